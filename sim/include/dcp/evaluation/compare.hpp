#pragma once
// Comparing placement policies on the same workloads: every policy plans the same batches with
// the planner's cost model, and the simulator judges every plan on the truth model
// (docs/simulator.md). This is what dcp-sim prints and docs/results.md reports.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dcp/cost/analytic.hpp"
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
  /// Optional admission stage, for a policy that carries samples across steps (WLB-LLM's
  /// outlier delay): given the batch drawn for a step, returns the batch it trains in that step
  /// (e.g. the drawn samples minus those it holds, plus held ones it releases), keeping its
  /// queues in the closure. `run` gives it the drawn samples under run-unique ids and then plans
  /// and simulates what it returns; every returned sample must be one drawn and not yet trained,
  /// unchanged. Without it the policy trains the drawn batch as drawn.
  std::function<std::vector<sample>(std::span<const sample>)> admit{};
  /// Optional drain, for a policy with an admission stage: after the run's last step, `run`
  /// calls it until it returns an empty batch, and trains each batch it returns in one more step
  /// (a drain step), planned, simulated and counted like any other. It returns samples still
  /// held, released whatever its thresholds say, so that the policy trains every drawn token and
  /// its tokens/s is on the same tokens as everyone's. Without it, what is held at the end stays
  /// untrained (tokens_queued_at_end).
  std::function<std::vector<sample>()> drain{};
  /// Which draw of its name's noise the policy gets: 0, its own; k > 0, the k-th further draw
  /// (a policy named twice in one run is simulated twice with different noise). The noise never
  /// depends on the policy's place in a list (noise_seed).
  std::uint64_t noise_draw = 0;
};

/// The seed of a policy's simulated noise in the step drawn from `step_seed`: a function of the
/// step's seed, the policy's name and its draw only, so adding, removing or reordering policies
/// leaves every other policy's noise, and its row, as it was.
[[nodiscard]] constexpr std::uint64_t noise_seed(std::uint64_t step_seed, std::string_view policy,
                                                 std::uint64_t draw = 0) noexcept {
  std::uint64_t name = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (const char c : policy) {
    name ^= static_cast<unsigned char>(c);
    name *= 0x100000001b3ull;
  }
  return step_seed * 1000003ull + name + draw * 0x9e3779b97f4a7c15ull;
}

/// What a framework would have measured for each micro-step of `plan` in the simulated step:
/// its duration as run (noise and NIC sharing included), its true peak, and whether it ran out
/// of memory. Indexed like plan.micro_steps.
[[nodiscard]] inline std::vector<observation> observations_of(const step_plan& plan,
                                                              std::span<const sample> batch,
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
  /// The simulated hardware's constants (the host's time per kernel among them) and the
  /// planner's analytic constants, for every policy.
  sim::truth_constants truth{};
  analytic_constants planner{};
  /// The style the truth bound assumes, if not training.sp: run_choosing_styles bounds a
  /// fixed-style run with the automatic bound, the least over styles, so that every row's gap
  /// is against the same bound.
  std::optional<sequence_parallel> bound_style{};
};

/// The static layouts users configure (baselines/user_static.hpp), by policy name: "your
/// static" is the fastest of those in a run.
inline const std::vector<std::string>& user_static_policies() {
  static const std::vector<std::string> names{"megatron-static", "megatron-static-sel",
                                              "ulysses-static"};
  return names;
}

