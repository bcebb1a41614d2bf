#pragma once
// The peers' policies inside a tensor x pipeline grid: each peer's choice of micro-batches, their
// context-parallel degree, order and recomputation for one step, as a plan that dcp's executor
// (simulate_pipeline) times on the same cost model as pipeline_planner. Notes:
// docs/baselines.md, "Pipeline peers".
//
// Every plan covers each (pipeline, slot) of D pipelines x m slots exactly once, because
// Megatron-LM's 1F1B and interleaved schedules run one micro-batch count m on every pipeline
// and stage. Where a peer leaves a pipeline idle at a slot (Megatron pads its global batch to
// whole rounds, DynaPipe's replicas get different counts), the plan holds an empty
// micro-batch there: no samples, the executor's fixed cost of a micro-batch. Every micro-batch
// carries one recompute setting per chunk (grid.chunks()).
//
// 1. Megatron-LM 4D static ("Plain-4D" in WLB-LLM): megatron_4d(). NVIDIA/Megatron-LM,
//    `--context-parallel-size` c, `--seq-length` S, packed THD sequences, the pretraining sampler
//    dealing consecutive micro-batches to consecutive DP ranks
//    (megatron/legacy/data/data_samplers.py), one num_microbatches on every rank
//    (core/num_microbatches_calculator.py), `--recompute-granularity full` (every layer,
//    `--recompute-method uniform --recompute-num-layers 1`) or `selective`.
//    Documents whole, in arrival order, next-fit into windows of <= S tokens; window w runs on CP
//    group w mod (D / c) at slot w / (D / c). Adaptations: Megatron's global batch is a whole
//    number of rounds and the rest waits for the next step; here every sample runs in this step
//    and the last round's idle groups hold empty micro-batches. Under interleaving m is rounded
//    up to a multiple of p the same way (Megatron refuses other counts). A document longer than
//    S throws sample_does_not_fit: a static layout is sized for the longest.
//    megatron_4d_sized() sizes the layout as a user does (the smallest power-of-two c whose
//    window of c x the per-pipeline cap holds the longest document); megatron_4d_best_static()
//    tries every c and window from that one down to the longest document and keeps the fastest
//    on the cost model (ours: the best a user could tune).
// 2. Megatron-LM's packing scheduler with PP: megatron_packing_scheduler. DpBalancedScheduler
//    .get_groups_and_subsamples in megatron/core/datasets/data_schedule.py
//    (`--sequence-packing-scheduler dp_balanced`). Samples in their original order packed until
//    max_seqlen_per_dp_cp_rank x CP tokens; while the group count is not a multiple of DP (x the
//    micro-batch group size G = p under interleaving), the last sample of the last group holding
//    more than one moves into a group of its own at the end (upstream asserts, and so this
//    throws, where that would split the first group); group k runs as micro-batch k / DP on DP
//    rank k mod DP, m = groups / DP. max_seqlen_per_dp_cp_rank defaults to Megatron's documented
//    rule, --seq-length / CP (ModelParallelConfig), with --seq-length the batch's longest sample
//    and CP megatron_4d_sized's. Adaptations: upstream's benchmark sets no recompute flag; a 70B
//    model in a pipeline runs out of memory without, so the recomputation is a knob (full by
//    default, as Plain-4D). A sample above max_seqlen x CP throws (upstream's arguments check
//    requires that capacity to cover --seq-length); THD padding to the CP x TP alignment is not
//    modelled.
// 3. WLB-LLM with PP (Wang et al., OSDI'25, arXiv 2503.17924, §4 and Algorithm 1; no public
//    code; facts through notes and a third-party re-implementation): wlb_llm_pipeline. Fixed CP,
//    N micro-batches per step (the global batch: step tokens over the context window W, in
//    whole rounds of the DP groups); documents sorted longest first, each into the micro-batch
//    with the least predicted workload if it stays within S_max tokens, else into the micro-batch
//    with the fewest tokens if it fits there, else carried over to the next step. The outlier
//    delay: documents of at least L_1 tokens wait in multi-level queues (wlb_outlier_queues),
//    a level releasing its N oldest when it holds N, one for each micro-batch. Adaptations: the
//    predicted workload W_a + W_l is the cost model's marginal time at the CP degree; S_max is
//    the re-implementation's 2 W, capped at what the CP group holds under the run's
//    recomputation (WLB-LLM's S_max is a memory cap); micro-batches go to the DP groups
//    longest-processing-time first, m to each, heaviest first within a group (WLB-LLM does not
//    say); the paper's interleaved 1F1B is Megatron's here; the CP degree, one per run, is the
//    fastest on the first step unless given (ours, as wlb_llm tunes it). flush() trains what is
//    still carried or queued after the last step, in steps of at most the largest step's tokens.
// 4. DynaPipe (Jiang et al., EuroSys'24; awslabs/optimizing-multitask-training-through-dynamic-
//    pipelines, dynapipe/data_opt/optimizer.py, dp_helper.cpp, schedule_opt/
//    execution_planner.py): dynapipe_pipeline. No context parallelism (degree 1, D data-parallel
//    replicas); samples sorted longest first (decoder-only); a dynamic program over consecutive
//    ranges of that order for every t_max candidate (the feasible ranges' costs, thinned to
//    5 ms apart), minimising (p - 1) t_max + sum(c) / D where c is a micro-batch's time on a
//    stage, under a per-micro-batch stored-activation limit of available / p (then available),
//    recomputation none, then selective, then full (the first that finds a partition);
//    micro-batches padded to their longest sample (rounded up to 8), as DynaPipe runs them
//    without its optional packing; Karmarkar-Karp split of the costs over the D replicas;
//    per replica the order kept is the fastest the executor times within memory among
//    k-means-cluster permutations (3 clusters above 20 micro-batches, else 4; random order
//    inside a cluster, seeded) and the original order. Adaptations: the cost model stands for
//    DynaPipe's profiles; the executor runs Megatron's 1F1B (DynaPipe's wait-free cyclic
//    schedule is not modelled); replicas with fewer micro-batches are padded at the end with
//    empty ones to one m; interleaving with a decoder-only model throws, as DynaPipe does.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/baselines/wlb_outlier_delay.hpp"
#include "dcp/error.hpp"
#include "dcp/pipeline/planner.hpp"
#include "dcp/pipeline/schedule.hpp"
#include "dcp/pipeline/stage_cost.hpp"
#include "dcp/placement/detail/does_not_fit.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// A peer's step inside the grid: its micro-batches in m = `slots` slots of every pipeline.
struct pipeline_peer_plan {
  std::string name;
  std::vector<pipeline_micro_batch> micro_batches;
  std::int64_t slots = 0;
};

