#pragma once
// The configuration the DCP paper compares against: bucket parallelism with a fixed sequence-
// parallel degree of 4 for every sample, every layer recomputed, and a batch size per bucket.
//
// Source: VideoSys (NUS-HPC-AI-Lab/VideoSys) examples/training/open_sora/configs/benchmarks/
// baseline.yaml (`sp_size: 4`, grad_checkpoint: True) and the sampler's bucketized path
// (videosys/training/datasets/open_sora/sampler.py, `_build_bucketized_bucket_id_access_order`:
// each bucket cut into batches of its profiled batch size, every SP group taking one batch of
// one bucket per iteration); the profiler keeps, for the fixed sp, the largest batch size that
// fits. Notes: docs/baselines.md.
//
// Simplifications and adaptations:
//  - Batch size per bucket: as VideoSys's profiler, the largest power of two whose batch of the
//    bucket's longest sample (in this batch) fits at degree 4 with every layer recomputed under
//    alloc_fraction × GPU memory (`memory_fraction`, 0.70 as argparse), capped at the bucket's
//    sample count (the profiler has unlimited synthetic data; one real batch does not); with
//    `power_of_two_batches = false`, the largest count (binary search). `memory_fraction = 0`
//    uses the cost model's budget instead.
//  - VideoSys's "global interpolation" (default on for its baseline; the profiler code that does
//    it is only partly public): a bucket whose batch time is above the median bucket
//    batch time gets bs × median / time when that lowers the error (1.5× weight above the
//    median, 1× below), the new time from the cost model rather than by proportion. Batch sizes
//    are never raised (the memory limit already binds).
//  - dealing = random_iterations (default), as upstream: the batches in a seeded random order
//    (torch.randperm in the sampler; splitmix64 here), cut into iterations of one batch per SP
//    group, batch j of an iteration on group j, and a world barrier after every iteration (its
//    optimizer step: train.py runs one per iteration). The step's iterations run back to back
//    with those barriers (no optimizer time is charged for them). dealing = longest_first is our
//    variant (`paper-baseline-lpt` in dcp-sim): batches longest first (by the cost model's time)
//    to the least-loaded group, no barriers.
//  - Nothing is dropped or padded (VideoSys trims the access order to a multiple of the DP
//    size; here the last iteration may leave groups idle). `profile()` gives the batch sizes on
//    unlimited data, with which evaluation::videosys_drop_last drops what upstream's drop_last
//    and that trim drop, before the batch is planned.
//  - A batch that does not fit at degree 4 even alone (one sample longer than four GPUs hold)
//    runs at the smallest larger allowed degree where it fits, on the least-loaded aligned block.
//  - Full recomputation regardless of the scheduler's Recompute strategy (the baseline
//    checkpoints every layer).
//  - For text, give the scheduler a length bucketing (log2_buckets): under varlen_buckets all
//    text is one bucket and its batch size is set by the longest sample.
// Memory: within the budget (or within memory_fraction × capacity, which may exceed the budget
// when set above it — then this policy does NOT keep placement_policy's budget requirement).

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// How the paper baseline deals its batches to the SP groups.
enum class paper_dealing {
  random_iterations,  ///< upstream: seeded random order, one batch per group per iteration,
                      ///< barriers
  longest_first,      ///< ours: longest first to the least-loaded group, no barriers
};

struct paper_baseline {
  /// The fixed sequence-parallel degree (sp_size in baseline.yaml).
  std::int64_t degree = 4;
  /// How batches are dealt (see the header comment).
  paper_dealing dealing = paper_dealing::random_iterations;
  /// The generator's seed for random_iterations.
  std::uint64_t seed = 0;
  /// The profiler's cap as a fraction of the GPU memory (VideoSys alloc_memory_fraction, 0.70
  /// in argparse); 0: the cost model's budget.
  double memory_fraction = 0.70;
  /// The profiler's batch sizes double: powers of two only (false: any count that fits).
  bool power_of_two_batches = true;
  /// VideoSys's global interpolation (on by default for its baseline): batch sizes of buckets
  /// slower than the median bucket scaled towards the median time.
  bool global_interpolation = true;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  /// Each bucket's batch size as the profiler finds it on unlimited synthetic data (not capped
  /// at the bucket's sample count; global interpolation applied), buckets in order of their
  /// longest sample: what upstream's sampler cuts each bucket into, and the remainder its
  /// drop_last drops (evaluation::videosys_drop_last).
  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] std::vector<profiled_bucket> profile(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "paper-baseline"; }
  friend bool operator==(const paper_baseline&, const paper_baseline&) = default;
};

namespace detail {

template <class Context>
class paper_solver {
 public:
  paper_solver(const Context& ctx, const paper_baseline& options)
      : ctx_(ctx),
        options_(options),
        full_(recompute_setting::full(ctx.cost().model().layers)),
        limit_(options.memory_fraction > 0
                   ? options.memory_fraction * ctx.cost().cluster().gpu.memory_bytes
                   : ctx.budget()) {}

