#pragma once
// VideoSys Data-Centric Parallel, the DCP-inter variant with pyramid activation checkpointing
// (PAC), as a placement policy.
//
// Source: NUS-HPC-AI-Lab/VideoSys (DCP landed in PR #234):
//  - the profiler, videosys/core/dcp/profiler.py: per bucket, bs doubles until the predicted
//    memory passes memory_cap = alloc_fraction × GPU memory, then sp doubles (inside a node,
//    across nodes only if nothing fits there); the kept config maximises bs / sp / time; PAC
//    un-checkpoints as many layers as a 1 GiB-granularity knapsack fits in the leftover memory;
//  - the sampler, videosys/training/datasets/open_sora/sampler.py, VariableVideoBatchSampler:
//    `_build_local_bucket_id_access_order_acc` fills the world with SP groups (each takes one
//    batch of one bucket at its profiled (sp, bs)), `_calculate_grad_accumulation_num` gives
//    each group its gradient-accumulation count by a brute-force search for the target time
//    that minimises an asymmetric error, and groups sorted by sp (largest first) are mapped to
//    contiguous ranks.
// Notes: docs/baselines.md; configs from
// examples/training/open_sora/configs/benchmarks/dcp_inter*.yaml.
//
// Simplifications and adaptations:
//  - The profile is the cost model (VideoSys measures time and memory per (bucket, bs, sp)):
//    a bucket's row is the cost model's seconds and peak bytes for bs copies of the bucket's
//    longest sample in this batch (a video bucket holds one shape; for text, use a length
//    bucketing such as log2_buckets — the default varlen_buckets puts all text in one bucket).
//  - The profiler has unlimited synthetic data; with one real batch, a batch size above the
//    bucket's sample count cannot be filled, so bs doubles up to the count (the count itself is
//    the last candidate).
//  - VideoSys plans an epoch as a sequence of iterations (optimizer steps); one of our global
//    batches may need several of its iterations. With iteration_barriers (default, upstream)
//    they are separated by world barriers (train.py's optimizer step after every iteration; its
//    time is not charged here: the simulator adds one gradient synchronisation per step), and
//    each iteration's groups, largest SP first, take contiguous ranks as VideoSys maps them.
//    Without (ours, in VideoSys's favour), they run back to back and each group (largest SP
//    first, then longest accumulated time first) takes the aligned block of its size that is
//    free earliest, so a slow group of one iteration does not hold back the same ranks' groups
//    in every later one.
//  - Nothing is dropped here (`profile()` gives the batch sizes with which
//    evaluation::videosys_drop_last drops each bucket's partial batch before planning, as
//    drop_last does upstream; the sampler's other drops below stay unmodelled): VideoSys drops (or
//    pads by repetition) partial batches with drop_last, discards an iteration whose GPUs cannot
//    all be filled, skips buckets the profiler marks invalid, and stops a group's accumulation when
//    its bucket runs out. Here partial batches run, an iteration keeps the groups it filled (the
//    other GPUs idle), a bucket that fits nowhere under the cap runs one sample per micro-step at
//    the smallest degree where it fits the cost model's budget with every layer recomputed, and a
//    group runs as many batches as are left.
//  - shuffle = false (default) is VideoSys's generator-free path: the largest SP size that still
//    fits, the first bucket of that size, data in canonical order (longest first). shuffle =
//    true draws SP size (weighted by how many buckets use it) and bucket from a seeded
//    splitmix64, as the generator path does with torch; the weighted pick is the intended
//    cumulative one (upstream compares the draw with each weight, not their running sum).
//  - `_calculate_grad_accumulation_num` is reproduced exactly (score 1.5× over the target,
//    1× under; the per-bucket limit ceil(left samples / bs / occurrences)); the minimum
//    accumulation (scale every count by ceil(min / max)) is applied when
//    min_gas > 1.
//  - One module type: the cost model treats a model's blocks alike, so PAC's knapsack has one
//    item (layers of the block type), value = the forward time recomputing a layer costs,
//    weight = ceil(bytes a kept layer adds × count / 1 GiB).
//  - The Recompute strategy the scheduler is given is not used: VideoSys checkpoints every layer
//    (grad_checkpoint: True in every benchmark config) and, with PAC, keeps the knapsack's layers.
// Memory: VideoSys is memory-aware against its own cap (alloc_fraction × GPU memory, 0.70 in
// argparse, 0.65 in train.yaml), which lies below the cost model's budget (capacity minus the
// training spec's headroom) unless the fraction exceeds budget / capacity; such a fraction gives
// micro-steps over the budget.
// This policy does NOT promise placement_policy's budget requirement for such settings, and the
// invalid-bucket fallback is checked against the budget only.