/// The executor's timeline of a peer's plan under `cost`.
[[nodiscard]] inline pipeline_timeline simulate_peer(const pipeline_cost_model& cost,
                                                     const pipeline_peer_plan& plan) {
  return simulate_pipeline(pipeline_instance_of(cost, plan.micro_batches, plan.slots));
}

/// Megatron-LM's `--recompute-granularity`, applied to every layer of every chunk: none (no
/// flag), selective (core attention) or full (every layer, uniform method, one layer a group).
enum class pipeline_recompute { none, selective, full };

[[nodiscard]] inline const char* to_string(pipeline_recompute r) noexcept {
  switch (r) {
    case pipeline_recompute::none:
      return "none";
    case pipeline_recompute::selective:
      return "selective";
    case pipeline_recompute::full:
      return "full";
  }
  return "full";
}

namespace detail {

[[nodiscard]] inline recompute_setting setting_of(const pipeline_cost_model& cost,
                                                  pipeline_recompute r) noexcept {
  switch (r) {
    case pipeline_recompute::none:
      return recompute_setting::none();
    case pipeline_recompute::selective:
      return recompute_setting::selective_only();
    case pipeline_recompute::full:
      return recompute_setting::full(cost.layers_per_chunk());
  }
  return recompute_setting::full(cost.layers_per_chunk());
}

[[nodiscard]] inline std::vector<recompute_setting> every_chunk(const pipeline_cost_model& cost,
                                                                recompute_setting r) {
  return std::vector<recompute_setting>(static_cast<std::size_t>(cost.grid().chunks()), r);
}

/// Chunk-forwards stage `stage` keeps in flight at most under Megatron's schedules, the running
/// one included: p - s under 1F1B, 2 (p - s - 1) + (v - 1) p + 1 interleaved.
[[nodiscard]] inline std::int64_t in_flight(const model_parallel_grid& g,
                                            std::int64_t stage) noexcept {
  return g.virtual_stages > 1
             ? 2 * (g.pipeline - stage - 1) + (g.virtual_stages - 1) * g.pipeline + 1
             : g.pipeline - stage;
}

/// m as Megatron's schedule takes it: interleaving needs a multiple of p (its micro-batch group).
[[nodiscard]] inline std::int64_t megatron_slots(const model_parallel_grid& g,
                                                 std::int64_t m) noexcept {
  return g.virtual_stages > 1 ? (m + g.pipeline - 1) / g.pipeline * g.pipeline : m;
}

[[nodiscard]] inline bool is_power_of_two(std::int64_t n) noexcept {
  return n > 0 && (n & (n - 1)) == 0;
}

/// Throws invalid_spec naming `field` where `degree` is not a power of two dividing D.
inline void check_degree(const pipeline_cost_model& cost, std::int64_t degree,
                         const std::string& who, const std::string& field) {
  if (!is_power_of_two(degree) || cost.pipelines() % degree != 0)
    throw invalid_spec(who + ": " + field + " = " + std::to_string(degree) +
                       ", must be a power of two dividing the " + std::to_string(cost.pipelines()) +
                       " pipelines");
}

[[nodiscard]] inline pipeline_micro_batch empty_micro_batch(const pipeline_cost_model& cost,
                                                            std::int64_t first, std::int64_t degree,
                                                            std::int64_t slot,
                                                            recompute_setting r) {
  pipeline_micro_batch mb;
  mb.first_pipeline = first;
  mb.degree = degree;
  mb.slot = slot;
  mb.recompute = every_chunk(cost, r);
  return mb;
}

/// Packs (lists of batch indices) on `groups` CP groups of `degree` pipelines: pack k at group
/// k mod groups, slot k / groups, every cell of the m = `slots` slots covered (empty where no
/// pack is).
[[nodiscard]] inline pipeline_peer_plan deal_round_robin(
    const pipeline_cost_model& cost, std::span<const sample> batch,
    const std::vector<std::vector<std::size_t>>& packs, std::int64_t degree, std::int64_t slots,
    recompute_setting r, std::string name) {
  const std::int64_t groups = cost.pipelines() / degree;
  pipeline_peer_plan plan{std::move(name), {}, slots};
  for (std::int64_t k = 0; k < groups * slots; ++k) {
    auto mb = empty_micro_batch(cost, (k % groups) * degree, degree, k / groups, r);
    if (k < static_cast<std::int64_t>(packs.size()))
      for (const auto i : packs[static_cast<std::size_t>(k)]) {
        mb.sample_ids.push_back(batch[i].id);
        mb.shape += micro_batch_shape::of(batch[i]);
      }
    plan.micro_batches.push_back(std::move(mb));
  }
  return plan;
}

/// Next-fit in arrival order: a sample that would pass `limit` tokens closes the pack. Throws
/// sample_does_not_fit naming a sample longer than `limit`.
[[nodiscard]] inline std::vector<std::vector<std::size_t>> pack_next_fit(
    std::span<const sample> batch, std::int64_t limit, const std::string& who,
    const std::string& limit_name) {
  std::vector<std::vector<std::size_t>> packs;
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].tokens > limit)
      throw sample_does_not_fit(who + ": sample " + std::to_string(batch[i].id) + " (" +
                                std::to_string(batch[i].tokens) + " tokens) is longer than " +
                                limit_name + " = " + std::to_string(limit) +
                                " tokens; size the static layout for the longest sample");
    if (packs.empty() || tokens + batch[i].tokens > limit) {
      packs.emplace_back();
      tokens = 0;
    }
    packs.back().push_back(i);
    tokens += batch[i].tokens;
  }
  return packs;
}

[[nodiscard]] inline std::int64_t longest_tokens(std::span<const sample> batch) noexcept {
  std::int64_t longest = 0;
  for (const auto& s : batch) longest = std::max(longest, s.tokens);
  return longest;
}

}  // namespace detail

