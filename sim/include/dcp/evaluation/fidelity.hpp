#pragma once
// Published protocols as fidelity scenarios: each re-enacts a peer's published benchmark — its
// model, cluster, data, batch and metric — on the truth model, runs the peer's system and its
// baseline as our policies, and sets the simulated speedup beside the published one. The bar
// is a simulated ratio within ±15 % of the published one; a miss is reported with the
// mechanism the simulator lacks that explains it (docs/fidelity.md). No constant is tuned to
// a published figure and no baseline is weakened: the policies are those of docs/baselines.md
// and the truth model is the one every dcp-sim run uses.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/baselines/flexsp_like.hpp"
#include "dcp/baselines/megatron_dp_balanced.hpp"
#include "dcp/baselines/megatron_dynamic_cp.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/cost/host_cost.hpp"
#include "dcp/error.hpp"
#include "dcp/evaluation/svg.hpp"  // detail::fixed
#include "dcp/evaluation/videosys_fidelity.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/placement/static_layout.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/scheduler.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/presets.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

/// The relative difference a simulated ratio may have from the published one and still pass.
inline constexpr double fidelity_tolerance = 0.15;

/// One published figure set beside its re-enactment: a (protocol, setting) pair.
struct fidelity_row {
  std::string scenario;  ///< the protocol, e.g. "megatron-dynamic-cp"
  std::string setting;   ///< e.g. "4 GPUs (1 x 4 H100-SXM)"
  std::string system;    ///< the policy whose speedup is published
  std::string baseline;  ///< the policy it is measured against
  double published_ratio = 0;
  bool published_up_to = false;    ///< the paper gives "up to" this (its best configuration)
  double simulated_ratio = 0;      ///< simulated baseline step / simulated system step (the metric)
  double relative_difference = 0;  ///< simulated / published - 1
  /// Published step times (the metric's), where the source gives them.
  std::optional<double> published_baseline_seconds{}, published_system_seconds{};
  double simulated_baseline_seconds = 0, simulated_system_seconds = 0;
  double ours_ratio = 0;        ///< dcp's simulated speedup over the same baseline
  std::int64_t oom_events = 0;  ///< over the baseline's and the system's simulated steps
  bool within_15_percent = false;
  std::string
      reason{};  ///< the mechanism the simulator lacks that explains a miss; empty within the bar
};

/// What a fidelity scenario re-enacts and from where, printed with its rows.
struct fidelity_scenario_info {
  std::string name;
  std::string source;
  std::string metric;
  std::vector<std::string> assumptions{};
};

struct fidelity_report {
  std::vector<fidelity_scenario_info> scenarios;
  std::vector<fidelity_row> rows;
};

/// How long the re-enactments run: each protocol's own iteration counts unless `steps` is
/// given (> 0), then that many steps per policy with the warm-up scaled down (tests).
struct fidelity_options {
  std::int64_t steps = 0;
  std::uint64_t seed = 1;
  sim::truth_constants truth{};  ///< the truth model every scenario runs on
  analytic_constants planner{};  ///< every policy's planning model
  /// The host time per kernel of the Megatron benchmark's machine (both models): its nodes of
  /// four GPUs point to a Grace host, and its 4-GPU baseline is what grace_host is fitted to.
  double megatron_host_seconds_per_kernel = grace_host.seconds_per_kernel;
};

/// Megatron's benchmark statistic (benchmark_dcp.sh, extract_iteration_stats_ms): the first
/// `warmup` values dropped, then the mean of the rest with int(n × 0.1) cut from each end of
/// the sorted values when something remains.
[[nodiscard]] inline double trimmed_mean(std::span<const double> values, std::size_t warmup,
                                         double fraction = 0.1) {
  if (values.size() <= warmup) return 0.0;
  std::vector<double> kept(values.begin() + static_cast<std::ptrdiff_t>(warmup), values.end());
  std::sort(kept.begin(), kept.end());
  const auto cut = static_cast<std::size_t>(static_cast<double>(kept.size()) * fraction);
  const auto first = kept.size() > 2 * cut ? cut : 0;
  const auto last = kept.size() > 2 * cut ? kept.size() - cut : kept.size();
  double sum = 0;
  for (auto i = first; i < last; ++i) sum += kept[i];
  return sum / static_cast<double>(last - first);
}

