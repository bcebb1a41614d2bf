#pragma once
// dcp::nccl::communicator: dcp::communicator over an NCCL communicator (ncclComm_t), one GPU per
// rank. Made from an ncclUniqueId, or bootstrapped over any other dcp::communicator (MPI,
// in-process) that carries rank 0's id to every rank. Every NCCL and CUDA call's return code is
// checked; a failure throws dcp::comm_error naming the call and the code. Needs NCCL 2.18 or
// later (ncclCommSplit). Link dcp::nccl.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "dcp/cuda/check.hpp"
#include "dcp/cuda/device_guard.hpp"
#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "dcp/nccl/communicator.hpp needs NCCL 2.18 or later (ncclCommSplit, NCCL_SPLIT_NOCOLOR)"
#endif

namespace dcp::inline DCP_ABI_NAMESPACE::nccl {

/// Throws comm_error(call, code, ncclGetErrorString(code)) unless `code` is ncclSuccess.
inline void check(ncclResult_t code, const char* call) {
  if (code != ncclSuccess) {
    const char* text = ncclGetErrorString(code);
    throw comm_error(call, static_cast<std::int64_t>(code), text ? text : "");
  }
}

/// Throws comm_error(call, code, "<cudaGetErrorName>: <cudaGetErrorString>") unless `code` is
/// cudaSuccess (dcp::cuda::check).
inline void check_cuda(cudaError_t code, const char* call) { cuda::check(code, call); }

/// One rank's handle on an NCCL communicator, driving one GPU (`device()`). Models
/// dcp::communicator.
///
/// Owning and move-only: the destructor finalizes and destroys the NCCL communicator
/// (ncclCommFinalize, ncclCommDestroy) and frees the stream and device buffer it made; close()
/// does the same with every code checked. Finalizing waits for the other ranks, so destroy
/// communicators in the same order on every rank, like any collective.
///
/// all_gather goes through a device buffer and an ncclAllGather on the handle's own stream and
/// waits for it: the runtime exchanges a few integers per step, so simplicity beats overlap.
/// Calls make the handle's device current for their duration and then restore the caller's.
class communicator {
 public:
  /// Words of an ncclUniqueId as it travels through dcp::communicator::all_gather.
  static constexpr std::size_t id_words = sizeof(ncclUniqueId) / sizeof(std::int64_t);
  static_assert(sizeof(ncclUniqueId) == id_words * sizeof(std::int64_t));

  /// A new id for init_rank (ncclGetUniqueId on this process; needs no GPU).
  [[nodiscard]] static ncclUniqueId unique_id() {
    ncclUniqueId id{};
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return id;
  }

  /// ncclCommInitRank: rank `rank` of `size` on GPU `device`, every rank passing the same `id`.
  /// Collective over the `size` ranks. Leaves `device` current on the calling thread, as NCCL's
  /// initialisation needs it to be. Bad arguments throw dcp::error naming them.
  [[nodiscard]] static communicator init_rank(const ncclUniqueId& id, int rank, int size,
                                              int device) {
    if (size < 1 || rank < 0 || rank >= size || device < 0)
      throw error("dcp::nccl::communicator::init_rank: rank = " + std::to_string(rank) +
                  ", size = " + std::to_string(size) + ", device = " + std::to_string(device) +
                  "; needs size >= 1, 0 <= rank < size and device >= 0");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclComm_t made = nullptr;
    check(ncclCommInitRank(&made, size, id, rank), "ncclCommInitRank");
    return communicator(made, device);
  }

