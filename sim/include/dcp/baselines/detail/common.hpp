#pragma once
// Shared machinery of the peers' policies (dcp::baselines): the recompute a peer's micro-batch
// runs with, splitting a micro-batch by bucket label, the per-GPU token capacity that token-cap
// peers derive their caps from, and a clock of rank free times that turns ordered group work
// into non-overlapping micro-steps.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/detail/largest_fitting.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/input.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines::detail {

using dcp::degree_option;

/// How a peer's micro-batch runs at degree index k: the recompute strategy's setting, or — when
/// the strategy has none that fits (the peer packed more than the budget holds, which only a
/// memory-aware planner avoids) — every layer recomputed, whatever the bytes. Such a micro-step
/// may exceed the budget: that is the peer's behaviour, counted by the simulator as an OOM.
template <class Context>
[[nodiscard]] degree_option run_with_strategy(const Context& ctx, const micro_batch_shape& shape,
                                              std::size_t k) {
  auto chosen = ctx.evaluate(shape, k);
  if (chosen.feasible) return chosen;
  return ctx.run(shape, k, recompute_setting::full(ctx.cost().model().layers));
}

template <class Context>
[[nodiscard]] micro_batch_shape shape_of(const Context& ctx,
                                         const std::vector<std::size_t>& items) {
  micro_batch_shape shape;
  for (auto i : items) shape += ctx.shape(i);
  return shape;
}

/// The items of one micro-batch split by bucket label (only equal labels share a micro-batch),
/// labels in order of first appearance, items in their given order.
template <class Context>
[[nodiscard]] std::vector<std::vector<std::size_t>> split_by_bucket(
    const Context& ctx, const std::vector<std::size_t>& items) {
  std::vector<std::int32_t> labels;
  std::vector<std::vector<std::size_t>> parts;
  for (auto i : items) {
    const auto label = ctx.bucket(i);
    const auto at = std::find(labels.begin(), labels.end(), label);
    if (at == labels.end()) {
      labels.push_back(label);
      parts.push_back({i});
    } else {
      parts[static_cast<std::size_t>(at - labels.begin())].push_back(i);
    }
  }
  return parts;
}

/// Smallest degree index whose degree is at least `degree` (the last one if none is).
template <class Context>
[[nodiscard]] std::size_t degree_index_at_least(const Context& ctx, std::int64_t degree) {
  for (std::size_t k = 0; k < ctx.degrees().size(); ++k)
    if (ctx.degree(k) >= degree) return k;
  return ctx.degrees().size() - 1;
}

/// Degree index of exactly `degree`, or degrees().size() when the cluster or model forbids it.
template <class Context>
[[nodiscard]] std::size_t degree_index_of(const Context& ctx, std::int64_t degree) {
  for (std::size_t k = 0; k < ctx.degrees().size(); ++k)
    if (ctx.degree(k) == degree) return k;
  return ctx.degrees().size();
}

/// Tokens of one text sequence of `tokens` tokens as a micro-batch shape (capacity probes).
[[nodiscard]] inline micro_batch_shape text_shape(std::int64_t tokens) {
  return micro_batch_shape::of(text_sample(0, tokens));
}

/// The most tokens one GPU (degree 1) holds in one micro-batch while the recompute strategy
/// keeps its lightest setting (the one it gives an empty micro-batch: no recomputation under
/// pyramid, every layer under full): the token cap that Megatron's max_seqlen_per_dp_cp_rank,
/// verl's max_token_len, FlexSP's per-GPU capacity and WLB-LLM's S_max stand for, derived from
/// the memory budget by binary search on the cost model. 0 when not even one token fits.
/// With `setting`, the most tokens one GPU holds with that recompute setting instead.
template <class Context>
[[nodiscard]] std::int64_t per_gpu_token_capacity(
    const Context& ctx, std::optional<recompute_setting> setting = std::nullopt) {
  if (!setting) {
    const auto lightest = ctx.evaluate(micro_batch_shape{}, 0);
    if (!lightest.feasible) return 0;
    setting = lightest.recompute;
  }
  const auto fits = [&](std::int64_t tokens) {
    return ctx.runs_with(text_shape(tokens), 0, *setting).has_value();
  };
  return dcp::detail::largest_fitting(fits, std::int64_t{1} << 41);
}

/// The number of caps a tuned policy tries must be in [1, 64]: they are capacity >> j for
/// j < count, and a shift of 64 or more is undefined. Throws invalid_spec naming the policy.
inline void check_cap_candidates(std::string_view policy, std::int32_t count) {
  if (count < 1 || count > 64)
    throw invalid_spec(std::string(policy) + ": cap_candidates = " + std::to_string(count) +
                       ", must be in [1, 64]");
}