namespace detail {

using plan_function = std::function<step_plan(std::span<const sample>)>;

/// The simulated step seconds of `plan` over `steps` batches drawn by `draw(seed + step)`, with
/// the simulator's default noise seeded as evaluation::run seeds it (policy index `k`);
/// `oom_events` accumulates the OOM events.
[[nodiscard]] inline std::vector<double> simulated_steps(
    const sim::truth_model& truth, const std::function<std::vector<sample>(std::uint64_t)>& draw,
    const plan_function& plan, std::int64_t steps, std::uint64_t seed, std::size_t k,
    std::int64_t& oom_events) {
  std::vector<double> out;
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::uint64_t step_seed = seed + static_cast<std::uint64_t>(step);
    const auto batch = draw(step_seed);
    sim::sim_options options;
    options.seed = step_seed * 1000003ull + k;
    options.record_timelines = false;
    const auto simulated = sim::simulate(plan(batch), batch, truth, options);
    oom_events += simulated.oom_events;
    out.push_back(simulated.step_seconds);
  }
  return out;
}

template <class Recompute = DataCentricScheduler<>::recompute_type, class Placement>
[[nodiscard]] plan_function planner_with(const analytic_cost_model& cost, Placement placement) {
  auto scheduler = std::make_shared<
      DataCentricScheduler<analytic_cost_model, varlen_buckets, Recompute, Placement>>(
      cost, varlen_buckets{}, Recompute{}, std::move(placement));
  return [scheduler](std::span<const sample> batch) { return scheduler->plan(batch); };
}

/// Sets the relative difference and the verdict; a miss gets `mechanism`, prefixed with the
/// shortened run when `steps` is not the protocol's (a short run is judged, not trusted).
inline void judge(fidelity_row& row, const std::string& mechanism, std::int64_t steps,
                  std::int64_t protocol_steps) {
  row.relative_difference =
      row.published_ratio > 0 ? row.simulated_ratio / row.published_ratio - 1.0 : 0.0;
  row.within_15_percent = std::abs(row.relative_difference) <= fidelity_tolerance;
  if (row.within_15_percent) return;
  row.reason = steps == protocol_steps
                   ? mechanism
                   : "shortened run (" + std::to_string(steps) + " of the protocol's " +
                         std::to_string(protocol_steps) + " steps); " + mechanism;
}

/// A protocol's (steps, warm-up) or, with options.steps, that many steps and the warm-up scaled.
[[nodiscard]] inline std::pair<std::int64_t, std::size_t> step_counts(
    const fidelity_options& options, std::int64_t steps, std::int64_t warmup) {
  if (options.steps <= 0) return {steps, static_cast<std::size_t>(warmup)};
  const auto scaled = std::min(options.steps - 1, warmup * options.steps / steps);
  return {options.steps, static_cast<std::size_t>(std::max<std::int64_t>(scaled, 0))};
}

}  // namespace detail

// ---- Megatron-Core dynamic CP ------------------------------------------------------------------

/// Published by NVIDIA/Megatron-LM dev, examples/dynamic_context_parallel/README.md ("Slurm
/// Benchmark Results", June 9, 2026, four GPUs per node): GPUs, baseline dp_balanced and dynamic
/// CP 10%-trimmed means (ms), trimmed speedup.
struct megatron_dcp_published {
  std::int64_t gpus;
  double baseline_ms;
  double dynamic_ms;
  double speedup;
};

inline constexpr megatron_dcp_published megatron_dcp_results[] = {
    {4, 195.269, 151.906, 1.285},  {8, 220.119, 155.850, 1.412},  {16, 226.775, 187.125, 1.212},
    {32, 286.206, 208.088, 1.375}, {64, 271.988, 181.912, 1.495},
};

/// The cluster of the benchmark: `gpus` H100 SXM (the GPU is not published: an assumption) in
/// nodes of four (the README's "four GPUs per node").
[[nodiscard]] inline cluster_spec megatron_dcp_cluster(std::int64_t gpus) {
  cluster_spec c;
  c.gpu = gpus::h100_sxm();
  c.gpus_per_node = 4;
  c.gpus = gpus;
  return c;
}

/// benchmark_dcp.sh: no --use-distributed-optimizer (gradients all-reduced, ZeRO 0), Megatron's
/// default --cp-comm-type p2p (ring attention), no recompute flags.
[[nodiscard]] inline training_spec megatron_dcp_training() {
  training_spec t;
  t.zero_stage = 0;
  t.sp = sequence_parallel::ring;
  return t;
}

