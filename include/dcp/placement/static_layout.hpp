#pragma once
// The static layout: one degree for every sample, groups of that degree side by side, samples
// balanced over the groups (longest processing time first) and packed to the memory budget.
// The baseline every dynamic plan is compared with; `best_static_layout` searches the degree.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/input.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {

/// What every micro-step at degree index k takes beyond its samples' marginal times, at least:
/// the least fixed part of its styles without recomputation for a cost model with
/// `memory_by_tokens` (under which an empty micro-step is fastest without recomputation, as the
/// bound assumes: plan/lower_bound.hpp), else 0.
template <class Context>
[[nodiscard]] double static_fixed_floor(const Context& ctx, std::size_t k) {
  using model_t = std::remove_cvref_t<decltype(ctx.cost())>;
  if constexpr (memory_by_tokens<model_t>) return std::max(0.0, ctx.least_fixed_seconds(k));
  return 0.0;
}

/// The static layout at degree index k, or nullopt if some sample cannot run at that degree or
/// if, once its samples are assigned to groups, a floor under a group's time reaches `beat`: its
/// samples' marginal times plus the fixed floor of the one micro-step it runs at least
/// (static_fixed_floor). The floor skips packing a layout that could not be returned anyway.
template <class Context>
[[nodiscard]] std::optional<placement> static_layout(
    const Context& ctx, std::size_t k, double beat = std::numeric_limits<double>::infinity()) {
  const std::int64_t d = ctx.degree(k);
  const auto groups = static_cast<std::size_t>(ctx.gpus() / d);
  std::vector<std::pair<double, std::size_t>> items;
  items.reserve(ctx.size());
  for (std::size_t i = 0; i < ctx.size(); ++i) {
    const auto& alone = ctx.alone(i, k);
    if (!alone.feasible) return std::nullopt;
    items.emplace_back(ctx.packed_estimate(i, k, alone), i);
  }
  auto assigned = lpt_assign(std::move(items), std::vector<double>(groups, 0.0));
  if (beat < std::numeric_limits<double>::infinity()) {
    const double fixed = static_fixed_floor(ctx, k);
    for (const auto& group : assigned) {
      if (group.empty()) continue;
      double floor = fixed;
      for (const auto i : group) floor += ctx.alone_marginal(i, k);
      if (floor >= beat) return std::nullopt;
    }
  }
  placement out;
  out.policy = "static(degree " + std::to_string(d) + ")";
  auto packed = pack_groups_to_budget(ctx, assigned, k);
  std::size_t steps = 0;
  for (const auto& group : packed) steps += group.size();
  out.micro_steps.reserve(steps);
  for (std::size_t g = 0; g < groups; ++g) {
    if (assigned[g].empty()) continue;
    const double end = append_group(out, std::move(packed[g]), static_cast<std::int64_t>(g) * d,
                                    ctx.config(k), 0.0);
    out.makespan_seconds = std::max(out.makespan_seconds, end);
  }
  out.best_static_seconds = out.makespan_seconds;
  out.best_static_degree = d;
  return out;
}

/// Whether the static layout at degree index k could beat `bound`: false as soon as a floor
/// under it (its longest sample, or work spread evenly over its groups plus one micro-step's
/// fixed floor: the busiest group takes at least the mean of the groups that run anything, each
/// of which runs a micro-step) reaches the bound, or when some sample cannot run at that degree.
/// Samples come longest first, so hopeless degrees are rejected after a few of them.
template <class Context>
[[nodiscard]] bool static_may_beat(const Context& ctx, std::size_t k, double bound) {
  const auto groups = static_cast<double>(ctx.gpus() / ctx.degree(k));
  double work = ctx.size() > 0 ? groups * static_fixed_floor(ctx, k) : 0.0;
  for (std::size_t i = 0; i < ctx.size(); ++i) {
    const auto& alone = ctx.alone(i, k);
    if (!alone.feasible || alone.seconds >= bound) return false;
    work += ctx.alone_marginal(i, k);
    if (work / groups >= bound) return false;
  }
  return true;
}

/// The fastest static layout over every allowed degree (every degree index k for which
/// `searched(k)` holds, when given) that is faster than `beat`, or nullopt if none is. A degree
/// is laid out only if its floor is below the best layout found so far, which keeps the search
/// exact.
template <class Context>
[[nodiscard]] std::optional<placement> best_static_layout(
    const Context& ctx, double beat = std::numeric_limits<double>::infinity(),
    const std::function<bool(std::size_t)>& searched = {}) {
  std::optional<placement> best;
  for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
    if (searched && !searched(k)) continue;
    const double bound = best ? best->makespan_seconds : beat;
    if (!static_may_beat(ctx, k, bound)) continue;
    auto candidate = static_layout(ctx, k, bound);
    if (candidate && candidate->makespan_seconds < bound) best = std::move(candidate);
  }
  return best;
}

}  // namespace detail

/// Places every sample at one given degree. Throws invalid_spec for a degree the model or
/// cluster does not allow and sample_does_not_fit for a sample that cannot run at it.
struct static_placement {
  std::int64_t degree = 1;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const {
    const auto& cost = input.cost();
    validate(
        execution_config{
            degree, default_style(cost.training().sp, degree, cost.model(), cost.cluster()), {}},
        cost.model(), cost.cluster());
    std::size_t k = 0;
    while (input.degree(k) != degree) ++k;
    for (std::size_t i = 0; i < input.size(); ++i)
      if (!input.alone(i, k).feasible) input.throw_does_not_fit(i);
    return input.size() == 0 ? placement{{}, 0, 0, degree, "static"}
                             : *detail::static_layout(input, k);
  }
  [[nodiscard]] std::string_view name() const noexcept { return "static"; }
  friend constexpr bool operator==(static_placement, static_placement) = default;
};

/// Searches every allowed degree and places the batch with the fastest static layout.
struct best_static_placement {
  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const {
    return place_with(input);
  }

 private:
  template <class Input>
  [[nodiscard]] static placement place_with(const Input& ctx) {
    if (ctx.size() == 0) return placement{{}, 0, 0, 0, "best-static"};
    auto best = detail::best_static_layout(ctx);
    if (!best) {
      // Name the first sample that fits at no degree, or the longest one.
      for (std::size_t i = 0; i < ctx.size(); ++i) {
        bool fits = false;
        for (std::size_t k = 0; k < ctx.degrees().size() && !fits; ++k)
          fits = ctx.alone(i, k).feasible;
        if (!fits) ctx.throw_does_not_fit(i);
      }
      throw sample_does_not_fit(
          "best_static_placement: no single degree fits every sample; "
          "the longest sample (" +
          std::to_string(ctx.sample(0).tokens) +
          " tokens) and the shortest need different degrees");
    }
    return std::move(*best);
  }

 public:
  [[nodiscard]] std::string_view name() const noexcept { return "best-static"; }
  friend constexpr bool operator==(best_static_placement, best_static_placement) = default;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
