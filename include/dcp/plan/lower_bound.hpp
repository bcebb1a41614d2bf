#pragma once
// The honest bound of DESIGN §4.6: no plan finishes its micro-steps sooner than
//   max( Σ_i min_d d·(m_i(d) + t_i·ρ(d)) / P ,  max_i min_d T_i(d) )
// — all work spread perfectly at each sample's most efficient feasible config, and the longest
// sample at its fastest config. m_i(d) is the cost model's marginal time of sample i (what it
// adds to any micro-batch it joins, cost_model requirement 5). ρ(d) is the fixed cost per token
// of a micro-step at degree d: every micro-step pays at least T_∅(d), the time of an empty one,
// and holds at most C(d) tokens, the most one micro-batch can hold within the budget with every
// layer recomputed, so each token carries at least ρ(d) = T_∅(d) / C(d) of it. ρ is counted
// only for a cost model that declares `memory_by_tokens` (cost_model optional member 8: peak
// bytes depend on a micro-batch only through its tokens and samples, and an empty micro-batch
// is fastest without recomputation); otherwise ρ = 0, the bound without fixed costs. Valid for
// every plan under requirement 5 (superadditive packing, no super-linear parallelism);
// memory-forced recomputation is in T_i because each option uses the recompute strategy's
// setting for that sample alone.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/placement/context.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// ρ(d) per degree index of `ctx` (seconds of fixed micro-step cost per token, 0 where the cost
/// model does not declare memory_by_tokens or nothing fits at that degree).
template <class Context>
[[nodiscard]] std::vector<double> fixed_seconds_per_token(const Context& ctx) {
  std::vector<double> rho(ctx.degrees().size(), 0.0);
  using model_t = std::remove_cvref_t<decltype(ctx.problem().cost)>;
  if constexpr (memory_by_tokens<model_t>) {
    const auto& cost = ctx.problem().cost;
    const auto full = recompute_setting::full(cost.model().layers);
    for (std::size_t k = 0; k < rho.size(); ++k) {
      const auto fits = [&](std::int64_t tokens) {
        micro_batch_shape one;
        one.samples = 1;
        one.tokens = tokens;
        one.longest = tokens;
        return static_cast<double>(cost.peak_bytes(one, ctx.config(k, full))) <= ctx.budget();
      };
      if (!fits(1)) continue;
      // The most tokens one micro-batch holds: doubling, then bisection (peak bytes never
      // decrease with tokens). 2^62 caps the search; no budget holds that many.
      std::int64_t low = 1;
      std::int64_t high = 2;
      while (high < (std::int64_t{1} << 62) && fits(high)) {
        low = high;
        high *= 2;
      }
      if (fits(high)) low = high;
      while (high - low > 1) {
        const std::int64_t mid = low + (high - low) / 2;
        (fits(mid) ? low : high) = mid;
      }
      rho[k] = std::max(0.0, static_cast<double>(cost.seconds(micro_batch_shape{}, ctx.config(k)))) /
               static_cast<double>(low);
    }
  }
  return rho;
}

template <class Context>
[[nodiscard]] double lower_bound_seconds(const Context& ctx) {
  const std::size_t n = ctx.size();
  if (n == 0) return 0.0;
  const auto relaxed = ctx.evaluate(micro_batch_shape{}, 0).recompute;
  const auto rho = fixed_seconds_per_token(ctx);
  // The least fixed cost per token at any degree, in GPU-seconds: what a sample without a menu
  // carries wherever it runs.
  double cheapest_rho = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < rho.size(); ++k)
    cheapest_rho = std::min(cheapest_rho, static_cast<double>(ctx.degree(k)) * rho[k]);
  // Menus for every sample that is not relaxed at degree 1 and for the longest few (samples
  // are in canonical order, longest first); the others are cheapest at degree 1.
  constexpr std::size_t always_menu = 64;
  double work = 0;
  double critical = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& single = ctx.alone(i, 0);
    const bool relaxed_single = single.feasible && single.recompute == relaxed;
    const auto tokens = static_cast<double>(ctx.shape(i).tokens);
    if (relaxed_single && i >= always_menu) {
      work += ctx.marginal_seconds(i, single, 0) + tokens * cheapest_rho;
      continue;
    }
    double cheapest = std::numeric_limits<double>::infinity();
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      const auto& o = ctx.alone(i, k);
      if (!o.feasible) continue;
      cheapest = std::min(cheapest, static_cast<double>(ctx.degree(k)) *
                                        (ctx.marginal_seconds(i, o, k) + tokens * rho[k]));
      fastest = std::min(fastest, o.seconds);
    }
    if (fastest == std::numeric_limits<double>::infinity()) ctx.throw_does_not_fit(i);
    work += cheapest;
    critical = std::max(critical, fastest);
  }
  return std::max(work / static_cast<double>(ctx.gpus()), critical);
}

}  // namespace dcp::detail