/// A global batch of the benchmark: GLOBAL_BATCH_SIZE = MICRO_BATCH_SIZE (1) × DP ×
/// NUM_MICROBATCHES (8) sequences, DP = GPUs / CP_SIZE (4), each one MockVarlenDataset sample
/// drawn from the lognormal mock (workload::megatron_mock()).
[[nodiscard]] inline std::vector<sample> megatron_dcp_batch(std::int64_t gpus, std::uint64_t seed) {
  return workload::draw_samples(workload::megatron_mock(), gpus / 4 * 8, seed);
}

[[nodiscard]] inline fidelity_scenario_info megatron_dcp_info() {
  return {
      "megatron-dynamic-cp",
      "NVIDIA/Megatron-LM dev: examples/dynamic_context_parallel/benchmark_dcp.sh and README.md "
      "(results of "
      "June 9, 2026); peers.md §2.8",
      "10%-trimmed mean of iteration time, iterations 11-30 (10 warm-up iterations dropped)",
      {"GPU: H100 SXM (not published; the README says four GPUs per node, so nodes of 4)",
       "model: 12 layers, hidden 2048, FFN 8192, 16 heads, vocab 131072, GELU; counted with an "
       "untied LM head "
       "(1.14 B parameters, the benchmark ties it: ~0.89 B), so the bf16 gradient all-reduce moves "
       "2.3 GB where "
       "Megatron reduces fp32 gradients of 0.89 B (3.6 GB)",
       "CP by ring attention (Megatron's default --cp-comm-type p2p), gradients all-reduced (no "
       "distributed "
       "optimizer), no recomputation in the baseline; dynamic CP and dcp use the default "
       "selective_pyramid_recompute "
       "(none fits here)",
       "global batch: DP x 8 sequences (MICRO_BATCH_SIZE 1, NUM_MICROBATCHES 8, DP = GPUs / 4) "
       "from the lognormal "
       "mock (mean 1024, sigma 1.5, clipped to 128..8192)",
       "host: the Grace preset (91.1 us per kernel, both models), fitted to this benchmark's "
       "4-GPU baseline iteration (195.269 ms): "
       "that step time is the fit, not a prediction; the other nine published times are held out "
       "(docs/fidelity.md, \"The host cost\")"}};
}

namespace detail {

/// Why a Megatron row misses, in its own numbers: how far the simulated iterations are from the
/// published ones, and which costs the truth model still lacks.
[[nodiscard]] inline std::string megatron_dcp_mechanism(const fidelity_row& row) {
  const auto off = [](double simulated, double published) {
    return fixed(100.0 * (simulated / published - 1.0), 1) + " %";
  };
  const std::string times = "simulated iterations are " +
                            off(row.simulated_baseline_seconds, *row.published_baseline_seconds) +
                            " (baseline) and " +
                            off(row.simulated_system_seconds, *row.published_system_seconds) +
                            " (dynamic CP) from the published ones";
  if (row.simulated_ratio >= row.published_ratio)
    return times +
           "; the dynamic run is the faster one here: the host time per kernel fitted on the 4-GPU "
           "baseline is an average over Megatron's and Transformer Engine's calls, and dynamic "
           "CP's own "
           "work (its packing scheduler, the all-to-all rerouting samples, CP-group set-up) is not "
           "charged";
  return times +
         "; the truth model still lacks per-iteration host work both runs pay (the optimizer step, "
         "Python scheduling), FP32 gradient all-reduce (it moves BF16) and THD padding to 2 x CP";
}

}  // namespace detail

namespace detail {

/// The simulated iterations of `placement` on the benchmark at `gpus` GPUs (policy index `k`
/// seeds the noise as evaluation::run does), planned and judged with `options`' constants.
template <class Placement>
[[nodiscard]] std::vector<double> megatron_dcp_steps(std::int64_t gpus,
                                                     const fidelity_options& options,
                                                     Placement placement, std::size_t k,
                                                     std::int64_t& oom) {
  const auto model = models::megatron_dcp_benchmark_gpt();
  const auto cluster = megatron_dcp_cluster(gpus);
  const auto training = megatron_dcp_training();
  auto planner = options.planner;
  auto constants = options.truth;
  planner.host_seconds_per_kernel = constants.host_seconds_per_kernel =
      options.megatron_host_seconds_per_kernel;
  const analytic_cost_model cost(model, cluster, training, planner);
  const sim::truth_model truth(model, cluster, training, constants);
  const auto draw = [gpus](std::uint64_t seed) { return megatron_dcp_batch(gpus, seed); };
  return simulated_steps(truth, draw, planner_with(cost, std::move(placement)),
                         step_counts(options, 30, 10).first, options.seed, k, oom);
}

}  // namespace detail

