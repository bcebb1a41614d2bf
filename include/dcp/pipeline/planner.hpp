#pragma once
// Planning a step inside a tensor x pipeline grid: the micro-batches' composition, their
// context-parallel degree over the D pipelines, their order and each chunk's recomputation,
// chosen together against the pipeline's makespan (warm-up and cool-down bubbles included)
// within every stage's memory. Megatron-compatible: one micro-batch count m for every
// pipeline, every micro-batch's shape known to all its stages. docs/pipeline.md.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <queue>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/pipeline/schedule.hpp"
#include "dcp/pipeline/stage_cost.hpp"
#include "dcp/placement/detail/does_not_fit.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// One micro-batch of a pipeline plan: its samples, run at slot `slot` of pipelines
/// [first_pipeline, first_pipeline + degree) (context parallelism over them), each chunk with
/// its own recomputation.
struct pipeline_micro_batch {
  std::vector<std::uint64_t> sample_ids;
  micro_batch_shape shape;
  std::int64_t first_pipeline = 0;
  std::int64_t degree = 1;
  std::int64_t slot = 0;
  std::vector<recompute_setting> recompute;  ///< per chunk
};

/// What one rank runs in a pipeline plan: where it sits in the grid, and its stage's ops in
/// order; op.slot indexes `micro_batch_at_slot`, the plan's micro-batch its pipeline runs there.
struct rank_pipeline_schedule {
  grid_coordinates at;
  std::vector<pipeline_op> ops;
  std::vector<std::size_t> micro_batch_at_slot;
};

struct pipeline_plan {
  model_parallel_grid grid;
  std::int64_t pipelines = 1;  ///< D
  std::int64_t slots = 0;      ///< m, the micro-batch count of every pipeline
  std::vector<pipeline_micro_batch> micro_batches;
  pipeline_instance instance;  ///< the cost model's times and bytes, micro_batches' order
  pipeline_timeline timeline;  ///< the executor's result on `instance`
  double lower_bound = 0;      ///< of any plan of the batch on this grid
  double order_bound = 0;      ///< of these micro-batches in any order
  double memory_budget = 0;

  [[nodiscard]] double makespan() const noexcept { return timeline.makespan; }
  /// How far the plan is from the bound: makespan / lower_bound - 1.
  [[nodiscard]] double gap() const noexcept {
    return lower_bound > 0 ? timeline.makespan / lower_bound - 1.0 : 0.0;
  }
  [[nodiscard]] double bubble_fraction() const noexcept { return timeline.bubble_fraction(); }

  /// Rank `rank`'s part (Megatron's order, model_parallel_grid::rank_of); throws invalid_plan
  /// naming a rank outside the plan's t p D GPUs.
  [[nodiscard]] rank_pipeline_schedule schedule_of(std::int64_t rank) const {
    const std::int64_t gpus = grid.tensor * grid.pipeline * pipelines;
    if (rank < 0 || rank >= gpus)
      throw invalid_plan("pipeline plan: rank " + std::to_string(rank) + " is outside the plan's " +
                         std::to_string(gpus) + " GPUs");
    rank_pipeline_schedule out;
    out.at = grid.coordinates_of(rank, pipelines);
    out.ops = stage_order(grid.pipeline, grid.virtual_stages, slots, out.at.stage);
    out.micro_batch_at_slot.assign(static_cast<std::size_t>(slots), 0);
    for (std::size_t k = 0; k < micro_batches.size(); ++k) {
      const auto& mb = micro_batches[k];
      if (out.at.pipeline >= mb.first_pipeline && out.at.pipeline < mb.first_pipeline + mb.degree)
        out.micro_batch_at_slot[static_cast<std::size_t>(mb.slot)] = k;
    }
    return out;
  }
};

