// Writes the valid part of the plan fuzzer's seed corpus: one DataCentricScheduler<> plan of the
// fixture's batch per cluster size that can hold it, as corpus/plan_json/plan_<gpus>_gpus.json
// (pretty) and plan_<gpus>_gpus_line.json (one line). Run: dcp_fuzz_make_plan_seeds <folder>.

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"

#include "plan_fixture.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dcp_fuzz_make_plan_seeds <corpus folder>\n";
    return 2;
  }
  const auto batch = dcp::fuzz::plan_batch();
  for (const auto gpus : dcp::fuzz::plan_cluster_sizes) {
    try {
      const dcp::analytic_cost_model cost(dcp::models::llama3_8b(), dcp::fuzz::plan_cluster(gpus));
      const auto plan = dcp::DataCentricScheduler<>(cost).plan(batch);
      const std::string stem = std::string(argv[1]) + "/plan_" + std::to_string(gpus) + "_gpus";
      std::ofstream(stem + ".json") << dcp::to_json(plan);
      std::ofstream(stem + "_line.json") << dcp::to_json(plan, {.ranks = true, .pretty = false});
    } catch (const dcp::error& e) {
      std::cerr << gpus << " GPUs: no plan: " << e.what() << '\n';
    }
  }
  return 0;
}