#include <algorithm>
#include <cmath>
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

/// VideoSys's `_calculate_grad_accumulation_num`: the accumulation count of each SP group of an
/// iteration. `exec_seconds[g]` is group g's profiled time per micro-step, `max_accumulation[g]`
/// the most batches its bucket can still give it. Every candidate target τ = exec_seconds[g] · m
/// (τ ≤ max(exec_seconds) · max_gas) is tried; for each, every group takes the count whose total
/// time is closest to τ without passing it (over-target error weighted 1.5, under 1); the τ with
/// the smallest total error wins (ties: the first found).
[[nodiscard]] inline std::vector<std::int32_t> videosys_grad_accumulation(
    const std::vector<double>& exec_seconds, const std::vector<std::int32_t>& max_accumulation,
    std::int32_t max_gas) {
  const auto score = [](double value, double target) {
    return value > target ? (value - target) * 1.5 : (target - value);
  };
  if (exec_seconds.empty()) return {};
  const double max_time =
      *std::max_element(exec_seconds.begin(), exec_seconds.end()) * static_cast<double>(max_gas);
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<std::int32_t> best(exec_seconds.size(), 1);
  std::vector<std::int32_t> gas(exec_seconds.size(), 0);
  for (std::size_t out = 0; out < exec_seconds.size(); ++out) {
    for (std::int32_t mult = 1; mult <= max_accumulation[out]; ++mult) {
      const double target = exec_seconds[out] * mult;
      if (target > max_time) break;
      double error = 0;
      for (std::size_t in = 0; in < exec_seconds.size(); ++in) {
        double group_error = std::numeric_limits<double>::infinity();
        gas[in] = 0;
        for (std::int32_t g = 1; g <= max_accumulation[in]; ++g) {
          const double value = exec_seconds[in] * g;
          if (value > target) break;
          const double e = score(value, target);
          if (e < group_error) {
            group_error = e;
            gas[in] = g;
          }
        }
        error += group_error;
      }
      if (error < best_error) {
        best_error = error;
        best = gas;
      }
    }
  }
  return best;
}

/// One item type of PAC's knapsack: `layers` blocks of one kind, each kept (not checkpointed)
/// saving `value` (its recomputed forward, seconds) and costing `bytes`.
struct pac_module {
  double value = 0;
  double bytes = 0;
  std::int64_t layers = 0;
};

/// PAC's knapsack at 1 GiB granularity: how many layers of each module type to keep so that
/// Σ ceil(bytes × count / 1 GiB) ≤ `capacity_gib`, maximising Σ value × count. Exact dynamic
/// programming over the capacity (a multiple-choice knapsack, one choice per module type).
[[nodiscard]] inline std::vector<std::int64_t> pac_knapsack(const std::vector<pac_module>& modules,
                                                            std::int64_t capacity_gib) {
  const auto width = static_cast<std::size_t>(std::max<std::int64_t>(capacity_gib, 0) + 1);
  const auto weight = [](const pac_module& m, std::int64_t count) {
    return static_cast<std::int64_t>(std::ceil(m.bytes * static_cast<double>(count) / gib - 1e-9));
  };
  std::vector<double> best(width, 0.0);
  std::vector<std::vector<std::int64_t>> choice(modules.size(),
                                                std::vector<std::int64_t>(width, 0));
  for (std::size_t t = 0; t < modules.size(); ++t) {
    std::vector<double> next(width, -1.0);
    for (std::size_t w = 0; w < width; ++w) {
      for (std::int64_t count = 0; count <= modules[t].layers; ++count) {
        const auto need = weight(modules[t], count);
        if (need > static_cast<std::int64_t>(w)) break;
        const double value = best[w - static_cast<std::size_t>(need)] +
                             modules[t].value * static_cast<double>(count);
        if (value > next[w]) {
          next[w] = value;
          choice[t][w] = count;
        }
      }
    }
    best = std::move(next);
  }
  std::vector<std::int64_t> counts(modules.size(), 0);
  auto w = static_cast<std::int64_t>(width) - 1;
  for (std::size_t t = modules.size(); t-- > 0;) {
    counts[t] = choice[t][static_cast<std::size_t>(w)];
    w -= weight(modules[t], counts[t]);
  }
  return counts;
}