  /// An NCCL communicator with the ranks of `over` (same rank, same size), on GPU `device` of
  /// each rank. Collective over `over`: every rank sets its device, rank 0 calls ncclGetUniqueId,
  /// and one all-gather carries each rank's status and rank 0's id (16 int64 words) to all;
  /// then every rank calls init_rank with rank 0's id. A rank whose device could not be set, or a
  /// failed ncclGetUniqueId, makes every rank throw the same comm_error (naming the call and the
  /// rank) before any of them waits in ncclCommInitRank. A failure inside ncclCommInitRank on one
  /// rank still leaves the others waiting there: abort the job (MPI_Abort) on such an error.
  template <::dcp::communicator C>
  [[nodiscard]] static communicator bootstrap(C& over, int device) {
    const auto rank = static_cast<std::int64_t>(over.rank());
    const auto size = static_cast<std::int64_t>(over.size());
    if (size > std::numeric_limits<int>::max())
      throw error("dcp::nccl::communicator::bootstrap: size = " + std::to_string(size) +
                  " is more ranks than NCCL takes (" +
                  std::to_string(std::numeric_limits<int>::max()) + ")");
    // Each rank sends {cudaSetDevice's code, ncclGetUniqueId's code, the id}; only rank 0 makes
    // an id, and only once its device is set.
    constexpr std::size_t words = 2 + id_words;
    std::array<std::int64_t, words> mine{};
    mine[0] = static_cast<std::int64_t>(cudaSetDevice(device));
    if (mine[0] == cudaSuccess && rank == 0) {
      ncclUniqueId id{};
      mine[1] = static_cast<std::int64_t>(ncclGetUniqueId(&id));
      std::memcpy(mine.data() + 2, &id, sizeof id);
    }
    if (mine[0] != cudaSuccess) (void)cudaGetLastError();  // reported below, through the gather
    const auto all = over.all_gather(mine);
    if (all.size() != static_cast<std::size_t>(size) * words)
      throw error("dcp::nccl::communicator::bootstrap: the all-gather returned " +
                  std::to_string(all.size()) + " values, expected " + std::to_string(size) + " x " +
                  std::to_string(words));
    for (std::int64_t r = 0; r < size; ++r) {
      const auto code = all[static_cast<std::size_t>(r) * words];
      if (code != cudaSuccess)
        throw comm_error("cudaSetDevice", code,
                         cuda::detail::error_text(static_cast<cudaError_t>(code)) + " (on rank " +
                             std::to_string(r) + " of " + std::to_string(size) +
                             ", bootstrapping NCCL)");
    }
    if (all[1] != ncclSuccess) {
      const char* text = ncclGetErrorString(static_cast<ncclResult_t>(all[1]));
      throw comm_error("ncclGetUniqueId", all[1],
                       std::string(text ? text : "") + " (on rank 0 of " + std::to_string(size) +
                           ", bootstrapping NCCL)");
    }
    ncclUniqueId id{};
    std::memcpy(&id, all.data() + 2, sizeof id);
    return init_rank(id, static_cast<int>(rank), static_cast<int>(size), device);
  }

