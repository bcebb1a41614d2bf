#pragma once
// dcp::cuda::device_guard: makes one device current on the calling thread for a scope and then
// restores the one that was current, so an adapter's calls never move a framework's thread to
// another GPU behind its back. Link dcp::cuda.

#include <cuda_runtime_api.h>

#include "dcp/cuda/check.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::cuda {

/// cudaGetDevice, then cudaSetDevice(device) when it differs (both checked); the destructor sets
/// the previous device back. Neither copyable nor movable: it belongs to one scope.
class device_guard {
 public:
  explicit device_guard(int device) : device_(device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device_) check(cudaSetDevice(device_), "cudaSetDevice");
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    // Setting back a device that was current a moment ago only fails if the context broke, which
    // the next checked call reports; a destructor has nobody to report to.
    if (previous_ != device_) (void)cudaSetDevice(previous_);
  }

  /// The device that was current before the guard.
  [[nodiscard]] int previous() const noexcept { return previous_; }

 private:
  int device_ = 0;
  int previous_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::cuda
