#pragma once
// dcp::cuda::check: a failed CUDA runtime call as dcp::comm_error naming the call, the code and
// CUDA's name and text for it (the same error type as a failed MPI or NCCL call). Link dcp::cuda.

#include <string>

#include <cuda_runtime_api.h>

#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::cuda {

namespace detail {
/// CUDA's name and text for `code`, e.g. "cudaErrorNoDevice: no CUDA-capable device is detected".
[[nodiscard]] inline std::string error_text(cudaError_t code) {
  const char* name = cudaGetErrorName(code);
  const char* text = cudaGetErrorString(code);
  std::string out = name ? name : "";
  if (text && *text) out += (out.empty() ? "" : ": ") + std::string(text);
  return out;
}
}  // namespace detail

/// Throws comm_error(call, code, "<cudaGetErrorName>: <cudaGetErrorString>") unless `code` is
/// cudaSuccess. The runtime also keeps a non-sticky error as the thread's "last error", which
/// frameworks read after their own kernel launches (cudaGetLastError); it is cleared here so that
/// this failure is not reported a second time against their code.
inline void check(cudaError_t code, const char* call) {
  if (code == cudaSuccess) return;
  (void)cudaGetLastError();  // returns `code` again (or a sticky error); only clearing matters
  throw comm_error(call, static_cast<std::int64_t>(code), detail::error_text(code));
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::cuda
