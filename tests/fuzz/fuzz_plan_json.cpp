// libFuzzer target: a `dcp.step_plan/1` document is read (read_plan_json), checked against a
// fixed batch (validate_plan) and simulated on the truth model of the cluster it names (1, 2, 4,
// 8 or 16 H200). A dcp::error is an expected outcome of bad input; any other exception, a crash,
// a sanitizer report, a leak, a hang or a simulated step that is not finite is a bug.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string_view>

#include "dcp/error.hpp"
#include "dcp/plan/json_reader.hpp"
#include "dcp/sim/simulator.hpp"

#include "plan_fixture.hpp"

namespace {

struct fixture {
  std::vector<dcp::sample> batch = dcp::fuzz::plan_batch();
  std::vector<std::unique_ptr<dcp::sim::truth_model>> truths;
  fixture() {
    for (const auto gpus : dcp::fuzz::plan_cluster_sizes)
      truths.push_back(std::make_unique<dcp::sim::truth_model>(dcp::models::llama3_8b(),
                                                               dcp::fuzz::plan_cluster(gpus)));
  }
  const dcp::sim::truth_model* truth_for(std::int64_t gpus) const {
    for (const auto& truth : truths)
      if (truth->cluster().gpus == gpus) return truth.get();
    return nullptr;
  }
};

[[noreturn]] void bug(const char* what, const char* detail) {
  std::fprintf(stderr, "fuzz_plan_json: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fixture f;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto plan = dcp::read_plan_json(text, "fuzz.json");
    const auto* truth = f.truth_for(plan.gpus);
    // A plan for a cluster the fixture lacks is checked against 8 GPUs: validate_plan rejects it.
    dcp::validate_plan(plan, f.batch, truth ? plan.gpus : 8);
    if (!truth) bug("validate_plan accepted a plan for another cluster", "gpus != 8");
    dcp::sim::sim_options options;
    options.seed = 1;
    const auto result = dcp::sim::simulate(plan, f.batch, *truth, options);
    if (!std::isfinite(result.step_seconds) || !(result.makespan_seconds >= 0))
      bug("simulate returned a step that is not finite", "step_seconds or makespan_seconds");
    if (result.micro_steps.size() != plan.micro_steps.size())
      bug("simulate lost micro-steps", "result.micro_steps.size() != plan.micro_steps.size()");
  } catch (const dcp::error&) {
    // Bad input, reported as it should be.
  } catch (const std::exception& e) {
    bug("an exception that is not a dcp::error", e.what());
  }
  return 0;
}
