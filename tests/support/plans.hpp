#pragma once
// Hand-built plans for tests of the simulator and the runtime.

#include <cstdint>

#include "dcp/plan/step_plan.hpp"

namespace dcp::test {

/// `count` single-GPU micro-steps: micro-step n runs sample id first_id + n alone on rank n,
/// with loss scale 1 / count (normalised by samples).
inline step_plan one_sample_per_rank(std::int64_t gpus, std::int64_t gpus_per_node,
                                     std::int64_t count, std::uint64_t first_id = 0) {
  step_plan plan;
  plan.gpus = gpus;
  plan.gpus_per_node = gpus_per_node;
  for (std::int64_t n = 0; n < count; ++n) {
    micro_step m;
    m.sequence = n;
    m.first_rank = n;
    m.config = {1, sequence_parallel::ulysses, {}};
    m.sample_ids = {first_id + static_cast<std::uint64_t>(n)};
    m.loss_units = 1;
    m.loss_scale = 1.0 / static_cast<double>(count);
    plan.micro_steps.push_back(m);
  }
  return plan;
}

}  // namespace dcp::test