  communicator(communicator&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)),
        stream_(std::exchange(other.stream_, nullptr)),
        buffer_(std::exchange(other.buffer_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)),
        device_(other.device_),
        rank_(other.rank_),
        size_(other.size_) {}
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, nullptr);
      stream_ = std::exchange(other.stream_, nullptr);
      buffer_ = std::exchange(other.buffer_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
      device_ = other.device_;
      rank_ = other.rank_;
      size_ = other.size_;
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { release(); }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The GPU this rank drives.
  [[nodiscard]] int device() const noexcept { return device_; }
  /// The NCCL handle (still owned by this object); null once moved from or closed.
  [[nodiscard]] ncclComm_t native() const noexcept { return comm_; }
  /// The stream all_gather runs on (created non-blocking, owned by this object).
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  /// ncclAllGather of ncclInt64: size() * mine.size() values, rank-major. Copies `mine` into
  /// this rank's slot of a device buffer, gathers in place, copies back and waits. Collective.
  [[nodiscard]] std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(size_) * mine.size());
    if (mine.empty()) return out;  // every rank passes the same count, so every rank skips NCCL
    const cuda::device_guard on(device_);
    reserve(out.size());
    std::int64_t* slot = buffer_ + static_cast<std::size_t>(rank_) * mine.size();
    check_cuda(
        cudaMemcpyAsync(slot, mine.data(), mine.size_bytes(), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync");
    // In place (NCCL's rule for all-gather: sendbuff == recvbuff + rank * count).
    check(ncclAllGather(slot, buffer_, mine.size(), ncclInt64, comm_, stream_), "ncclAllGather");
    check_cuda(cudaMemcpyAsync(out.data(), buffer_, out.size() * sizeof(std::int64_t),
                               cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    // A network failure during the gather is reported here, not by ncclAllGather's return code.
    ncclResult_t asynchronous = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &asynchronous), "ncclCommGetAsyncError");
    check(asynchronous, "ncclAllGather");
    return out;
  }

  /// ncclCommSplit: equal non-negative colours form a group ordered by (key, rank); a negative
  /// colour passes NCCL_SPLIT_NOCOLOR and gives nullopt. The child drives the same device.
  /// Collective.
  [[nodiscard]] std::optional<communicator> split(int color, int key) {
    const cuda::device_guard on(device_);
    ncclComm_t made = nullptr;
    check(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &made, nullptr),
          "ncclCommSplit");
    if (made == nullptr) return std::nullopt;
    return communicator(made, device_);
  }

  /// What the destructor does, with every code checked: ncclCommFinalize, ncclCommDestroy, then
  /// cudaFree of the buffer and cudaStreamDestroy. Collective, like destruction. Afterwards the
  /// handle is empty (native() is null); closing an empty handle does nothing.
  void close() {
    if (comm_ == nullptr && stream_ == nullptr && buffer_ == nullptr) return;
    const cuda::device_guard on(device_);
    if (comm_ != nullptr) {
      check(ncclCommFinalize(comm_), "ncclCommFinalize");
      check(ncclCommDestroy(std::exchange(comm_, nullptr)), "ncclCommDestroy");
    }
    if (buffer_ != nullptr) {
      capacity_ = 0;
      check_cuda(cudaFree(std::exchange(buffer_, nullptr)), "cudaFree");
    }
    if (stream_ != nullptr)
      check_cuda(cudaStreamDestroy(std::exchange(stream_, nullptr)), "cudaStreamDestroy");
  }

 private:
  /// Adopts `comm` (owned from here on, also when this constructor throws): its stream, rank and
  /// size.
  communicator(ncclComm_t comm, int device) : comm_(comm), device_(device) {
    try {
      const cuda::device_guard on(device_);
      check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags");
      check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
      check(ncclCommCount(comm_, &size_), "ncclCommCount");
    } catch (...) {
      // The other ranks' handles may be fine, so do not wait for them in ncclCommFinalize.
      (void)ncclCommAbort(std::exchange(comm_, nullptr));
      release();
      throw;
    }
  }

  /// A device buffer of at least `values` int64 (grown by doubling; its contents are not kept).
  void reserve(std::size_t values) {
    if (values <= capacity_) return;
    const auto wanted = std::max({values, capacity_ * 2, std::size_t{64}});
    if (buffer_ != nullptr) {
      capacity_ = 0;
      check_cuda(cudaFree(std::exchange(buffer_, nullptr)), "cudaFree");
    }
    void* made = nullptr;
    check_cuda(cudaMalloc(&made, wanted * sizeof(std::int64_t)), "cudaMalloc");
    buffer_ = static_cast<std::int64_t*>(made);
    capacity_ = wanted;
  }

  void release() noexcept {
    if (comm_ == nullptr && stream_ == nullptr && buffer_ == nullptr) return;
    // Nothing to report to in a destructor: each step runs whatever the one before returned.
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    if (comm_ != nullptr) {
      // A communicator that cannot finalize (a peer failed) is aborted rather than destroyed.
      if (ncclCommFinalize(comm_) == ncclSuccess)
        (void)ncclCommDestroy(comm_);
      else
        (void)ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    if (buffer_ != nullptr) (void)cudaFree(buffer_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    buffer_ = nullptr;
    stream_ = nullptr;
    capacity_ = 0;
    if (switched) (void)cudaSetDevice(previous);
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::int64_t* buffer_ = nullptr;
  std::size_t capacity_ = 0;  ///< int64 values buffer_ holds
  int device_ = 0;
  int rank_ = 0;
  int size_ = 0;
};

static_assert(dcp::communicator<communicator>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::nccl
