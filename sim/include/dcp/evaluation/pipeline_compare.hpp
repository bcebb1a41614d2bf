#pragma once
// Every policy on the same steps inside a tensor x pipeline grid: each plans with the
// planner's cost model (pipeline_cost_model), each plan is timed stage by stage by the executor
// on the simulator's truth model (pipeline_truth_model), noise free. docs/pipeline.md.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dcp/pipeline.hpp"
#include "dcp/sim/pipeline_truth.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

/// One step of a policy: its micro-batches in `slots` slots of every pipeline.
struct pipeline_step_plan {
  std::vector<pipeline_micro_batch> micro_batches;
  std::int64_t slots = 0;
};

/// A policy plans the whole run at once — one plan per drawn step, and any steps it adds to
/// train what it delayed — so a policy that moves samples between steps can be compared on
/// the same tokens.
struct pipeline_policy {
  std::string name;
  std::function<std::vector<pipeline_step_plan>(const std::vector<std::vector<sample>>& steps)>
      plan;
};

struct pipeline_policy_result {
  std::string name;
  double seconds = 0;                ///< the steps' truth makespans, summed
  double bound_seconds = 0;          ///< the truth bound of each step it ran (its samples), summed
  double bubble = 0;                 ///< the steps' bubble fractions, weighted by their makespans
  std::vector<double> stage_idle{};  ///< the same per stage: its devices' idle share
  double peak_bytes = 0;             ///< the largest device peak of any step
  std::int64_t oom_steps = 0;        ///< steps where some device's peak exceeds the HBM
  std::int64_t steps = 0;            ///< steps run (a delaying policy may add some)
  std::int64_t tokens = 0;           ///< tokens trained
  double planning_ms = 0;            ///< wall time of the policy's plan(), all steps
  std::string refused{};             ///< why the policy cannot run the scenario, as it says
  pipeline_instance first_instance{};  ///< its first step on the truth model, for figures
  pipeline_timeline first_timeline{};

  /// seconds / bound_seconds - 1.
  [[nodiscard]] double gap() const noexcept {
    return bound_seconds > 0 ? seconds / bound_seconds - 1.0 : 0.0;
  }
};

/// Runs every policy on `steps` and judges each plan on `truth`; a policy that refuses the
/// configuration (invalid_spec, as its source refuses it) gets a row that says why. Throws
/// invalid_plan naming
/// the policy when its plans do not train every drawn sample exactly once (a micro-batch's
/// shape may be larger than its samples: a policy that pads pays for it).
[[nodiscard]] inline std::vector<pipeline_policy_result> compare_pipeline_policies(
    const sim::pipeline_truth_model& truth, const std::vector<std::vector<sample>>& steps,
    const std::vector<pipeline_policy>& policies) {
  std::int64_t drawn = 0;
  std::unordered_map<std::uint64_t, sample> drawn_samples;
  for (const auto& batch : steps)
    for (const auto& s : batch) {
      drawn += s.tokens;
      if (!drawn_samples.emplace(s.id, s).second)
        throw invalid_sample("pipeline comparison: sample id " + std::to_string(s.id) +
                             " is drawn twice in the run");
    }
  std::vector<pipeline_policy_result> out;
  for (const auto& policy : policies) {
    pipeline_policy_result r;
    r.name = policy.name;
    const auto start = std::chrono::steady_clock::now();
    std::vector<pipeline_step_plan> plans;
    try {
      plans = policy.plan(steps);
    } catch (const invalid_spec& e) {  // a configuration its source refuses
      r.refused = e.what();
      out.push_back(std::move(r));
      continue;
    }
    r.planning_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double weighted_bubble = 0;
    std::unordered_set<std::uint64_t> trained;
    for (const auto& plan : plans) {
      std::vector<sample> step;
      for (const auto& mb : plan.micro_batches)
        for (const auto id : mb.sample_ids) {
          const auto it = drawn_samples.find(id);
          if (it == drawn_samples.end() || !trained.insert(id).second)
            throw invalid_plan("pipeline comparison: policy " + policy.name + " trains sample " +
                               std::to_string(id) +
                               (it == drawn_samples.end() ? ", which was not drawn" : " twice"));
          r.tokens += it->second.tokens;
          step.push_back(it->second);
        }
      r.bound_seconds += pipeline_batch_lower_bound(truth, std::span<const sample>(step));
      auto instance = pipeline_instance_of(truth, plan.micro_batches, plan.slots);
      auto timeline = simulate_pipeline(instance);
      r.seconds += timeline.makespan;
      weighted_bubble += timeline.bubble_fraction() * timeline.makespan;
      // Per stage: 1 - its devices' busy time over D x the time to the last op.
      const auto p = static_cast<std::size_t>(truth.grid().pipeline);
      std::vector<double> busy(p, 0.0);
      for (std::size_t device = 0; device < timeline.busy.size(); ++device)
        busy[device % p] += timeline.busy[device];
      const double span = timeline.pipeline_seconds * static_cast<double>(truth.pipelines());
      r.stage_idle.resize(p, 0.0);
      for (std::size_t stage = 0; stage < p; ++stage)
        if (span > 0) r.stage_idle[stage] += (1.0 - busy[stage] / span) * timeline.makespan;
      r.peak_bytes = std::max(r.peak_bytes, timeline.peak());
      if (timeline.peak() > truth.capacity_bytes()) ++r.oom_steps;
      if (r.steps++ == 0) {
        r.first_instance = std::move(instance);
        r.first_timeline = std::move(timeline);
      }
    }
    if (r.tokens != drawn)
      throw invalid_plan("pipeline comparison: policy " + policy.name + " trains " +
                         std::to_string(r.tokens) + " tokens of the " + std::to_string(drawn) +
                         " drawn");
    r.bubble = r.seconds > 0 ? weighted_bubble / r.seconds : 0.0;
    for (auto& idle : r.stage_idle) idle = r.seconds > 0 ? idle / r.seconds : 0.0;
    out.push_back(std::move(r));
  }
  return out;
}

/// dcp's planner as a policy: every step planned on its own.
[[nodiscard]] inline pipeline_policy dcp_pipeline_policy(pipeline_planner planner,
                                                         std::string name = "dcp") {
  return {std::move(name),
          [planner = std::move(planner)](const std::vector<std::vector<sample>>& steps) {
            std::vector<pipeline_step_plan> plans;
            for (const auto& batch : steps) {
              auto plan = planner.plan(batch);
              plans.push_back({std::move(plan.micro_batches), plan.slots});
            }
            return plans;
          }};
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
