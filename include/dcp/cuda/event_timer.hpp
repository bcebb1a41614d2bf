#pragma once
// dcp::cuda::event_timer: the device time between two points of a CUDA stream, measured with a
// pair of CUDA events. It is what an executor reports as execution_report::seconds: the GPU's
// time for the micro-batch's work, not the host's time to enqueue it. Link dcp::cuda.

#include <utility>

#include <cuda_runtime_api.h>

#include "dcp/cuda/check.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::cuda {

/// Two CUDA events (cudaEventCreate; timing enabled), destroyed with the timer; move-only.
///
/// Usage: start() and stop() record an event on the stream (cudaEventRecord); seconds() waits for
/// the stop event (cudaEventSynchronize) and returns the time between them (cudaEventElapsedTime,
/// about 0.5 us resolution by CUDA's documentation). `time(f)` does all three around `f()`, which
/// must enqueue its work on the same stream. The events belong to the device that was current at
/// construction; record them only on that device's streams. Every call is checked and a failure
/// throws comm_error naming it (with no GPU, the constructor's "cudaEventCreate").
class event_timer {
 public:
  /// Events on the current device, recorded on `stream` (default: the legacy default stream).
  explicit event_timer(cudaStream_t stream = nullptr) : stream_(stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    const auto second = cudaEventCreate(&stop_);
    if (second != cudaSuccess) {
      (void)cudaEventDestroy(start_);  // the creation error is the one worth reporting
      start_ = nullptr;
      check(second, "cudaEventCreate");
    }
  }
  event_timer(event_timer&& other) noexcept
      : stream_(other.stream_),
        start_(std::exchange(other.start_, nullptr)),
        stop_(std::exchange(other.stop_, nullptr)),
        started_(std::exchange(other.started_, false)),
        stopped_(std::exchange(other.stopped_, false)) {}
  event_timer& operator=(event_timer&& other) noexcept {
    if (this != &other) {
      release();
      stream_ = other.stream_;
      start_ = std::exchange(other.start_, nullptr);
      stop_ = std::exchange(other.stop_, nullptr);
      started_ = std::exchange(other.started_, false);
      stopped_ = std::exchange(other.stopped_, false);
    }
    return *this;
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;
  ~event_timer() { release(); }

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  /// Records the start event on the stream.
  void start() {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    started_ = true;
    stopped_ = false;
  }

  /// Records the stop event on the stream; throws dcp::error before any start().
  void stop() {
    if (!started_) throw error("dcp::cuda::event_timer::stop: the timer was not started");
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    stopped_ = true;
  }

  /// Waits until the stream reaches the stop event and returns the seconds since the start event;
  /// throws dcp::error unless start() and then stop() were called.
  [[nodiscard]] double seconds() {
    if (!stopped_)
      throw error("dcp::cuda::event_timer::seconds: the timer was not stopped after a start");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(milliseconds) * 1e-3;
  }

  /// start(), work(), stop(), seconds(): the device time of what `work` enqueues on the stream.
  template <class F>
  [[nodiscard]] double time(F&& work) {
    start();
    std::forward<F>(work)();
    stop();
    return seconds();
  }

 private:
  void release() noexcept {
    // A failed destroy leaks one event handle at most; a destructor has nobody to report to.
    if (start_) (void)cudaEventDestroy(start_);
    if (stop_) (void)cudaEventDestroy(stop_);
    start_ = nullptr;
    stop_ = nullptr;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::cuda
