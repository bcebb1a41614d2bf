#pragma once
// Turning group assignments into a placement: pack each group's samples, run the groups'
// micro-batches back to back, and record start times.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/first_fit_packer.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// std::pair's `<` for (value, index) pairs, spelled out: the same answer for every pair (NaN
/// included), without the three-way comparison C++20's pair goes through (a partial ordering
/// for double), which costs several times as many instructions in the planner's hot sorts and
/// heaps.
struct pair_less {
  template <class Pair>
  [[nodiscard]] bool operator()(const Pair& a, const Pair& b) const noexcept {
    return a.first < b.first || (a.first == b.first && a.second < b.second);
  }
};

/// Orders items for longest-processing-time-first: estimate descending, then index.
inline void lpt_order(std::vector<std::pair<double, std::size_t>>& items) {
  const auto before = [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  };
  // Items usually arrive longest first already (canonical order): check before sorting.
  if (!std::is_sorted(items.begin(), items.end(), before))
    std::sort(items.begin(), items.end(), before);
}

/// Longest-processing-time-first over items already in lpt_order: each goes to the
/// least-loaded slot, ties to the lower slot. A winner tree over the slots (each node holds the
/// least (load, slot) below it): an item raises its slot's load and replays the slot's path to
/// the root, one comparison per level where a heap's sift-down takes two.
[[nodiscard]] inline std::vector<std::vector<std::size_t>> lpt_assign_ordered(
    const std::vector<std::pair<double, std::size_t>>& items, const std::vector<double>& loads) {
  const std::size_t n = loads.size();
  std::vector<std::vector<std::size_t>> assigned(n);
  if (n == 0) {
    if (!items.empty())
      throw error("lpt_assign: " + std::to_string(items.size()) +
                  " items and no slot to put them in");
    return assigned;
  }
  std::vector<double> load = loads;
  // (load, slot) pairs are distinct, so the least is unique and the order is total.
  const auto least = [&](std::size_t a, std::size_t b) {
    if (b >= n) return a;  // past the last slot: an empty leaf
    return load[b] < load[a] || (load[b] == load[a] && b < a) ? b : a;
  };
  std::size_t leaves = 1;
  while (leaves < n) leaves *= 2;
  std::vector<std::size_t> tree(2 * leaves, n);
  for (std::size_t g = 0; g < n; ++g) tree[leaves + g] = g;
  for (std::size_t node = leaves - 1; node >= 1; --node)
    tree[node] = least(tree[2 * node], tree[2 * node + 1]);
  for (auto& slot_items : assigned) slot_items.reserve(items.size() / n + 1);  // an even share
  for (const auto& [estimate, item] : items) {
    const std::size_t g = tree[1];
    assigned[g].push_back(item);
    load[g] += estimate;
    for (std::size_t node = (leaves + g) / 2; node >= 1; node /= 2)
      tree[node] = least(tree[2 * node], tree[2 * node + 1]);
  }
  return assigned;
}

[[nodiscard]] inline std::vector<std::vector<std::size_t>> lpt_assign(
    std::vector<std::pair<double, std::size_t>> items, const std::vector<double>& loads) {
  lpt_order(items);
  return lpt_assign_ordered(items, loads);
}

/// Appends the packed batches of one group (ranks [first, first + degree)) to `out`, starting
/// at `start` (their sample lists move into it); returns the end time.
[[nodiscard]] inline double append_group(placement& out, std::vector<packed_batch>&& batches,
                                         std::int64_t first_rank, const execution_config& base,
                                         double start) {
  for (auto& b : batches) {
    placed_micro_step step;
    step.first_rank = first_rank;
    step.config = base;
    step.config.recompute = b.run.recompute;
    if (base.degree > 1) step.config.sp = b.run.sp;
    step.samples = std::move(b.samples);
    step.start_seconds = start;
    step.seconds = b.run.seconds;
    step.peak_bytes = b.run.peak_bytes;
    start += b.run.seconds;
    out.micro_steps.push_back(std::move(step));
  }
  return start;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