/// The most tokens one pipeline may hold of a micro-batch run over `degree` pipelines with
/// `recompute` in every chunk such that each stage holds the most chunk-forwards Megatron's
/// schedule keeps in flight (detail::in_flight) and the running op, next to its model states:
/// every micro-batch at or below it fits in any order. 0 where not even one token fits.
[[nodiscard]] inline std::int64_t pipeline_tokens_cap(const pipeline_cost_model& cost,
                                                      recompute_setting recompute,
                                                      std::int64_t degree) {
  const auto& g = cost.grid();
  const auto fits = [&](std::int64_t per_pipeline) {
    micro_batch_shape shape;
    shape.samples = 1;
    shape.tokens = per_pipeline * degree;
    shape.longest = shape.tokens;
    for (std::int64_t s = 0; s < g.pipeline; ++s) {
      double stored = 0;
      double working = 0;
      for (std::int64_t c = s; c < g.chunks(); c += g.pipeline) {
        const auto b = cost.chunk(shape, degree, recompute, c);
        stored = std::max(stored, b.stored_bytes);
        working = std::max(working, b.working_bytes);
      }
      if (cost.state_bytes(s) + static_cast<double>(detail::in_flight(g, s)) * stored + working >
          cost.memory_budget())
        return false;
    }
    return true;
  };
  std::int64_t lo = 0;
  std::int64_t hi = std::int64_t{1} << 26;  // 64M tokens a pipeline: above any GPU's memory
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// 1. Megatron-LM 4D static (Plain-4D)

/// The flags of a static Megatron run: `--context-parallel-size`, `--seq-length` (the window one
/// CP group holds) and `--recompute-granularity`.
struct megatron_4d_layout {
  std::int64_t context_parallel = 1;
  std::int64_t window_tokens = 0;
  pipeline_recompute recompute = pipeline_recompute::full;

  friend bool operator==(const megatron_4d_layout&, const megatron_4d_layout&) = default;
};

/// Plain-4D: whole documents next-fit in arrival order into windows of at most
/// layout.window_tokens, dealt round-robin to the D / c CP groups, m windows each (the last
/// round padded with empty micro-batches), every chunk at the layout's recomputation. Throws
/// invalid_spec for a CP size that is not a power of two dividing D or a window < 1, and
/// sample_does_not_fit naming a document longer than the window.
[[nodiscard]] inline pipeline_peer_plan megatron_4d(const pipeline_cost_model& cost,
                                                    std::span<const sample> batch,
                                                    const megatron_4d_layout& layout) {
  validate_batch(batch);
  const std::string who = "megatron-4d";
  detail::check_degree(cost, layout.context_parallel, who, "context_parallel");
  if (layout.window_tokens < 1)
    throw invalid_spec(who + ": window_tokens = " + std::to_string(layout.window_tokens) +
                       ", must be >= 1");
  const auto packs = detail::pack_next_fit(batch, layout.window_tokens, who, "the window");
  const std::int64_t groups = cost.pipelines() / layout.context_parallel;
  const std::int64_t windows = static_cast<std::int64_t>(packs.size());
  const std::int64_t m = detail::megatron_slots(
      cost.grid(), std::max<std::int64_t>(1, (windows + groups - 1) / groups));
  return detail::deal_round_robin(cost, batch, packs, layout.context_parallel, m,
                                  detail::setting_of(cost, layout.recompute),
                                  who + " (CP " + std::to_string(layout.context_parallel) + ", " +
                                      std::to_string(layout.window_tokens) + "-token windows, " +
                                      to_string(layout.recompute) + " recompute)");
}

/// The layout a user sizes for `batch`: the smallest power-of-two CP size c dividing D whose
/// window, c x pipeline_tokens_cap at `recompute`, holds the longest document; that window.
/// Throws sample_does_not_fit naming the longest document where no c holds it.
[[nodiscard]] inline megatron_4d_layout megatron_4d_sized(
    const pipeline_cost_model& cost, std::span<const sample> batch,
    pipeline_recompute recompute = pipeline_recompute::full) {
  const auto setting = detail::setting_of(cost, recompute);
  const std::int64_t longest = detail::longest_tokens(batch);
  std::int64_t widest = 1;
  for (std::int64_t c = 1; c <= cost.pipelines() && cost.pipelines() % c == 0; c *= 2) {
    widest = c;
    const std::int64_t window = c * pipeline_tokens_cap(cost, setting, c);
    if (window >= longest && window > 0) return {c, window, recompute};
  }
  std::uint64_t id = 0;
  for (const auto& s : batch)
    if (s.tokens == longest) id = s.id;
  throw sample_does_not_fit(
      "megatron-4d: sample " + std::to_string(id) + " (" + std::to_string(longest) +
      " tokens) fits no CP size up to " + std::to_string(widest) + " with " + to_string(recompute) +
      " recompute; the widest window holds " +
      std::to_string(widest * pipeline_tokens_cap(cost, setting, widest)) + " tokens");
}

/// Best static (ours, the best a user could tune): every power-of-two CP size c dividing D whose
/// window holds the longest document, each with the windows c x pipeline_tokens_cap halved while
/// they hold it and the longest document's length itself (`--seq-length` = the data's context),
/// laid out as megatron_4d and timed by the executor; the fastest. Throws as megatron_4d_sized
/// where no c holds the longest document.
[[nodiscard]] inline pipeline_peer_plan megatron_4d_best_static(
    const pipeline_cost_model& cost, std::span<const sample> batch,
    pipeline_recompute recompute = pipeline_recompute::full) {
  const auto smallest = megatron_4d_sized(cost, batch, recompute);
  const auto setting = detail::setting_of(cost, recompute);
  const std::int64_t longest = std::max<std::int64_t>(1, detail::longest_tokens(batch));
  std::optional<pipeline_peer_plan> best;
  double best_makespan = std::numeric_limits<double>::infinity();
  const auto try_layout = [&](const megatron_4d_layout& layout) {
    auto plan = megatron_4d(cost, batch, layout);
    const double makespan = simulate_peer(cost, plan).makespan;
    if (makespan < best_makespan) {
      best_makespan = makespan;
      best = std::move(plan);
    }
  };
  for (std::int64_t c = smallest.context_parallel;
       c <= cost.pipelines() && cost.pipelines() % c == 0; c *= 2) {
    const std::int64_t widest = c * pipeline_tokens_cap(cost, setting, c);
    for (std::int64_t window = widest; window >= longest; window /= 2)
      try_layout({c, window, recompute});
    if (widest >= longest) try_layout({c, longest, recompute});
  }
  best->name = "megatron-4d-best-static: " + best->name;
  return std::move(*best);
}

// ---------------------------------------------------------------------------------------------
// 2. Megatron-LM's packing scheduler (DpBalancedScheduler) with PP

struct megatron_packing_scheduler {
  std::int64_t context_parallel_size = 0;      ///< 0: megatron_4d_sized's CP size
  std::int64_t max_seqlen_per_dp_cp_rank = 0;  ///< 0: ceil(seq_length / CP), Megatron's rule
  std::int64_t seq_length = 0;                 ///< `--seq-length`; 0: the batch's longest sample
  pipeline_recompute recompute = pipeline_recompute::full;

  friend bool operator==(const megatron_packing_scheduler&,
                         const megatron_packing_scheduler&) = default;

  /// Throws invalid_spec for a CP size that is not a power of two dividing D, a capacity < 1, or
  /// a batch too short to give every DP rank a group (upstream's assert); sample_does_not_fit
  /// naming a sample above max_seqlen_per_dp_cp_rank x CP.
  [[nodiscard]] pipeline_peer_plan plan(const pipeline_cost_model& cost,
                                        std::span<const sample> batch) const {
    validate_batch(batch);
    const std::string who = "megatron-packing";
    const auto setting = detail::setting_of(cost, recompute);
    const std::int64_t cp = context_parallel_size > 0
                                ? context_parallel_size
                                : megatron_4d_sized(cost, batch, recompute).context_parallel;
    detail::check_degree(cost, cp, who, "context_parallel_size");
    const std::int64_t longest = seq_length > 0 ? seq_length : detail::longest_tokens(batch);
    const std::int64_t per_rank =
        max_seqlen_per_dp_cp_rank > 0 ? max_seqlen_per_dp_cp_rank : (longest + cp - 1) / cp;
    if (per_rank < 1)
      throw invalid_spec(who + ": max_seqlen_per_dp_cp_rank = " + std::to_string(per_rank) +
                         ", must be >= 1");
    auto groups =
        detail::pack_next_fit(batch, per_rank * cp, who, "max_seqlen_per_dp_cp_rank x CP");
    const std::int64_t dp = cost.pipelines() / cp;
    const std::int64_t multiple =
        dp * (cost.grid().virtual_stages > 1 ? cost.grid().pipeline : std::int64_t{1});
    split_to_multiple(groups, static_cast<std::size_t>(multiple));
    const std::int64_t m = static_cast<std::int64_t>(groups.size()) / dp;
    return detail::deal_round_robin(cost, batch, groups, cp, m, setting,
                                    who + " (CP " + std::to_string(cp) + ", " +
                                        std::to_string(per_rank * cp) + "-token groups, " +
                                        to_string(recompute) + " recompute)");
  }

  /// Upstream's fix-up: while the group count is not a multiple of `multiple`, the last sample of
  /// the last group holding more than one moves into a new group at the end; the first group is
  /// never split (upstream asserts "Not enough samples to move"; this throws invalid_spec).
  static void split_to_multiple(std::vector<std::vector<std::size_t>>& groups,
                                std::size_t multiple) {
    if (groups.size() % multiple == 0) return;
    std::size_t to_move = multiple - groups.size() % multiple;
    std::size_t i = groups.size() - 1;
    while (to_move > 0) {
      if (i == 0)
        throw invalid_spec("megatron-packing: not enough samples to move: " +
                           std::to_string(groups.size()) + " groups cannot reach a multiple of " +
                           std::to_string(multiple) + " (DP x micro-batch group size)");
      if (groups[i].size() > 1) {
        const auto moved = groups[i].back();
        groups[i].pop_back();
        groups.push_back({moved});
        --to_move;
      } else {
        --i;
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// 3. WLB-LLM with PP

struct wlb_pipeline_options {
  std::int64_t context_tokens = 0;  ///< W, the context window; 0: the first step's longest
  std::int64_t degree = 0;          ///< CP; 0: the fastest on the first step (fastest_degree)
  std::int64_t max_tokens = 0;      ///< S_max; 0: min(2 W, degree x pipeline_tokens_cap)
  std::int64_t micro_batches = 0;   ///< N per step; 0: from the first step (see plan_step)
  std::vector<std::int64_t> thresholds{};  ///< outlier levels; empty: wlb_default_thresholds(W)
  pipeline_recompute recompute = pipeline_recompute::full;
};

/// One step of WLB-LLM: its plan, and every sample still waiting after it (queued outliers and
/// documents carried over), by id.
struct wlb_pipeline_step {
  pipeline_peer_plan plan;
  std::vector<std::uint64_t> waiting;
};

/// WLB-LLM's packing and outlier delay across steps. Sample ids must be unique over the steps a
/// sample may wait through.
class wlb_llm_pipeline {
 public:
  explicit wlb_llm_pipeline(pipeline_cost_model cost, wlb_pipeline_options options = {})
      : cost_(std::move(cost)), options_(std::move(options)) {}

  /// Plans one step of `batch`: its outliers join the queues, full levels release N each, and
  /// the documents carried over from the last step, the rest of `batch` and the released
  /// outliers are packed into N micro-batches. On the first step the layout is fixed: W, CP
  /// degree, S_max, N = ceil(tokens / W) rounded up to whole rounds of the D / CP groups (and to
  /// a multiple of p x groups under interleaving), and the levels. Throws sample_does_not_fit
  /// naming a document above S_max.
  [[nodiscard]] wlb_pipeline_step plan_step(std::span<const sample> batch) {
    validate_batch(batch);
    if (!queues_) configure(batch);
    std::int64_t tokens = 0;
    for (const auto& s : batch) {
      check_fits(s);
      tokens += s.tokens;
    }
    largest_step_tokens_ = std::max(largest_step_tokens_, tokens);
    auto candidates = std::move(carried_);
    carried_.clear();
    for (auto& s : queues_->hold(batch)) candidates.push_back(std::move(s));
    for (auto& s : queues_->release(micro_batches_)) candidates.push_back(std::move(s));
    return {pack_step(std::move(candidates)), waiting()};
  }

  /// The steps that train what is still carried over or queued, oldest outliers first, each of
  /// at most the largest step's tokens besides the carried documents; none when nothing waits.
  [[nodiscard]] std::vector<pipeline_peer_plan> flush() {
    std::vector<pipeline_peer_plan> steps;
    if (!queues_) return steps;
    while (!carried_.empty() || queues_->queued_tokens() > 0) {
      auto candidates = std::move(carried_);
      carried_.clear();
      for (auto& s : queues_->drain(std::max<std::int64_t>(1, largest_step_tokens_)))
        candidates.push_back(std::move(s));
      steps.push_back(pack_step(std::move(candidates)));
    }
    return steps;
  }

  [[nodiscard]] std::int64_t degree() const noexcept { return degree_; }
  [[nodiscard]] std::int64_t max_tokens() const noexcept { return max_tokens_; }
  [[nodiscard]] std::int64_t context_tokens() const noexcept { return context_; }
  [[nodiscard]] std::int64_t micro_batches() const noexcept { return micro_batches_; }
  /// The outlier levels' lower bounds (empty before the first step).
  [[nodiscard]] std::vector<std::int64_t> thresholds() const {
    return queues_ ? queues_->thresholds() : std::vector<std::int64_t>{};
  }

 private:
  struct micro_batch {
    std::vector<sample> documents;
    std::int64_t tokens = 0;
    double workload = 0;
  };

  void configure(std::span<const sample> first) {
    const std::string who = "wlb-llm-pipeline";
    context_ =
        options_.context_tokens > 0 ? options_.context_tokens : detail::longest_tokens(first);
    const auto setting = detail::setting_of(cost_, options_.recompute);
    if (options_.degree > 0) {
      detail::check_degree(cost_, options_.degree, who, "degree");
      degree_ = options_.degree;
    } else {
      degree_ = fastest_degree(first);
    }
    groups_ = cost_.pipelines() / degree_;
    max_tokens_ =
        options_.max_tokens > 0
            ? options_.max_tokens
            : std::min(2 * context_, degree_ * pipeline_tokens_cap(cost_, setting, degree_));
    std::int64_t tokens = 0;
    for (const auto& s : first) tokens += s.tokens;
    const std::int64_t round =
        groups_ * (cost_.grid().virtual_stages > 1 ? cost_.grid().pipeline : std::int64_t{1});
    micro_batches_ = options_.micro_batches > 0
                         ? options_.micro_batches
                         : std::max<std::int64_t>(1, (tokens + context_ - 1) / context_);
    micro_batches_ = (micro_batches_ + round - 1) / round * round;
    queues_.emplace(options_.thresholds.empty() ? wlb_default_thresholds(context_)
                                                : options_.thresholds);
  }

  /// The tuned CP degree (ours, as wlb_llm's): every power-of-two degree dividing D whose group
  /// holds the context window under the run's recomputation, the first step planned at each and
  /// timed by the executor; the fastest.
  [[nodiscard]] std::int64_t fastest_degree(std::span<const sample> first) const {
    const auto setting = detail::setting_of(cost_, options_.recompute);
    const sample window = text_sample(0, context_);
    std::int64_t best =
        megatron_4d_sized(cost_, std::span(&window, 1), options_.recompute).context_parallel;
    double best_makespan = std::numeric_limits<double>::infinity();
    for (std::int64_t c = best; c <= cost_.pipelines() && cost_.pipelines() % c == 0; c *= 2) {
      if (c * pipeline_tokens_cap(cost_, setting, c) < context_) continue;
      auto options = options_;
      options.degree = c;
      wlb_llm_pipeline trial(cost_, std::move(options));
      const double makespan = simulate_peer(cost_, trial.plan_step(first).plan).makespan;
      if (makespan < best_makespan) {
        best_makespan = makespan;
        best = c;
      }
    }
    return best;
  }

  void check_fits(const sample& s) const {
    if (s.tokens > max_tokens_)
      throw sample_does_not_fit("wlb-llm-pipeline: sample " + std::to_string(s.id) + " (" +
                                std::to_string(s.tokens) +
                                " tokens) is longer than S_max = " + std::to_string(max_tokens_) +
                                " tokens at CP " + std::to_string(degree_));
  }

  /// W_a + W_l: the cost model's marginal seconds of the document at the CP degree, every chunk.
  [[nodiscard]] double predicted(const sample& s) const {
    const auto shape = micro_batch_shape::of(s);
    double seconds = 0;
    for (std::int64_t c = 0; c < cost_.grid().chunks(); ++c) {
      const auto b = cost_.marginal(shape, degree_, recompute_setting::none(), c);
      seconds += b.forward + b.backward;
    }
    return seconds;
  }

  /// Algorithm 1 over N micro-batches, the leftovers carried to the next step; then the
  /// micro-batches laid out on the groups.
  [[nodiscard]] pipeline_peer_plan pack_step(std::vector<sample> candidates) {
    std::stable_sort(candidates.begin(), candidates.end(), [](const sample& a, const sample& b) {
      return a.tokens != b.tokens ? a.tokens > b.tokens : a.id < b.id;
    });
    std::vector<micro_batch> batches(static_cast<std::size_t>(micro_batches_));
    for (auto& s : candidates) {
      const auto target = place(batches, s.tokens);
      if (!target) {
        carried_.push_back(std::move(s));
        continue;
      }
      auto& mb = batches[*target];
      mb.tokens += s.tokens;
      mb.workload += predicted(s);
      mb.documents.push_back(std::move(s));
    }
    return lay_out(std::move(batches));
  }

  /// The micro-batch with the least workload if the document fits there under S_max, else the
  /// one with the fewest tokens if it fits there; nullopt: carried over.
  [[nodiscard]] std::optional<std::size_t> place(const std::vector<micro_batch>& batches,
                                                 std::int64_t tokens) const {
    std::size_t least = 0;
    std::size_t shortest = 0;
    for (std::size_t b = 1; b < batches.size(); ++b) {
      if (batches[b].workload < batches[least].workload) least = b;
      if (batches[b].tokens < batches[shortest].tokens) shortest = b;
    }
    if (batches[least].tokens + tokens <= max_tokens_) return least;
    if (batches[shortest].tokens + tokens <= max_tokens_) return shortest;
    return std::nullopt;
  }

  /// Longest-processing-time first onto the groups, m = N / groups each, heaviest first within
  /// a group.
  [[nodiscard]] pipeline_peer_plan lay_out(std::vector<micro_batch> batches) const {
    const std::int64_t m = micro_batches_ / groups_;
    std::vector<std::size_t> order(batches.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return batches[a].workload > batches[b].workload;
    });
    std::vector<double> load(static_cast<std::size_t>(groups_), 0.0);
    std::vector<std::int64_t> used(static_cast<std::size_t>(groups_), 0);
    const auto setting = detail::setting_of(cost_, options_.recompute);
    pipeline_peer_plan plan{"wlb-llm-pipeline (CP " + std::to_string(degree_) + ", S_max " +
                                std::to_string(max_tokens_) + ", N " +
                                std::to_string(micro_batches_) + ", " +
                                to_string(options_.recompute) + " recompute)",
                            {},
                            m};
    for (const auto b : order) {
      std::size_t group = 0;
      for (std::size_t g = 0; g < load.size(); ++g)
        if (used[g] < m && (used[group] >= m || load[g] < load[group])) group = g;
      auto mb = detail::empty_micro_batch(cost_, static_cast<std::int64_t>(group) * degree_,
                                          degree_, used[group], setting);
      for (const auto& s : batches[b].documents) {
        mb.sample_ids.push_back(s.id);
        mb.shape += micro_batch_shape::of(s);
      }
      load[group] += batches[b].workload;
      ++used[group];
      plan.micro_batches.push_back(std::move(mb));
    }
    return plan;
  }

  [[nodiscard]] std::vector<std::uint64_t> waiting() const {
    std::vector<std::uint64_t> ids;
    for (const auto& s : carried_) ids.push_back(s.id);
    for (std::size_t level = 0; level < queues_->levels(); ++level)
      for (const auto& s : queues_->queued(level)) ids.push_back(s.id);
    return ids;
  }

  pipeline_cost_model cost_;
  wlb_pipeline_options options_;
  std::optional<wlb_outlier_queues> queues_;
  std::vector<sample> carried_;
  std::int64_t context_ = 0;
  std::int64_t degree_ = 1;
  std::int64_t groups_ = 1;
  std::int64_t max_tokens_ = 0;
  std::int64_t micro_batches_ = 1;
  std::int64_t largest_step_tokens_ = 0;
};

// ---------------------------------------------------------------------------------------------
// 4. DynaPipe

struct dynapipe_pipeline {
  /// Seeds the random order inside each k-means cluster (upstream draws from numpy's global
  /// generator).
  std::uint64_t seed = 0;

  friend bool operator==(const dynapipe_pipeline&, const dynapipe_pipeline&) = default;

  /// Throws invalid_spec under interleaving (DynaPipe refuses it for decoder-only models),
  /// sample_does_not_fit naming the longest sample where no partition fits memory, and
  /// invalid_plan where no order of a replica's micro-batches fits memory.
  [[nodiscard]] pipeline_peer_plan plan(const pipeline_cost_model& cost,
                                        std::span<const sample> batch) const {
    validate_batch(batch);
    if (cost.grid().virtual_stages > 1)
      throw invalid_spec(
          "dynapipe: virtual_stages = " + std::to_string(cost.grid().virtual_stages) +
          ": interleaved schedules with decoder-only models are not supported "
          "(DynaPipe's generate_microbatches)");
    if (batch.empty()) return {"dynapipe", {}, 0};
    const auto order = sorted_order(batch);
    const auto partition = partition_memory_aware(cost, batch, order);
    const auto replicas = karmarkar_karp(partition.costs, cost.pipelines());
    return lay_out(cost, batch, order, partition, replicas);
  }

  /// One consecutive range [begin, end) of the sorted order and its cost.
  struct range {
    std::size_t begin = 0;
    std::size_t end = 0;
  };

  struct partition_result {
    std::vector<range> ranges;
    std::vector<double> costs;
    recompute_setting recompute;
  };

  /// DynaPipe's decoder-only order: by length, longest first (Python's reverse sort of
  /// (length, 0, index) tuples: equal lengths by the larger index first).
  [[nodiscard]] static std::vector<std::size_t> sorted_order(std::span<const sample> batch) {
    std::vector<std::size_t> order(batch.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return batch[a].tokens != batch[b].tokens ? batch[a].tokens > batch[b].tokens : a > b;
    });
    return order;
  }

  /// The micro-batch of a range as DynaPipe runs it: each sample padded to the range's longest,
  /// rounded up to a multiple of 8 (round_seqlen_multiple).
  [[nodiscard]] static micro_batch_shape padded_shape(std::span<const sample> batch,
                                                      const std::vector<std::size_t>& order,
                                                      range r) {
    const auto& longest = batch[order[r.begin]];
    sample padded = longest;
    padded.tokens = (longest.tokens + 7) / 8 * 8;
    padded.video.reset();
    const auto one = micro_batch_shape::of(padded);
    const auto count = static_cast<std::int64_t>(r.end - r.begin);
    return {count, count * one.tokens, one.tokens,
            static_cast<double>(count) * one.attention_pairs};
  }

 private:
  /// A range's stage time (DynaPipe's c: forward and backward of a stage's layers, with the
  /// LM head on the last), the bytes it keeps and its peak on the worst stage.
  struct range_cost {
    double seconds = 0;
    double stored = 0;
    double peak = 0;
  };

  [[nodiscard]] static range_cost cost_of(const pipeline_cost_model& cost,
                                          const micro_batch_shape& shape, recompute_setting r) {
    range_cost out;
    for (std::int64_t c = 0; c < cost.grid().chunks(); ++c) {
      const auto b = cost.chunk(shape, 1, r, c);
      out.seconds = std::max(out.seconds, b.forward + b.backward);
      out.stored = std::max(out.stored, b.stored_bytes);
      out.peak = std::max(out.peak, b.stored_bytes + b.working_bytes);
    }
    return out;
  }

  /// optimizer.py's loop: the per-micro-batch limit available / p, then available; within each,
  /// recomputation none, selective, full; the first that partitions the batch.
  [[nodiscard]] static partition_result partition_memory_aware(
      const pipeline_cost_model& cost, std::span<const sample> batch,
      const std::vector<std::size_t>& order) {
    double states = 0;
    for (std::int64_t s = 0; s < cost.grid().pipeline; ++s)
      states = std::max(states, cost.state_bytes(s));
    const double available = cost.memory_budget() - states;
    const double preferred = available / static_cast<double>(cost.grid().pipeline);
    for (const double limit : {preferred, available})
      for (const auto granularity :
           {pipeline_recompute::none, pipeline_recompute::selective, pipeline_recompute::full}) {
        const auto r = detail::setting_of(cost, granularity);
        auto found = consecutive_partition(cost, batch, order, r, limit, available);
        if (!found.ranges.empty()) return found;
      }
    const auto& longest = batch[order.front()];
    throw sample_does_not_fit("dynapipe: sample " + std::to_string(longest.id) + " (" +
                              std::to_string(longest.tokens) +
                              " tokens) fits no micro-batch on one pipeline with every layer "
                              "recomputed; " +
                              dcp::detail::format_gib(available) + " available for activations");
  }

  /// dp_helper.cpp: every feasible range's cost (a range stops growing at the first that passes
  /// the limits), the t_max candidates (those costs, sorted, 5 ms apart: MIN_TMAX_INTERVAL
  /// in the profiles' milliseconds), for each the least sum of costs of a partition into ranges
  /// of cost <= t_max, and the t_max minimising (p - 1) t_max + sum / D. Empty when none.
  [[nodiscard]] static partition_result consecutive_partition(const pipeline_cost_model& cost,
                                                              std::span<const sample> batch,
                                                              const std::vector<std::size_t>& order,
                                                              recompute_setting r,
                                                              double stored_limit,
                                                              double peak_limit) {
    const std::size_t n = order.size();
    // seconds[i][k]: the range [i, i + k + 1); rows end at the first infeasible range.
    std::vector<std::vector<double>> seconds(n);
    std::vector<double> candidates;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j <= n; ++j) {
        const auto c = cost_of(cost, padded_shape(batch, order, {i, j}), r);
        if (c.stored > stored_limit || c.peak > peak_limit) break;
        seconds[i].push_back(c.seconds);
        candidates.push_back(c.seconds);
      }
    std::sort(candidates.begin(), candidates.end());
    constexpr double min_t_max_interval = 0.005;  // dp_helper.cpp: 5 (ms)
    std::vector<double> t_max;
    for (const double t : candidates)
      if (t_max.empty() || t - t_max.back() > min_t_max_interval) t_max.push_back(t);
    const double stages_less_one = static_cast<double>(cost.grid().pipeline - 1);
    const double replicas = static_cast<double>(cost.pipelines());
    double best_objective = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> best_cuts;
    for (const double t : t_max) {
      // f[k]: the least sum over a partition of the first k samples; from[k] its last cut.
      std::vector<double> f(n + 1, std::numeric_limits<double>::infinity());
      std::vector<std::size_t> from(n + 1, n + 1);
      f[0] = 0;
      for (std::size_t end = 1; end <= n; ++end)
        for (std::size_t i = end; i-- > 0;) {
          // [i, end) grows as i falls: once infeasible or above t_max, so are all wider.
          if (end - i > seconds[i].size()) break;
          const double c = seconds[i][end - i - 1];
          if (c > t) break;
          if (f[i] + c <= f[end]) {
            f[end] = f[i] + c;
            from[end] = i;
          }
        }
      if (!std::isfinite(f[n])) continue;
      const double objective = stages_less_one * t + f[n] / replicas;
      if (objective < best_objective) {
        best_objective = objective;
        best_cuts.clear();
        for (std::size_t k = n; k > 0; k = from[k]) best_cuts.push_back(k);
        best_cuts.push_back(0);
        std::reverse(best_cuts.begin(), best_cuts.end());
      }
    }
    partition_result out;
    out.recompute = r;
    for (std::size_t k = 0; k + 1 < best_cuts.size(); ++k) {
      out.ranges.push_back({best_cuts[k], best_cuts[k + 1]});
      out.costs.push_back(seconds[best_cuts[k]][best_cuts[k + 1] - best_cuts[k] - 1]);
    }
    return out;
  }

  /// prtpy's Karmarkar-Karp (largest differencing) over `bins`: each item a partition of its own,
  /// the two partitions with the largest spread merged, the heaviest subset of one with the
  /// lightest of the other, until one is left. Each bin's items in index order.
  [[nodiscard]] static std::vector<std::vector<std::size_t>> karmarkar_karp(
      const std::vector<double>& costs, std::int64_t bins) {
    struct partition {
      std::vector<double> sums;                     // heaviest first
      std::vector<std::vector<std::size_t>> items;  // with sums
      std::size_t order = 0;                        // ties: the earlier first
    };
    const auto spread = [](const partition& p) { return p.sums.front() - p.sums.back(); };
    const auto lower = [&](const partition& a, const partition& b) {
      return spread(a) != spread(b) ? spread(a) < spread(b) : a.order > b.order;
    };
    std::priority_queue<partition, std::vector<partition>, decltype(lower)> heap(lower);
    const auto k = static_cast<std::size_t>(bins);
    std::size_t made = 0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
      partition p{std::vector<double>(k, 0.0), std::vector<std::vector<std::size_t>>(k), made++};
      p.sums[0] = costs[i];
      p.items[0].push_back(i);
      heap.push(std::move(p));
    }
    while (heap.size() > 1) {
      auto a = heap.top();
      heap.pop();
      auto b = heap.top();
      heap.pop();
      partition merged{std::vector<double>(k), std::vector<std::vector<std::size_t>>(k), made++};
      std::vector<std::size_t> by_sum(k);
      for (std::size_t s = 0; s < k; ++s) {
        merged.sums[s] = a.sums[s] + b.sums[k - 1 - s];
        merged.items[s] = a.items[s];
        merged.items[s].insert(merged.items[s].end(), b.items[k - 1 - s].begin(),
                               b.items[k - 1 - s].end());
        by_sum[s] = s;
      }
      std::stable_sort(by_sum.begin(), by_sum.end(), [&](std::size_t x, std::size_t y) {
        return merged.sums[x] > merged.sums[y];
      });
      partition sorted{{}, {}, merged.order};
      for (const auto s : by_sum) {
        sorted.sums.push_back(merged.sums[s]);
        sorted.items.push_back(std::move(merged.items[s]));
      }
      heap.push(std::move(sorted));
    }
    auto bins_out = heap.empty() ? std::vector<std::vector<std::size_t>>(k) : heap.top().items;
    for (auto& bin : bins_out) std::sort(bin.begin(), bin.end());
    return bins_out;
  }

  /// The replicas' micro-batches on pipelines 0 .. D - 1, each replica in the order its search
  /// keeps, padded at the end with empty micro-batches to the largest count.
  [[nodiscard]] pipeline_peer_plan lay_out(
      const pipeline_cost_model& cost, std::span<const sample> batch,
      const std::vector<std::size_t>& order, const partition_result& partition,
      const std::vector<std::vector<std::size_t>>& replicas) const {
    std::int64_t m = 1;
    for (const auto& r : replicas) m = std::max(m, static_cast<std::int64_t>(r.size()));
    pipeline_peer_plan plan{"dynapipe (" + to_string(partition.recompute) + " recompute, " +
                                std::to_string(partition.ranges.size()) + " micro-batches)",
                            {},
                            m};
    for (std::size_t replica = 0; replica < replicas.size(); ++replica) {
      std::vector<pipeline_micro_batch> mine;
      for (const auto k : replicas[replica]) {
        const auto r = partition.ranges[k];
        auto mb = detail::empty_micro_batch(cost, 0, 1, 0, partition.recompute);
        for (std::size_t i = r.begin; i < r.end; ++i) mb.sample_ids.push_back(batch[order[i]].id);
        mb.shape = padded_shape(batch, order, r);
        mine.push_back(std::move(mb));
      }
      const auto kept = order_replica(cost, mine, m, replica);
      for (std::size_t position = 0; position < kept.size(); ++position) {
        auto mb = std::move(mine[kept[position]]);
        mb.first_pipeline = static_cast<std::int64_t>(replica);
        mb.slot = static_cast<std::int64_t>(position);
        plan.micro_batches.push_back(std::move(mb));
      }
      for (auto slot = static_cast<std::int64_t>(kept.size()); slot < m; ++slot)
        plan.micro_batches.push_back(detail::empty_micro_batch(
            cost, static_cast<std::int64_t>(replica), 1, slot, partition.recompute));
    }
    return plan;
  }

  /// execution_planner.py: the orders to try (every cluster permutation with a random order
  /// inside each cluster, or every permutation of at most 4 micro-batches, and the original), the
  /// fastest the executor times on one pipeline within the memory budget.
  [[nodiscard]] std::vector<std::size_t> order_replica(
      const pipeline_cost_model& cost, const std::vector<pipeline_micro_batch>& mine,
      std::int64_t m, std::size_t replica) const {
    if (mine.empty()) return {};
    auto base = pipeline_instance_of(cost, std::span<const pipeline_micro_batch>(mine), m);
    base.pipelines = 1;
    for (std::int64_t slot = static_cast<std::int64_t>(mine.size()); slot < m; ++slot) {
      const auto empty = detail::empty_micro_batch(cost, 0, 1, slot, mine.front().recompute[0]);
      base.work.push_back(
          pipeline_instance_of(cost, std::span<const pipeline_micro_batch>(&empty, 1), m)
              .work.front());
    }
    std::optional<std::vector<std::size_t>> best;
    double best_makespan = std::numeric_limits<double>::infinity();
    for (const auto& candidate : candidate_orders(base, mine.size(), replica)) {
      auto instance = base;
      for (std::size_t position = 0; position < candidate.size(); ++position)
        instance.work[candidate[position]].slot = static_cast<std::int64_t>(position);
      const auto timeline = simulate_pipeline(instance);
      if (timeline.peak() > cost.memory_budget()) continue;
      if (timeline.makespan < best_makespan) {
        best_makespan = timeline.makespan;
        best = candidate;
      }
    }
    if (!best)
      throw invalid_plan("dynapipe: no order of replica " + std::to_string(replica) + "'s " +
                         std::to_string(mine.size()) + " micro-batches fits the memory budget");
    return *best;
  }

  [[nodiscard]] std::vector<std::vector<std::size_t>> candidate_orders(
      const pipeline_instance& base, std::size_t count, std::size_t replica) const {
    std::vector<std::vector<std::size_t>> out;
    std::vector<std::size_t> original(count);
    std::iota(original.begin(), original.end(), std::size_t{0});
    const std::size_t clusters = count > 20 ? 3 : 4;  // execution_planner.py's perm_clusters
    if (count <= clusters) {
      auto perm = original;
      do out.push_back(perm);
      while (std::next_permutation(perm.begin(), perm.end()));
    } else {
      const auto groups = k_means(base, count, clusters);
      std::vector<std::size_t> labels(groups.size());
      std::iota(labels.begin(), labels.end(), std::size_t{0});
      std::uint64_t state = seed ^ (0x9e3779b97f4a7c15ULL * (replica + 1));
      do {
        std::vector<std::size_t> order;
        for (const auto label : labels) {
          auto members = groups[label];
          shuffle(members, state);
          order.insert(order.end(), members.begin(), members.end());
        }
        out.push_back(std::move(order));
      } while (std::next_permutation(labels.begin(), labels.end()));
    }
    out.push_back(original);
    return out;
  }

  /// Lloyd's k-means on (first-stage forward, last-stage forward, first-stage backward,
  /// last-stage backward), centres started at evenly spaced ranks of the total; the non-empty
  /// clusters. (Upstream: scikit-learn's KMeans, random_state 0.)
  [[nodiscard]] static std::vector<std::vector<std::size_t>> k_means(const pipeline_instance& base,
                                                                     std::size_t count,
                                                                     std::size_t clusters) {
    using point = std::array<double, 4>;
    std::vector<point> points(count);
    for (std::size_t k = 0; k < count; ++k) {
      const auto& w = base.work[k];
      points[k] = {w.forward.front(), w.forward.back(), w.backward.front(), w.backward.back()};
    }
    std::vector<std::size_t> by_total(count);
    std::iota(by_total.begin(), by_total.end(), std::size_t{0});
    const auto total = [&](std::size_t k) {
      return points[k][0] + points[k][1] + points[k][2] + points[k][3];
    };
    std::stable_sort(by_total.begin(), by_total.end(),
                     [&](std::size_t a, std::size_t b) { return total(a) < total(b); });
    std::vector<point> centres(clusters);
    for (std::size_t c = 0; c < clusters; ++c)
      centres[c] = points[by_total[(2 * c + 1) * count / (2 * clusters)]];
    std::vector<std::size_t> label(count, 0);
    for (int round = 0; round < 100; ++round) {
      bool moved = false;
      for (std::size_t k = 0; k < count; ++k) {
        std::size_t nearest = 0;
        double nearest_distance = std::numeric_limits<double>::infinity();
        for (std::size_t c = 0; c < clusters; ++c) {
          double d = 0;
          for (std::size_t x = 0; x < 4; ++x)
            d += (points[k][x] - centres[c][x]) * (points[k][x] - centres[c][x]);
          if (d < nearest_distance) {
            nearest_distance = d;
            nearest = c;
          }
        }
        moved = moved || label[k] != nearest;
        label[k] = nearest;
      }
      if (!moved && round > 0) break;
      for (std::size_t c = 0; c < clusters; ++c) {
        point sum{};
        std::size_t members = 0;
        for (std::size_t k = 0; k < count; ++k)
          if (label[k] == c) {
            for (std::size_t x = 0; x < 4; ++x) sum[x] += points[k][x];
            ++members;
          }
        if (members > 0)
          for (std::size_t x = 0; x < 4; ++x) centres[c][x] = sum[x] / static_cast<double>(members);
      }
    }
    std::vector<std::vector<std::size_t>> groups(clusters);
    for (std::size_t k = 0; k < count; ++k) groups[label[k]].push_back(k);
    std::erase_if(groups, [](const std::vector<std::size_t>& g) { return g.empty(); });
    return groups;
  }

  /// Fisher-Yates with splitmix64.
  static void shuffle(std::vector<std::size_t>& items, std::uint64_t& state) {
    for (std::size_t k = items.size(); k > 1; --k) {
      state += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      std::swap(items[k - 1], items[static_cast<std::size_t>(z % k)]);
    }
  }
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
