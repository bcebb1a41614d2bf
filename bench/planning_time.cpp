// Planning time and memory as the batch grows, side by side in one run.
//
//   BM_PlanningTime/<gpus>/<samples>  DataCentricScheduler<>::plan on Wikipedia-profile lengths
//                                     (Llama-3-8B, H200, 64K context), after one untimed plan of
//                                     the same batch; counters: ns per sample
//                                     (wall clock, and CPU time of this process),
//                                     the heap the plan call holds at its peak, with what the
//                                     scheduler keeps between plans (bytes per sample; kept_MiB:
//                                     the part kept)
//                                     and gap = makespan / lower bound - 1.
//   BM_PlanningTime/ratios            the scaling bars: time(1M) / time(100K) and
//                                     time(10M) / time(1M) on 1,024 GPUs, from the runs above
//                                     (wall clock and CPU time).
//
// ./build/bench/dcp_bench_planning_time
// ./build/bench/dcp_bench_planning_time --benchmark_filter='/32/|/1024/100000$'   (quick)
// GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=17179869184
//   ./build/bench/dcp_bench_planning_time   (one command line: glibc keeps all freed memory,
//                                            docs/planner.md "Planning time")

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/dcp.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

#include "wikipedia_samples.hpp"

// Heap accounting: every allocation of this program is counted, so the peak a plan call holds
// above what was live before it is its working memory.
namespace {
std::atomic<std::int64_t> live_bytes{0};
std::atomic<std::int64_t> peak_bytes{0};

void* counted_alloc(std::size_t bytes) {
  void* p = std::malloc(bytes + 16);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = bytes;
  const auto now =
      live_bytes.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
  auto peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return static_cast<char*>(p) + 16;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  void* base = static_cast<char*>(p) - 16;
  live_bytes.fetch_sub(static_cast<std::int64_t>(*static_cast<std::size_t*>(base)));
  std::free(base);
}
}  // namespace

void* operator new(std::size_t bytes) { return counted_alloc(bytes); }
void* operator new[](std::size_t bytes) { return counted_alloc(bytes); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace {

using namespace dcp;

using bench::wikipedia_samples;

// Mean (wall, CPU) seconds per plan of each (gpus, samples), for the ratio report. The CPU
// time of this process is the planner's own (it runs on one thread), which keeps the ratios
// meaningful on a machine shared with other work.
std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>>& seconds_per_plan() {
  static std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>> measured;
  return measured;
}

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Records the mean seconds per plan of each (gpus, samples) for the ratio report.
void BM_PlanningTimeRecorded(benchmark::State& state) {
  const std::int64_t gpus = state.range(0);
  const auto count = static_cast<std::size_t>(state.range(1));
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(gpus / 8, gpus::h200_sxm()));
  const DataCentricScheduler<> scheduler(cost);
  const auto batch = wikipedia_samples(count, 42);
  double gap = 0;
  std::int64_t held = 0;
  double total = 0;
  double cpu = 0;
  std::int64_t plans = 0;
  // One untimed plan first, at every size alike: the timed ones then run as in a training loop
  // that replans every step (the allocator holds memory an earlier plan freed), where a size
  // timed once would pay first-touch page faults that a size timed twice halves.
  // Heap is counted from before that plan: what the scheduler keeps between plans (its
  // workspace, detail/plan_workspace.hpp) is part of what a plan holds.
  const std::int64_t base = live_bytes.load();
  benchmark::DoNotOptimize(scheduler.plan(batch).fingerprint);
  const std::int64_t kept = live_bytes.load() - base;
  for (auto _ : state) {
    peak_bytes.store(live_bytes.load());
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    const auto plan = scheduler.plan(batch);
    cpu += cpu_seconds() - cpu_start;
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++plans;
    held = std::max(held, peak_bytes.load() - base);
    gap = plan.gap();
    benchmark::DoNotOptimize(plan.fingerprint);
  }
  const auto per_plan = [&](double seconds) {
    return seconds / static_cast<double>(std::max<std::int64_t>(plans, 1));
  };
  seconds_per_plan()[{gpus, state.range(1)}] = {per_plan(total), per_plan(cpu)};
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count));
  state.counters["gap"] = gap;
  state.counters["samples"] = static_cast<double>(count);
  state.counters["peak_heap_MiB"] = static_cast<double>(held) / (1024.0 * 1024.0);
  state.counters["kept_MiB"] = static_cast<double>(kept) / (1024.0 * 1024.0);
  state.counters["bytes_per_sample"] = static_cast<double>(held) / static_cast<double>(count);
  state.counters["ns_per_sample"] = 1e9 * per_plan(total) / static_cast<double>(count);
  state.counters["cpu_ns_per_sample"] = 1e9 * per_plan(cpu) / static_cast<double>(count);
}

void BM_Ratios(benchmark::State& state) {
  for (auto _ : state) {
  }
  const auto& m = seconds_per_plan();
  const auto ratio = [&](std::int64_t big, std::int64_t small, bool by_cpu) {
    const auto b = m.find({1024, big});
    const auto s = m.find({1024, small});
    if (b == m.end() || s == m.end()) return 0.0;
    return by_cpu ? b->second.second / s->second.second : b->second.first / s->second.first;
  };
  state.counters["1M_over_100K"] = ratio(1'000'000, 100'000, false);
  state.counters["10M_over_1M"] = ratio(10'000'000, 1'000'000, false);
  state.counters["cpu_1M_over_100K"] = ratio(1'000'000, 100'000, true);
  state.counters["cpu_10M_over_1M"] = ratio(10'000'000, 1'000'000, true);
  state.SetLabel("bar: both <= 12 (0 = not run)");
}

BENCHMARK(BM_PlanningTimeRecorded)
    ->Name("BM_PlanningTime")
    ->Args({32, 1000})
    ->Args({32, 32000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanningTimeRecorded)
    ->Name("BM_PlanningTime")
    ->Args({1024, 100'000})
    ->Args({1024, 1'000'000})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanningTimeRecorded)
    ->Name("BM_PlanningTime")
    ->Args({1024, 10'000'000})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ratios)->Name("BM_PlanningTime/ratios")->Iterations(1);

}  // namespace
