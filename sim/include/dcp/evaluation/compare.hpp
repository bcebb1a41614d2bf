#pragma once
// Comparing placement policies on the same workloads: every policy plans the same batches with
// the planner's cost model, and the simulator judges every plan on the truth model
// (DESIGN §5). This is what dcp-sim prints and docs/results.md reports.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/cost/calibrated.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_bound.hpp"
#include "dcp/sim/truth_model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

/// A policy under comparison: a name, a function that plans a batch, and optionally one that
/// receives what each of its micro-steps measured on the simulated hardware after every step
/// (an online-calibrating policy learns from it, as it would from a framework's reports).
struct policy_entry {
  std::string name;
  std::function<step_plan(std::span<const sample>)> plan;
  std::function<void(std::span<const observation>)> observe{};
  std::string note{};  ///< how the policy was configured for the run, printed beside its row
};

/// What a framework would have measured for each micro-step of `plan` in the simulated step:
/// its duration as run (noise and NIC sharing included), its true peak, and whether it ran out
/// of memory. Indexed like plan.micro_steps.
[[nodiscard]]
inline std::vector<observation> observations_of(const step_plan& plan, std::span<const sample> batch,
                                                const sim::step_result& simulated) {
  auto out = plan_observations(plan, batch);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& sm = simulated.micro_steps[i];
    out[i].report = {sm.seconds(), sm.peak_bytes, sm.oom};
  }
  return out;
}

/// One workload on one cluster: a model, the cluster, training settings, and how each step's
/// batch is drawn (a pure function of the step's seed).
struct scenario {
  std::string name;
  model_spec model;
  cluster_spec cluster;
  training_spec training{};
  std::function<std::vector<sample>(std::uint64_t seed)> draw;
  std::int64_t steps = 50;
  std::uint64_t seed = 1;
  /// The kinds of sample the workload draws, longest included: what a user sizes a static
  /// layout for (baselines/user_static_rules.hpp). Empty: the first batch's samples.
  std::vector<sample> sample_kinds{};
  /// The tokens a step's batch is drawn to (0: unknown): user layouts leave no data-parallel
  /// group without a share of it.
  std::int64_t tokens_per_step = 0;
  /// Lines the reports print with the scenario (how its batch size and user layouts were chosen).
  std::vector<std::string> notes{};
};

/// The static layouts users configure (baselines/user_static.hpp), by policy name: "your
/// static" is the fastest of those in a run.
inline const std::vector<std::string>& user_static_policies() {
  static const std::vector<std::string> names{"megatron-static", "megatron-static-sel", "ulysses-static"};
  return names;
}

/// Per-step numbers of one policy.
struct step_record {
  std::int64_t tokens = 0;
  double step_seconds = 0;       ///< simulated: makespan + gradient synchronisation
  double makespan_seconds = 0;   ///< simulated, micro-steps only
  double bound_seconds = 0;      ///< truth-model lower bound on the micro-steps
  double idle_fraction = 0;
  double peak_bytes = 0;
  std::int64_t oom_events = 0;
  double planning_ms = 0;
  double predicted_seconds = 0;  ///< the planner's own prediction of the makespan
};

struct policy_result {
  std::string name;
  std::vector<step_record> steps;
  std::string note{};  ///< from policy_entry::note
  // Summary, filled by summarise():
  double median_step_s = 0;
  double mean_step_s = 0;        ///< the median hides heavy-tailed policies
  double tokens_per_s = 0;
  double speedup_vs_best_static = 0;
  double speedup_vs_your_static = 0;    ///< over the fastest user static layout in the run
  double speedup_vs_megatron_static = 0;  ///< over megatron-static (full recompute)
  double speedup_vs_ulysses_static = 0;   ///< over ulysses-static
  double speedup_vs_paper_baseline = 0;
  double gap_to_bound = 0;       ///< mean of simulated makespan / truth bound - 1
  double idle_fraction = 0;      ///< mean
  double peak_bytes = 0;         ///< max
  std::int64_t oom_events = 0;   ///< sum
  double planning_ms = 0;        ///< median
  double prediction_error = 0;   ///< mean |predicted / simulated makespan - 1|
  sim::step_result first_step{}; ///< the first step's timelines, for figures
};

struct scenario_result {
  std::string name;
  std::int64_t gpus = 0;
  std::vector<policy_result> policies;
  /// Mean over steps of (paper baseline step time) / (truth bound + gradient sync): no plan
  /// can beat the paper baseline by more than this under the truth model.
  double paper_baseline_ceiling = 0;
  double best_static_ceiling = 0;  ///< the same against the best static layout
  std::string your_static{};       ///< the fastest user static layout in the run; empty if none ran
};

namespace detail {

[[nodiscard]] inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[nodiscard]] inline double tokens_per_second(const policy_result& p) {
  double tokens = 0, seconds = 0;
  for (const auto& s : p.steps) {
    tokens += static_cast<double>(s.tokens);
    seconds += s.step_seconds;
  }
  return seconds > 0 ? tokens / seconds : 0.0;
}