/// The instance of `micro_batches` (each with its recomputation per chunk) in m slots under
/// `cost`: pipeline_cost_model, or any type with the members of it that this calls (the
/// simulator's truth model). Throws invalid_plan naming a micro-batch without one setting per
/// chunk.
template <class StageCost>
[[nodiscard]] pipeline_instance pipeline_instance_of(
    const StageCost& cost, std::span<const pipeline_micro_batch> micro_batches, std::int64_t m) {
  const auto& g = cost.grid();
  const std::int64_t chunks = g.chunks();
  pipeline_instance in;
  in.stages = g.pipeline;
  in.virtual_stages = g.virtual_stages;
  in.pipelines = cost.pipelines();
  in.slots = m;
  for (std::int64_t s = 0; s < g.pipeline; ++s) {
    in.state_bytes.push_back(cost.state_bytes(s));
    in.sync_seconds.push_back(cost.sync_seconds(s));
  }
  for (std::size_t k = 0; k < micro_batches.size(); ++k) {
    const auto& mb = micro_batches[k];
    if (mb.recompute.size() != static_cast<std::size_t>(chunks))
      throw invalid_plan("pipeline: micro-batch " + std::to_string(k) + " has " +
                         std::to_string(mb.recompute.size()) +
                         " recompute settings, one per chunk needs " + std::to_string(chunks));
    pipeline_work w;
    w.first_pipeline = mb.first_pipeline;
    w.degree = mb.degree;
    w.slot = mb.slot;
    w.p2p_seconds = cost.p2p_seconds(mb.shape, mb.degree);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const auto b = cost.chunk(mb.shape, mb.degree, mb.recompute[static_cast<std::size_t>(c)], c);
      w.forward.push_back(b.forward);
      w.backward.push_back(b.backward);
      w.stored_bytes.push_back(b.stored_bytes);
      w.working_bytes.push_back(b.working_bytes);
    }
    in.work.push_back(std::move(w));
  }
  return in;
}

/// A lower bound on the makespan of any plan of `batch` on `cost`'s grid — any micro-batches
/// of power-of-two degrees, in any order, with any recomputation — under `cost` (the planner's
/// model or the simulator's truth; it calls marginal, chunk_fixed, p2p_seconds and
/// sync_seconds). For every stage s: the stage's share over the D pipelines of the batch's least
/// work (each sample at its cheapest degree, its marginal time without recomputation), behind
/// the forward every micro-batch pays to reach stage s (fixed costs and hops) and before the
/// backward down to stage 0 or the stage's own sync; and the longest sample's path through
/// every chunk at its best degree, then stage 0's sync. docs/pipeline.md shows why each holds.
template <class StageCost>
[[nodiscard]] double pipeline_batch_lower_bound(const StageCost& cost,
                                                std::span<const sample> batch) {
  if (batch.empty()) return 0.0;
  const std::int64_t p = cost.grid().pipeline;
  const std::int64_t chunks = cost.grid().chunks();
  const std::int64_t pipelines = cost.pipelines();
  std::vector<double> load(static_cast<std::size_t>(p), 0.0);
  std::vector<double> least(load.size());
  std::vector<double> per_stage(load.size());
  const double sync0 = cost.sync_seconds(0);
  double bound = 0;
  for (const auto& s : batch) {
    const auto shape = micro_batch_shape::of(s);
    std::fill(least.begin(), least.end(), std::numeric_limits<double>::infinity());
    double best_path = std::numeric_limits<double>::infinity();
    for (std::int64_t d = 1; d <= pipelines; d *= 2) {
      std::fill(per_stage.begin(), per_stage.end(), 0.0);
      double path = 2.0 * static_cast<double>(chunks - 1) * cost.p2p_seconds(shape, d);
      for (std::int64_t c = 0; c < chunks; ++c) {
        const auto m = cost.marginal(shape, d, recompute_setting{}, c);
        per_stage[static_cast<std::size_t>(c % p)] +=
            static_cast<double>(d) * (m.forward + m.backward);
        path += m.forward + m.backward;
      }
      for (std::size_t k = 0; k < least.size(); ++k) least[k] = std::min(least[k], per_stage[k]);
      best_path = std::min(best_path, path);
    }
    for (std::size_t k = 0; k < load.size(); ++k) load[k] += least[k];
    bound = std::max(bound, best_path + sync0);
  }
  double head = 0;
  double tail = 0;
  const double hop = cost.p2p_seconds(micro_batch_shape{}, 1);
  for (std::int64_t s = 0; s < p; ++s) {
    bound =
        std::max(bound, head + load[static_cast<std::size_t>(s)] / static_cast<double>(pipelines) +
                            std::max(cost.sync_seconds(s), tail + sync0));
    const auto fixed = cost.chunk_fixed(s);
    head += fixed.forward + hop;
    tail += fixed.backward + hop;
  }
  return bound;
}