  // Buckets in order of their longest sample (labels_, buckets_) and the profiler's batch size
  // of each at the fixed degree: capped at the bucket's count unless `unlimited`.
  [[nodiscard]] std::vector<std::size_t> profile(bool unlimited) {
    validate(execution_config{options_.degree,
                              default_style(ctx_.sp(), options_.degree, ctx_.cost().model(),
                                            ctx_.cost().cluster()),
                              {}},
             ctx_.cost().model(), ctx_.cost().cluster());
    k_ = degree_index_of(ctx_, options_.degree);
    const auto k = k_;
    labels_.clear();
    buckets_.clear();
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      const auto at = std::find(labels_.begin(), labels_.end(), ctx_.bucket(i));
      if (at == labels_.end()) {
        labels_.push_back(ctx_.bucket(i));
        buckets_.push_back({i});
      } else {
        buckets_[static_cast<std::size_t>(at - labels_.begin())].push_back(i);
      }
    }
    const auto& buckets = buckets_;
    // The profiler's batch size per bucket (the largest that fits), then VideoSys's global
    // interpolation: a bucket whose batch takes longer than the median bucket's gets the batch
    // size scaled by median / time when that lowers |time - median| (1.5x weight above).
    std::vector<std::size_t> sizes;
    std::vector<double> times;
    for (const auto& bucket : buckets) {
      sizes.push_back(batch_size(bucket.front(),
                                 unlimited ? past_fitting(bucket.front(), k) : bucket.size(), k));
      times.push_back(sizes.back() > 0 ? batch_seconds(bucket.front(), sizes.back(), k) : 0.0);
    }
    if (options_.global_interpolation && !times.empty()) {
      auto sorted = times;
      std::sort(sorted.begin(), sorted.end());
      const auto mid = sorted.size() / 2;
      const double median = sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
      const auto score = [&](double t) { return t > median ? (t - median) * 1.5 : median - t; };
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        if (sizes[b] <= 1 || times[b] <= median) continue;
        const auto scaled = std::max<std::size_t>(
            1, static_cast<std::size_t>(static_cast<double>(sizes[b]) * median / times[b]));
        const double t = batch_seconds(buckets[b].front(), scaled, k);
        if (score(t) < score(times[b])) {
          sizes[b] = scaled;
          times[b] = t;
        }
      }
    }
    return sizes;
  }

  [[nodiscard]] std::vector<profiled_bucket> profiled() {
    const auto sizes = profile(true);
    std::vector<profiled_bucket> out;
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      out.push_back({labels_[b], static_cast<std::int64_t>(buckets_[b].size()), options_.degree,
                     static_cast<std::int64_t>(sizes[b])});
    return out;
  }

  [[nodiscard]] placement solve() {
    const auto sizes = profile(false);
    const auto k = k_;
    const auto& buckets = buckets_;
    struct batch {
      std::vector<std::size_t> items;
      std::size_t degree_index;
      dcp::degree_option run;
    };
    std::vector<batch> batches;
    for (const auto& bucket : buckets) {
      const auto size = sizes[static_cast<std::size_t>(&bucket - buckets.data())];
      const std::size_t step = std::max<std::size_t>(size, 1);
      for (std::size_t at = 0; at < bucket.size(); at += step) {
        std::vector<std::size_t> items(
            bucket.begin() + static_cast<std::ptrdiff_t>(at),
            bucket.begin() + static_cast<std::ptrdiff_t>(std::min(at + step, bucket.size())));
        const auto kb = size > 0 || fits(items.front(), 1, k) ? k : larger_degree(items.front(), k);
        const auto run = ctx_.run(shape_of(ctx_, items), kb, full_);
        batches.push_back({std::move(items), kb, run});
      }
    }
    placement out;
    rank_clock clock(ctx_.gpus());
    // Batches that need a larger degree first, each on its least-loaded aligned block.
    for (auto& b : batches) {
      if (b.degree_index == k) continue;
      const auto d = ctx_.degree(b.degree_index);
      std::int64_t first = 0;
      for (std::int64_t start = 0; start + d <= ctx_.gpus(); start += d)
        if (clock.ready(start, d) < clock.ready(first, d)) first = start;
      append_step(out, clock, ctx_, first, b.degree_index, b.items, b.run);
    }
    const std::int64_t d = ctx_.degree(k);
    const auto groups = static_cast<std::size_t>(ctx_.gpus() / d);
    if (options_.dealing == paper_dealing::random_iterations) {
      // Upstream: a random order, one batch per group per iteration, a barrier after each.
      std::vector<std::size_t> order;
      for (std::size_t n = 0; n < batches.size(); ++n)
        if (batches[n].degree_index == k) order.push_back(n);
      splitmix64(options_.seed).shuffle(order);
      for (std::size_t at = 0; at < order.size(); at += groups) {
        if (clock.makespan() > 0) {
          clock.barrier();
          out.barrier_seconds.push_back(clock.makespan());
        }
        for (std::size_t g = 0; g < groups && at + g < order.size(); ++g) {
          const auto& b = batches[order[at + g]];
          append_step(out, clock, ctx_, static_cast<std::int64_t>(g) * d, k, b.items, b.run);
        }
      }
      out.policy = "paper-baseline (degree " + std::to_string(d) +
                   ", full recompute, random dealing, a barrier per iteration)";
      return out;
    }
    // Ours: the degree-4 batches dealt longest first to the least-loaded group.
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t n = 0; n < batches.size(); ++n)
      if (batches[n].degree_index == k) order.emplace_back(batches[n].run.seconds, n);
    std::vector<double> loads;
    for (std::size_t g = 0; g < groups; ++g)
      loads.push_back(clock.ready(static_cast<std::int64_t>(g) * d, d));
    const auto assigned = dcp::detail::lpt_assign(std::move(order), loads);
    for (std::size_t g = 0; g < groups; ++g)
      for (auto n : assigned[g])
        append_step(out, clock, ctx_, static_cast<std::int64_t>(g) * d, k, batches[n].items,
                    batches[n].run);
    out.policy = "paper-baseline (degree " + std::to_string(d) + ", full recompute, longest first)";
    return out;
  }

 private:
  [[nodiscard]] micro_batch_shape copies(std::size_t representative, std::int64_t count) const {
    const auto& one = ctx_.shape(representative);
    return {count * one.samples, count * one.tokens, one.longest,
            static_cast<double>(count) * one.attention_pairs};
  }
  [[nodiscard]] bool fits(std::size_t representative, std::int64_t count, std::size_t k) const {
    return ctx_.cost().peak_bytes(copies(representative, count), ctx_.config(k, full_)) <= limit_;
  }
  [[nodiscard]] double batch_seconds(std::size_t representative, std::size_t count,
                                     std::size_t k) const {
    return ctx_.cost().seconds(copies(representative, static_cast<std::int64_t>(count)),
                               ctx_.config(k, full_));
  }

  // A count of the representative that does not fit at degree index k: the profiler's
  // synthetic data is unlimited, memory is not (a power of two; 2^40 at most).
  [[nodiscard]] std::size_t past_fitting(std::size_t representative, std::size_t k) const {
    std::size_t count = 1;
    while (count < (std::size_t{1} << 40) &&
           fits(representative, static_cast<std::int64_t>(count), k))
      count *= 2;
    return count;
  }

  // The largest count of the representative that fits at degree index k (0 if not even one).
  [[nodiscard]] std::size_t batch_size(std::size_t representative, std::size_t count,
                                       std::size_t k) const {
    if (!fits(representative, 1, k)) return 0;
    if (options_.power_of_two_batches) {
      std::size_t bs = 1;  // the profiler doubles while the next size fits
      while (bs * 2 <= count && fits(representative, static_cast<std::int64_t>(bs * 2), k)) bs *= 2;
      return bs;
    }
    std::size_t low = 1;
    std::size_t high = count + 1;  // does not fit or is past the count
    while (high - low > 1) {
      const std::size_t mid = low + (high - low) / 2;
      if (fits(representative, static_cast<std::int64_t>(mid), k))
        low = mid;
      else
        high = mid;
    }
    return low;
  }

  // The smallest larger degree where the sample fits alone under the profiler's cap, else the
  // smallest degree from k on where it fits the cost model's budget (VideoSys would mark the
  // bucket invalid and skip it; nothing is dropped here).
  [[nodiscard]] std::size_t larger_degree(std::size_t sample, std::size_t k) const {
    for (const double limit : {limit_, ctx_.budget()})
      for (std::size_t j = limit == limit_ ? k + 1 : k; j < ctx_.degrees().size(); ++j)
        if (ctx_.cost().peak_bytes(copies(sample, 1), ctx_.config(j, full_)) <= limit) return j;
    ctx_.throw_does_not_fit(sample);
  }

  const Context& ctx_;
  const paper_baseline& options_;
  recompute_setting full_;
  double limit_;
  std::size_t k_ = 0;
  std::vector<std::int32_t> labels_;
  std::vector<std::vector<std::size_t>> buckets_;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement paper_baseline::place(const placement_input<M, R>& input) const {
  if (input.size() == 0) return placement{{}, 0, 0, 0, "paper-baseline"};
  return detail::paper_solver<dcp::placement_input<M, R>>(input, *this).solve();
}

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] std::vector<profiled_bucket> paper_baseline::profile(
    const placement_input<M, R>& input) const {
  return detail::paper_solver<dcp::placement_input<M, R>>(input, *this).profiled();
}

static_assert(placement_policy<paper_baseline, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
