// Online calibration's cost.
//
//   BM_Refit/<observations>   calibrated<analytic_cost_model>::observe of that many micro-steps
//                             at once (one refit: robust non-negative fit of 11 time terms and
//                             2 memory terms) into a full window of the same size.
//   BM_Plan/<model>           planning 32 GPUs x 1,000 Wikipedia samples with the analytic
//                             model and with a calibrated one, side by side.
//
// ./build/bench/dcp_bench_calibration

#include <algorithm>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/cost/calibrated.hpp"
#include "dcp/dcp.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

namespace {

using namespace dcp;

cluster_spec four_nodes() { return hgx_cluster(4, gpus::h200_sxm()); }

/// `count` micro-batches of 1-16 Wikipedia-length samples at degrees 1-8, measured on the
/// simulator's truth model.
std::vector<observation> truth_observations(std::size_t count, std::uint64_t seed) {
  const sim::truth_model truth(models::llama3_8b(), four_nodes());
  const auto drawn = workload::draw_samples(workload::wikipedia(), 4000, seed);
  const auto pool = workload::split_to_context(drawn, 65536).samples;
  workload::rng random(seed);
  std::vector<observation> out;
  while (out.size() < count) {
    const execution_config c{
        std::int64_t{1} << (random() % 4), sequence_parallel::ulysses,
        random() % 2 ? recompute_setting::none() : recompute_setting::full(32)};
    micro_batch_shape s;
    for (std::uint64_t i = 0, n = 1 + random() % 16; i < n; ++i)
      s += micro_batch_shape::of(pool[random() % pool.size()]);
    if (truth.peak_bytes(s, c) > truth.capacity_bytes()) continue;
    out.push_back({s, c, {truth.seconds(s, c), truth.peak_bytes(s, c), false}});
  }
  return out;
}

void BM_Refit(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  calibration_options options;
  options.window = count;
  calibrated<analytic_cost_model> model(analytic_cost_model(models::llama3_8b(), four_nodes()),
                                        options);
  const auto observations = truth_observations(count, 7);
  model.observe(observations);  // the window is full from here on
  for (auto _ : state) {
    model.observe(observations);
    benchmark::DoNotOptimize(model.time_weights().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count));
  state.SetComplexityN(static_cast<std::int64_t>(count));
}
BENCHMARK(BM_Refit)
    ->RangeMultiplier(4)
    ->Range(64, 4096)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

std::vector<sample> wikipedia_batch() {
  auto drawn = workload::draw_samples(workload::wikipedia(), 1000, 42);
  auto split = workload::split_to_context(drawn, 65536).samples;
  split.resize(std::min<std::size_t>(split.size(), 1000));
  return split;
}

template <class Scheduler>
void plan_loop(benchmark::State& state, const Scheduler& scheduler) {
  const auto batch = wikipedia_batch();
  for (auto _ : state) {
    const auto plan = scheduler.plan(batch);
    benchmark::DoNotOptimize(plan.fingerprint);
  }
}

void BM_Plan_analytic(benchmark::State& state) {
  plan_loop(state, DataCentricScheduler<>(analytic_cost_model(models::llama3_8b(), four_nodes())));
}
void BM_Plan_calibrated(benchmark::State& state) {
  calibrated<analytic_cost_model> model(analytic_cost_model(models::llama3_8b(), four_nodes()));
  model.observe(truth_observations(256, 7));
  plan_loop(state, DataCentricScheduler<calibrated<analytic_cost_model>>(model));
}
BENCHMARK(BM_Plan_analytic)->Name("BM_Plan/analytic")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan_calibrated)->Name("BM_Plan/calibrated")->Unit(benchmark::kMillisecond);

}  // namespace
