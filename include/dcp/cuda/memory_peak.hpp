#pragma once
// dcp::cuda::memory_peak: the most device memory seen in use over a few samples, for
// execution_report::peak_bytes. The CUDA runtime has no per-process high-water mark, so this
// samples cudaMemGetInfo where the caller knows the peak is (after forward, when the activations
// are live). Link dcp::cuda.

#include <algorithm>
#include <cstddef>

#include <cuda_runtime_api.h>

#include "dcp/cuda/check.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::cuda {

/// Device memory in use now on the current device: total minus free, from cudaMemGetInfo
/// (checked). It counts the whole device: every process on it, the CUDA contexts, and whatever a
/// caching allocator holds without handing it out; so it bounds a micro-batch's own use from
/// above. A framework whose allocator tracks its own peak (PyTorch's max_memory_allocated)
/// should report that instead.
[[nodiscard]] inline std::size_t device_bytes_in_use() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return total_bytes - free_bytes;
}

/// The largest device_bytes_in_use() among its samples: one at construction or reset(), one per
/// sample(). Memory taken and given back between two samples is not seen.
class memory_peak {
 public:
  memory_peak() : peak_(device_bytes_in_use()) {}

  /// Forgets the samples so far and takes a new first one.
  void reset() { peak_ = device_bytes_in_use(); }
  /// Takes a sample; returns the bytes in use now.
  std::size_t sample() {
    const auto now = device_bytes_in_use();
    peak_ = std::max(peak_, now);
    return now;
  }
  /// The largest sample so far, in bytes.
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }

 private:
  std::size_t peak_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::cuda
