#pragma once
// The honest bound of DESIGN §4.6: no plan finishes its micro-steps sooner than
//   max( Σ_i min_d d·(T_i(d) − T_∅(d)) / P ,  max_i min_d T_i(d) )
// — all work spread perfectly at each sample's most efficient feasible config (fixed
// per-micro-step costs excluded, since packing shares them), and the longest sample at its
// fastest config. Valid for every plan under cost_model requirement 5 (superadditive packing,
// no super-linear parallelism); memory-forced recomputation is in T_i because each option uses
// the recompute strategy's setting for that sample alone. The per-sample work is the cost
// model's marginal time (what the sample adds to any micro-batch it joins).

#include <algorithm>
#include <cstdint>
#include <limits>

#include "dcp/placement/context.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

template <class Context>
[[nodiscard]] double lower_bound_seconds(const Context& ctx) {
  const std::size_t n = ctx.size();
  if (n == 0) return 0.0;
  const auto relaxed = ctx.evaluate(micro_batch_shape{}, 0).recompute;
  // Menus for every sample that is not relaxed at degree 1 and for the longest few (samples
  // are in canonical order, longest first); the others are cheapest at degree 1.
  constexpr std::size_t always_menu = 64;
  double work = 0;
  double critical = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& single = ctx.alone(i, 0);
    const bool relaxed_single = single.feasible && single.recompute == relaxed;
    if (relaxed_single && i >= always_menu) {
      work += ctx.marginal_seconds(i, single, 0);
      critical = std::max(critical, 0.0);
      continue;
    }
    double cheapest = std::numeric_limits<double>::infinity();
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      const auto& o = ctx.alone(i, k);
      if (!o.feasible) continue;
      cheapest = std::min(cheapest, static_cast<double>(ctx.degree(k)) * ctx.marginal_seconds(i, o, k));
      fastest = std::min(fastest, o.seconds);
    }
    if (fastest == std::numeric_limits<double>::infinity()) ctx.throw_does_not_fit(i);
    work += cheapest;
    critical = std::max(critical, fastest);
  }
  return std::max(work / static_cast<double>(ctx.gpus()), critical);
}

}  // namespace dcp::detail
