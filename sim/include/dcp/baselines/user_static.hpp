#pragma once
// The static layouts users configure, as policies: what "my setup" is when someone asks how
// much faster dcp is than it. Not a peer's algorithm and not tuned per batch: one degree and
// one recompute setting for the whole run, samples packed in the data loader's order, packs
// dealt round-robin over the data-parallel groups. How a user picks the degree and the budget
// is user_static_rules.hpp; docs/baselines.md cites the flags.
//
//  - megatron_static: Megatron-LM with `--context-parallel-size d`, `--seq-length L` and
//    `--recompute-granularity full` (or `selective`): every micro-batch is one window of at
//    most L tokens, filled with whole samples in arrival order (a sample that does not fit the
//    open window closes it and opens the next; packed-sequence training, THD format); window w
//    goes to data-parallel group w mod (GPUs / d), as Megatron's pretraining sampler deals a
//    global batch; the groups run their windows back to back and meet at the gradient
//    all-reduce (the step's barrier). `--thd-max-packed-sequences n` (Megatron-LM dev: caps the
//    real sequences per packed bin) closes a window at n samples. With a Ulysses scenario the CP
//    group exchanges by all-to-all (`--cp-comm-type a2a`); with ring, by ring attention (p2p, the
//    default).
//  - ulysses_static: DeepSpeed-Ulysses with `sequence_parallel_size d` and token-based
//    batching: a micro-batch takes samples in arrival order until the next would pass the
//    group's token budget (tokens_per_rank × d), then the next micro-batch opens; dealt
//    round-robin over the GPUs / d data-parallel groups; every layer recomputed (activation
//    checkpointing on, as long-sequence DeepSpeed recipes set it).
//
// Arrival order is sample id order (the workloads number samples in draw order; chunks of a
// split document take fresh ids after the batch's), so the plan does not depend on the order
// the batch is passed in. Samples of different bucket labels (video grids) never share a
// micro-batch: each label keeps its own open window, as a bucketed video loader does.
// A sample longer than the window (or the budget) runs alone in its own window at the run's
// degree; it may then exceed the memory (the simulator counts an OOM) — with the rules'
// configuration none is, since the window is the longest sample the workload draws.
// Memory: these policies do not keep placement_policy's budget requirement (a user's layout
// is sized against the GPU, not our budget); the rules size them so that the truth model's
// peak stays within the GPU's memory.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// Megatron-LM's `--recompute-granularity`: full (every layer) or selective (core attention).
enum class recompute_granularity { full, selective };

[[nodiscard]] constexpr std::string_view to_string(recompute_granularity g) noexcept {
  return g == recompute_granularity::full ? "full" : "selective";
}

[[nodiscard]] inline recompute_setting setting_of(recompute_granularity g,
                                                  std::int64_t layers) noexcept {
  return g == recompute_granularity::full ? recompute_setting::full(layers)
                                          : recompute_setting::selective_only();
}

struct megatron_static {
  std::int64_t context_parallel_size = 1;  ///< `--context-parallel-size`
  std::int64_t seq_length = 0;             ///< `--seq-length`: tokens of one packed window
  recompute_granularity recompute = recompute_granularity::full;  ///< `--recompute-granularity`
  /// `--thd-max-packed-sequences`: at most this many samples per window; 0: no limit.
  std::int64_t max_packed_sequences = 0;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept {
    return recompute == recompute_granularity::full ? "megatron-static" : "megatron-static-sel";
  }
  friend bool operator==(const megatron_static&, const megatron_static&) = default;
};

struct ulysses_static {
  std::int64_t sequence_parallel_size = 1;  ///< DeepSpeed's `sequence_parallel_size`
  std::int64_t tokens_per_rank = 0;         ///< token budget per GPU of a micro-batch

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "ulysses-static"; }
  friend bool operator==(const ulysses_static&, const ulysses_static&) = default;
};

