#pragma once
// The truth-model lower bound: the library's own bound (dcp/plan/lower_bound.hpp) evaluated on
// the truth model, with the budget raised to the GPU's physical capacity so that it bounds
// every plan that does not run out of memory, not only those that keep the planner's headroom.

#include <cstdint>
#include <span>
#include <vector>

#include "dcp/bucketing/varlen_buckets.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/plan/lower_bound.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/recompute/strategies.hpp"
#include "dcp/sim/truth_model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::sim {

/// What the truth bound counts beyond dcp/plan/lower_bound.hpp's plain bound; each only raises
/// it. Off, a term gives the bound without it (tests compare the two).
struct truth_bound_terms {
  /// Video clips share a micro-step only with clips of their grid, text only with text
  /// (varlen_buckets, which the simulator holds every plan to).
  bool buckets = true;
  /// No micro-step takes less than an empty one with its config (the host's issue time where
  /// that is the longer).
  bool empty_floor = true;
  /// A sample runs only where its micro-step ends by the makespan.
  bool deadline = true;
};

/// No plan whose micro-steps stay within the GPU's capacity under the truth model, with
/// recomputation chosen by `recompute`, finishes the batch's micro-steps sooner than this (noise
/// free; NIC sharing only adds time): dcp/plan/lower_bound.hpp's bound with each sample's share
/// of the fixed per-micro-step cost over the ladder of recomputation ranges, each option's
/// recomputation the strategy's choice for the sample alone at the capacity, and `terms`.
/// Throws what validate_batch throws, and sample_does_not_fit for a sample that fits nowhere.
template <recompute_strategy<truth_model> Recompute = selective_pyramid_recompute>
[[nodiscard]] double truth_lower_bound_seconds(std::span<const sample> batch,
                                               const truth_model& truth,
                                               const Recompute& recompute = {},
                                               truth_bound_terms terms = {}) {
  validate_batch(batch);
  if (batch.empty()) return 0.0;
  training_spec at_capacity = truth.training();
  at_capacity.headroom_bytes = 0;
  at_capacity.headroom_fraction = 0;
  const truth_model model(truth.model(), truth.cluster(), at_capacity, truth.constants());
  const auto samples = canonical_order(batch);
  const auto buckets = terms.buckets ? varlen_buckets{}.assign(samples)
                                     : std::vector<std::int32_t>(samples.size(), 0);
  const placement_problem<truth_model, Recompute> problem{samples, buckets, model, recompute};
  const dcp::placement_input<truth_model, Recompute> context(problem);
  return dcp::detail::lower_bound_seconds(context, {.recompute_ladder = true,
                                                    .by_bucket = terms.buckets,
                                                    .empty_floor = terms.empty_floor,
                                                    .deadline = terms.deadline});
}

[[nodiscard]] inline double truth_lower_bound_seconds(const std::vector<sample>& batch,
                                                      const truth_model& truth) {
  return truth_lower_bound_seconds(std::span<const sample>(batch.data(), batch.size()), truth);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::sim