struct videosys_dcp {
  /// alloc_memory_fraction: the profiler's memory cap as a fraction of the GPU memory.
  double alloc_fraction = 0.70;
  /// max_grad_accumulation_steps (5 in the benchmark YAMLs, 3 in argparse).
  std::int32_t max_gas = 5;
  /// min_grad_accumulation_steps (15 in dcp_inter_ckpt.yaml); 1 leaves the counts as searched.
  std::int32_t min_gas = 1;
  /// dynamic_recompute: PAC. Off: every layer checkpointed.
  bool pyramid_checkpointing = true;
  /// The sampler's generator: random SP size and bucket picks from `seed`.
  bool shuffle = false;
  std::uint64_t seed = 0;
  /// A world barrier between iterations (upstream: an optimizer step each); off lets the next
  /// iteration's groups start on ranks as soon as they are free (ours).
  bool iteration_barriers = true;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  /// Each bucket's profiled (sp, bs) as VideoSys's profiler finds them on unlimited synthetic
  /// data (bs not capped at the bucket's sample count), buckets in order of their longest
  /// sample; batch_size 0 for a bucket it marks invalid. What drop_last keeps whole batches of
  /// (evaluation::videosys_drop_last).
  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] std::vector<profiled_bucket> profile(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "videosys-dcp"; }
  friend bool operator==(const videosys_dcp&, const videosys_dcp&) = default;
};

namespace detail {

/// A profiled configuration of one bucket.
struct videosys_row {
  std::int64_t batch_size = 1;
  std::size_t degree_index = 0;
  recompute_setting recompute{};
  double seconds = 0;
  double peak_bytes = 0;
};

struct videosys_bucket {
  std::int32_t label = 0;
  std::vector<std::size_t> samples{};  // canonical order, longest first
  std::size_t cursor = 0;              // samples already taken
  videosys_row row{};
  bool profiled = true;  // false: the cap-free fallback row
  [[nodiscard]] std::size_t left() const noexcept { return samples.size() - cursor; }
};

template <class Context>
class videosys_solver {
 public:
  videosys_solver(const Context& ctx, const videosys_dcp& options)
      : ctx_(ctx),
        options_(options),
        layers_(ctx.cost().model().layers),
        cap_(options.alloc_fraction * ctx.cost().cluster().gpu.memory_bytes),
        random_(options.seed) {}

  [[nodiscard]] placement solve() {
    make_buckets();
    for (auto& b : buckets_) profile(b);
    placement out;
    rank_clock clock(ctx_.gpus());
    run_iterations(out, clock);
    out.policy = std::string("videosys-dcp (inter") +
                 (options_.pyramid_checkpointing ? ", PAC" : "") + ", max gas " +
                 std::to_string(options_.max_gas) + ")";
    return out;
  }

  [[nodiscard]] const std::vector<videosys_bucket>& buckets() const noexcept { return buckets_; }
  /// The profile alone; `unlimited`: batch sizes not capped at a bucket's sample count.
  void profile_only(bool unlimited = false) {
    unlimited_ = unlimited;
    make_buckets();
    for (auto& b : buckets_) profile(b);
  }

 private:
  // Buckets in order of their longest sample (canonical order), each with its samples.
  void make_buckets() {
    buckets_.clear();
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      auto it = std::find_if(buckets_.begin(), buckets_.end(),
                             [&](const videosys_bucket& b) { return b.label == ctx_.bucket(i); });
      if (it == buckets_.end()) {
        buckets_.push_back({ctx_.bucket(i), {}, 0, {}, true});
        it = buckets_.end() - 1;
      }
      it->samples.push_back(i);
    }
  }

  [[nodiscard]] micro_batch_shape copies(std::size_t representative,
                                         std::int64_t batch_size) const {
    const auto& one = ctx_.shape(representative);
    return {batch_size * one.samples, batch_size * one.tokens, one.longest,
            static_cast<double>(batch_size) * one.attention_pairs};
  }

