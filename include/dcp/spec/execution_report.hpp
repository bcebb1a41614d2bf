#pragma once
// dcp::execution_report — what a framework measured for one micro-batch. Returned by a
// micro_batch_executor (dcp/runtime/executor.hpp), read by calibrated<M>::observe.

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// What the framework measured for one micro-batch (dcp::calibrated<M>::observe reads it).
struct execution_report {
  double seconds = 0;          ///< wall time of forward + backward
  double peak_bytes = 0;       ///< peak device bytes
  bool out_of_memory = false;  ///< the micro-batch ran out of device memory and did not finish

  friend bool operator==(const execution_report&, const execution_report&) = default;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
