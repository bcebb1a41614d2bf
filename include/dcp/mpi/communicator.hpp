#pragma once
// dcp::mpi::communicator: dcp::communicator over an MPI communicator (Open MPI, MPICH), and
// dcp::mpi::environment, an RAII MPI_Init / MPI_Finalize for programs. Every MPI call's return
// code is checked; a failure throws dcp::comm_error naming the call and the code. Link dcp::mpi.

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::mpi {

namespace detail {
/// The text MPI gives for an error code (empty if it has none).
inline std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS || length <= 0) return {};
  return std::string(text, static_cast<std::size_t>(length));
}
}  // namespace detail

/// Throws comm_error(call, code, MPI_Error_string(code)) unless `code` is MPI_SUCCESS.
inline void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw comm_error(call, code, detail::error_text(code));
}

/// MPI_Init (or MPI_Init_thread) in the constructor, MPI_Finalize in the destructor, unless MPI
/// was already initialised (then it neither initialises nor finalises). MPI_COMM_WORLD is set to
/// MPI_ERRORS_RETURN so that failures come back as codes.
class environment {
public:
  environment() : environment(nullptr, nullptr) {}
  environment(int* argc, char*** argv) {
    int initialised = 0;
    check(MPI_Initialized(&initialised), "MPI_Initialized");
    if (!initialised) {
      check(MPI_Init(argc, argv), "MPI_Init");
      owns_ = true;
    }
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    if (!owns_) return;
    int finalised = 0;
    if (MPI_Finalized(&finalised) == MPI_SUCCESS && !finalised) MPI_Finalize();
  }

private:
  bool owns_ = false;
};

/// One rank's handle on an MPI communicator. Models dcp::communicator.
///
/// Owning (made by split, or adopted with `owning`): freed with MPI_Comm_free when destroyed;
/// move-only. Borrowed (`borrowed`, `world()`): never freed, e.g. MPI_COMM_WORLD. Either way the
/// communicator's error handler is set to MPI_ERRORS_RETURN.
class communicator {
public:
  /// A handle on MPI_COMM_WORLD (borrowed).
  static communicator world() { return borrowed(MPI_COMM_WORLD); }
  /// A handle that never frees `comm`.
  static communicator borrowed(MPI_Comm comm) { return communicator(comm, false); }
  /// A handle that frees `comm` with MPI_Comm_free when destroyed.
  static communicator owning(MPI_Comm comm) { return communicator(comm, true); }

  communicator(communicator&& other) noexcept
      : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
        owned_(std::exchange(other.owned_, false)),
        rank_(other.rank_),
        size_(other.size_) {}
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
      owned_ = std::exchange(other.owned_, false);
      rank_ = other.rank_;
      size_ = other.size_;
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { release(); }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// The MPI handle (still owned by this object when owning).
  MPI_Comm native() const noexcept { return comm_; }
  bool owns() const noexcept { return owned_; }

  /// MPI_Allgather of MPI_INT64_T: size() * mine.size() values, rank-major.
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw error("dcp::mpi::communicator::all_gather: " + std::to_string(mine.size()) +
                  " values is more than one MPI call can send");
    std::vector<std::int64_t> out(static_cast<std::size_t>(size_) * mine.size());
    // MPI wants a non-null buffer even for a zero count on some implementations.
    std::int64_t dummy = 0;
    const void* send = mine.empty() ? static_cast<const void*>(&dummy) : static_cast<const void*>(mine.data());
    void* receive = out.empty() ? static_cast<void*>(&dummy) : static_cast<void*>(out.data());
    const int count = static_cast<int>(mine.size());
    check(MPI_Allgather(send, count, MPI_INT64_T, receive, count, MPI_INT64_T, comm_), "MPI_Allgather");
    return out;
  }

  /// MPI_Comm_split: equal non-negative colours form a group ordered by (key, rank); a negative
  /// colour passes MPI_UNDEFINED and gives nullopt. Collective.
  std::optional<communicator> split(int color, int key) {
    MPI_Comm made = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &made), "MPI_Comm_split");
    if (made == MPI_COMM_NULL) return std::nullopt;
    return communicator(made, true);
  }

private:
  communicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    if (comm == MPI_COMM_NULL) throw error("dcp::mpi::communicator: MPI_COMM_NULL given");
    try {
      check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
      check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    } catch (...) {
      release();
      throw;
    }
  }

  void release() noexcept {
    if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);  // nothing to report to in a destructor
    comm_ = MPI_COMM_NULL;
    owned_ = false;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 0;
};

static_assert(dcp::communicator<communicator>);

}  // namespace dcp::mpi
