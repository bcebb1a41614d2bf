// Planning inside a tensor x pipeline grid.
//
//   BM_PipelinePlan/<gpus>/<v>  pipeline_planner::plan of one step of ~1M tokens of the
//                               long-context corpus cut to 128K windows (Llama-3-70B, TP 8,
//                               PP 4, v virtual stages per stage, H100), on one core; counters:
//                               gap = makespan / lower bound - 1, bubble fraction, micro-batches
//                               per pipeline (m), samples.
//
// ./build/bench/dcp_bench_pipeline

#include "dcp/pipeline.hpp"

#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/workload/batch.hpp"
#include "dcp/workload/presets.hpp"

namespace {

using namespace dcp;

void BM_PipelinePlan(benchmark::State& state) {
  const auto gpus = state.range(0);
  const auto virtual_stages = state.range(1);
  const pipeline_planner planner(pipeline_cost_model(models::llama3_70b(),
                                                     hgx_cluster(gpus / 8, gpus::h100_sxm()),
                                                     training_spec{}, {8, 4, virtual_stages}));
  const auto documents = workload::draw_batch(workload::long_context_corpus(), 1'000'000, 1);
  const auto batch = workload::split_to_context(documents, 131072).samples;
  pipeline_plan plan;
  for (auto _ : state) {
    plan = planner.plan(batch);
    benchmark::DoNotOptimize(plan.timeline.makespan);
  }
  state.counters["gap"] = plan.gap();
  state.counters["bubble"] = plan.bubble_fraction();
  state.counters["m"] = static_cast<double>(plan.slots);
  state.counters["samples"] = static_cast<double>(batch.size());
}

BENCHMARK(BM_PipelinePlan)
    ->ArgsProduct({{128, 256}, {1, 2}})
    ->ArgNames({"gpus", "v"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