/// Re-enacts the benchmark at every published GPU count: megatron-dp-balanced (CP 4, 2048
/// tokens per rank) against megatron_dynamic_cp{} (packing-aware, 2048), and dcp, over 30
/// iterations of which the first 10 are dropped.
[[nodiscard]] inline std::vector<fidelity_row> run_megatron_dcp(const fidelity_options& options) {
  const auto [steps, warmup] = detail::step_counts(options, 30, 10);
  std::vector<fidelity_row> rows;
  for (const auto& published : megatron_dcp_results) {
    const auto gpus = published.gpus;
    std::int64_t oom = 0, ours_oom = 0;
    const auto baseline =
        detail::megatron_dcp_steps(gpus, options, baselines::megatron_dp_balanced{}, 0, oom);
    const auto dynamic =
        detail::megatron_dcp_steps(gpus, options, baselines::megatron_dynamic_cp{}, 1, oom);
    const auto ours = detail::megatron_dcp_steps(gpus, options, balanced_placement{}, 2, ours_oom);
    fidelity_row row;
    row.scenario = "megatron-dynamic-cp";
    row.setting = std::to_string(gpus) + " GPUs (" + std::to_string(gpus / 4) + " x 4 " +
                  megatron_dcp_cluster(gpus).gpu.name + ")";
    row.system = "megatron-dcp";
    row.baseline = "megatron-dp-balanced";
    row.published_ratio = published.speedup;
    row.published_baseline_seconds = published.baseline_ms / 1e3;
    row.published_system_seconds = published.dynamic_ms / 1e3;
    row.simulated_baseline_seconds = trimmed_mean(baseline, warmup);
    row.simulated_system_seconds = trimmed_mean(dynamic, warmup);
    row.simulated_ratio = row.simulated_baseline_seconds / row.simulated_system_seconds;
    row.ours_ratio = row.simulated_baseline_seconds / trimmed_mean(ours, warmup);
    row.oom_events = oom;
    detail::judge(row, detail::megatron_dcp_mechanism(row), steps, 30);
    rows.push_back(std::move(row));
  }
  return rows;
}

/// The simulated iteration of megatron-dp-balanced (CP 4, 2048 tokens per rank) at `gpus` GPUs
/// under `constants`: the protocol's statistic (10%-trimmed mean of iterations 11-30, or of
/// options.steps with the warm-up scaled).
[[nodiscard]] inline double megatron_dp_balanced_seconds(std::int64_t gpus,
                                                         const fidelity_options& options) {
  std::int64_t oom = 0;
  const auto baseline =
      detail::megatron_dcp_steps(gpus, options, baselines::megatron_dp_balanced{}, 0, oom);
  return trimmed_mean(baseline, detail::step_counts(options, 30, 10).second);
}

/// Fits the Megatron benchmark's host time per kernel (grace_host) to one fully public absolute
/// measurement: the value at which the re-enacted 4-GPU baseline of Megatron's dynamic-CP
/// benchmark (megatron_dp_balanced_seconds(4), every other constant as in `options.truth`)
/// takes the published 195.269 ms. The other nine published iteration times are held out
/// (docs/fidelity.md, "The host cost"). The iteration never gets shorter as the host cost
/// grows, so bisection over [0, 1 ms] per kernel finds it (to 1e-12 s).
[[nodiscard]] inline double fit_host_seconds_per_kernel(fidelity_options options = {}) {
  const double target = megatron_dcp_results[0].baseline_ms / 1e3;
  double lo = 0.0, hi = 1e-3;
  while (hi - lo > 1e-12) {
    options.megatron_host_seconds_per_kernel = 0.5 * (lo + hi);
    (megatron_dp_balanced_seconds(4, options) < target ? lo : hi) =
        options.megatron_host_seconds_per_kernel;
  }
  return 0.5 * (lo + hi);
}

// ---- FlexSP ------------------------------------------------------------------------------------