class pipeline_planner {
 public:
  explicit pipeline_planner(pipeline_cost_model cost) : cost_(std::move(cost)) { derive(); }

  [[nodiscard]] const pipeline_cost_model& cost() const noexcept { return cost_; }

  /// The most tokens one pipeline may hold of a micro-batch: at that size, with every layer
  /// recomputed, each stage fits the most micro-batches its schedule keeps in flight plus the
  /// running op. Every micro-batch at or below it fits in any order.
  [[nodiscard]] double tokens_cap() const noexcept { return tokens_cap_; }

  [[nodiscard]] pipeline_plan plan(std::span<const sample> batch) const {
    validate_batch(batch);
    const std::int64_t pipelines = cost_.pipelines();
    std::vector<item> items(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      items[i].index = i;
      items[i].shape = micro_batch_shape::of(batch[i]);
      items[i].smallest = smallest_degree(batch[i]);
      items[i].degree = items[i].smallest;
    }
    for (auto& it : items)
      for (std::int64_t d = it.smallest; d <= pipelines; d *= 2)
        it.seconds_at.push_back(path_seconds(it.shape, d));
    pipeline_plan best;
    best.timeline.makespan = std::numeric_limits<double>::infinity();
    // More micro-batches shrink the bubbles until their fixed costs and the cells' imbalance
    // outweigh that: the counts are tried upwards until two in a row are slower than the best.
    const auto [counts, fallbacks] = slot_candidates(items);
    for (const auto& tried : {counts, fallbacks}) {
      int slower = 0;
      for (const std::int64_t m : tried) {
        widen(items, m);
        std::vector<pipeline_micro_batch> packed;
        if (!pack(items, batch, m, packed)) continue;
        auto candidate = assemble(std::move(packed), m);
        if (candidate.timeline.makespan < best.timeline.makespan) {
          best = std::move(candidate);
          slower = 0;
        } else if (++slower == 2) {
          break;
        }
      }
      if (std::isfinite(best.timeline.makespan)) break;
    }
    if (!std::isfinite(best.timeline.makespan))
      throw invalid_plan("pipeline planner: no micro-batch count up to " +
                         std::to_string(fallbacks.back()) + " packs the batch");
    improve_order(best);
    best.lower_bound = lower_bound(batch);
    best.order_bound = pipeline_lower_bound(best.instance);
    return best;
  }

  /// A lower bound on the makespan of any plan of `batch` on this grid under the cost model
  /// (pipeline_batch_lower_bound).
  [[nodiscard]] double lower_bound(std::span<const sample> batch) const {
    return pipeline_batch_lower_bound(cost_, batch);
  }

 private:
  struct item {
    std::size_t index = 0;
    micro_batch_shape shape;
    std::int64_t smallest = 1;       ///< the smallest degree it fits at
    std::int64_t degree = 1;         ///< as widen() sets it
    double seconds = 0;              ///< per GPU through every chunk, forward and back, alone
    std::vector<double> seconds_at;  ///< that at the smallest degree, twice it, ... up to D
  };

  /// What stage `stage` keeps in flight at most: p - s micro-batches under 1F1B, 2 (p - s - 1)
  /// + (v - 1) p + 1 chunks interleaved (Megatron's warm-up plus the running one).
  [[nodiscard]] std::int64_t window(std::int64_t stage) const noexcept {
    const auto& g = cost_.grid();
    return g.virtual_stages > 1
               ? 2 * (g.pipeline - stage - 1) + (g.virtual_stages - 1) * g.pipeline + 1
               : g.pipeline - stage;
  }

  void derive() {
    // Bytes are linear in the tokens per pipeline: read them per token at a large size.
    const auto& g = cost_.grid();
    const double probe = 1 << 20;
    micro_batch_shape shape;
    shape.tokens = static_cast<std::int64_t>(2 * probe);
    tokens_cap_ = std::numeric_limits<double>::infinity();
    for (std::int64_t s = 0; s < g.pipeline; ++s) {
      double stored = 0;
      double working = 0;
      for (std::int64_t c = s; c < g.chunks(); c += g.pipeline) {
        const auto b = cost_.chunk(shape, 2, recompute_setting::full(cost_.layers_per_chunk()), c);
        stored = std::max(stored, b.stored_bytes / probe);
        working = std::max(working, b.working_bytes / probe);
      }
      const double room = cost_.memory_budget() - cost_.state_bytes(s);
      if (room <= 0)
        throw sample_does_not_fit(
            "pipeline planner: stage " + std::to_string(s) + "'s model states take " +
            detail::format_gib(cost_.state_bytes(s)) + " of the " +
            detail::format_gib(cost_.memory_budget()) + " budget: no room for activations");
      tokens_cap_ =
          std::min(tokens_cap_, room / (static_cast<double>(window(s)) * stored + working));
    }
  }

