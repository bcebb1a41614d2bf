#pragma once
// dcp::placement_policy — the solver that turns a bucketed batch into an ordered schedule.

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/concepts/bucketing_policy.hpp"
#include "dcp/concepts/cost_model.hpp"
#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/placement/result.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A placement policy chooses each micro-batch's degree and group, packs samples into
/// micro-batches, and orders them.
///
/// Requirements on `const P& p` and `const placement_input<M, R>& input` (the batch, its
/// buckets, the cost model, the recompute strategy and the options cache, built once by the
/// scheduler: placement/input.hpp):
///  1. `p.place(input)` -> `placement`: every sample index in exactly one micro-step; every
///     micro-step's group aligned (first_rank a multiple of its power-of-two degree) and inside
///     the cluster; every micro-step's peak bytes within the cost model's budget; start times
///     such that micro-steps sharing a rank do not overlap.
///  2. `p.name()` -> convertible to std::string_view.
///  3. Semantics: pure and deterministic for a given input.
/// Models: balanced_placement (the default), static_placement.
template <class P, class M, class R>
concept placement_policy =
    cost_model<M> && recompute_strategy<R, M> && std::copy_constructible<P> &&
    requires(const P& p, const placement_input<M, R>& input) {
      { p.place(input) } -> std::same_as<placement>;
      { p.name() } -> std::convertible_to<std::string_view>;
    };

}  // namespace dcp::inline DCP_ABI_NAMESPACE