/// FlexSP's cluster (arXiv 2412.01523): 8 nodes of 8 A100-40GB with NVLink,
/// nodes joined by 400 Gb/s InfiniBand, taken as one 400 Gb/s link per node shared by its 8
/// GPUs at NCCL's 96 % of line rate (nccl-tests#267): 6 GB/s per GPU. FlexSP's own all-to-all
/// table (train_dist.py: 10.3 / 5.9 / 4.9 GB/s at SP 16 / 32 / 64) is of that size.
[[nodiscard]] inline cluster_spec flexsp_cluster() {
  cluster_spec c;
  c.gpu = gpus::a100_sxm_40gb();
  c.gpus_per_node = 8;
  c.gpus = 64;
  c.nvlink_bandwidth = gpus::a100_nvlink_bandwidth;
  c.nic_bandwidth = 50e9 * 0.96 / 8;
  return c;
}

/// FlexSP's training: Ulysses SP, ZeRO-3 (its memory model's "model states, ZeRO-3 share").
[[nodiscard]] inline training_spec flexsp_training() {
  training_spec t;
  t.zero_stage = 3;
  t.sp = sequence_parallel::ulysses;
  return t;
}

/// A global batch of FlexSP's protocol: 512 sequences of Wikipedia (FlexSP's own length file,
/// workload::wikipedia()); sequences longer than the max context are dropped (solver.py) and
/// drawn again, so the batch keeps 512.
[[nodiscard]] inline std::vector<sample> flexsp_batch(std::int64_t context, std::uint64_t seed,
                                                      std::int64_t sequences = 512) {
  const auto profile = workload::wikipedia();
  workload::rng random(seed);
  std::vector<sample> out;
  while (static_cast<std::int64_t>(out.size()) < sequences) {
    auto s = profile.draw(random, out.size());
    if (s.tokens <= context) out.push_back(s);
  }
  return out;
}

[[nodiscard]] inline fidelity_scenario_info flexsp_info() {
  return {"flexsp",
          "FlexSP (Wang et al., ASPLOS'25, arXiv 2412.01523), end-to-end evaluation; peers.md §2.1",
          "mean step time over 20 steps (the paper reports iteration time; no warm-up protocol is "
          "given)",
          {"model: GPT-7B as GPT-3 6.7B's shape (32 layers, hidden 4096, 32 heads, 4h GELU MLP, "
           "vocab 50257); "
           "the paper gives no shape",
           "network: 400 Gb/s per node shared by its 8 GPUs (6 GB/s per GPU through NCCL); NVLink "
           "all-to-all "
           "busbw 247 GB/s (H100's nccl-tests ratio applied to A100's 300 GB/s per direction)",
           "ZeRO-3 and Ulysses for both systems, one checkpointing setting for the run for both: "
           "none (FlexSP's "
           "memory model is linear activations per token under a 28 GB cap, and its DeepSpeed case "
           "study runs "
           "SP 64, the degree a max-context sequence forces without recomputation); selective "
           "recomputation "
           "keeps the same activations under FlashAttention",
           "DeepSpeed-Ulysses as FlexSP ran it: one SP degree for the run, hand-tuned (every "
           "degree that holds a "
           "max-context sequence is run; the fastest is the baseline), samples balanced over the "
           "groups and packed "
           "to the memory budget (static_placement)",
           "published: up to 1.72x over DeepSpeed-Ulysses across GPT-7B/13B/30B, three datasets "
           "and 192K/384K "
           "(Wikipedia, the most skewed, gives FlexSP its largest gains); the per-configuration "
           "figure is not in "
           "our notes, so the bar is taken against the headline",
           "384K is not re-enacted: with 32 heads Ulysses stops at SP 32, and a 384K sequence "
           "needs SP 64 "
           "without recomputation (the paper's DeepSpeed ran SP 64, so its GPT-7B shape differs "
           "from ours)",
           "dcp plans with its own recompute choice (selective_pyramid_recompute) in every row"}};
}

