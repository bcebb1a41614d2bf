#pragma once
// How the libtorch programs start: mpiexec launches the processes, MPI tells each its rank and
// agrees on a fresh c10d::FileStore, and everything else (groups, collectives) is c10d's. MPI is
// used for nothing but this and the final barrier. Nothing here knows dcp.
//
// The store lives in a directory rank 0 creates with mkdtemp under $TMPDIR (or /tmp) and
// broadcasts, so concurrent jobs never share a store and no job finds a stale file; rank 0
// removes the directory after every rank is done with it.

#include <ATen/Parallel.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <vector>

#include <mpi.h>

namespace tiny {

/// Throws std::runtime_error naming the MPI call unless `code` is MPI_SUCCESS.
inline void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed with code " + std::to_string(code));
}

/// MPI_Init, this process's rank and size, and a FileStore shared by the job's processes.
/// The destructor waits for every rank (MPI_Barrier), removes the store's directory on rank 0
/// and calls MPI_Finalize: destroy every process group before it.
class launch {
 public:
  launch(int* argc, char*** argv) {
    check_mpi(MPI_Init(argc, argv), "MPI_Init");
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    std::vector<char> path(4096, '\0');
    if (rank_ == 0) {
      const char* base = std::getenv("TMPDIR");
      std::string pattern = std::string(base && *base ? base : "/tmp") + "/dcp-torch-XXXXXX";
      if (pattern.size() >= path.size()) pattern = "/tmp/dcp-torch-XXXXXX";
      pattern.copy(path.data(), pattern.size());
      if (mkdtemp(path.data()) == nullptr) path.assign(path.size(), '\0');  // broadcast the failure
    }
    check_mpi(MPI_Bcast(path.data(), static_cast<int>(path.size()), MPI_CHAR, 0, MPI_COMM_WORLD),
              "MPI_Bcast");
    directory_ = path.data();
    if (directory_.empty()) throw std::runtime_error("launch: mkdtemp failed on rank 0");
    store_ = c10::make_intrusive<::c10d::FileStore>(directory_ + "/store", size_);
    store_->setTimeout(std::chrono::seconds(60));
  }
  launch(const launch&) = delete;
  launch& operator=(const launch&) = delete;
  ~launch() {
    store_.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(directory_, ignored);
    }
    MPI_Finalize();
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const c10::intrusive_ptr<::c10d::Store>& store() const noexcept { return store_; }
  [[nodiscard]] const std::string& directory() const noexcept { return directory_; }

  /// True on every rank when `mine` is true on any (collective; MPI_Allreduce).
  [[nodiscard]] static bool any_rank(bool mine) {
    int flag = mine ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    return flag != 0;
  }

  /// Runs `body(launch&)` -> int; an exception or a non-zero return on any rank ends the whole
  /// job (MPI_Abort), since the other ranks may wait in a collective this one left.
  template <class F>
  static int run(int argc, char** argv, F&& body) {
    std::optional<launch> job;  // outside the try: an error must abort, not wait in ~launch
    try {
      job.emplace(&argc, &argv);
      at::set_num_threads(1);  // four processes share two cores
      const int code = body(*job);
      if (code != 0) {
        std::fprintf(stderr, "rank %d: failed (exit code %d)\n", job->rank(), code);
        MPI_Abort(MPI_COMM_WORLD, code);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", job ? job->rank() : -1, e.what());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
  }

 private:
  int rank_ = 0;
  int size_ = 0;
  std::string directory_;
  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace tiny
