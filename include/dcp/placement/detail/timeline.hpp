#pragma once
// Turning group assignments into a placement: pack each group's samples, run the groups'
// micro-batches back to back, and record start times.

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "dcp/placement/context.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// Orders items for longest-processing-time-first: estimate descending, then index.
inline void lpt_order(std::vector<std::pair<double, std::size_t>>& items) {
  const auto before = [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  };
  // Items usually arrive longest first already (canonical order): check before sorting.
  if (!std::is_sorted(items.begin(), items.end(), before)) std::sort(items.begin(), items.end(), before);
}

/// Longest-processing-time-first over items already in lpt_order: each goes to the
/// least-loaded slot, ties to the lower slot.
[[nodiscard]] inline std::vector<std::vector<std::size_t>> lpt_assign_ordered(
    const std::vector<std::pair<double, std::size_t>>& items, const std::vector<double>& loads) {
  using slot = std::pair<double, std::size_t>;
  std::vector<slot> heap_storage;
  heap_storage.reserve(loads.size());
  for (std::size_t g = 0; g < loads.size(); ++g) heap_storage.emplace_back(loads[g], g);
  std::priority_queue<slot, std::vector<slot>, std::greater<>> heap(std::greater<>{},
                                                                    std::move(heap_storage));
  std::vector<std::vector<std::size_t>> assigned(loads.size());
  for (const auto& [estimate, item] : items) {
    auto [load, g] = heap.top();
    heap.pop();
    assigned[g].push_back(item);
    heap.emplace(load + estimate, g);
  }
  return assigned;
}

[[nodiscard]] inline std::vector<std::vector<std::size_t>> lpt_assign(
    std::vector<std::pair<double, std::size_t>> items, const std::vector<double>& loads) {
  lpt_order(items);
  return lpt_assign_ordered(items, loads);
}

/// Appends the packed batches of one group (ranks [first, first + degree)) to `out`, starting
/// at `start`; returns the end time.
[[nodiscard]] inline double append_group(placement& out, const std::vector<packed_batch>& batches,
                           std::int64_t first_rank, const execution_config& base, double start) {
  for (const auto& b : batches) {
    placed_micro_step step;
    step.first_rank = first_rank;
    step.config = base;
    step.config.recompute = b.run.recompute;
    step.samples = b.samples;
    step.start_seconds = start;
    step.seconds = b.run.seconds;
    step.peak_bytes = b.run.peak_bytes;
    start += b.run.seconds;
    out.micro_steps.push_back(std::move(step));
  }
  return start;
}

}  // namespace dcp::detail
