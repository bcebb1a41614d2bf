// dcp::cuda and dcp::nccl on any machine. CTest runs each test case as gpu.<test case> (label
// gpu). Everywhere: return codes become comm_error naming the call, the code and the library's
// text; asking for a device that does not exist throws comm_error naming the CUDA call, on every
// rank of a bootstrap, instead of crashing or hanging. Without a GPU: every CUDA entry point of
// the timer and memory reader throws comm_error. With a GPU (cudaGetDeviceCount > 0): the
// communicator conformance checks on a 1-rank NCCL communicator, a bootstrap over an in-process
// world, ownership, and an event-timed cudaMemcpy. A case that cannot run here prints
// DCP_TEST_SKIPPED (CTest counts it as skipped).
//
// The NCCL cases are compiled when the build has dcp::nccl (DCP_TEST_NCCL).

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <cuda_runtime_api.h>

#include <doctest/doctest.h>

#include "dcp/cuda/check.hpp"
#include "dcp/cuda/device_guard.hpp"
#include "dcp/cuda/event_timer.hpp"
#include "dcp/cuda/measure.hpp"
#include "dcp/cuda/memory_peak.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/in_process.hpp"

#include "../support/errors.hpp"

#if DCP_TEST_NCCL
#include <nccl.h>

#include "dcp/nccl/communicator.hpp"
#include "dcp/testing/communicator_conformance.hpp"
#endif

namespace {

using dcp::test::contains;
using dcp::test::message_of;

/// CUDA devices visible here; 0 when the runtime has no driver or no device to talk to.
int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// True (after printing the skip marker) when this machine has no GPU.
bool skip_without_gpu() {
  if (device_count() > 0) return false;
  MESSAGE("DCP_TEST_SKIPPED: no CUDA device (cudaGetDeviceCount found none)");
  return true;
}

/// True (after printing the skip marker) when this machine has a GPU.
bool skip_with_gpu() {
  if (device_count() == 0) return false;
  MESSAGE("DCP_TEST_SKIPPED: this case checks the behaviour without a GPU, and there is one");
  return true;
}

/// The comm_error that f throws; fails the test case when f throws nothing or something else.
template <class F>
std::optional<dcp::comm_error> comm_error_of(F&& f) {
  try {
    f();
  } catch (const dcp::comm_error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL_CHECK("expected dcp::comm_error, got: " << e.what());
    return std::nullopt;
  }
  FAIL_CHECK("expected dcp::comm_error, nothing was thrown");
  return std::nullopt;
}

/// `e` names `call`, carries a failed CUDA code, and its message holds CUDA's name and text for it.
void check_cuda_failure(const dcp::comm_error& e, const std::string& call) {
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(e.call() == call);
  CHECK(e.code() != cudaSuccess);
  const auto code = static_cast<cudaError_t>(e.code());
  CHECK(contains(e.what(), call + " failed with code " + std::to_string(e.code())));
  CHECK(contains(e.detail(), cudaGetErrorName(code)));
  CHECK(contains(e.detail(), cudaGetErrorString(code)));
}

}  // namespace

// --- checked calls: codes become comm_error -------------------------------------------------

TEST_CASE("Cuda.check.names_call_code_and_text") {
  dcp::cuda::check(cudaSuccess, "cudaSetDevice");  // no throw
  const auto e = comm_error_of([] { dcp::cuda::check(cudaErrorNoDevice, "cudaSetDevice"); });
  REQUIRE(e);
  CHECK(e->code() == 100);  // cudaErrorNoDevice, as CUDA numbers it
  CHECK(contains(e->what(), "cudaSetDevice failed with code 100: cudaErrorNoDevice: "));
  check_cuda_failure(*e, "cudaSetDevice");

  const auto oom = comm_error_of([] { dcp::cuda::check(cudaErrorMemoryAllocation, "cudaMalloc"); });
  REQUIRE(oom);
  CHECK(oom->code() == 2);
  CHECK(contains(oom->detail(), "cudaErrorMemoryAllocation"));
  check_cuda_failure(*oom, "cudaMalloc");
}

