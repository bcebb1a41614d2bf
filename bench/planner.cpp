// Planner speed and plan quality.
//
//   BM_Plan<gpus>/<samples>      planning time of DataCentricScheduler<> (Llama-3-8B, H200,
//                                Wikipedia-profile lengths, 64K context), complexity fitted over
//                                the sample count; counter gap = makespan / lower bound - 1.
//   BM_Plan_auto<gpus>/<samples> the same with sp = automatic (style chosen per micro-batch).
//   BM_Quality/Wikipedia1M       200 batches of ~1M tokens on 4x8 H200: mean and p95 gap to the
//                                bound, and best static / ours (exact static search), all from
//                                the analytic cost model.
//
// ./build/bench/dcp_bench_planner --benchmark_filter=BM_Plan

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/dcp.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

#include "wikipedia_samples.hpp"

namespace {

using namespace dcp;

using bench::wikipedia_samples;

template <std::int64_t Gpus, sequence_parallel Style = sequence_parallel::ulysses>
void BM_Plan(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  training_spec training;
  training.sp = Style;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(Gpus / 8, gpus::h200_sxm()),
                                 training);
  const DataCentricScheduler<> scheduler(cost);
  const auto batch = wikipedia_samples(count, 42);
  double gap = 0;
  for (auto _ : state) {
    const auto plan = scheduler.plan(batch);
    gap = plan.gap();
    benchmark::DoNotOptimize(plan.fingerprint);
  }
  state.SetComplexityN(static_cast<std::int64_t>(count));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count));
  state.counters["gap"] = gap;
}
BENCHMARK(BM_Plan<32>)
    ->ArgsProduct({{1000, 2000, 4000, 8000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();
BENCHMARK(BM_Plan<1024>)
    ->ArgsProduct({{1000, 2000, 4000, 8000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity();
// The style chosen per micro-batch: every degree evaluates each style it allows.
BENCHMARK(BM_Plan<32, sequence_parallel::automatic>)
    ->Name("BM_Plan_auto<32>")
    ->Arg(1000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan<1024, sequence_parallel::automatic>)
    ->Name("BM_Plan_auto<1024>")
    ->Arg(32000)
    ->Unit(benchmark::kMillisecond);

/// Batches of about `tokens` tokens: documents drawn with replacement from the real Wikipedia
/// lengths when ../shared/data is present, else from the embedded profile derived from them;
/// split into 64K chunks.
std::vector<sample> wikipedia_batch(std::uint64_t seed, std::int64_t tokens, bool& real) {
  static const std::vector<std::int64_t> lengths = [] {
    std::vector<std::int64_t> out;
    std::ifstream in(std::string(DCP_SHARED_DATA_DIR) + "/wikipedia-lengths.txt");
    for (std::int64_t v = 0; in >> v;) out.push_back(v);
    return out;
  }();
  real = !lengths.empty();
  std::vector<sample> documents;
  if (real) {
    workload::rng random(seed);
    std::int64_t total = 0;
    for (std::uint64_t id = 0; total < tokens; ++id) {
      const auto pick = random() % lengths.size();
      documents.push_back(text_sample(id, lengths[pick]));
      total += lengths[pick];
    }
  } else {
    documents = workload::draw_batch(workload::wikipedia(), tokens, seed);
  }
  return workload::split_to_context(documents, 65536).samples;
}

void BM_Quality(benchmark::State& state) {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  balanced_placement exact;
  exact.exact_best_static = true;
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, pyramid_recompute,
                             balanced_placement>
      scheduler(cost, {}, {}, exact);
  constexpr int batches = 200;
  std::vector<double> gaps, ratios;
  bool real = false;
  for (auto _ : state) {
    gaps.clear();
    ratios.clear();
    for (std::uint64_t seed = 1; seed <= batches; ++seed) {
      const auto plan = scheduler.plan(wikipedia_batch(seed, 1'000'000, real));
      gaps.push_back(plan.gap());
      ratios.push_back(plan.best_static_seconds / plan.makespan_seconds);
    }
  }
  std::sort(gaps.begin(), gaps.end());
  double mean_gap = 0, mean_ratio = 0;
  for (double g : gaps) mean_gap += g / batches;
  for (double r : ratios) mean_ratio += r / batches;
  state.counters["gap_mean"] = mean_gap;
  state.counters["gap_p95"] = gaps[static_cast<std::size_t>(0.95 * (batches - 1))];
  state.counters["gap_max"] = gaps.back();
  state.counters["static_over_ours_mean"] = mean_ratio;
  state.counters["static_over_ours_min"] = *std::min_element(ratios.begin(), ratios.end());
  state.SetLabel(real ? "real Wikipedia lengths" : "embedded Wikipedia profile");
}
BENCHMARK(BM_Quality)->Name("BM_Quality/Wikipedia1M")->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
