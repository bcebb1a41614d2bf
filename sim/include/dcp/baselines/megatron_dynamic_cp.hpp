#pragma once
// Megatron-Core dynamic (formerly "hybrid") context parallelism as a placement policy.
//
// Source: NVIDIA/Megatron-LM.
//  - variant::packing_aware (the default): the dev branch's DefaultDynamicCPScheduler,
//    `next_hdp_group_packing_aware` in megatron/core/datasets/data_schedule_utils.py
//    (--sequence-packing-scheduler default_dynamic_cp).
//  - variant::balanced: main's BalancedCPScheduler, `next_hdp_group` in
//    megatron/core/pipeline_parallel/hybrid_cp_schedule.py (make_buckets_equal,
//    trim_overload, fill_empty_gpus).
// Notes: docs/baselines.md.
//
// The algorithm, per global batch: sort by length descending; CP size per sample = the smallest
// power of two cp with length / cp <= max_seqlen_per_dp_cp_rank (and >= min_cp); workload
// estimate L²/cp per rank (attention only). Micro-batches ("waves") are formed one at a time over
// the whole DP×CP world: each sample joins the least-loaded existing group of its size or opens
// a new group on free GPUs, within the per-rank token cap; what does not fit is left over for the
// next wave; idle GPUs are filled by doubling the smallest group's CP. Every rank takes part in
// every wave. packing_aware also lets a short sample take a larger CP group when that lowers the
// projected maximum workload, bounded by tallest × max_seqlen × 1.05; each group's samples are
// packed into one THD micro-batch. balanced cuts the sorted list into one equal-work bucket per
// distinct CP size, stops a wave once the load spread is within 5%, trims the most-loaded group,
// and ends every wave with a barrier over the world.
//
// Simplifications and adaptations (each deliberate):
//  - Workload is Megatron's own proxy (L²/cp); times and bytes of the resulting micro-steps come
//    from the cost model, like every other policy.
//  - max_seqlen_per_dp_cp_rank is the knob a Megatron user tunes. The default, 2048, is the
//    documented one: examples/dynamic_context_parallel's benchmark script
//    (MAX_SEQLEN_PER_DP_CP_RANK=2048, the README's benchmark); the flag itself
//    has no default (dynamic CP requires it). dcp-sim's `megatron-dcp` row sets it per workload
//    by the rule Megatron documents, max sequence length / CP size
//    (megatron_dynamic_cp_user_layout, user_static_rules.hpp). Set to 0, it is tuned per batch (our
//    variant, `megatron-dcp-tuned` in dcp-sim): the capacity C (the most tokens one GPU holds while
//    the recompute strategy keeps its lightest setting — no recomputation under pyramid_recompute)
//    and C/2, C/4, ... (cap_candidates values) are each planned, and the fastest plan by the
//    cost model is kept — a tuned Megatron, as best_static_placement is a tuned static layout.
//    (Smaller caps mean higher CP sizes and more waves; Megatron's own example runs 8K
//    sequences at 2K per rank.)
//  - Megatron opens a new group on "the least-loaded free ranks" and fills idle ranks by
//    shifting later groups; here a wave's groups are laid out largest first on contiguous
//    ranks, so every group is an aligned power-of-two block (Megatron's dynamic groups are the
//    contiguous power-of-two slices, so an unaligned member set could not run anyway). As
//    upstream, the tallest sample of every wave lands on ranks 0..cp-1, and packing_aware has
//    no barrier between waves (a group starts when its ranks are free).
//  - When doubling cannot fill idle ranks (a Ulysses degree limit from the head count, or a
//    non-power-of-two world), packing_aware falls back to one group over the whole world as
//    upstream does when that degree is allowed; otherwise those ranks stay idle for the wave
//    (upstream asserts).
//  - A sample longer than max_seqlen × the largest allowed degree runs at the largest degree
//    (upstream asserts).
//  - balanced: upstream runs each sub-sample as its own forward/backward; here a group's
//    sub-samples are packed in order into micro-batches of at most max_seqlen tokens per rank
//    (the per-rank token cap, as the packing-aware scheduler and THD packing do).
//  - Each micro-step runs with the recompute strategy's setting for it, or every layer
//    recomputed when the strategy has none that fits.
// Memory: Megatron is memory-aware only through the token cap. With the default caps its packs
// fit; a larger cap, or samples above cap × largest degree, give micro-steps whose peak exceeds
// the budget — on purpose: this policy does NOT promise placement_policy's budget requirement
// (the simulator counts those as OOM events).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// Megatron's `dcp_gpus_needed`: the smallest of `sizes` (ascending) that is at least `min_cp`
/// and holds `tokens` at no more than `max_seqlen_per_rank` per rank; the largest if none does.
[[nodiscard]] inline std::int64_t megatron_cp_needed(std::int64_t tokens,
                                                     std::int64_t max_seqlen_per_rank,
                                                     std::int64_t min_cp,
                                                     const std::vector<std::int64_t>& sizes) {
  for (auto cp : sizes) {
    if (cp < min_cp) continue;
    if (static_cast<double>(tokens) / static_cast<double>(cp) <=
        static_cast<double>(max_seqlen_per_rank))
      return cp;
  }
  return sizes.back();
}