namespace detail {

/// One FlexSP row: flexsp_like{} and the fastest fixed DeepSpeed-Ulysses degree that holds a
/// `context`-token sequence, both with the recompute strategy `Recompute`; dcp as it ships.
template <class Recompute>
[[nodiscard]] fidelity_row flexsp_row(const fidelity_options& options, std::int64_t context,
                                      std::string recompute, const std::string& mechanism) {
  const auto model = models::gpt_7b();
  const auto cluster = flexsp_cluster();
  const auto training = flexsp_training();
  const analytic_cost_model cost(model, cluster, training, options.planner);
  const sim::truth_model truth(model, cluster, training, options.truth);
  const auto [steps, warmup] = step_counts(options, 20, 0);
  const auto draw = [context](std::uint64_t seed) { return flexsp_batch(context, seed); };
  std::int64_t oom = 0, ours_oom = 0;
  const auto flexsp =
      simulated_steps(truth, draw, planner_with<Recompute>(cost, baselines::flexsp_like{}), steps,
                      options.seed, 0, oom);
  const auto ours = simulated_steps(truth, draw, planner_with(cost, balanced_placement{}), steps,
                                    options.seed, 1, ours_oom);
  // DeepSpeed-Ulysses, hand-tuned: every degree at which a max-context sequence runs.
  double best = 0;
  std::int64_t best_degree = 0, best_oom = 0;
  const std::vector<sample> longest{text_sample(0, context)};
  std::size_t k = 2;
  for (const auto degree : allowed_degrees(model, cluster, training.sp)) {
    ++k;
    const auto plan = planner_with<Recompute>(cost, static_placement{degree});
    try {
      (void)plan(longest);
    } catch (const sample_does_not_fit&) {
      continue;
    }
    std::int64_t degree_oom = 0;
    const auto seconds = trimmed_mean(
        simulated_steps(truth, draw, plan, steps, options.seed, k, degree_oom), warmup, 0.0);
    if (best_degree == 0 || seconds < best) {
      best = seconds;
      best_degree = degree;
      best_oom = degree_oom;
    }
  }
  if (best_degree == 0)
    throw error("fidelity flexsp: no DeepSpeed-Ulysses degree holds a " + std::to_string(context) +
                "-token sequence with recompute " + recompute);
  fidelity_row row;
  row.scenario = "flexsp";
  row.setting = "GPT-7B, Wikipedia, " + std::to_string(context / 1024) + "K, 64 x " +
                cluster.gpu.name + ", " + recompute;
  row.system = "flexsp";
  row.baseline = "deepspeed-ulysses (SP " + std::to_string(best_degree) + ", hand-tuned)";
  row.published_ratio = 1.72;
  row.published_up_to = true;
  row.simulated_baseline_seconds = best;
  row.simulated_system_seconds = trimmed_mean(flexsp, warmup, 0.0);
  row.simulated_ratio = best / row.simulated_system_seconds;
  row.ours_ratio = best / trimmed_mean(ours, warmup, 0.0);
  row.oom_events = oom + best_oom;
  judge(row,
        row.simulated_ratio < row.published_ratio
            ? mechanism
            : "the simulated ratio is above the published headline, which no mechanism we know of "
              "explains",
        steps, 20);
  return row;
}

}  // namespace detail

/// Re-enacts FlexSP's protocol on GPT-7B and Wikipedia at 192K: with no recomputation for both
/// systems (the protocol as we read it), and with the scheduler's per-micro-batch recompute
/// choice for both (ours: a DeepSpeed that recomputes only where memory asks).
[[nodiscard]] inline std::vector<fidelity_row> run_flexsp(const fidelity_options& options) {
  const sim::truth_model truth(models::gpt_7b(), flexsp_cluster(), flexsp_training(),
                               options.truth);
  return {
      detail::flexsp_row<no_recompute>(options, 196608, "no recompute",
                                       "both systems pay the ZeRO-3 parameter gathers and gradient "
                                       "reduce-scatter, which the truth model "
                                       "charges once per step and not overlapped with compute (" +
                                           detail::fixed(truth.gradient_sync_seconds(), 2) +
                                           " s of every step; FlexSP and DeepSpeed prefetch them): "
                                           "a cost common to both that dilutes the "
                                           "ratio"),
      detail::flexsp_row<DataCentricScheduler<>::recompute_type>(
          options, 196608, "recompute per micro-batch (ours)",
          "not the simulator: this DeepSpeed recomputes where memory asks, so it holds a 192K "
          "sequence at SP 8 "
          "inside one node; the paper's DeepSpeed, with one checkpointing setting for the run, "
          "needed the "
          "cross-node SP whose all-to-all over 400 Gb/s per node is what FlexSP avoids; a stronger "
          "baseline "
          "than the published one")};
}

