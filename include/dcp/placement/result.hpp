#pragma once
// What a placement policy returns: its micro-steps (group, config, samples, predicted start,
// time and peak) and the step's predicted makespan.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// One micro-step as a placement returns it; the scheduler numbers them, maps sample indices to
/// ids and computes loss scales.
struct placed_micro_step {
  std::int64_t first_rank = 0;
  execution_config config{};
  std::vector<std::size_t> samples{};  ///< indices into placement_input::samples()
  double start_seconds = 0;
  double seconds = 0;
  double peak_bytes = 0;
};

struct placement {
  std::vector<placed_micro_step> micro_steps{};
  double makespan_seconds = 0;
  double best_static_seconds = 0;  ///< 0 when the policy did not evaluate static layouts
  std::int64_t best_static_degree = 0;
  std::string policy{};
  /// Predicted times of world barriers (see step_plan::barriers): every micro-step ends at or
  /// before a barrier's time or starts at or after it. Most policies have none.
  std::vector<double> barrier_seconds{};
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