struct megatron_dynamic_cp {
  enum class variant : std::uint8_t { packing_aware, balanced };

  /// --max-seqlen-per-dp-cp-rank: the documented example's 2048 by default; 0 tunes it (see
  /// the header comment).
  std::int64_t max_seqlen_per_dp_cp_rank = 2048;
  /// With max_seqlen_per_dp_cp_rank = 0: the caps tried are capacity / 2^j, j < this.
  std::int32_t cap_candidates = 5;
  /// --min-dynamic-context-parallel-size.
  std::int64_t min_cp_size = 1;
  variant scheduler = variant::packing_aware;
  /// packing_aware: _DYNAMIC_CP_WORKLOAD_CAP_DELTA (cap = tallest × max_seqlen × (1 + delta)).
  double workload_cap_delta = 0.05;
  /// balanced: `delta`, the load spread at which a wave is balanced enough.
  double balance_delta = 0.05;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "megatron-dynamic-cp"; }
  friend bool operator==(const megatron_dynamic_cp&, const megatron_dynamic_cp&) = default;
};

namespace detail {

template <class Context>
class megatron_solver {
 public:
  megatron_solver(const Context& ctx, const megatron_dynamic_cp& options)
      : ctx_(ctx), options_(options), world_(ctx.gpus()) {
    for (auto d : ctx.degrees())
      if (d >= options.min_cp_size) sizes_.push_back(d);
    if (sizes_.empty() || sizes_.front() != options.min_cp_size)
      throw invalid_spec(
          "megatron_dynamic_cp: min_cp_size = " + std::to_string(options.min_cp_size) +
          " is not an allowed degree on this cluster and model");
    cap_ = options.max_seqlen_per_dp_cp_rank > 0
               ? options.max_seqlen_per_dp_cp_rank
               : std::max<std::int64_t>(1, per_gpu_token_capacity(ctx));
  }

  [[nodiscard]] std::int64_t max_seqlen_per_rank() const noexcept { return cap_; }

  [[nodiscard]] placement solve() {
    placement out;
    rank_clock clock(world_);
    std::vector<std::size_t> remaining(ctx_.size());
    for (std::size_t i = 0; i < remaining.size(); ++i)
      remaining[i] = i;  // canonical: longest first
    while (!remaining.empty()) {
      std::vector<std::size_t> leftovers;
      auto wave = options_.scheduler == megatron_dynamic_cp::variant::packing_aware
                      ? packing_aware_wave(remaining, leftovers)
                      : balanced_wave(remaining, leftovers);
      lay_out(out, clock, std::move(wave));
      remaining = std::move(leftovers);
    }
    out.policy =
        std::string("megatron-dynamic-cp (") +
        (options_.scheduler == megatron_dynamic_cp::variant::packing_aware ? "packing-aware"
                                                                           : "balanced") +
        ", " + std::to_string(cap_) + " tokens per rank)";
    return out;
  }

  [[nodiscard]] std::int64_t cp_needed(std::size_t i) const {
    return megatron_cp_needed(tokens(i), cap_, options_.min_cp_size, sizes_);
  }

 private:
  struct group {
    std::int64_t size = 1;
    std::vector<std::size_t> samples{};
    double exec = 0;    // per-rank workload, L²/cp summed
    double packed = 0;  // per-rank packed tokens, L/cp summed
  };