  // The profiler's row for (bs, sp), or nullopt when its predicted memory with every layer
  // checkpointed passes the cap. With PAC, the knapsack keeps layers in the leftover memory.
  [[nodiscard]] std::optional<videosys_row> row_for(std::size_t representative,
                                                    std::int64_t batch_size, std::size_t k) const {
    const auto& cost = ctx_.cost();
    const auto shape = copies(representative, batch_size);
    const auto full = recompute_setting::full(layers_);
    const double all_checkpointed = cost.peak_bytes(shape, ctx_.config(k, full));
    if (all_checkpointed > cap_) return std::nullopt;
    auto recompute = full;
    if (options_.pyramid_checkpointing) {
      const auto avail = static_cast<std::int64_t>(std::floor((cap_ - all_checkpointed) / gib));
      const double kept_one =
          layers_ > 1 ? (cost.peak_bytes(shape, ctx_.config(k, recompute_setting::partial(1))) -
                         all_checkpointed) /
                            static_cast<double>(layers_ - 1)
                      : cost.peak_bytes(shape, ctx_.config(k, recompute_setting::none())) -
                            all_checkpointed;
      const double recompute_one =
          (cost.seconds(shape, ctx_.config(k, full)) -
           cost.seconds(shape, ctx_.config(k, recompute_setting::none()))) /
          static_cast<double>(layers_);
      auto keep = pac_knapsack({{recompute_one, std::max(kept_one, 0.0), layers_}}, avail).front();
      while (keep > 0 &&
             cost.peak_bytes(shape, ctx_.config(k, recompute_setting::partial(layers_ - keep))) >
                 cap_)
        --keep;
      recompute = recompute_setting::partial(layers_ - keep);
    }
    const auto run = ctx_.run(shape, k, recompute);
    return videosys_row{batch_size, k, recompute, run.seconds, run.peak_bytes};
  }

  // The profiler's search over one list of degrees: bs doubles while it fits (up to the
  // bucket's count), then sp doubles with bs restarting at 1 (PAC) or at half the last good bs.
  void search(const videosys_bucket& b, const std::vector<std::size_t>& ks,
              std::vector<videosys_row>& rows) const {
    // The profiler's data is synthetic and unlimited (memory stops bs long before 2^40); one
    // real batch holds the bucket's count.
    const auto count =
        unlimited_ ? std::int64_t{1} << 40 : static_cast<std::int64_t>(b.samples.size());
    const std::size_t representative = b.samples.front();
    std::int64_t batch_size = 1;
    for (auto k : ks) {
      std::int64_t last_good = 0;
      while (true) {
        const auto row = row_for(representative, batch_size, k);
        if (!row) break;
        rows.push_back(*row);
        last_good = batch_size;
        if (batch_size >= count) break;
        batch_size = std::min(batch_size * 2, count);
      }
      batch_size = options_.pyramid_checkpointing ? 1 : std::max<std::int64_t>(1, last_good / 2);
    }
  }

  void profile(videosys_bucket& b) const {
    std::vector<std::size_t> intra;
    std::vector<std::size_t> cross;
    for (std::size_t k = 0; k < ctx_.degrees().size(); ++k)
      (ctx_.crosses_nodes(k) ? cross : intra).push_back(k);
    std::vector<videosys_row> rows;
    search(b, intra, rows);
    if (rows.empty()) search(b, cross, rows);  // across nodes only if nothing fits in one
    if (!rows.empty()) {
      // Samples per GPU-second: bs / sp / time; the first best row wins ties.
      const auto throughput = [&](const videosys_row& r) {
        return static_cast<double>(r.batch_size) /
               (static_cast<double>(ctx_.degree(r.degree_index)) * r.seconds);
      };
      b.row = rows.front();
      for (const auto& r : rows)
        if (throughput(r) > throughput(b.row)) b.row = r;
      return;
    }
    // An invalid bucket (VideoSys skips it): one sample per micro-step at the smallest degree
    // where the longest fits the cost model's budget with every layer recomputed.
    b.profiled = false;
    const auto full = recompute_setting::full(layers_);
    for (std::size_t k = 0; k < ctx_.degrees().size(); ++k) {
      const auto run = ctx_.run(ctx_.shape(b.samples.front()), k, full);
      if (run.peak_bytes <= ctx_.budget()) {
        b.row = {1, k, full, run.seconds, run.peak_bytes};
        return;
      }
    }
    ctx_.throw_does_not_fit(b.samples.front());
  }

  [[nodiscard]] std::int64_t sp_of(const videosys_bucket& b) const {
    return ctx_.degree(b.row.degree_index);
  }

