#pragma once
// dcp::cuda::measure: one micro-batch's execution_report from the GPU: device seconds between two
// events on the executor's stream, and the peak of the memory samples taken during it. Link
// dcp::cuda.

#include <utility>

#include <cuda_runtime_api.h>

#include "dcp/cuda/event_timer.hpp"
#include "dcp/cuda/memory_peak.hpp"
#include "dcp/spec/execution_report.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::cuda {

/// Runs `run(memory)` between the two events of an event_timer on `stream` and returns
/// {seconds between them, the memory_peak's peak}. `run` enqueues forward and backward on
/// `stream` and calls `memory.sample()` where usage peaks (after forward, or once a layer's
/// activations are all live); measure itself samples before and after. Waits for the stream.
///
///   dcp::execution_report run(const dcp::micro_step& m, Group& group, ...) {
///     return dcp::cuda::measure(stream_, [&](dcp::cuda::memory_peak& memory) {
///       forward(m, group);
///       memory.sample();
///       backward(m, group);
///     });
///   }
template <class F>
[[nodiscard]] execution_report measure(cudaStream_t stream, F&& run) {
  event_timer timer(stream);
  memory_peak memory;
  timer.start();
  std::forward<F>(run)(memory);
  timer.stop();
  execution_report report;
  report.seconds = timer.seconds();
  memory.sample();
  report.peak_bytes = static_cast<double>(memory.peak_bytes());
  return report;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::cuda
