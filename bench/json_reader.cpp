// Reading plans back from JSON (finding 06: time linear in the size of the document).
//
//   BM_ReadPlanJson/<gpus>/<samples>   read_plan_json over the document to_json writes (pretty,
//                                      as dcp-plan --json) for a real plan: DataCentricScheduler<>
//                                      over Llama-3-8B on <gpus> H200, Wikipedia-profile lengths
//                                      split to 64K; bytes/s, complexity fitted over the document's
//                                      size in bytes; counters: bytes and micro_steps.
//   BM_ValidatePlan/<gpus>/<samples>   validate_plan on the plan read back, against its batch.
//
// ./build/bench/dcp_bench_json_reader --benchmark_filter=BM_ReadPlanJson

#include "dcp/plan/json_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

namespace {

using namespace dcp;

struct planned {
  std::vector<sample> batch;
  std::string json;
  std::size_t micro_steps = 0;
};

/// The batch and the JSON of its plan, made once per size (planning is not what is timed).
const planned& plan_document(std::int64_t gpus, std::int64_t count) {
  static std::map<std::pair<std::int64_t, std::int64_t>, planned> cache;
  auto [it, inserted] = cache.try_emplace({gpus, count});
  if (inserted) {
    auto drawn = workload::draw_samples(workload::wikipedia(), count, 42);
    auto split = workload::split_to_context(drawn, 65536).samples;
    split.resize(std::min(split.size(), static_cast<std::size_t>(count)));
    const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(gpus / 8, gpus::h200_sxm()));
    const auto plan = DataCentricScheduler<>(cost).plan(split);
    it->second.batch = std::move(split);
    it->second.json = to_json(plan);
    it->second.micro_steps = plan.micro_steps.size();
  }
  return it->second;
}

void BM_ReadPlanJson(benchmark::State& state) {
  const auto& doc = plan_document(state.range(0), state.range(1));
  for (auto _ : state) {
    auto plan = read_plan_json(doc.json, "bench.json");
    benchmark::DoNotOptimize(plan.fingerprint);
  }
  const auto bytes = static_cast<std::int64_t>(doc.json.size());
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetComplexityN(bytes);
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["micro_steps"] = static_cast<double>(doc.micro_steps);
}
BENCHMARK(BM_ReadPlanJson)
    ->ArgNames({"gpus", "samples"})
    ->ArgsProduct({{32, 1024}, {1000, 2000, 4000, 8000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

void BM_ValidatePlan(benchmark::State& state) {
  const auto& doc = plan_document(state.range(0), state.range(1));
  const auto read = read_plan_json(doc.json, "bench.json");
  for (auto _ : state) {
    auto plan = read;
    validate_plan(plan, doc.batch, state.range(0));
    benchmark::DoNotOptimize(plan.micro_steps.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(doc.batch.size()));
  state.SetComplexityN(static_cast<std::int64_t>(doc.batch.size()));
}
BENCHMARK(BM_ValidatePlan)
    ->ArgNames({"gpus", "samples"})
    ->ArgsProduct({{1024}, {1000, 4000, 16000, 32000}})
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oNLogN);

}  // namespace