/// Token caps a tuned deployment would try (count checked by check_cap_candidates): capacity,
/// capacity / 2, ..., capacity / 2^(count-1), distinct and at least 1 (the peers' caps are
/// hand-tuned knobs; the default policies pick the fastest of these by the cost model, as
/// best_static_placement picks the static degree).
[[nodiscard]] inline std::vector<std::int64_t> cap_candidates(std::int64_t capacity,
                                                              std::int32_t count) {
  std::vector<std::int64_t> caps;
  for (std::int32_t j = 0; j < count; ++j) {
    const auto cap = std::max<std::int64_t>(capacity >> j, 1);
    if (caps.empty() || caps.back() != cap) caps.push_back(cap);
  }
  return caps;
}

/// Free time of every rank. A micro-step of a group starts when all its members are free
/// (collectives synchronise them), so appending through the clock never overlaps a rank.
class rank_clock {
 public:
  explicit rank_clock(std::int64_t gpus) : free_(static_cast<std::size_t>(gpus), 0.0) {}

  [[nodiscard]] double ready(std::int64_t first_rank, std::int64_t degree) const {
    double t = 0;
    for (auto r = first_rank; r < first_rank + degree; ++r)
      t = std::max(t, free_[static_cast<std::size_t>(r)]);
    return t;
  }
  void occupy(std::int64_t first_rank, std::int64_t degree, double until) {
    for (auto r = first_rank; r < first_rank + degree; ++r)
      free_[static_cast<std::size_t>(r)] = until;
  }
  /// Every rank waits for the slowest (a barrier over the world).
  void barrier() {
    const double t = makespan();
    std::fill(free_.begin(), free_.end(), t);
  }
  [[nodiscard]] double free_at(std::int64_t rank) const {
    return free_[static_cast<std::size_t>(rank)];
  }
  [[nodiscard]] double makespan() const {
    return free_.empty() ? 0.0 : *std::max_element(free_.begin(), free_.end());
  }
  [[nodiscard]] std::int64_t gpus() const noexcept {
    return static_cast<std::int64_t>(free_.size());
  }

 private:
  std::vector<double> free_;
};

/// Appends one micro-step of `items`, run as `run` at degree index k on ranks
/// [first_rank, first_rank + degree), when all of them are free; returns its end.
template <class Context>
double append_step(placement& out, rank_clock& clock, const Context& ctx, std::int64_t first_rank,
                   std::size_t k, std::vector<std::size_t> items, const degree_option& run) {
  placed_micro_step step;
  step.first_rank = first_rank;
  step.config = ctx.config_of(k, run);
  step.samples = std::move(items);
  step.start_seconds = clock.ready(first_rank, ctx.degree(k));
  step.seconds = run.seconds;
  step.peak_bytes = run.peak_bytes;
  const double end = step.start_seconds + step.seconds;
  clock.occupy(first_rank, ctx.degree(k), end);
  out.micro_steps.push_back(std::move(step));
  out.makespan_seconds = std::max(out.makespan_seconds, end);
  return end;
}

/// Appends a peer's micro-batch: one micro-step per bucket label it holds, each with the
/// recompute strategy's setting (full recomputation when it has none); returns the end.
template <class Context>
double append_micro_batch(placement& out, rank_clock& clock, const Context& ctx,
                          std::int64_t first_rank, std::size_t k,
                          const std::vector<std::size_t>& items) {
  double end = clock.ready(first_rank, ctx.degree(k));
  for (auto& part : split_by_bucket(ctx, items)) {
    const auto run = run_with_strategy(ctx, shape_of(ctx, part), k);
    end = append_step(out, clock, ctx, first_rank, k, std::move(part), run);
  }
  return end;
}

/// Sizes of power-of-two groups laid out largest first on contiguous ranks: each group then
/// starts at a multiple of its size (the buddy argument), which is how VideoSys maps its SP
/// groups and how the other peers' group sets become aligned blocks. Returns first ranks in the
/// given order; `sizes` must be sorted descending.
[[nodiscard]] inline std::vector<std::int64_t> contiguous_layout(
    const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> first;
  std::int64_t next = 0;
  for (auto s : sizes) {
    first.push_back(next);
    next += s;
  }
  return first;
}

/// splitmix64 (Steele, Lea and Flood 2014): the seeded generator the peers' random choices use
/// (VideoSys and its baseline draw from torch's generator; any good seeded stream serves).
class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed) noexcept : state_(seed) {}
  [[nodiscard]] std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  [[nodiscard]] double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Fisher–Yates, as torch.randperm's order is a uniform permutation.
  template <class T>
  void shuffle(std::vector<T>& items) noexcept {
    for (std::size_t i = items.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(next() % i);
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines::detail

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// One bucket as a VideoSys-style profiler sizes it on unlimited synthetic data: the batches its
/// sampler cuts the bucket into (and the remainder drop_last drops). `profile()` of
/// paper_baseline and videosys_dcp.
struct profiled_bucket {
  std::int32_t label = 0;       ///< the bucketing's label
  std::int64_t samples = 0;     ///< the bucket's samples in this batch
  std::int64_t degree = 1;      ///< the sequence-parallel degree its batches run at
  std::int64_t batch_size = 0;  ///< samples per batch; 0: fits nowhere under the profiler's cap
  friend bool operator==(const profiled_bucket&, const profiled_bucket&) = default;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
