// Simulator speed, and how the planner's predictions compare with the truth model.
//
//   BM_Simulate<gpus>/<samples>   one simulated step of a DataCentricScheduler<> plan (Llama-3-8B,
//                                 H200, Wikipedia-profile lengths split to 64K); planning and the
//                                 bound are outside the timed loop. Counters: micro-steps, the
//                                 truth gap (simulated makespan / truth lower bound - 1, noise 0).
//   BM_TruthVsPlanner/Wikipedia1M 20 batches of ~1M tokens on 4x8 H200: the planner's predicted
//                                 makespan, the simulated one (noise 0 and sigma 0.03) and the
//                                 truth lower bound, as means; the prediction error; OOM events.
//   BM_KarmarkarKarp/<n>/<k>/<eq> verl's largest differencing (baselines::karmarkar_karp) of n
//                                 Wikipedia-profile workloads into k parts, equal_size = eq: the
//                                 partition the verl policy computes for every micro-batch count
//                                 it tries (eq = 0) and over the DP ranks (eq = 1).
//   BM_VerlPlan<gpus>/<samples>   the verl policy (cap tuned per batch, as dcp-sim runs it)
//                                 planning one Wikipedia batch for Llama-3-8B on H200.
//
// ./build/bench/dcp_bench_simulator --benchmark_filter=BM_Simulate

#include "dcp/sim/simulator.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/baselines/verl_balanced_dp.hpp"
#include "dcp/dcp.hpp"
#include "dcp/sim/truth_bound.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

namespace {

using namespace dcp;

std::vector<sample> wikipedia_samples(std::int64_t count, std::uint64_t seed) {
  const auto drawn = workload::draw_samples(workload::wikipedia(), count, seed);
  return workload::split_to_context(drawn, 65536).samples;
}

template <std::int64_t Gpus>
void BM_Simulate(benchmark::State& state) {
  const auto cluster = hgx_cluster(Gpus / 8, gpus::h200_sxm());
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), cluster));
  const sim::truth_model truth(models::llama3_8b(), cluster);
  const auto batch = wikipedia_samples(state.range(0), 42);
  const auto plan = scheduler.plan(batch);
  const sim::sim_options options{7, 0.03};
  double makespan = 0;
  for (auto _ : state) {
    const auto result = sim::simulate(plan, batch, truth, options);
    makespan = result.makespan_seconds;
    benchmark::DoNotOptimize(makespan);
  }
  const double exact = sim::simulate(plan, batch, truth, {7, 0.0}).makespan_seconds;
  state.SetComplexityN(state.range(0));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch.size()));
  state.counters["micro_steps"] = static_cast<double>(plan.micro_steps.size());
  state.counters["truth_gap"] = exact / sim::truth_lower_bound_seconds(batch, truth) - 1.0;
}
BENCHMARK(BM_Simulate<32>)
    ->ArgsProduct({{1000, 4000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();
BENCHMARK(BM_Simulate<1024>)
    ->ArgsProduct({{1000, 4000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

void BM_TruthVsPlanner(benchmark::State& state) {
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), cluster));
  const sim::truth_model truth(models::llama3_8b(), cluster);
  constexpr int batches = 20;
  double planned = 0, exact = 0, noisy = 0, bound = 0, gap_max = 0, error_max = 0;
  std::int64_t ooms = 0;
  for (auto _ : state) {
    planned = exact = noisy = bound = gap_max = error_max = 0;
    ooms = 0;
    for (std::uint64_t seed = 1; seed <= batches; ++seed) {
      const auto documents = workload::draw_batch(workload::wikipedia(), 1'000'000, seed);
      const auto batch = workload::split_to_context(documents, 65536).samples;
      const auto plan = scheduler.plan(batch);
      const auto r0 = sim::simulate(plan, batch, truth, {seed, 0.0});
      const auto r = sim::simulate(plan, batch, truth, {seed, 0.03});
      const double lb = sim::truth_lower_bound_seconds(batch, truth);
      planned += plan.makespan_seconds / batches;
      exact += r0.makespan_seconds / batches;
      noisy += r.makespan_seconds / batches;
      bound += lb / batches;
      gap_max = std::max(gap_max, r0.makespan_seconds / lb - 1.0);
      error_max = std::max(error_max, std::abs(r0.makespan_seconds / plan.makespan_seconds - 1.0));
      ooms += r0.oom_events;
    }
  }
  state.counters["planned_s"] = planned;
  state.counters["truth_s"] = exact;
  state.counters["truth_noisy_s"] = noisy;
  state.counters["truth_bound_s"] = bound;
  state.counters["truth_gap_mean"] = exact / bound - 1.0;
  state.counters["truth_gap_max"] = gap_max;
  state.counters["prediction_error_mean"] = exact / planned - 1.0;
  state.counters["prediction_error_max"] = error_max;
  state.counters["oom_events"] = static_cast<double>(ooms);
}
BENCHMARK(BM_TruthVsPlanner)
    ->Name("BM_TruthVsPlanner/Wikipedia1M")
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_KarmarkarKarp(benchmark::State& state) {
  std::vector<double> values;
  for (const auto& s : wikipedia_samples(state.range(0), 42))
    values.push_back(baselines::verl_workload(s.tokens));
  const auto k = static_cast<std::size_t>(state.range(1));
  const bool equal_size = state.range(2) != 0;
  for (auto _ : state) {
    auto parts = baselines::karmarkar_karp(values, k, equal_size);
    benchmark::DoNotOptimize(parts.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(values.size()));
}
BENCHMARK(BM_KarmarkarKarp)
    ->ArgsProduct({{1000, 8000}, {8, 64}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

template <std::int64_t Gpus>
void BM_VerlPlan(benchmark::State& state) {
  const auto cluster = hgx_cluster(Gpus / 8, gpus::h200_sxm());
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_pyramid_recompute,
                             baselines::verl_balanced_dp>
      scheduler(analytic_cost_model(models::llama3_8b(), cluster));
  const auto batch = wikipedia_samples(state.range(0), 42);
  for (auto _ : state) {
    auto plan = scheduler.plan(batch);
    benchmark::DoNotOptimize(plan.makespan_seconds);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch.size()));
}
BENCHMARK(BM_VerlPlan<32>)->Arg(1000)->Arg(4000)->Unit(benchmark::kMillisecond);

}  // namespace
