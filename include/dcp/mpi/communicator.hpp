#pragma once
// dcp::mpi::communicator: dcp::communicator over an MPI communicator (Open MPI, MPICH), and
// dcp::mpi::environment, an RAII MPI_Init / MPI_Finalize for programs that ends the job
// (MPI_Abort) instead of finalizing when a rank leaves on an error, and dcp::mpi::abort_job.
// Every MPI call's return code is checked; a failure throws dcp::comm_error naming the call and
// the code. Link dcp::mpi.

#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::mpi {

namespace detail {
/// The text MPI gives for an error code (empty if it has none).
[[nodiscard]] inline std::string error_text(int code) {
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

/// What dcp::mpi::environment does when it ends the job, and how long it lets MPI_Finalize wait.
struct environment_options {
  /// The code the job ends with when the environment aborts it (MPI_Abort's errorcode; Open
  /// MPI's mpiexec exits with it). Must be non-zero.
  int abort_code = 1;
  /// With a positive value, the destructor first waits (MPI_Ibarrier on a private duplicate of
  /// MPI_COMM_WORLD) at most this long for every rank to reach its own destructor, and aborts the
  /// job if they do not: a rank that swallowed an error and returned while the others wait in a
  /// collective then ends the job instead of hanging in MPI_Finalize. Zero waits as long as
  /// MPI_Finalize does (forever). Every rank must pass the same value.
  std::chrono::milliseconds finalize_timeout{0};
};

namespace detail {
/// "rank 2 of 4" of MPI_COMM_WORLD, or "rank ?" when MPI cannot tell.
[[nodiscard]] inline std::string world_rank_text() {
  int rank = -1;
  int size = -1;
  int initialised = 0;
  int finalised = 0;
  if (MPI_Initialized(&initialised) != MPI_SUCCESS || !initialised ||
      MPI_Finalized(&finalised) != MPI_SUCCESS || finalised ||
      MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS)
    return "rank ?";
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}
}  // namespace detail

/// Prints "dcp::mpi: rank R of N: <why>; aborting the job (MPI_Abort, code C)" on stderr and
/// ends every process of MPI_COMM_WORLD with `code` (1 if `code` is 0). For a rank that cannot
/// go on while the others may be waiting for it in a collective: returning instead would leave
/// them waiting forever. std::abort() if MPI_Abort returns or MPI is not running.
[[noreturn]] inline void abort_job(std::string_view why, int code = 1) noexcept {
  if (code == 0) code = 1;
  try {
    const std::string line = "dcp::mpi: " + detail::world_rank_text() + ": " + std::string(why) +
                             "; aborting the job (MPI_Abort, code " + std::to_string(code) + ")\n";
    std::fputs(line.c_str(), stderr);
  } catch (...) {
    std::fputs("dcp::mpi: aborting the job (MPI_Abort)\n", stderr);
  }
  std::fflush(stderr);
  int initialised = 0;
  int finalised = 0;
  if (MPI_Initialized(&initialised) == MPI_SUCCESS && initialised &&
      MPI_Finalized(&finalised) == MPI_SUCCESS && !finalised)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

/// MPI_Init in the constructor and MPI_Finalize in the destructor, unless MPI was already
/// initialised (then it neither initialises nor finalises). MPI_COMM_WORLD is set to
/// MPI_ERRORS_RETURN so that failures come back as codes.
///
/// A rank must not finalize while the others may wait for it in a collective (MPI_Finalize then
/// waits for them, and they for it: the job hangs). So the destructor of an environment that
/// owns MPI aborts the job (abort_job, options.abort_code) instead of finalizing when it runs
/// during stack unwinding (std::uncaught_exceptions() above its count at construction), and,
/// with options.finalize_timeout, when the other ranks do not reach their destructors in time.
/// `run` is the easy way to use it: every exception, and every non-zero return, ends the job.
class environment {
 public:
  environment() : environment(nullptr, nullptr) {}
  explicit environment(int* argc, char*** argv, environment_options options = {})
      : options_(options), uncaught_(std::uncaught_exceptions()) {
    if (options_.abort_code == 0)
      throw error(
          "dcp::mpi::environment: options.abort_code = 0, must be non-zero (the job's exit code on "
          "abort)");
    if (options_.finalize_timeout.count() < 0)
      throw error("dcp::mpi::environment: options.finalize_timeout = " +
                  std::to_string(options_.finalize_timeout.count()) + " ms, must be >= 0");
    int initialised = 0;
    check(MPI_Initialized(&initialised), "MPI_Initialized");
    if (!initialised) {
      check(MPI_Init(argc, argv), "MPI_Init");
      owns_ = true;
    }
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    // Collective, so it is made on every owning rank whatever the timeout (ranks may differ in
    // nothing that decides whether a collective is called).
    if (owns_) check(MPI_Comm_dup(MPI_COMM_WORLD, &finalize_comm_), "MPI_Comm_dup");
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    if (!owns_) return;
    int finalised = 0;
    if (MPI_Finalized(&finalised) != MPI_SUCCESS || finalised) return;
    if (std::uncaught_exceptions() > uncaught_)
      abort_job(
          "an exception is unwinding through dcp::mpi::environment, so this rank will not "
          "reach the collectives the others may be waiting in (catch and print it inside "
          "the environment's scope, or use dcp::mpi::environment::run)",
          options_.abort_code);
    if (options_.finalize_timeout.count() > 0) wait_for_every_rank();
    if (finalize_comm_ != MPI_COMM_NULL) MPI_Comm_free(&finalize_comm_);
    MPI_Finalize();
  }

  [[nodiscard]] const environment_options& options() const noexcept { return options_; }

  /// Runs `fn` (returning int, the exit code, or void for 0) with MPI initialised, and returns
  /// its result after MPI_Finalize. Any exception out of fn is printed with this rank's number
  /// and ends the job (abort_job, options.abort_code); so does a non-zero return (with that
  /// code), since this rank cannot know whether the others still wait for it. Use as
  ///   int main(int argc, char** argv) { return dcp::mpi::environment::run(argc, argv, [&] { ...
  ///   }); }
  template <class F>
    requires std::invocable<F&>
  [[nodiscard]] static int run(int& argc, char**& argv, F&& fn, environment_options options = {}) {
    std::optional<environment> env;
    try {
      env.emplace(&argc, &argv, options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dcp::mpi::environment::run: %s\n", e.what());
      return options.abort_code == 0 ? 1 : options.abort_code;
    }
    int code = 0;
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
        fn();
      } else {
        code = static_cast<int>(fn());
      }
    } catch (const std::exception& e) {
      abort_job(std::string("uncaught exception: ") + e.what(), options.abort_code);
    } catch (...) {
      abort_job("uncaught exception that is not a std::exception", options.abort_code);
    }
    if (code != 0) abort_job("returned " + std::to_string(code), code);
    env.reset();
    return 0;
  }

 private:
  /// MPI_Ibarrier on finalize_comm_, tested until every rank is in its destructor or the
  /// timeout passes (then the job is aborted).
  void wait_for_every_rank() noexcept {
    MPI_Request request = MPI_REQUEST_NULL;
    if (finalize_comm_ == MPI_COMM_NULL || MPI_Ibarrier(finalize_comm_, &request) != MPI_SUCCESS)
      return;
    const auto deadline = std::chrono::steady_clock::now() + options_.finalize_timeout;
    int done = 0;
    while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
      if (std::chrono::steady_clock::now() >= deadline)
        abort_job("the other ranks did not reach MPI_Finalize within " +
                      std::to_string(options_.finalize_timeout.count()) +
                      " ms (finalize_timeout); one may wait in a collective this rank left, e.g. "
                      "after an error was caught and not passed on",
                  options_.abort_code);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  environment_options options_{};
  int uncaught_ = 0;
  bool owns_ = false;
  MPI_Comm finalize_comm_ = MPI_COMM_NULL;
};

/// One rank's handle on an MPI communicator. Models dcp::communicator.
///
/// Owning (made by split, or adopted with `owning`): freed with MPI_Comm_free when destroyed;
/// move-only. Borrowed (`borrowed`, `world()`): never freed, e.g. MPI_COMM_WORLD. Either way the
/// communicator's error handler is set to MPI_ERRORS_RETURN.
class communicator {
 public:
  /// A handle on MPI_COMM_WORLD (borrowed).
  [[nodiscard]] static communicator world() { return borrowed(MPI_COMM_WORLD); }
  /// A handle that never frees `comm`.
  [[nodiscard]] static communicator borrowed(MPI_Comm comm) { return communicator(comm, false); }
  /// A handle that frees `comm` with MPI_Comm_free when destroyed.
  [[nodiscard]] static communicator owning(MPI_Comm comm) { return communicator(comm, true); }

  communicator(communicator&& other) noexcept
      : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
        owned_(std::exchange(other.owned_, false)),
        rank_(other.rank_),
        size_(other.size_),
        timeout_(other.timeout_),
        abort_code_(other.abort_code_) {}
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
      owned_ = std::exchange(other.owned_, false);
      rank_ = other.rank_;
      size_ = other.size_;
      timeout_ = other.timeout_;
      abort_code_ = other.abort_code_;
    }
    return *this;
  }

  /// How long all_gather waits for the other ranks before it ends the job (MPI_Abort with
  /// `abort_code`, after a message naming this rank and the call): a rank stuck in its executor
  /// or gone would otherwise hang every other rank in the collective forever. Ten minutes by
  /// default (PyTorch's default for NCCL); zero waits as long as MPI does. Communicators made by
  /// split() inherit it. Every rank should set the same value.
  void set_collective_timeout(std::chrono::milliseconds timeout, int abort_code = 1) {
    if (timeout.count() < 0)
      throw error("dcp::mpi::communicator: collective timeout = " +
                  std::to_string(timeout.count()) + " ms, must be >= 0");
    if (abort_code == 0) throw error("dcp::mpi::communicator: abort_code = 0, must be non-zero");
    timeout_ = timeout;
    abort_code_ = abort_code;
  }
  [[nodiscard]] std::chrono::milliseconds collective_timeout() const noexcept { return timeout_; }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { release(); }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The MPI handle (still owned by this object when owning).
  [[nodiscard]] MPI_Comm native() const noexcept { return comm_; }
  [[nodiscard]] bool owns() const noexcept { return owned_; }

  /// MPI_Allgather of MPI_INT64_T: size() * mine.size() values, rank-major.
  [[nodiscard]] std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw error("dcp::mpi::communicator::all_gather: " + std::to_string(mine.size()) +
                  " values is more than one MPI call can send");
    std::vector<std::int64_t> out(static_cast<std::size_t>(size_) * mine.size());
    // MPI wants a non-null buffer even for a zero count on some implementations.
    std::int64_t dummy = 0;
    const void* send =
        mine.empty() ? static_cast<const void*>(&dummy) : static_cast<const void*>(mine.data());
    void* receive = out.empty() ? static_cast<void*>(&dummy) : static_cast<void*>(out.data());
    const int count = static_cast<int>(mine.size());
    if (timeout_.count() == 0) {
      check(MPI_Allgather(send, count, MPI_INT64_T, receive, count, MPI_INT64_T, comm_),
            "MPI_Allgather");
      return out;
    }
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(send, count, MPI_INT64_T, receive, count, MPI_INT64_T, comm_, &request),
          "MPI_Iallgather");
    wait_or_abort(request, "MPI_Allgather");
    return out;
  }

  /// MPI_Comm_split: equal non-negative colours form a group ordered by (key, rank); a negative
  /// colour passes MPI_UNDEFINED and gives nullopt. Collective.
  [[nodiscard]] std::optional<communicator> split(int color, int key) {
    MPI_Comm made = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &made), "MPI_Comm_split");
    if (made == MPI_COMM_NULL) return std::nullopt;
    communicator child(made, true);
    child.timeout_ = timeout_;
    child.abort_code_ = abort_code_;
    return child;
  }

 private:
  /// Tests `request` until it completes or the collective timeout passes; then ends the job.
  void wait_or_abort(MPI_Request& request, const char* call) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr,
                     "%s: %s did not complete within %lld ms (the communicator's collective "
                     "timeout): another of its %d ranks has not joined it (stuck in its executor, "
                     "or gone); ending the job\n",
                     detail::world_rank_text().c_str(), call,
                     static_cast<long long>(timeout_.count()), size_);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, abort_code_);
        std::abort();  // MPI_Abort does not return
      }
      // Spin briefly (a collective usually completes within microseconds), then sleep.
      if (polls < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

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
    if (owned_ && comm_ != MPI_COMM_NULL)
      MPI_Comm_free(&comm_);  // nothing to report to in a destructor
    comm_ = MPI_COMM_NULL;
    owned_ = false;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 0;
  std::chrono::milliseconds timeout_{std::chrono::minutes(10)};
  int abort_code_ = 1;
};

static_assert(dcp::communicator<communicator>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::mpi