/// Per-step numbers of one policy.
struct step_record {
  std::int64_t tokens = 0;      ///< trained in this step (the admitted batch's, where admitting)
  double step_seconds = 0;      ///< simulated: makespan + gradient synchronisation
  double makespan_seconds = 0;  ///< simulated, micro-steps only
  double bound_seconds = 0;     ///< truth-model lower bound on the micro-steps
  /// The same plan simulated without noise: what the gap is measured on (the bound is noise
  /// free, and a noisy step may end before it, so a gap on noisy times could read negative).
  double noise_free_makespan_seconds = 0;
  double noise_free_step_seconds = 0;  ///< that run's makespan + gradient synchronisation
  double idle_fraction = 0;
  double peak_bytes = 0;
  std::int64_t oom_events = 0;
  double planning_ms = 0;
  double predicted_seconds = 0;  ///< the planner's own prediction of the makespan
  // Admission (policy_entry::admit); without it tokens == drawn_tokens and the rest are 0.
  std::int64_t drawn_tokens = 0;       ///< drawn for this step
  std::int64_t delayed_tokens = 0;     ///< of `tokens`, those drawn in an earlier step
  std::int64_t delay_token_steps = 0;  ///< sum over those of tokens x steps waited
  std::int64_t max_delay_steps = 0;    ///< the longest wait among them
  std::int64_t queued_tokens = 0;      ///< drawn up to this step and not yet trained, after it
  bool drain = false;  ///< a drain step after the run's last (policy_entry::drain): drew nothing
};

struct policy_result {
  std::string name;
  std::vector<step_record> steps;
  std::string note{};  ///< from policy_entry::note
  // Summary, filled by summarise():
  double median_step_s = 0;
  double mean_step_s = 0;  ///< the median hides heavy-tailed policies
  double tokens_per_s = 0;
  /// Tokens per second of the same plans simulated without noise: the deterministic model
  /// comparison (a few noisy steps can put two policies a few per cent apart either way).
  double noise_free_tokens_per_s = 0;
  double speedup_vs_best_static = 0;
  double speedup_vs_your_static = 0;      ///< over the fastest user static layout in the run
  double speedup_vs_megatron_static = 0;  ///< over megatron-static (full recompute)
  double speedup_vs_ulysses_static = 0;   ///< over ulysses-static
  double speedup_vs_paper_baseline = 0;
  double gap_to_bound = 0;        ///< mean of noise-free simulated makespan / truth bound - 1
  double noise_share = 0;         ///< mean of simulated makespan / noise-free makespan - 1
  double idle_fraction = 0;       ///< mean
  double peak_bytes = 0;          ///< max
  std::int64_t oom_events = 0;    ///< sum
  double planning_ms = 0;         ///< median
  double prediction_error = 0;    ///< mean |predicted / noise-free simulated makespan - 1|
  sim::step_result first_step{};  ///< the first step's timelines, for figures
  // Admission, from the steps (a policy without policy_entry::admit trains what is drawn):
  bool admits = false;  ///< the entry had an admission stage
  std::int64_t tokens_drawn = 0;
  std::int64_t tokens_trained = 0;        ///< what tokens_per_s counts
  std::int64_t tokens_delayed = 0;        ///< trained in a later step than drawn
  double delayed_share = 0;               ///< tokens_delayed / tokens_drawn
  double mean_delay_steps = 0;            ///< token-weighted, over the delayed tokens
  double mean_delay_steps_per_token = 0;  ///< token-weighted, over every trained token
  std::int64_t max_delay_steps = 0;
  /// Drawn but still held when the run ended, after any drain steps: never trained, so in
  /// neither tokens_trained nor tokens_per_s, and their wait is in no delay figure. 0 for a
  /// policy that drains.
  std::int64_t tokens_queued_at_end = 0;
  /// Steps after the run's last that trained what was still held (policy_entry::drain): their
  /// time and tokens are in every figure above, and they count among `steps`.
  std::int64_t drain_steps = 0;
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

[[nodiscard]] inline double tokens_per_second(const policy_result& p, bool noise_free = false) {
  double tokens = 0, seconds = 0;
  for (const auto& s : p.steps) {
    tokens += static_cast<double>(s.tokens);
    seconds +=
        noise_free && s.noise_free_step_seconds > 0 ? s.noise_free_step_seconds : s.step_seconds;
  }
  return seconds > 0 ? tokens / seconds : 0.0;
}

[[nodiscard]] inline const policy_result* find(const std::vector<policy_result>& all,
                                               std::string_view name) {
  for (const auto& p : all)
    if (p.name == name) return &p;
  return nullptr;
}

/// What an admitting policy drew and has not trained yet, by run-unique id: checks what it
/// admits and measures how long each sample waited.
class admission_ledger {
 public:
  void drawn(std::span<const sample> batch, std::int64_t step) {
    for (const auto& s : batch) {
      waiting_.emplace(s.id, pending{step, s});
      queued_tokens_ += s.tokens;
    }
  }

