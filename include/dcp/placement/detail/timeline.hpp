#pragma once
// Turning group assignments into a placement: pack each group's samples, run the groups'
// micro-batches back to back, and record start times.

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "dcp/placement/detail/context.hpp"

namespace dcp::detail {

/// Longest-processing-time-first: each item (with its estimate) goes to the least-loaded slot;
/// ties go to the lower slot, items in the order given (estimate descending, then index).
inline std::vector<std::vector<std::size_t>> lpt_assign(
    std::vector<std::pair<double, std::size_t>> items, std::vector<double> loads) {
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  using slot = std::pair<double, std::size_t>;
  std::priority_queue<slot, std::vector<slot>, std::greater<>> heap;
  for (std::size_t g = 0; g < loads.size(); ++g) heap.emplace(loads[g], g);
  std::vector<std::vector<std::size_t>> assigned(loads.size());
  for (const auto& [estimate, item] : items) {
    auto [load, g] = heap.top();
    heap.pop();
    assigned[g].push_back(item);
    heap.emplace(load + estimate, g);
  }
  return assigned;
}

/// Appends the packed batches of one group (ranks [first, first + degree)) to `out`, starting
/// at `start`; returns the end time.
inline double append_group(placement& out, const std::vector<packed_batch>& batches,
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