namespace detail {

/// Packs the problem's samples in arrival (id) order into micro-batches of at most `limit`
/// tokens (and at most `max_samples` samples, 0: any), one open pack per bucket label; packs in
/// the order they were opened.
template <class Context>
[[nodiscard]] std::vector<std::vector<std::size_t>> pack_in_arrival_order(
    const Context& ctx, std::int64_t limit, std::int64_t max_samples = 0) {
  std::vector<std::size_t> order(ctx.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto& samples = ctx.samples();
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return samples[a].id < samples[b].id; });
  std::vector<std::vector<std::size_t>> packs;
  std::vector<std::int64_t> pack_tokens;
  std::vector<std::pair<std::int32_t, std::size_t>> open;  // label -> index of its open pack
  for (auto i : order) {
    const auto label = ctx.bucket(i);
    const auto tokens = samples[i].tokens;
    auto at =
        std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == label; });
    if (at != open.end() && pack_tokens[at->second] + tokens <= limit &&
        (max_samples < 1 || static_cast<std::int64_t>(packs[at->second].size()) < max_samples)) {
      packs[at->second].push_back(i);
      pack_tokens[at->second] += tokens;
      continue;
    }
    packs.push_back({i});
    pack_tokens.push_back(tokens);
    if (at != open.end())
      at->second = packs.size() - 1;
    else
      open.emplace_back(label, packs.size() - 1);
  }
  return packs;
}

/// Pack w runs on data-parallel group w mod (GPUs / degree), each group's packs back to back,
/// every one with the fixed recompute setting.
template <class Context>
[[nodiscard]] placement deal_round_robin(const Context& ctx, std::size_t k,
                                         const std::vector<std::vector<std::size_t>>& packs,
                                         recompute_setting setting, std::string policy) {
  placement out;
  rank_clock clock(ctx.gpus());
  const auto degree = ctx.degree(k);
  const auto groups = ctx.gpus() / degree;
  for (std::size_t w = 0; w < packs.size(); ++w) {
    const auto group = static_cast<std::int64_t>(w) % groups;
    const auto run = ctx.run(shape_of(ctx, packs[w]), k, setting);
    append_step(out, clock, ctx, group * degree, k, packs[w], run);
  }
  out.policy = std::move(policy);
  return out;
}

template <class Context>
[[nodiscard]] std::size_t fixed_degree_index(const Context& ctx, std::string_view policy,
                                             std::string_view knob, std::int64_t degree) {
  const auto k = degree_index_of(ctx, degree);
  if (k == ctx.degrees().size())
    throw invalid_spec(
        std::string(policy) + ": " + std::string(knob) + " = " + std::to_string(degree) +
        " is not a degree this cluster and model allow (a power of two up to the GPU "
        "count; Ulysses: dividing the head count)");
  return k;
}

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement megatron_static::place(const placement_input<M, R>& input) const {
  if (seq_length < 1)
    throw invalid_spec("megatron-static: seq_length = " + std::to_string(seq_length) +
                       ", must be >= 1");
  const auto k =
      detail::fixed_degree_index(input, name(), "context_parallel_size", context_parallel_size);
  if (input.size() == 0) return placement{{}, 0, 0, 0, std::string(name())};
  if (max_packed_sequences < 0)
    throw invalid_spec("megatron-static: max_packed_sequences = " +
                       std::to_string(max_packed_sequences) + ", must be >= 0 (0: no limit)");
  const auto windows = detail::pack_in_arrival_order(input, seq_length, max_packed_sequences);
  return detail::deal_round_robin(
      input, k, windows, setting_of(recompute, input.cost().model().layers),
      std::string(name()) + " (CP " + std::to_string(context_parallel_size) + ", " +
          std::to_string(seq_length) + "-token windows" +
          (max_packed_sequences > 0
               ? " of at most " + std::to_string(max_packed_sequences) + " samples"
               : "") +
          ", " + std::string(to_string(recompute)) + " recompute, round-robin)");
}

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement ulysses_static::place(const placement_input<M, R>& input) const {
  if (tokens_per_rank < 1)
    throw invalid_spec("ulysses-static: tokens_per_rank = " + std::to_string(tokens_per_rank) +
                       ", must be >= 1");
  const auto k =
      detail::fixed_degree_index(input, name(), "sequence_parallel_size", sequence_parallel_size);
  if (input.size() == 0) return placement{{}, 0, 0, 0, std::string(name())};
  const auto budget = dcp::detail::checked_mul(tokens_per_rank, sequence_parallel_size);
  if (!budget)
    throw invalid_spec("ulysses-static: tokens_per_rank = " + std::to_string(tokens_per_rank) +
                       " times SP " + std::to_string(sequence_parallel_size) + " passes int64");
  const auto batches = detail::pack_in_arrival_order(input, *budget);
  return detail::deal_round_robin(
      input, k, batches, recompute_setting::full(input.cost().model().layers),
      "ulysses-static (SP " + std::to_string(sequence_parallel_size) + ", " +
          std::to_string(tokens_per_rank) + " tokens per rank, full recompute, round-robin)");
}

static_assert(placement_policy<megatron_static, analytic_cost_model, pyramid_recompute>);
static_assert(placement_policy<ulysses_static, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