  [[nodiscard]] std::int64_t smallest_degree(const sample& s) const {
    std::int64_t d = 1;
    while (static_cast<double>(s.tokens) / static_cast<double>(d) > std::floor(tokens_cap_)) {
      if (2 * d > cost_.pipelines())
        throw sample_does_not_fit(
            "pipeline planner: sample " + std::to_string(s.id) + " (" + std::to_string(s.tokens) +
            " tokens) needs more than " + std::to_string(static_cast<std::int64_t>(tokens_cap_)) +
            " tokens per pipeline even over all " + std::to_string(cost_.pipelines()) +
            " pipelines with every layer recomputed; the largest sample this grid takes has " +
            std::to_string(static_cast<std::int64_t>(std::floor(tokens_cap_)) *
                           largest_power_of_two(cost_.pipelines())) +
            " tokens");
      d *= 2;
    }
    return d;
  }

  [[nodiscard]] static std::int64_t largest_power_of_two(std::int64_t n) noexcept {
    std::int64_t d = 1;
    while (2 * d <= n) d *= 2;
    return d;
  }

  [[nodiscard]] double path_seconds(const micro_batch_shape& shape, std::int64_t degree) const {
    double total = 0;
    for (std::int64_t c = 0; c < cost_.grid().chunks(); ++c) {
      const auto b = cost_.chunk(shape, degree, recompute_setting{}, c);
      total += b.forward + b.backward;
    }
    return total;
  }

  /// With m slots a pipeline's cell should take about its share of the work, W / (D m); a
  /// sample longer than that alone would stall its pipeline (and the path bound would set the
  /// step), so it runs over more pipelines while that shortens it. W counts each sample at its
  /// degree, so the share is recomputed as samples widen.
  void widen(std::vector<item>& items, std::int64_t m) const {
    const auto cells = static_cast<double>(cost_.pipelines() * m);
    for (auto& it : items) {
      it.degree = it.smallest;
      it.seconds = it.seconds_at.front();
    }
    for (int round = 0; round < 8; ++round) {
      double work = 0;
      for (const auto& it : items) work += static_cast<double>(it.degree) * it.seconds;
      const double share = work / cells;
      bool changed = false;
      for (auto& it : items) {
        const auto k = static_cast<std::size_t>(
            std::countr_zero(static_cast<std::uint64_t>(it.degree / it.smallest)));
        if (it.seconds <= share || k + 1 >= it.seconds_at.size() ||
            it.seconds_at[k + 1] >= it.seconds)
          continue;
        it.degree *= 2;
        it.seconds = it.seconds_at[k + 1];
        changed = true;
      }
      if (!changed) break;
    }
  }

  /// Micro-batch counts to try, in increasing order: from the fewest that hold the batch (cells
  /// of D pipelines under the token cap, and every wide sample its own aligned block) up to four
  /// samples' cells per pipeline, geometrically, and multiples of the stages (interleaving needs
  /// them).
  [[nodiscard]] std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> slot_candidates(
      const std::vector<item>& items) const {
    const std::int64_t pipelines = cost_.pipelines();
    const std::int64_t p = cost_.grid().pipeline;
    const bool interleaved = cost_.grid().virtual_stages > 1;
    double cells = 0;
    std::int64_t wide_cells = 0;
    for (const auto& it : items) {
      cells += static_cast<double>(it.degree);
      if (it.degree > 1) wide_cells += it.degree;
    }
    double tokens = 0;
    for (const auto& it : items) tokens += static_cast<double>(it.shape.tokens);
    const auto d = static_cast<double>(pipelines);
    std::int64_t low = std::max<std::int64_t>(
        {1, static_cast<std::int64_t>(std::ceil(tokens / (d * std::floor(tokens_cap_)))),
         (wide_cells + pipelines - 1) / pipelines});
    std::int64_t high = std::max<std::int64_t>(low, static_cast<std::int64_t>(4.0 * cells / d));
    const auto round_up = [&](std::int64_t m) { return interleaved ? (m + p - 1) / p * p : m; };
    std::vector<std::int64_t> out;
    for (double m = static_cast<double>(low); m <= static_cast<double>(high) * 1.0001; m *= 1.4)
      out.push_back(round_up(static_cast<std::int64_t>(std::llround(m))));
    for (std::int64_t k = 1; k * p <= high; k *= 2)
      if (k * p >= low) out.push_back(k * p);
    out.push_back(round_up(high));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    // Where none of these packs (cells full under the token cap), more slots.
    std::vector<std::int64_t> more;
    for (std::int64_t m = round_up(high) * 2; m <= round_up(high) * 16; m *= 2) more.push_back(m);
    return {out, more};
  }