// --- without a GPU: the timer and the memory reader fail with the call's name ------------------

TEST_CASE("Cuda.no_gpu.timer_and_memory_throw_comm_error") {
  if (skip_with_gpu()) return;
  const auto timer = comm_error_of([] { dcp::cuda::event_timer t; });
  REQUIRE(timer);
  check_cuda_failure(*timer, "cudaEventCreate");

  const auto in_use = comm_error_of([] { (void)dcp::cuda::device_bytes_in_use(); });
  REQUIRE(in_use);
  check_cuda_failure(*in_use, "cudaMemGetInfo");
  const auto peak = comm_error_of([] { dcp::cuda::memory_peak m; });
  REQUIRE(peak);
  check_cuda_failure(*peak, "cudaMemGetInfo");

  bool ran = false;
  const auto measured = comm_error_of(
      [&] { (void)dcp::cuda::measure(nullptr, [&](dcp::cuda::memory_peak&) { ran = true; }); });
  REQUIRE(measured);
  CHECK_FALSE(ran);
}

// --- with a GPU: the timer, the memory reader, measure ----------------------------------------

TEST_CASE("Cuda.event_timer.times_a_device_copy") {
  if (skip_without_gpu()) return;
  const dcp::cuda::device_guard on(0);
  constexpr std::size_t bytes = std::size_t{256} << 20;
  cudaStream_t stream = nullptr;
  dcp::cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags");
  dcp::cuda::memory_peak memory;
  const auto before = memory.peak_bytes();
  void* from = nullptr;
  void* to = nullptr;
  dcp::cuda::check(cudaMalloc(&from, bytes), "cudaMalloc");
  dcp::cuda::check(cudaMalloc(&to, bytes), "cudaMalloc");
  dcp::cuda::check(cudaMemset(from, 1, bytes), "cudaMemset");
  dcp::cuda::check(cudaDeviceSynchronize(),
                   "cudaDeviceSynchronize");  // `stream` does not wait for it
  memory.sample();
  CHECK(memory.peak_bytes() >= before + 2 * bytes);

  dcp::cuda::event_timer timer(stream);
  CHECK(timer.stream() == stream);
  const double seconds = timer.time([&] {
    dcp::cuda::check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync");
  });
  CAPTURE(seconds);
  CHECK(std::isfinite(seconds));
  CHECK(seconds > 0);
  CHECK(seconds < 10);
  MESSAGE("device-to-device copy of 256 MiB: " << seconds * 1e3 << " ms, "
                                               << 2.0 * static_cast<double>(bytes) / seconds / 1e9
                                               << " GB/s counting reads and writes");

  // measure: the same copy as one "micro-batch".
  const auto report = dcp::cuda::measure(stream, [&](dcp::cuda::memory_peak& m) {
    dcp::cuda::check(cudaMemcpyAsync(from, to, bytes, cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync");
    m.sample();
  });
  CHECK(report.seconds > 0);
  CHECK(report.peak_bytes >= static_cast<double>(2 * bytes));
  CHECK_FALSE(report.out_of_memory);

  dcp::cuda::check(cudaFree(from), "cudaFree");
  dcp::cuda::check(cudaFree(to), "cudaFree");
  dcp::cuda::check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

TEST_CASE("Cuda.event_timer.rejects_reading_before_stop") {
  if (skip_without_gpu()) return;
  const dcp::cuda::device_guard on(0);
  dcp::cuda::event_timer timer;
  CHECK(contains(message_of([&] { timer.stop(); }), "was not started"));
  timer.start();
  CHECK(contains(message_of([&] { (void)timer.seconds(); }), "was not stopped"));
  timer.stop();
  CHECK(timer.seconds() >= 0);
  dcp::cuda::event_timer moved(std::move(timer));
  CHECK(moved.seconds() >= 0);
}

TEST_CASE("Cuda.device_guard.rejects_a_missing_device") {
  const int count = device_count();
  const auto e = comm_error_of([&] { const dcp::cuda::device_guard on(count); });
  REQUIRE(e);
  // With no GPU, even cudaGetDevice fails; with one, cudaSetDevice refuses device `count`.
  CHECK((e->call() == "cudaSetDevice" || (count == 0 && e->call() == "cudaGetDevice")));
  check_cuda_failure(*e, e->call());
}

#if DCP_TEST_NCCL

// --- the NCCL adapter: concept, checked codes, bad arguments -----------------------------------

static_assert(dcp::communicator<dcp::nccl::communicator>);
static_assert(std::same_as<dcp::split_result_t<dcp::nccl::communicator>, dcp::nccl::communicator>);
static_assert(!std::is_copy_constructible_v<dcp::nccl::communicator>);
static_assert(!std::is_copy_assignable_v<dcp::nccl::communicator>);
static_assert(std::is_nothrow_move_constructible_v<dcp::nccl::communicator>);
static_assert(std::is_nothrow_move_assignable_v<dcp::nccl::communicator>);
static_assert(dcp::nccl::communicator::id_words == 16);

TEST_CASE("Nccl.check.names_call_code_and_text") {
  dcp::nccl::check(ncclSuccess, "ncclCommSplit");  // no throw
  const auto e = comm_error_of([] { dcp::nccl::check(ncclInvalidArgument, "ncclCommSplit"); });
  REQUIRE(e);
  const std::string what = e->what();
  CAPTURE(what);
  CHECK(e->call() == "ncclCommSplit");
  CHECK(e->code() == 4);  // ncclInvalidArgument, as NCCL numbers it
  CHECK(contains(e->what(), "ncclCommSplit failed with code 4: "));
  CHECK(e->detail() == ncclGetErrorString(ncclInvalidArgument));
  CHECK(contains(e->detail(), "invalid argument"));

  const auto cuda =
      comm_error_of([] { dcp::nccl::check(ncclUnhandledCudaError, "ncclCommInitRank"); });
  REQUIRE(cuda);
  CHECK(cuda->code() == 1);
  CHECK(cuda->detail() == ncclGetErrorString(ncclUnhandledCudaError));

  dcp::nccl::check_cuda(cudaSuccess, "cudaSetDevice");  // no throw
  const auto device =
      comm_error_of([] { dcp::nccl::check_cuda(cudaErrorNoDevice, "cudaSetDevice"); });
  REQUIRE(device);
  CHECK(device->code() == 100);
  check_cuda_failure(*device, "cudaSetDevice");
}

TEST_CASE("Nccl.init_rank.rejects_bad_arguments") {
  const ncclUniqueId id{};
  struct arguments {
    int rank, size, device;
  };
  for (const auto [rank, size, device] :
       {arguments{2, 2, 0}, arguments{-1, 2, 0}, arguments{0, 0, 0}, arguments{0, 1, -1}}) {
    const auto message = message_of([&id, r = rank, s = size, d = device] {
      (void)dcp::nccl::communicator::init_rank(id, r, s, d);
    });
    CAPTURE(message);
    CHECK(contains(message, "init_rank: rank = " + std::to_string(rank) + ", size = " +
                                std::to_string(size) + ", device = " + std::to_string(device)));
    CHECK(contains(message, "needs size >= 1, 0 <= rank < size and device >= 0"));
  }
}

// --- a device that does not exist: every rank throws, naming cudaSetDevice ---------------------
// On a machine without a GPU, device 0 is such a device; on one with N GPUs, device N is.

TEST_CASE("Nccl.init_rank.missing_device_names_cudaSetDevice") {
  const ncclUniqueId id{};  // never used: the device fails first
  const auto e =
      comm_error_of([&] { (void)dcp::nccl::communicator::init_rank(id, 0, 1, device_count()); });
  REQUIRE(e);
  check_cuda_failure(*e, "cudaSetDevice");
}

TEST_CASE("Nccl.bootstrap.missing_device_fails_on_every_rank") {
  constexpr int ranks = 3;
  const int missing = device_count();
  dcp::in_process_world world(ranks);
  std::vector<std::string> calls(ranks);
  std::vector<std::string> details(ranks);
  std::vector<std::int64_t> codes(ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto comm = world.communicator(r);
      try {
        (void)dcp::nccl::communicator::bootstrap(comm, missing);
        calls[static_cast<std::size_t>(r)] = "(nothing thrown)";
      } catch (const dcp::comm_error& e) {
        calls[static_cast<std::size_t>(r)] = e.call();
        details[static_cast<std::size_t>(r)] = e.detail();
        codes[static_cast<std::size_t>(r)] = e.code();
      } catch (const std::exception& e) {
        calls[static_cast<std::size_t>(r)] = std::string("(other exception) ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    const auto index = static_cast<std::size_t>(r);
    CAPTURE(r);
    CAPTURE(details[index]);
    CHECK(calls[index] == "cudaSetDevice");
    CHECK(codes[index] != cudaSuccess);
    // Every rank reports the first failing rank, rank 0, with CUDA's text for its code.
    CHECK(contains(details[index], "(on rank 0 of 3, bootstrapping NCCL)"));
    CHECK(contains(details[index], cudaGetErrorString(static_cast<cudaError_t>(codes[index]))));
  }
}

// --- with a GPU: conformance, bootstrap, ownership ----------------------------------------------

namespace {
std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}
}  // namespace

TEST_CASE("Nccl.communicator.conforms_on_one_rank") {
  if (skip_without_gpu()) return;
  auto comm = dcp::nccl::communicator::init_rank(dcp::nccl::communicator::unique_id(), 0, 1, 0);
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);
  CHECK(comm.device() == 0);
  CHECK(comm.native() != nullptr);
  CHECK(comm.stream() != nullptr);
  const auto failures = dcp::testing::check_communicator(comm);
  CAPTURE(joined(failures));
  CHECK(failures.empty());
  // More values than the first buffer holds: the buffer grows.
  std::vector<std::int64_t> many(1000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int64_t>(i) * -3;
  CHECK(comm.all_gather(many) == many);

  // The runtime's group cache over it: degree 1 is one NCCL split.
  dcp::group_cache<dcp::nccl::communicator> cache(comm);
  cache.warm_up(1);
  auto& group = cache.group(0, 1);
  CHECK(group.size() == 1);
  const std::int64_t mine[1] = {7};
  CHECK(group.all_gather(mine) == std::vector<std::int64_t>{7});
}

TEST_CASE("Nccl.bootstrap.over_an_in_process_world") {
  if (skip_without_gpu()) return;
  dcp::run_ranks(1, [](dcp::in_process_communicator& world) {
    auto comm = dcp::nccl::communicator::bootstrap(world, 0);
    CHECK(comm.rank() == world.rank());
    CHECK(comm.size() == world.size());
    const std::int64_t mine[2] = {5, -6};
    CHECK(comm.all_gather(mine) == std::vector<std::int64_t>{5, -6});
  });
}

TEST_CASE("Nccl.communicator.owns_moves_and_closes") {
  if (skip_without_gpu()) return;
  auto world = dcp::nccl::communicator::init_rank(dcp::nccl::communicator::unique_id(), 0, 1, 0);
  CHECK_FALSE(world.split(-1, 0).has_value());
  auto made = world.split(0, 0);
  REQUIRE(made.has_value());
  const auto handle = made->native();
  dcp::nccl::communicator moved(std::move(*made));
  CHECK(made->native() == nullptr);
  CHECK(made->stream() == nullptr);
  CHECK(moved.native() == handle);
  const std::int64_t mine[1] = {42};
  CHECK(moved.all_gather(mine) == std::vector<std::int64_t>{42});
  moved.close();
  CHECK(moved.native() == nullptr);
  moved.close();  // closing an empty handle does nothing
  world.close();
}

#endif  // DCP_TEST_NCCL
