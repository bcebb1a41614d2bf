#pragma once
// balanced_scratch: the balanced solver's batch-sized arrays, in one typed object. Where the
// scheduler keeps arrays between plans (detail::plan_workspace), they are taken from it at once
// and given back at once.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/detail/plan_workspace.hpp"
#include "dcp/placement/balanced/blocks.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

struct balanced_scratch {
  std::vector<double> estimate;                              // per sample (classify_batch)
  std::vector<std::pair<double, std::size_t>> short_sorted;  // the short samples (classify_batch)
  // What a schedule places into (its singles as long as the batch), kept from schedule to
  // schedule (a plan schedules several allotments; arrays of a 10M batch allocated afresh each
  // time are mapped and faulted in afresh each time).
  block_assignment schedule_blocks;
  std::vector<std::size_t> unjoined;    // fill_blocks()'s links past joined singles
  std::vector<std::uint32_t> group_of;  // pack_groups_to_budget()'s sample-to-rank table
  std::vector<std::uint32_t> batch_of;  // local_search's sample-to-micro-batch table
  // The micro-step list of a schedule that lost, emptied, for the next schedule to fill.
  std::vector<placed_micro_step> spare_steps;

  /// The arrays for `n` samples from `workspace`.
  void take(plan_workspace& workspace, std::size_t n) {
    estimate = workspace.take<double>(n);
    short_sorted = workspace.take<std::pair<double, std::size_t>>(n);
    schedule_blocks.singles = workspace.take<std::pair<double, std::size_t>>(n);
    unjoined = workspace.take<std::size_t>(n + 1);
    group_of = workspace.take<std::uint32_t>(n);
    batch_of = workspace.take<std::uint32_t>(n);
  }
  /// Gives every array back to `workspace`.
  void give(plan_workspace& workspace) {
    workspace.give(std::move(estimate));
    workspace.give(std::move(short_sorted));
    workspace.give(std::move(schedule_blocks.singles));
    workspace.give(std::move(unjoined));
    workspace.give(std::move(group_of));
    workspace.give(std::move(batch_of));
    workspace.give(std::move(spare_steps));
  }
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
