#pragma once
// placement_scratch: the batch-sized arrays of one plan's placement, in one typed object that
// the scheduler lends the placement input (as CUB hands an agent its TempStorage). The input
// fills its per-sample tables into it; the shipped balanced solver works in the rest. Where the
// scheduler keeps arrays between plans (detail::plan_workspace, batches of 512K samples or
// more), it takes them all before the plan and gives them all back after it.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dcp/detail/plan_workspace.hpp"
#include "dcp/placement/balanced/block_assignment.hpp"
#include "dcp/placement/result.hpp"
#include "dcp/spec/micro_batch_shape.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct placement_scratch {
  // placement_input's per-sample tables.
  std::vector<micro_batch_shape> shapes;
  std::vector<std::uint32_t> run_of;  // each sample's run of equal shapes
  // balanced_placement's solver.
  std::vector<double> estimate;                              // per sample (classify_batch)
  std::vector<std::pair<double, std::size_t>> short_sorted;  // the short samples (classify_batch)
  // What a schedule places into (its singles as long as the batch), kept from schedule to
  // schedule (a plan schedules several allotments; arrays of a 10M batch allocated afresh each
  // time are mapped and faulted in afresh each time).
  detail::block_assignment schedule_blocks;
  std::vector<std::size_t> unjoined;    // fill_blocks()'s links past joined singles
  std::vector<std::uint32_t> group_of;  // pack_groups_to_budget()'s sample-to-rank table
  std::vector<std::uint32_t> batch_of;  // local_search's sample-to-micro-batch table
  // Micro-step lists for schedules to fill: a 10M plan's list is ~75 MB, which a fresh one maps
  // and faults in afresh. The second is the larger one kept from an earlier plan, taken where
  // the first is too small.
  std::vector<placed_micro_step> spare_steps;
  std::vector<placed_micro_step> kept_steps;

  /// The arrays for `n` samples from `workspace`, taken once before a plan.
  void take(detail::plan_workspace& workspace, std::size_t n) {
    shapes = workspace.take<micro_batch_shape>(n);
    run_of = workspace.take<std::uint32_t>(n);
    estimate = workspace.take<double>(n);
    short_sorted = workspace.take<std::pair<double, std::size_t>>(n);
    schedule_blocks.singles = workspace.take<std::pair<double, std::size_t>>(n);
    unjoined = workspace.take<std::size_t>(n + 1);
    group_of = workspace.take<std::uint32_t>(n);
    batch_of = workspace.take<std::uint32_t>(n);
    kept_steps = workspace.take<placed_micro_step>(n);
  }
  /// Gives every array back to `workspace`, once after a plan.
  void give(detail::plan_workspace& workspace) {
    workspace.give(std::move(shapes));
    workspace.give(std::move(run_of));
    workspace.give(std::move(estimate));
    workspace.give(std::move(short_sorted));
    workspace.give(std::move(schedule_blocks.singles));
    workspace.give(std::move(unjoined));
    workspace.give(std::move(group_of));
    workspace.give(std::move(batch_of));
    workspace.give(std::move(spare_steps));
    workspace.give(std::move(kept_steps));
  }
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