[[nodiscard]]
inline const policy_result* find(const std::vector<policy_result>& all, std::string_view name) {
  for (const auto& p : all)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace detail

/// Fills the summary fields; "static" and "paper-baseline" are the reference policies.
inline void summarise(scenario_result& result) {
  for (auto& p : result.policies) {
    std::vector<double> step_s, planning;
    double gap = 0, idle = 0, error = 0;
    for (const auto& s : p.steps) {
      step_s.push_back(s.step_seconds);
      planning.push_back(s.planning_ms);
      gap += s.bound_seconds > 0 ? s.makespan_seconds / s.bound_seconds - 1.0 : 0.0;
      idle += s.idle_fraction;
      error += s.makespan_seconds > 0 ? std::abs(s.predicted_seconds / s.makespan_seconds - 1.0) : 0.0;
      p.peak_bytes = std::max(p.peak_bytes, s.peak_bytes);
      p.oom_events += s.oom_events;
    }
    const auto n = static_cast<double>(std::max<std::size_t>(p.steps.size(), 1));
    p.median_step_s = detail::median(step_s);
    p.mean_step_s = std::accumulate(step_s.begin(), step_s.end(), 0.0) / n;
    p.planning_ms = detail::median(planning);
    p.tokens_per_s = detail::tokens_per_second(p);
    p.gap_to_bound = gap / n;
    p.idle_fraction = idle / n;
    p.prediction_error = error / n;
  }
  const auto* best_static = detail::find(result.policies, "static");
  const auto* paper = detail::find(result.policies, "paper-baseline");
  const policy_result* yours = nullptr;
  for (const auto& name : user_static_policies())
    if (const auto* p = detail::find(result.policies, name); p && (!yours || p->tokens_per_s > yours->tokens_per_s))
      yours = p;
  result.your_static = yours ? yours->name : std::string{};
  const auto* megatron = detail::find(result.policies, "megatron-static");
  const auto* ulysses = detail::find(result.policies, "ulysses-static");
  const auto ratio = [](const policy_result& p, const policy_result* reference) {
    return reference && reference->tokens_per_s > 0 ? p.tokens_per_s / reference->tokens_per_s : 0.0;
  };
  for (auto& p : result.policies) {
    p.speedup_vs_best_static = ratio(p, best_static);
    p.speedup_vs_paper_baseline = ratio(p, paper);
    p.speedup_vs_your_static = ratio(p, yours);
    p.speedup_vs_megatron_static = ratio(p, megatron);
    p.speedup_vs_ulysses_static = ratio(p, ulysses);
  }
  auto ceiling = [&](const policy_result* reference) {
    if (!reference || reference->steps.empty()) return 0.0;
    double sum = 0;
    for (const auto& s : reference->steps)
      sum += s.step_seconds / (s.bound_seconds + (s.step_seconds - s.makespan_seconds));
    return sum / static_cast<double>(reference->steps.size());
  };
  result.paper_baseline_ceiling = ceiling(paper);
  result.best_static_ceiling = ceiling(best_static);
}

/// Runs every policy on the scenario's steps. `progress(done, total)` is called after each
/// (step, policy) pair.
[[nodiscard]]
inline scenario_result run(const scenario& sc, const std::vector<policy_entry>& policies,
                           const std::function<void(std::int64_t, std::int64_t)>& progress = {}) {
  scenario_result result;
  result.name = sc.name;
  result.gpus = sc.cluster.gpus;
  for (const auto& p : policies) result.policies.push_back({p.name, {}, p.note});
  const sim::truth_model truth(sc.model, sc.cluster, sc.training);
  const auto total = sc.steps * static_cast<std::int64_t>(policies.size());
  std::int64_t done = 0;
  for (std::int64_t step = 0; step < sc.steps; ++step) {
    const std::uint64_t seed = sc.seed + static_cast<std::uint64_t>(step);
    const auto batch = sc.draw(seed);
    validate_batch(batch);  // also bounds the total, so the sum below cannot overflow
    std::int64_t tokens = 0;
    for (const auto& s : batch) tokens += s.tokens;
    const double bound = sim::truth_lower_bound_seconds(batch, truth);
    for (std::size_t k = 0; k < policies.size(); ++k) {
      const auto start = std::chrono::steady_clock::now();
      const auto plan = policies[k].plan(batch);
      const double planning_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      sim::sim_options options;
      options.seed = seed * 1000003ull + k;
      auto simulated = sim::simulate(plan, batch, truth, options);
      step_record record;
      record.tokens = tokens;
      record.step_seconds = simulated.step_seconds;
      record.makespan_seconds = simulated.makespan_seconds;
      record.bound_seconds = bound;
      record.idle_fraction = simulated.idle_fraction;
      record.peak_bytes = simulated.peak_bytes;
      record.oom_events = simulated.oom_events;
      record.planning_ms = planning_ms;
      record.predicted_seconds = plan.makespan_seconds;
      if (policies[k].observe) policies[k].observe(observations_of(plan, batch, simulated));
      auto& out = result.policies[k];
      out.steps.push_back(record);
      if (step == 0) out.first_step = std::move(simulated);
      if (progress) progress(++done, total);
    }
  }
  summarise(result);
  return result;
}

}  // namespace dcp::evaluation