  /// Takes the admitted samples off the ledger and fills the record's admission fields. Throws
  /// dcp::error naming the policy, step and sample for one not drawn, already trained or changed.
  void trained(std::span<const sample> admitted, std::int64_t step, const std::string& policy,
               step_record& record) {
    for (const auto& s : admitted) {
      const auto it = waiting_.find(s.id);
      const auto refuse = [&](const char* why) {
        throw error("policy '" + policy + "', step " + std::to_string(step) +
                    ": admitted sample id=" + std::to_string(s.id) + why);
      };
      if (it == waiting_.end()) refuse(" was never drawn or is trained already (admitted twice?)");
      if (!(it->second.drawn == s)) refuse(" differs from the sample drawn under that id");
      const std::int64_t waited = step - it->second.step;
      if (waited > 0) {
        record.delayed_tokens += s.tokens;
        record.delay_token_steps += s.tokens * waited;
        record.max_delay_steps = std::max(record.max_delay_steps, waited);
      }
      queued_tokens_ -= s.tokens;
      waiting_.erase(it);
    }
    record.queued_tokens = queued_tokens_;
  }

  [[nodiscard]] std::int64_t queued_tokens() const noexcept { return queued_tokens_; }

 private:
  struct pending {
    std::int64_t step = 0;
    sample drawn{};
  };
  std::unordered_map<std::uint64_t, pending> waiting_;
  std::int64_t queued_tokens_ = 0;
};

/// The batch under run-unique ids: every id plus `base`, the ids all earlier steps used (each
/// step's largest id + 1, summed). Step 0 keeps its ids. Advances `base` past this batch; throws
/// dcp::error where the ids would pass 2^64 - 1.
[[nodiscard]] inline std::vector<sample> run_unique(std::span<const sample> batch,
                                                    std::uint64_t& base) {
  std::uint64_t largest = 0;
  for (const auto& s : batch) largest = std::max(largest, s.id);
  const auto limit = std::numeric_limits<std::uint64_t>::max();
  if (!batch.empty() && (largest == limit || base > limit - largest - 1))
    throw error("evaluation::run: run-unique sample ids for an admitting policy pass " +
                std::to_string(limit) + " (the steps' ids, offset by the ids earlier steps used)");
  std::vector<sample> out(batch.begin(), batch.end());
  for (auto& s : out) s.id += base;
  if (!batch.empty()) base += largest + 1;
  return out;
}

}  // namespace detail