  [[nodiscard]] double uniform() { return random_.uniform(); }

  struct group {
    std::size_t bucket;
    std::vector<std::vector<std::size_t>> batches;
  };

  [[nodiscard]] std::vector<std::size_t> take_batch(videosys_bucket& b) const {
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(b.row.batch_size), b.left());
    std::vector<std::size_t> batch(b.samples.begin() + static_cast<std::ptrdiff_t>(b.cursor),
                                   b.samples.begin() + static_cast<std::ptrdiff_t>(b.cursor + n));
    b.cursor += n;
    return batch;
  }

  // `_build_local_bucket_id_access_order_acc`: iterations until every sample is taken.
  void run_iterations(placement& out, rank_clock& clock) {
    const std::int64_t world = ctx_.gpus();
    // SP sizes in use (ascending) and, per size, the buckets with samples left (bucket order).
    std::vector<std::int64_t> sp_list;
    std::vector<std::vector<std::size_t>> sp_buckets;
    const auto sp_at = [&](std::int64_t sp) {
      return static_cast<std::size_t>(std::find(sp_list.begin(), sp_list.end(), sp) -
                                      sp_list.begin());
    };
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const auto sp = sp_of(buckets_[b]);
      if (sp_at(sp) == sp_list.size()) {
        const auto pos = std::lower_bound(sp_list.begin(), sp_list.end(), sp) - sp_list.begin();
        sp_list.insert(sp_list.begin() + pos, sp);
        sp_buckets.insert(sp_buckets.begin() + pos, std::vector<std::size_t>{});
      }
      sp_buckets[sp_at(sp)].push_back(b);
    }
    const auto retire = [&](std::size_t b) {
      const auto at = sp_at(sp_of(buckets_[b]));
      if (at == sp_list.size()) return;
      auto& list = sp_buckets[at];
      const auto it = std::find(list.begin(), list.end(), b);
      if (it == list.end()) return;
      list.erase(it);
      if (list.empty()) {
        sp_list.erase(sp_list.begin() + static_cast<std::ptrdiff_t>(at));
        sp_buckets.erase(sp_buckets.begin() + static_cast<std::ptrdiff_t>(at));
      }
    };
    while (!sp_list.empty()) {
      std::vector<group> groups;
      std::int64_t remain = world;
      while (remain > 0) {
        std::size_t fitting = 0;
        while (fitting < sp_list.size() && remain >= sp_list[fitting]) ++fitting;
        if (fitting == 0) break;  // upstream discards such an iteration; the GPUs idle instead
        std::size_t idx = fitting - 1;
        if (options_.shuffle) {
          double total = 0;
          for (std::size_t s = 0; s < fitting; ++s)
            total += static_cast<double>(sp_buckets[s].size());
          double draw = uniform() * total;
          for (idx = 0; idx + 1 < fitting; ++idx) {
            draw -= static_cast<double>(sp_buckets[idx].size());
            if (draw < 0) break;
          }
        }
        const auto sp = sp_list[idx];
        remain -= sp;
        std::size_t pick = 0;
        if (options_.shuffle)
          pick = std::min(
              sp_buckets[idx].size() - 1,
              static_cast<std::size_t>(uniform() * static_cast<double>(sp_buckets[idx].size())));
        const auto b = sp_buckets[idx][pick];
        groups.push_back({b, {take_batch(buckets_[b])}});
        if (buckets_[b].left() == 0) retire(b);
      }
      std::stable_sort(groups.begin(), groups.end(), [&](const group& x, const group& y) {
        return sp_of(buckets_[x.bucket]) > sp_of(buckets_[y.bucket]);
      });
      accumulate(groups, retire);
      if (options_.iteration_barriers && clock.makespan() > 0) {
        clock.barrier();
        out.barrier_seconds.push_back(clock.makespan());
      }
      const auto first = place_groups(groups, clock);
      for (std::size_t g = 0; g < groups.size(); ++g) {
        const auto& row = buckets_[groups[g].bucket].row;
        for (auto& batch : groups[g].batches) {
          const auto run = ctx_.run(shape_of(ctx_, batch), row.degree_index, row.recompute);
          append_step(out, clock, ctx_, first[g], row.degree_index, std::move(batch), run);
        }
      }
    }
  }

  // First ranks of an iteration's groups. VideoSys maps them, largest SP first, onto contiguous
  // ranks of a world that starts the iteration together (an optimizer step separates
  // iterations); here iterations follow each other without a barrier, so the groups, largest
  // SP first and then longest accumulated time first, each take the aligned block of their size
  // that is free earliest among those not yet taken in this iteration (the buddy argument keeps
  // one available while the iteration's SP sizes fit the world).
  [[nodiscard]] std::vector<std::int64_t> place_groups(std::vector<group>& groups,
                                                       const rank_clock& clock) const {
    const auto seconds = [&](const group& g) {
      double t = 0;
      for (const auto& batch : g.batches) {
        const auto& row = buckets_[g.bucket].row;
        t += ctx_.run(shape_of(ctx_, batch), row.degree_index, row.recompute).seconds;
      }
      return t;
    };
    std::vector<double> total;
    for (const auto& g : groups) total.push_back(seconds(g));
    std::vector<std::size_t> order(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const auto sa = sp_of(buckets_[groups[a].bucket]);
      const auto sb = sp_of(buckets_[groups[b].bucket]);
      if (sa != sb) return sa > sb;
      return total[a] > total[b];
    });
    std::vector<bool> taken(static_cast<std::size_t>(ctx_.gpus()), false);
    std::vector<std::int64_t> first(groups.size(), 0);
    for (auto g : order) {
      const auto d = sp_of(buckets_[groups[g].bucket]);
      std::int64_t best = -1;
      for (std::int64_t start = 0; start + d <= ctx_.gpus(); start += d) {
        bool free = true;
        for (auto r = start; r < start + d && free; ++r) free = !taken[static_cast<std::size_t>(r)];
        if (free && (best < 0 || clock.ready(start, d) < clock.ready(best, d))) best = start;
      }
      for (auto r = best; r < best + d; ++r) taken[static_cast<std::size_t>(r)] = true;
      first[g] = best;
    }
    return first;
  }

  // Gradient accumulation per group, then each group takes its further batches.
  template <class Retire>
  void accumulate(std::vector<group>& groups, Retire&& retire) {
    std::vector<double> exec;
    std::vector<std::int32_t> limit;
    for (const auto& g : groups) {
      const auto& b = buckets_[g.bucket];
      exec.push_back(b.row.seconds);
      std::size_t occurrences = 0;
      std::size_t first_size = 0;
      for (const auto& h : groups)
        if (h.bucket == g.bucket) {
          if (occurrences == 0) first_size = h.batches.front().size();
          ++occurrences;
        }
      const double most =
          std::ceil(static_cast<double>(b.left()) / static_cast<double>(first_size) /
                    static_cast<double>(occurrences));
      limit.push_back(static_cast<std::int32_t>(std::max(1.0, std::min(most, 1e6))));
    }
    auto gas = videosys_grad_accumulation(exec, limit, options_.max_gas);
    const auto top = *std::max_element(gas.begin(), gas.end());
    if (top > 0 && top < options_.min_gas) {
      const auto scale = (options_.min_gas + top - 1) / top;
      for (auto& g : gas) g *= scale;
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      auto& b = buckets_[groups[g].bucket];
      for (std::int32_t more = gas[g] - 1; more > 0 && b.left() > 0; --more)
        groups[g].batches.push_back(take_batch(b));
      if (b.left() == 0) retire(groups[g].bucket);
    }
  }

  const Context& ctx_;
  const videosys_dcp& options_;
  std::int64_t layers_;
  double cap_;
  splitmix64 random_;
  bool unlimited_ = false;
  std::vector<videosys_bucket> buckets_;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement videosys_dcp::place(const placement_input<M, R>& input) const {
  if (input.size() == 0) return placement{{}, 0, 0, 0, "videosys-dcp"};
  return detail::videosys_solver<dcp::placement_input<M, R>>(input, *this).solve();
}

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] std::vector<profiled_bucket> videosys_dcp::profile(
    const placement_input<M, R>& input) const {
  detail::videosys_solver<dcp::placement_input<M, R>> solver(input, *this);
  solver.profile_only(true);
  std::vector<profiled_bucket> out;
  for (const auto& b : solver.buckets())
    out.push_back({b.label, static_cast<std::int64_t>(b.samples.size()),
                   input.degree(b.row.degree_index), b.profiled ? b.row.batch_size : 0});
  return out;
}

static_assert(placement_policy<videosys_dcp, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