  [[nodiscard]] std::int64_t tokens(std::size_t i) const { return ctx_.sample(i).tokens; }
  [[nodiscard]] double length(std::size_t i) const { return static_cast<double>(tokens(i)); }
  [[nodiscard]] static double workload(double length, std::int64_t cp) {
    return length * length / static_cast<double>(cp);
  }

  [[nodiscard]] std::size_t size_index(std::int64_t size) const {
    return static_cast<std::size_t>(std::find(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
  }

  void add_to(group& g, std::size_t i) const {
    g.samples.push_back(i);
    g.exec += workload(length(i), g.size);
    g.packed += length(i) / static_cast<double>(g.size);
  }

  // Doubles (to the next enabled size) the first smallest group when enough ranks are idle.
  [[nodiscard]] bool expand_smallest(std::vector<group>& groups, std::int64_t& free,
                                     bool next_enabled) const {
    if (groups.empty()) return false;
    std::int64_t smallest = groups.front().size;
    for (const auto& g : groups) smallest = std::min(smallest, g.size);
    std::int64_t next = 0;
    if (next_enabled) {
      const auto at = size_index(smallest);
      if (at + 1 >= sizes_.size()) return false;
      next = sizes_[at + 1];
    } else {
      next = std::min(smallest * 2, world_);  // main: "next power", or the whole world
      if (size_index(next) == sizes_.size()) return false;
    }
    if (free < next - smallest) return false;
    for (auto& g : groups) {
      if (g.size != smallest) continue;
      g.size = next;
      g.exec = 0;
      g.packed = 0;
      for (auto i : g.samples) {
        g.exec += workload(length(i), next);
        g.packed += length(i) / static_cast<double>(next);
      }
      free -= next - smallest;
      return true;
    }
    return false;
  }

  // One wave of next_hdp_group_packing_aware. `input` is sorted longest first.
  [[nodiscard]] std::vector<group> packing_aware_wave(const std::vector<std::size_t>& input,
                                                      std::vector<std::size_t>& leftovers) const {
    const double cap_tokens = static_cast<double>(cap_);
    const double bound = length(input.front()) * cap_tokens * (1.0 + options_.workload_cap_delta);
    std::vector<group> groups;
    std::vector<std::vector<std::size_t>> by_size(sizes_.size());  // groups of each size, in order
    // Largest free per-rank room among the groups of each size: a sample whose share exceeds it
    // skips those groups without scanning them (same choices, far fewer comparisons).
    std::vector<double> room(sizes_.size(), -1.0);
    const auto refresh = [&](std::size_t s) {
      room[s] = -1.0;
      for (auto g : by_size[s]) room[s] = std::max(room[s], cap_tokens - groups[g].packed);
    };
    std::int64_t free = world_;
    double top = 0;  // max per-rank workload over the world
    {
      group first;
      first.size = cp_needed(input.front());
      add_to(first, input.front());
      free -= first.size;
      top = first.exec;
      groups.push_back(std::move(first));
      by_size[size_index(groups.back().size)].push_back(0);
      refresh(size_index(groups.back().size));
    }
    for (std::size_t n = 1; n < input.size(); ++n) {
      const std::size_t i = input[n];
      const double len = length(i);
      const std::int64_t min_needed = cp_needed(i);
      bool found = false;
      double best_projected = 0;
      std::size_t best_group = groups.size();  // groups.size(): a new group
      std::int64_t best_size = 0;
      for (std::size_t s = 0; s < sizes_.size(); ++s) {
        const auto cp = sizes_[s];
        if (cp < min_needed) continue;
        const double cost = workload(len, cp);
        const bool may_fit = room[s] + 1e-9 * cap_tokens >= len / static_cast<double>(cp);
        for (std::size_t at = 0; may_fit && at < by_size[s].size(); ++at) {
          const auto g = by_size[s][at];
          if (groups[g].packed + len / static_cast<double>(cp) > cap_tokens) continue;
          const double projected = std::max(top, groups[g].exec + cost);
          if (projected <= bound && (!found || projected < best_projected)) {
            found = true;
            best_projected = projected;
            best_group = g;
            best_size = cp;
          }
        }
        if (free >= cp) {
          const double projected = std::max(top, cost);
          if (projected <= bound && (!found || projected < best_projected)) {
            found = true;
            best_projected = projected;
            best_group = groups.size();
            best_size = cp;
          }
        }
      }
      if (!found) {
        leftovers.push_back(i);
        continue;
      }
      if (best_group == groups.size()) {
        group fresh;
        fresh.size = best_size;
        groups.push_back(std::move(fresh));
        by_size[size_index(best_size)].push_back(best_group);
        free -= best_size;
      }
      add_to(groups[best_group], i);
      refresh(size_index(best_size));
      top = std::max(top, groups[best_group].exec);
    }
    while (free > 0) {
      if (expand_smallest(groups, free, true)) continue;
      if (size_index(world_) < sizes_.size()) {
        // fill_with_full_dpxcp_group: the whole input packed in order into one world-wide group.
        group whole;
        whole.size = world_;
        leftovers.clear();
        for (auto i : input) {
          if (whole.samples.empty() ||
              whole.packed + length(i) / static_cast<double>(world_) <= cap_tokens)
            add_to(whole, i);
          else
            leftovers.push_back(i);
        }
        groups.assign(1, std::move(whole));
      }
      break;
    }
    return groups;
  }

  // One wave of main's next_hdp_group (dp strategy). `input` keeps Megatron's order: sorted once,
  // then leftovers in bucket order with trimmed samples appended.
  [[nodiscard]] std::vector<group> balanced_wave(const std::vector<std::size_t>& input,
                                                 std::vector<std::size_t>& leftovers) const {
    const double delta = options_.balance_delta;
    const auto estimate = [&](std::size_t i) { return workload(length(i), cp_needed(i)); };
    // make_buckets_equal: one bucket per distinct CP size, each near total / k work.
    std::vector<std::int64_t> distinct;
    double total = 0;
    for (auto i : input) {
      const auto cp = cp_needed(i);
      if (std::find(distinct.begin(), distinct.end(), cp) == distinct.end()) distinct.push_back(cp);
      total += estimate(i);
    }
    const auto k = static_cast<std::int64_t>(distinct.size());
    const double target = total / static_cast<double>(k);
    std::vector<std::vector<std::size_t>> buckets;
    {
      std::vector<std::size_t> current;
      double current_work = 0;
      std::int64_t remaining_k = k;
      for (std::size_t n = 0; n < input.size(); ++n) {
        const double work = estimate(input[n]);
        const double projected = current_work + work;
        const auto left = static_cast<std::int64_t>(input.size() - n);
        if (!current.empty() && (projected > target * 1.1 ||
                                 left <= remaining_k - static_cast<std::int64_t>(buckets.size()))) {
          buckets.push_back(std::move(current));
          current.clear();
          current_work = 0;
          --remaining_k;
        }
        current.push_back(input[n]);
        current_work += work;
      }
      if (!current.empty()) buckets.push_back(std::move(current));
    }
    std::vector<std::size_t> head(buckets.size(), 0);
    std::size_t front = 0;  // buckets before `front` are exhausted and popped
    std::vector<group> groups;
    std::int64_t free = world_;
    std::int64_t first_needed = 0;
    bool check_balance = false;
    const auto spread = [&](double& top, double& bottom) {
      top = 0;
      bottom = std::numeric_limits<double>::infinity();
      for (const auto& g : groups) {
        top = std::max(top, g.exec);
        bottom = std::min(bottom, g.exec);
      }
      if (free > 0 || groups.empty()) bottom = 0;
    };
    while (front < buckets.size()) {
      std::size_t chosen = buckets.size();
      for (std::size_t b = front; b < buckets.size(); ++b) {
        if (head[b] == buckets[b].size()) continue;
        const auto need = cp_needed(buckets[b][head[b]]);
        bool has_group = false;
        for (const auto& g : groups) has_group = has_group || g.size == need;
        if (has_group || free >= need) {
          chosen = b;
          break;
        }
      }
      if (chosen == buckets.size()) break;
      const std::size_t i = buckets[chosen][head[chosen]];
      const auto need = cp_needed(i);
      if (first_needed == 0) first_needed = need;
      std::size_t best = groups.size();
      double best_load = std::numeric_limits<double>::infinity();
      for (std::size_t g = 0; g < groups.size(); ++g)
        if (groups[g].size == need && groups[g].exec < best_load) {
          best = g;
          best_load = groups[g].exec;
        }
      if (free >= need && 0.0 < best_load) {  // a fresh group's ranks carry no load yet
        group fresh;
        fresh.size = need;
        groups.push_back(std::move(fresh));
        free -= need;
        best = groups.size() - 1;
      }
      groups[best].samples.push_back(i);
      groups[best].exec += estimate(i);
      ++head[chosen];
      while (front < buckets.size() && head[front] == buckets[front].size()) ++front;
      if (need < first_needed) check_balance = true;
      double top = 0;
      double bottom = 0;
      spread(top, bottom);
      if (check_balance && front < buckets.size() && top - bottom <= delta * top) break;
    }
    for (std::size_t b = front; b < buckets.size(); ++b)
      for (std::size_t n = head[b]; n < buckets[b].size(); ++n) leftovers.push_back(buckets[b][n]);
    // trim_overload: pop the most recent sample of the most-loaded group while that narrows
    // the spread.
    while (true) {
      double top = 0;
      double bottom = 0;
      spread(top, bottom);
      const double slack = top - bottom;
      if (slack <= delta * top || bottom == 0) break;
      std::size_t busiest = 0;
      while (groups[busiest].exec != top) ++busiest;
      auto& g = groups[busiest];
      if (g.samples.size() <= 1) break;
      const double cost = estimate(g.samples.back());
      g.exec -= cost;
      double new_top = 0;
      double new_bottom = 0;
      spread(new_top, new_bottom);
      if (new_top - new_bottom < slack) {
        leftovers.push_back(g.samples.back());
        g.samples.pop_back();
      } else {
        g.exec += cost;
        break;
      }
    }
    while (free > 0 && expand_smallest(groups, free, false)) {
    }
    return groups;
  }

  // Groups largest first on contiguous ranks (aligned blocks); packing_aware runs each group's
  // pack as one micro-batch, balanced packs a group's sub-samples by the per-rank token cap and
  // ends the wave with a barrier.
  void lay_out(placement& out, rank_clock& clock, std::vector<group> groups) const {
    std::stable_sort(groups.begin(), groups.end(),
                     [](const group& a, const group& b) { return a.size > b.size; });
    std::vector<std::int64_t> sizes;
    for (const auto& g : groups) sizes.push_back(g.size);
    const auto first = contiguous_layout(sizes);
    const bool packing_aware = options_.scheduler == megatron_dynamic_cp::variant::packing_aware;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto k = degree_index_of(ctx_, groups[g].size);
      if (packing_aware) {
        append_micro_batch(out, clock, ctx_, first[g], k, groups[g].samples);
        continue;
      }
      std::vector<std::size_t> pack;
      double per_rank = 0;
      for (auto i : groups[g].samples) {
        const double share = length(i) / static_cast<double>(groups[g].size);
        if (!pack.empty() && per_rank + share > static_cast<double>(cap_)) {
          append_micro_batch(out, clock, ctx_, first[g], k, pack);
          pack.clear();
          per_rank = 0;
        }
        pack.push_back(i);
        per_rank += share;
      }
      if (!pack.empty()) append_micro_batch(out, clock, ctx_, first[g], k, pack);
    }
    if (!packing_aware) {
      clock.barrier();
      out.barrier_seconds.push_back(clock.makespan());
    }
  }

  const Context& ctx_;
  const megatron_dynamic_cp& options_;
  std::int64_t world_;
  std::vector<std::int64_t> sizes_;
  std::int64_t cap_ = 1;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement megatron_dynamic_cp::place(const placement_input<M, R>& input) const {
  detail::check_cap_candidates("megatron_dynamic_cp", cap_candidates);
  if (input.size() == 0) return placement{{}, 0, 0, 0, "megatron-dynamic-cp"};
  using solver = detail::megatron_solver<dcp::placement_input<M, R>>;
  if (max_seqlen_per_dp_cp_rank > 0) return solver(input, *this).solve();
  std::optional<placement> best;
  for (auto cap : detail::cap_candidates(detail::per_gpu_token_capacity(input), cap_candidates)) {
    auto tuned = *this;
    tuned.max_seqlen_per_dp_cp_rank = cap;
    auto candidate = solver(input, tuned).solve();
    if (!best || candidate.makespan_seconds < best->makespan_seconds) best = std::move(candidate);
  }
  return std::move(*best);
}

static_assert(placement_policy<megatron_dynamic_cp, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
