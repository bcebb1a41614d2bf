#pragma once
// Turning group assignments into a placement: pack each group's samples, run the groups'
// micro-batches back to back, and record start times.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
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
/// least-loaded slot, ties to the lower slot. A binary min-heap of (load, slot); each item
/// raises the top's load and sifts it down once (no pop and push).
[[nodiscard]] inline std::vector<std::vector<std::size_t>> lpt_assign_ordered(
    const std::vector<std::pair<double, std::size_t>>& items, const std::vector<double>& loads) {
  using slot = std::pair<double, std::size_t>;
  std::vector<slot> heap;
  heap.reserve(loads.size());
  for (std::size_t g = 0; g < loads.size(); ++g) heap.emplace_back(loads[g], g);
  std::make_heap(heap.begin(), heap.end(), std::greater<>{});
  std::vector<std::vector<std::size_t>> assigned(loads.size());
  const std::size_t n = heap.size();
  if (n == 0) {
    if (!items.empty())
      throw error("lpt_assign: " + std::to_string(items.size()) + " items and no slot to put them in");
    return assigned;
  }
  for (auto& slot_items : assigned) slot_items.reserve(items.size() / n + 1);  // an even share
  for (const auto& [estimate, item] : items) {
    assigned[heap.front().second].push_back(item);
    // (load, slot) pairs are distinct, so the least is unique and the order is total.
    const slot raised{heap.front().first + estimate, heap.front().second};
    std::size_t at = 0;
    for (;;) {
      std::size_t child = 2 * at + 1;
      if (child >= n) break;
      if (child + 1 < n && heap[child + 1] < heap[child]) ++child;
      if (!(heap[child] < raised)) break;
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = raised;
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
                           std::int64_t first_rank, const execution_config& base, double start) {
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

}  // namespace dcp::detail