// ---- VideoSys's own 8-GPU benchmark -------------------------------------------------------------

[[nodiscard]] inline fidelity_scenario_info videosys_info() {
  return {
      "videosys-dcp",
      "NUS-HPC-AI-Lab/VideoSys: examples/training/open_sora/benchmark.sh, "
      "configs/benchmarks/*.yaml, "
      "datasets.py (DummyVariableVideoTextDataset), train.py; chart assets/figures/dcp_speedup.png "
      "(short-sequence-dominated bars, dcp.md §4.1)",
      "tokens per second over one epoch of the dummy dataset (drop_last as upstream: each variant "
      "trains the "
      "samples its batch sizes keep; steps: epoch times)",
      {"GPU: H200 SXM, one node of 8 (the repo does not state it; the paper uses H200)",
       "the chart's short-sequence-dominated distribution is the benchmark's default dataset (Zipf "
       "alpha 3, "
       "offset 5: 100,000 images and 2,000 videos); the chart does not say which settings made its "
       "three "
       "distributions",
       "profiles from the analytic cost model, not measured; one gradient synchronisation per "
       "iteration for its "
       "optimizer step; drop_last as upstream (each bucket's partial batch, and for the baseline "
       "whole batches to a "
       "multiple of its 2 data-parallel groups, dropped before planning); the DCP sampler's other "
       "drops (unfilled "
       "iterations, buckets short of their accumulation) not modelled",
       "DCP-intra: max_gas 1; DCP-inter: max_gas 5, min_gas 2 (train.py default), every layer "
       "checkpointed; "
       "DCP-inter+PAC: min_gas 15 with PAC; all with shuffle and a barrier per iteration; "
       "baseline: sp 4, every "
       "layer checkpointed, power-of-two batch sizes under 0.70 x GPU memory, global "
       "interpolation, random "
       "dealing with a barrier per iteration"}};
}

/// The three DCP variants over the paper baseline on one epoch (evaluation/videosys_fidelity.hpp).
/// A short run (options.steps > 0) changes nothing here: the protocol is one epoch.
[[nodiscard]] inline std::vector<fidelity_row> run_videosys(const fidelity_options& options) {
  const auto result = run_videosys_fidelity(options.seed, sim::sim_options{}.noise_sigma,
                                            options.truth, options.planner);
  std::vector<fidelity_row> rows;
  const auto& base = result.variants.front();
  for (std::size_t v = 1; v < result.variants.size(); ++v) {
    const auto& variant = result.variants[v];
    fidelity_row row;
    row.scenario = "videosys-dcp";
    row.setting = "8 H200-SXM, one epoch (" + std::to_string(variant.iterations) + " iterations, " +
                  std::to_string(variant.dropped_samples) + " samples dropped; baseline " +
                  std::to_string(base.iterations) + ", " + std::to_string(base.dropped_samples) +
                  ")";
    row.system = variant.name;
    row.baseline = "paper-baseline";
    row.published_ratio = variant.published_speedup;
    row.simulated_ratio = variant.speedup;
    row.simulated_baseline_seconds = base.epoch_seconds;
    row.simulated_system_seconds = variant.epoch_seconds;
    row.oom_events = base.oom_events + variant.oom_events;
    detail::judge(
        row,
        "the simulated gain is below the chart's; the truth model lacks what the baseline's large "
        "image batches pay upstream (STDiT's cross-attention loops over the samples of a batch "
        "above "
        "200,000 tokens, one FlashAttention call per sample, each after two cu_seqlens copies from "
        "pageable host memory that wait for the GPU, attentions.py ~161-177 and ~240-251; no "
        "measurement "
        "sets that per-sample cost; the baseline's profiled batches hold up to " +
            std::to_string(base.largest_micro_batch_tokens) +
            " tokens), and the chart's GPU and distribution settings are not published",
        1, 1);
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Every fidelity scenario, in the order docs/fidelity.md lists them.
[[nodiscard]] inline fidelity_report run_fidelity(const fidelity_options& options = {}) {
  fidelity_report report;
  report.scenarios = {megatron_dcp_info(), flexsp_info(), videosys_info()};
  for (auto& row : run_megatron_dcp(options)) report.rows.push_back(std::move(row));
  for (auto& row : run_flexsp(options)) report.rows.push_back(std::move(row));
  for (auto& row : run_videosys(options)) report.rows.push_back(std::move(row));
  return report;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