  /// Longest-processing-time packing into m slots x D pipelines: each wide sample (longest
  /// first) opens an aligned block of its degree in the emptiest slot that has one, else joins
  /// the least-loaded block of its degree that it fits; each other sample joins the least-loaded
  /// cell it fits. False when some sample fits nowhere.
  [[nodiscard]] bool pack(std::vector<item> items, std::span<const sample> batch, std::int64_t m,
                          std::vector<pipeline_micro_batch>& out) const {
    const std::int64_t pipelines = cost_.pipelines();
    const double cap = std::floor(tokens_cap_);
    std::sort(items.begin(), items.end(), [](const item& a, const item& b) {
      if (a.degree != b.degree) return a.degree > b.degree;
      if (a.seconds != b.seconds) return a.seconds > b.seconds;
      return a.index < b.index;
    });
    std::vector<std::int64_t> owner(static_cast<std::size_t>(m * pipelines), -1);
    std::vector<double> load;
    std::vector<std::int64_t> used_in_slot(static_cast<std::size_t>(m), 0);
    out.clear();
    const auto fits = [&](const pipeline_micro_batch& mb, const item& it) {
      return static_cast<double>(mb.shape.tokens + it.shape.tokens) /
                 static_cast<double>(mb.degree) <=
             cap;
    };
    const auto add = [&](std::size_t block, const item& it) {
      out[block].sample_ids.push_back(batch[it.index].id);
      out[block].shape += it.shape;
      load[block] += it.seconds;
    };
    std::size_t next = 0;
    for (; next < items.size() && items[next].degree > 1; ++next) {
      const auto& it = items[next];
      const std::int64_t d = it.degree;
      std::int64_t slot = -1;
      std::int64_t first = -1;
      for (std::int64_t j = 0; j < m; ++j) {
        if (slot >= 0 && used_in_slot[static_cast<std::size_t>(j)] >=
                             used_in_slot[static_cast<std::size_t>(slot)])
          continue;
        for (std::int64_t r = 0; r + d <= pipelines; r += d) {
          bool free = true;
          for (std::int64_t q = r; q < r + d && free; ++q)
            free = owner[static_cast<std::size_t>(q * m + j)] < 0;
          if (free) {
            slot = j;
            first = r;
            break;
          }
        }
      }
      if (slot >= 0) {
        pipeline_micro_batch mb;
        mb.first_pipeline = first;
        mb.degree = d;
        mb.slot = slot;
        out.push_back(std::move(mb));
        load.push_back(0.0);
        for (std::int64_t q = first; q < first + d; ++q)
          owner[static_cast<std::size_t>(q * m + slot)] = static_cast<std::int64_t>(out.size() - 1);
        used_in_slot[static_cast<std::size_t>(slot)] += d;
        add(out.size() - 1, it);
        continue;
      }
      std::size_t target = out.size();
      for (std::size_t b = 0; b < out.size(); ++b)
        if (out[b].degree == d && fits(out[b], it) &&
            (target == out.size() || load[b] < load[target]))
          target = b;
      if (target == out.size()) return false;
      add(target, it);
    }
    // The cells no block took: one micro-batch each, empty until a sample joins.
    using entry = std::pair<double, std::size_t>;
    std::priority_queue<entry, std::vector<entry>, std::greater<>> cells;
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t r = 0; r < pipelines; ++r)
        if (owner[static_cast<std::size_t>(r * m + j)] < 0) {
          pipeline_micro_batch mb;
          mb.first_pipeline = r;
          mb.slot = j;
          out.push_back(std::move(mb));
          load.push_back(0.0);
          cells.emplace(0.0, out.size() - 1);
        }
    std::vector<entry> skipped;
    for (; next < items.size(); ++next) {
      const auto& it = items[next];
      while (!cells.empty() && !fits(out[cells.top().second], it)) {
        skipped.push_back(cells.top());
        cells.pop();
      }
      if (cells.empty()) return false;
      const auto [_, b] = cells.top();
      cells.pop();
      add(b, it);
      cells.emplace(load[b], b);
      for (const auto& e : skipped) cells.push(e);
      skipped.clear();
    }
    return true;
  }

  /// Each chunk's least recomputation within its stage's share of memory, the slots ordered
  /// (the best of a few orders by the executor's makespan), timed.
  [[nodiscard]] pipeline_plan assemble(std::vector<pipeline_micro_batch> micro_batches,
                                       std::int64_t m) const {
    const auto& g = cost_.grid();
    const std::int64_t chunks = g.chunks();
    const std::int64_t l = cost_.layers_per_chunk();
    // The largest working set at each stage, then each chunk's share of what is left.
    std::vector<double> working(static_cast<std::size_t>(g.pipeline), 0.0);
    for (const auto& mb : micro_batches)
      for (std::int64_t c = 0; c < chunks; ++c) {
        const auto b = cost_.chunk(mb.shape, mb.degree, recompute_setting::full(l), c);
        auto& w = working[static_cast<std::size_t>(c % g.pipeline)];
        w = std::max(w, b.working_bytes);
      }
    std::vector<double> share(working.size());
    for (std::int64_t s = 0; s < g.pipeline; ++s)
      share[static_cast<std::size_t>(s)] =
          (cost_.memory_budget() - cost_.state_bytes(s) - working[static_cast<std::size_t>(s)]) /
          static_cast<double>(std::min(window(s), m * g.virtual_stages));
    for (auto& mb : micro_batches) {
      mb.recompute.clear();
      for (std::int64_t c = 0; c < chunks; ++c)
        mb.recompute.push_back(
            least_recompute(mb, c, share[static_cast<std::size_t>(c % g.pipeline)]));
    }
    pipeline_plan plan;
    plan.grid = g;
    plan.pipelines = cost_.pipelines();
    plan.slots = m;
    plan.memory_budget = cost_.memory_budget();
    plan.instance = pipeline_instance_of(cost_, micro_batches, m);
    order_slots(plan, micro_batches);
    plan.micro_batches = std::move(micro_batches);
    return plan;
  }

  /// The fastest setting whose stored bytes fit `share`: no recomputation, selective, then the
  /// fewest whole layers (with or without selective on the rest).
  [[nodiscard]] recompute_setting least_recompute(const pipeline_micro_batch& mb, std::int64_t c,
                                                  double share) const {
    const std::int64_t l = cost_.layers_per_chunk();
    recompute_setting best = recompute_setting::full(l);
    double best_seconds = std::numeric_limits<double>::infinity();
    for (const bool selective : {false, true}) {
      std::int64_t lo = 0;
      std::int64_t hi = l;  // full recompute fits by the token cap
      while (lo < hi) {
        const std::int64_t mid = (lo + hi) / 2;
        const recompute_setting r{static_cast<std::int32_t>(mid), selective};
        if (cost_.chunk(mb.shape, mb.degree, r, c).stored_bytes <= share)
          hi = mid;
        else
          lo = mid + 1;
      }
      const recompute_setting r{static_cast<std::int32_t>(lo), selective && lo < l};
      const auto b = cost_.chunk(mb.shape, mb.degree, r, c);
      if (b.stored_bytes <= share && b.backward < best_seconds) {
        best = r;
        best_seconds = b.backward;
      }
    }
    return best;
  }

  /// Tries the slots as packed, heaviest first, lightest first, heaviest first behind the
  /// lightest (a short warm-up) with the second lightest last (a short cool-down), and the
  /// heaviest in the middle; keeps the order the executor times fastest.
  void order_slots(pipeline_plan& plan, std::vector<pipeline_micro_batch>& micro_batches) const {
    const std::int64_t m = plan.slots;
    std::vector<double> weight(static_cast<std::size_t>(m), 0.0);
    for (const auto& w : plan.instance.work) {
      double total = 0;
      for (std::size_t c = 0; c < w.forward.size(); ++c) total += w.forward[c] + w.backward[c];
      auto& slot = weight[static_cast<std::size_t>(w.slot)];
      slot = std::max(slot, total);
    }
    std::vector<std::int64_t> by_weight(static_cast<std::size_t>(m));
    std::iota(by_weight.begin(), by_weight.end(), 0);
    std::stable_sort(by_weight.begin(), by_weight.end(), [&](std::int64_t a, std::int64_t b) {
      return weight[static_cast<std::size_t>(a)] > weight[static_cast<std::size_t>(b)];
    });
    std::vector<std::vector<std::int64_t>> orders;  // orders[k][position] = old slot
    std::vector<std::int64_t> packed(static_cast<std::size_t>(m));
    std::iota(packed.begin(), packed.end(), 0);
    orders.push_back(packed);
    orders.push_back(by_weight);
    orders.emplace_back(by_weight.rbegin(), by_weight.rend());
    if (m >= 3) {
      auto shaped = by_weight;
      std::rotate(shaped.rbegin(), shaped.rbegin() + 1, shaped.rend());   // lightest first
      std::rotate(shaped.begin() + 1, shaped.begin() + 2, shaped.end());  // next-lightest last
      orders.push_back(std::move(shaped));
      // Heaviest in the middle, lighter towards both ends (an organ pipe): the warm-up fills
      // and the cool-down drains the pipeline with light micro-batches.
      std::vector<std::int64_t> pipe(static_cast<std::size_t>(m));
      std::size_t front = 0;
      std::size_t back = pipe.size();
      for (std::size_t k = 0; k < by_weight.size(); ++k) {
        const auto lightest = by_weight[by_weight.size() - 1 - k];
        if (k % 2 == 0)
          pipe[front++] = lightest;
        else
          pipe[--back] = lightest;
      }
      orders.push_back(std::move(pipe));
    }
    const auto timed = [&](const std::vector<std::int64_t>& order) {
      std::vector<std::int64_t> position(static_cast<std::size_t>(m));
      for (std::int64_t k = 0; k < m; ++k)
        position[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = k;
      auto instance = plan.instance;
      for (auto& w : instance.work) w.slot = position[static_cast<std::size_t>(w.slot)];
      auto timeline = simulate_pipeline(instance);
      return std::tuple{std::move(instance), std::move(timeline), std::move(position)};
    };
    auto [best_instance, best_timeline, best_position] = timed(orders.front());
    for (std::size_t k = 1; k < orders.size(); ++k) {
      auto [instance, timeline, position] = timed(orders[k]);
      if (timeline.makespan < best_timeline.makespan) {
        best_instance = std::move(instance);
        best_timeline = std::move(timeline);
        best_position = std::move(position);
      }
    }
    plan.instance = std::move(best_instance);
    plan.timeline = std::move(best_timeline);
    for (auto& mb : micro_batches) mb.slot = best_position[static_cast<std::size_t>(mb.slot)];
  }

  /// Swaps of two slots of the chosen plan, each kept where the executor finds the step
  /// shorter; a fixed seed, so the same batch gets the same plan.
  void improve_order(pipeline_plan& plan) const {
    const std::int64_t m = plan.slots;
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    const auto next = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(m));
    };
    for (std::int64_t tries = 0; m >= 2 && tries < std::min<std::int64_t>(4 * m, 48); ++tries) {
      const auto a = next();
      const auto b = next();
      if (a == b) continue;
      auto instance = plan.instance;
      for (auto& w : instance.work) w.slot = w.slot == a ? b : w.slot == b ? a : w.slot;
      auto timeline = simulate_pipeline(instance);
      if (timeline.makespan < plan.timeline.makespan) {
        plan.instance = std::move(instance);
        plan.timeline = std::move(timeline);
        for (auto& mb : plan.micro_batches) mb.slot = mb.slot == a ? b : mb.slot == b ? a : mb.slot;
      }
    }
  }

  pipeline_cost_model cost_;
  double tokens_cap_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