/// Fills the summary fields; "static" and "paper-baseline" are the reference policies.
inline void summarise(scenario_result& result) {
  for (auto& p : result.policies) {
    std::vector<double> step_s, planning;
    double gap = 0, idle = 0, error = 0, noise = 0;
    for (const auto& s : p.steps) {
      step_s.push_back(s.step_seconds);
      planning.push_back(s.planning_ms);
      const double quiet =
          s.noise_free_makespan_seconds > 0 ? s.noise_free_makespan_seconds : s.makespan_seconds;
      gap += s.bound_seconds > 0 ? quiet / s.bound_seconds - 1.0 : 0.0;
      noise += quiet > 0 ? s.makespan_seconds / quiet - 1.0 : 0.0;
      idle += s.idle_fraction;
      // The planner's error on the truth model itself, not on the noise drawn around it.
      error += quiet > 0 ? std::abs(s.predicted_seconds / quiet - 1.0) : 0.0;
      p.peak_bytes = std::max(p.peak_bytes, s.peak_bytes);
      p.oom_events += s.oom_events;
    }
    std::int64_t token_steps = 0;
    p.tokens_drawn = p.tokens_trained = p.tokens_delayed = p.max_delay_steps = p.drain_steps = 0;
    for (const auto& s : p.steps) {
      p.drain_steps += s.drain ? 1 : 0;
      p.tokens_drawn += s.drawn_tokens;
      p.tokens_trained += s.tokens;
      p.tokens_delayed += s.delayed_tokens;
      token_steps += s.delay_token_steps;
      p.max_delay_steps = std::max(p.max_delay_steps, s.max_delay_steps);
    }
    const auto ratio_of = [](std::int64_t a, std::int64_t b) {
      return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    p.delayed_share = ratio_of(p.tokens_delayed, p.tokens_drawn);
    p.mean_delay_steps = ratio_of(token_steps, p.tokens_delayed);
    p.mean_delay_steps_per_token = ratio_of(token_steps, p.tokens_trained);
    p.tokens_queued_at_end = p.steps.empty() ? 0 : p.steps.back().queued_tokens;
    const auto n = static_cast<double>(std::max<std::size_t>(p.steps.size(), 1));
    p.median_step_s = detail::median(step_s);
    p.mean_step_s = std::accumulate(step_s.begin(), step_s.end(), 0.0) / n;
    p.planning_ms = detail::median(planning);
    p.tokens_per_s = detail::tokens_per_second(p);
    p.noise_free_tokens_per_s = detail::tokens_per_second(p, true);
    p.gap_to_bound = gap / n;
    p.noise_share = noise / n;
    p.idle_fraction = idle / n;
    p.prediction_error = error / n;
  }
  const auto* best_static = detail::find(result.policies, "static");
  const auto* paper = detail::find(result.policies, "paper-baseline");
  const policy_result* yours = nullptr;
  for (const auto& name : user_static_policies())
    if (const auto* p = detail::find(result.policies, name);
        p && (!yours || p->tokens_per_s > yours->tokens_per_s))
      yours = p;
  result.your_static = yours ? yours->name : std::string{};
  const auto* megatron = detail::find(result.policies, "megatron-static");
  const auto* ulysses = detail::find(result.policies, "ulysses-static");
  const auto ratio = [](const policy_result& p, const policy_result* reference) {
    return reference && reference->tokens_per_s > 0 ? p.tokens_per_s / reference->tokens_per_s
                                                    : 0.0;
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

namespace detail {

/// Plans `trained` with `policy`, simulates the plan with the policy's noise and without, fills
/// the record's times, memory and planning time (from `start`, so that an admission's time is
/// in it) and hands the measurements to policy.observe. Returns the noisy simulation.
inline sim::step_result plan_and_simulate(const policy_entry& policy,
                                          std::span<const sample> trained, std::uint64_t seed,
                                          const sim::truth_model& truth,
                                          std::chrono::steady_clock::time_point start,
                                          step_record& record) {
  const auto plan = policy.plan(trained);
  record.planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  sim::sim_options options;
  options.seed = noise_seed(seed, policy.name, policy.noise_draw);
  auto simulated = sim::simulate(plan, trained, truth, options);
  sim::sim_options quiet = options;
  quiet.noise_sigma = 0;
  const auto noise_free = sim::simulate(plan, trained, truth, quiet);
  record.noise_free_makespan_seconds = noise_free.makespan_seconds;
  record.noise_free_step_seconds = noise_free.step_seconds;
  record.step_seconds = simulated.step_seconds;
  record.makespan_seconds = simulated.makespan_seconds;
  record.idle_fraction = simulated.idle_fraction;
  record.peak_bytes = simulated.peak_bytes;
  record.oom_events = simulated.oom_events;
  record.predicted_seconds = plan.makespan_seconds;
  if (policy.observe) policy.observe(observations_of(plan, trained, simulated));
  return simulated;
}

/// The drain steps of one admitting policy (policy_entry::drain) after the run's sc.steps
/// steps: each batch the drain returns is trained in a step of its own, numbered on from the
/// last drawn one, until it returns an empty batch. Throws dcp::error naming the policy where
/// the drain ends with drawn tokens still queued.
inline void run_drain_steps(const scenario& sc, const policy_entry& policy,
                            admission_ledger& ledger, const sim::truth_model& truth,
                            const sim::truth_model& bound_truth, policy_result& out) {
  for (std::int64_t step = sc.steps;; ++step) {
    step_record record;
    record.drain = true;
    const auto start = std::chrono::steady_clock::now();
    const auto batch = policy.drain();
    if (batch.empty()) break;
    ledger.trained(batch, step, policy.name, record);
    validate_batch(batch);
    for (const auto& s : batch) record.tokens += s.tokens;
    (void)plan_and_simulate(policy, batch, sc.seed + static_cast<std::uint64_t>(step), truth, start,
                            record);
    record.bound_seconds = sim::truth_lower_bound_seconds(batch, bound_truth);
    out.steps.push_back(record);
  }
  if (ledger.queued_tokens() > 0)
    throw error("policy '" + policy.name + "': its drain ended with " +
                std::to_string(ledger.queued_tokens()) + " drawn tokens still queued");
}

}  // namespace detail

/// Runs every policy on the scenario's steps. `progress(done, total)` is called after each
/// (step, policy) pair of the drawn steps.
///
/// A policy with an admission stage (policy_entry::admit) receives each step's drawn batch
/// under run-unique ids (`detail::run_unique`: step t's ids offset by the ids steps 0..t-1
/// used, so a sample held from an earlier step never shares an id with one drawn later) and
/// trains what it returns: that batch is planned, simulated and bounded, its tokens are the
/// step's, and its planning time includes the admission's. After the last step, one that also
/// drains (policy_entry::drain) trains what it still holds in drain steps, counted in its time
/// and tokens, so that it trains exactly the drawn tokens; what one without a drain still holds
/// is reported (tokens_queued_at_end), never trained.
[[nodiscard]] inline scenario_result run(
    const scenario& sc, const std::vector<policy_entry>& policies,
    const std::function<void(std::int64_t, std::int64_t)>& progress = {}) {
  scenario_result result;
  result.name = sc.name;
  result.gpus = sc.cluster.gpus;
  for (const auto& p : policies) {
    result.policies.push_back({p.name, {}, p.note});
    result.policies.back().admits = static_cast<bool>(p.admit);
  }
  const bool any_admits = std::any_of(policies.begin(), policies.end(), [](const policy_entry& p) {
    return static_cast<bool>(p.admit);
  });
  std::vector<detail::admission_ledger> ledgers(policies.size());
  std::uint64_t id_base = 0;
  const sim::truth_model truth(sc.model, sc.cluster, sc.training, sc.truth);
  training_spec bounded = sc.training;
  if (sc.bound_style) bounded.sp = *sc.bound_style;
  const sim::truth_model bound_truth(sc.model, sc.cluster, bounded, sc.truth);
  const auto total = sc.steps * static_cast<std::int64_t>(policies.size());
  std::int64_t done = 0;
  for (std::int64_t step = 0; step < sc.steps; ++step) {
    const std::uint64_t seed = sc.seed + static_cast<std::uint64_t>(step);
    const auto batch = sc.draw(seed);
    validate_batch(batch);  // also bounds the total, so the sum below cannot overflow
    std::int64_t tokens = 0;
    for (const auto& s : batch) tokens += s.tokens;
    const double bound = sim::truth_lower_bound_seconds(batch, bound_truth);
    const auto unique = any_admits ? detail::run_unique(batch, id_base) : std::vector<sample>{};
    for (std::size_t k = 0; k < policies.size(); ++k) {
      step_record record;
      record.drawn_tokens = tokens;
      const auto start = std::chrono::steady_clock::now();
      std::vector<sample> admitted;
      if (policies[k].admit) {
        ledgers[k].drawn(unique, step);
        admitted = policies[k].admit(unique);
        ledgers[k].trained(admitted, step, policies[k].name, record);
        validate_batch(admitted);
        for (const auto& s : admitted) record.tokens += s.tokens;
      } else {
        record.tokens = tokens;
      }
      const std::span<const sample> trained =
          policies[k].admit ? std::span<const sample>(admitted) : std::span<const sample>(batch);
      auto simulated = detail::plan_and_simulate(policies[k], trained, seed, truth, start, record);
      record.bound_seconds =
          policies[k].admit ? sim::truth_lower_bound_seconds(trained, bound_truth) : bound;
      auto& out = result.policies[k];
      out.steps.push_back(record);
      if (step == 0) out.first_step = std::move(simulated);
      if (progress) progress(++done, total);
    }
  }
  for (std::size_t k = 0; k < policies.size(); ++k)
    if (policies[k].drain)
      detail::run_drain_steps(sc, policies[k], ledgers[k], truth, bound_truth, result.policies[k]);
  summarise(result);
  return result;
}

/// Whether a policy chooses the sequence-parallel style per micro-batch when the training style
/// is sequence_parallel::automatic: ours. Every other policy runs one style for a whole run.
[[nodiscard]] inline bool chooses_style(std::string_view policy) noexcept {
  return policy == "dcp" || policy == "dcp-calibrated";
}

/// evaluation::run for a scenario whose training style is sequence_parallel::automatic. Ours
/// (chooses_style) plan with it, choosing per micro-batch. Every other policy runs the whole run
/// under each fixed style — ulysses, ring, hybrid — and keeps the one with the most noise-free
/// tokens per second, which its note names: a user picks one style for a run, and this picks
/// each peer's best with hindsight. A style under which a policy cannot plan the batch (a sample
/// that fits nowhere, a degree its rule needs) is named in the note, and a policy with no style is
/// left out and named in `skipped` (an error without it). "dcp-fixed-style", after "dcp", is ours
/// at its own best fixed style: what choosing per micro-batch adds. Every row is bounded by the
/// automatic scenario's truth bound (the least over styles, sample by sample). `make(s)`
/// builds the policies for scenario s, the same names in the same order for every style.
/// `known`: results already run for some fixed styles of the same scenario with make's full
/// list (evaluation::run, as a scenario matrix has them), used instead of running those again;
/// their bounds are replaced with the automatic one.
[[nodiscard]] inline scenario_result run_choosing_styles(
    const scenario& sc, const std::function<std::vector<policy_entry>(const scenario&)>& make,
    const std::function<void(std::int64_t, std::int64_t)>& progress = {},
    std::vector<std::string>* skipped = nullptr,
    const std::vector<std::pair<sequence_parallel, const scenario_result*>>& known = {}) {
  constexpr std::array fixed{sequence_parallel::ulysses, sequence_parallel::ring,
                             sequence_parallel::hybrid};
  const auto adaptive = make(sc);
  const auto known_result = [&](sequence_parallel style) -> const scenario_result* {
    for (const auto& [s, r] : known)
      if (s == style) return r;
    return nullptr;
  };
  // The automatic bound per step, for rows taken from `known`.
  std::vector<double> bounds;
  if (!known.empty()) {
    const sim::truth_model truth(sc.model, sc.cluster, sc.training, sc.truth);
    for (std::int64_t step = 0; step < sc.steps; ++step)
      bounds.push_back(sim::truth_lower_bound_seconds(
          sc.draw(sc.seed + static_cast<std::uint64_t>(step)), truth));
  }
  std::vector<std::vector<policy_entry>> per_style;
  for (auto style : fixed) {
    scenario s = sc;
    s.training.sp = style;
    per_style.push_back(known_result(style) ? std::vector<policy_entry>{} : make(s));
  }
  // Runs (step, policy) pairs: ours once, the others once per style, ours once per style too.
  const auto total = sc.steps * static_cast<std::int64_t>(adaptive.size() * (1 + fixed.size()));
  std::int64_t done = 0;
  const auto run_one = [&](const scenario& s, policy_entry entry, std::uint64_t draw) {
    entry.noise_draw = draw;
    scenario bounded = s;
    bounded.bound_style = sequence_parallel::automatic;
    auto r = run(bounded, {std::move(entry)}, [&](std::int64_t, std::int64_t) {
      if (progress) progress(++done, total);
    });
    return std::move(r.policies.front());
  };
  const auto fresh = [](policy_result p) {
    policy_result out;
    out.name = std::move(p.name);
    out.steps = std::move(p.steps);
    out.note = std::move(p.note);
    out.admits = p.admits;
    out.first_step = std::move(p.first_step);
    return out;
  };
  scenario_result result;
  result.name = sc.name;
  result.gpus = sc.cluster.gpus;
  for (std::size_t k = 0; k < adaptive.size(); ++k) {
    const auto& name = adaptive[k].name;
    const bool ours = chooses_style(name);
    // Every style's run of the policy keeps the draw of its noise that the policy carries.
    const std::uint64_t noise = adaptive[k].noise_draw;
    if (ours) result.policies.push_back(fresh(run_one(sc, adaptive[k], noise)));
    if (ours && name != "dcp") continue;
    // The fixed styles: every other policy, and ours as dcp-fixed-style.
    std::optional<policy_result> best;
    std::string best_style;
    std::string tried;
    const auto note = [&](const std::string& style, const std::string& what) {
      tried += (tried.empty() ? "" : "; ") + style + what;
    };
    const auto consider = [&](const std::string& style, policy_result r) {
      note(style,
           " " + std::to_string(static_cast<long long>(r.noise_free_tokens_per_s)) + " tokens/s");
      if (!best || r.noise_free_tokens_per_s > best->noise_free_tokens_per_s) {
        best = std::move(r);
        best_style = style;
      }
    };
    for (std::size_t j = 0; j < fixed.size(); ++j) {
      const std::string style(to_string(fixed[j]));
      if (const auto* r = known_result(fixed[j])) {
        const auto* p = detail::find(r->policies, name);
        if (!p) {
          note(style, ": not available");
          continue;
        }
        auto copy = *p;
        if (!copy.admits)
          for (std::size_t t = 0; t < copy.steps.size() && t < bounds.size(); ++t)
            copy.steps[t].bound_seconds = bounds[t];
        consider(style, std::move(copy));
        continue;
      }
      const auto& list = per_style[j];
      const auto it = std::find_if(list.begin(), list.end(),
                                   [&](const policy_entry& p) { return p.name == name; });
      if (it == list.end()) {
        note(style, ": not available");
        continue;
      }
      scenario s = sc;
      s.training.sp = fixed[j];
      try {
        consider(style, run_one(s, *it, noise));
      } catch (const sample_does_not_fit&) {
        note(style, ": a sample fits nowhere");
      } catch (const dcp::error& e) {
        note(style, std::string(": ") + e.what());
      }
    }
    if (!best) {
      if (!skipped) throw error(name + " runs under no sequence-parallel style (" + tried + ")");
      skipped->push_back(name + ": no style runs it (" + tried + ")");
      continue;
    }
    auto row = fresh(std::move(*best));
    row.note = (adaptive[k].note.empty() ? "" : adaptive[k].note + "; ") +
               "its best fixed style over the run: " + best_style + " (noise free: " + tried + ")";
    if (ours) {
      row.name = "dcp-fixed-style";
      row.note = "ours at its best single style for the run: " + best_style +
                 " (noise free: " + tried + ")";
    }
    result.policies.push_back(std::move(row));
  }
  summarise(result);
  return result;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
