#pragma once
// The memory-budget packer: first fit per bucket, in packing order, for one group
// (pack_to_budget) or for every group of one degree in a single pass (pack_groups_to_budget).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "dcp/detail/prefetch.hpp"
#include "dcp/placement/degree_option.hpp"
#include "dcp/placement/detail/first_fit_index.hpp"
#include "dcp/spec/micro_batch_shape.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A micro-batch being filled by the packer.
struct packed_batch {
  std::vector<std::size_t> samples{};
  micro_batch_shape shape{};
  degree_option run{};
};

namespace detail {

/// First fit for one group, fed its samples in packing order (bucket descending, then index):
/// each joins the first micro-batch of its bucket, in creation order, with room for what it
/// needs alone and whose setting the recompute strategy keeps for the union, else opens one
/// (at the degree's dense packing setting for a short sample: placement_input::opening_setting).
template <class Input>
class first_fit_packer {
 public:
  /// `smallest_need`: the least activation bytes any of the group's samples needs alone; a
  /// micro-batch with less free room is closed and never tried again.
  /// `dense`: open a short sample's micro-batch at the degree's dense packing setting.
  first_fit_packer(const Input& input, std::size_t k, double smallest_need,
                   std::size_t expected = 0, bool dense = false)
      : input_(input), k_(k), smallest_need_(smallest_need), dense_(dense) {
    joined_.reserve(expected);
  }

  /// Adds sample i, whose alone option at the packer's degree is `alone`.
  void add(std::size_t i, const degree_option& alone) {
    if (!batches_.empty() && input_.bucket(i) != bucket_) bucket_begin_ = batches_.size();
    bucket_ = input_.bucket(i);
    // What the sample needs on its own, less a little for rounding: bins with less free room are
    // skipped without asking the cost model (memory is close to additive in samples).
    const double need = 0.999 * (alone.peak_bytes - input_.empty_bytes(k_));
    for (std::size_t o = open_.first_at_least(bucket_begin_, need); o != first_fit_index::none;
         o = open_.first_at_least(o + 1, need)) {
      auto& batch = batches_[o];
      const auto joined = batch.shape + input_.shape(i);
      if (const auto bytes = input_.runs_with(joined, k_, batch.run.recompute, batch.run.sp)) {
        batch.shape = joined;
        batch.run.peak_bytes = *bytes;  // its time is taken once, in finish()
        open_.set(o, room(input_.budget() - *bytes));
        joined_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(o)});
        ++made_[o].size;
        return;
      }
    }
    if (!alone.feasible) input_.throw_does_not_fit(i);
    joined_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(batches_.size())});
    // A short sample opens its micro-batch at the degree's dense packing setting, if asked.
    auto run = alone;
    const auto opening = dense_ ? input_.opening_setting(k_, alone) : alone.recompute;
    if (opening != alone.recompute)
      if (const auto bytes = input_.runs_with(input_.shape(i), k_, opening, alone.sp))
        run = input_.run_fitting(input_.shape(i), k_, opening, alone.sp, *bytes);
    batches_.push_back({{}, input_.shape(i), run});
    open_.push(room(input_.budget() - run.peak_bytes));
    made_.push_back({1, alone.recompute});
  }

  /// The micro-batches, each timed as a whole, their samples in the order they joined; one
  /// opened at the dense packing setting that fits its first sample's own setting gets that.
  [[nodiscard]] std::vector<packed_batch> finish() && {
    for (std::size_t b = 0; b < batches_.size(); ++b) batches_[b].samples.reserve(made_[b].size);
    for (const auto& [i, b] : joined_) batches_[b].samples.push_back(i);
    for (std::size_t b = 0; b < batches_.size(); ++b) {
      auto& batch = batches_[b];
      const auto own_bytes = batch.run.recompute != made_[b].own
                                 ? input_.runs_with(batch.shape, k_, made_[b].own, batch.run.sp)
                                 : std::nullopt;
      if (own_bytes)
        batch.run = input_.run_fitting(batch.shape, k_, made_[b].own, batch.run.sp, *own_bytes);
      else if (batch.samples.size() > 1)
        batch.run = input_.run_fitting(batch.shape, k_, batch.run.recompute, batch.run.sp,
                                       batch.run.peak_bytes);
    }
    return std::move(batches_);
  }

 private:
  [[nodiscard]] double room(double free) const noexcept {
    return free < smallest_need_ ? -std::numeric_limits<double>::infinity() : free;
  }

  const Input& input_;
  std::size_t k_;
  double smallest_need_;
  bool dense_;
  std::vector<packed_batch> batches_{};  // sample lists filled by finish()
  // (sample, micro-batch) in joining order and the size of each micro-batch: the packer's
  // writes go to one sequential log rather than to a list per micro-batch (with thousands of
  // groups packed at once those lists would be far apart in memory and regrown piecemeal).
  // (Sample indices fit 32 bits as elsewhere in the packer: a batch of 2^32 samples would need
  // over a terabyte of planner memory.)
  struct join_record {
    std::uint32_t sample;
    std::uint32_t batch;
  };
  std::vector<join_record> joined_{};
  struct made {
    std::uint32_t size;     // samples that joined
    recompute_setting own;  // its first sample's own setting
  };
  std::vector<made> made_{};      // per micro-batch
  first_fit_index open_{};        // free bytes per micro-batch, -inf once closed
  std::size_t bucket_begin_ = 0;  // first micro-batch of the current bucket
  std::int32_t bucket_ = 0;
};

}  // namespace detail

/// Total seconds of a list of packed micro-batches.
[[nodiscard]] inline double total_seconds(const std::vector<packed_batch>& batches) noexcept {
  double t = 0;
  for (const auto& b : batches) t += b.run.seconds;
  return t;
}

namespace detail {

/// Each group's packing from `packers` (the lightest setting's for every group, then, where
/// `both`, the denser setting's): the one with the shorter total.
template <class Packer>
[[nodiscard]] std::vector<std::vector<packed_batch>> finish_groups(std::vector<Packer> packers,
                                                                   std::size_t groups, bool both) {
  std::vector<std::vector<packed_batch>> out;
  out.reserve(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    out.push_back(std::move(packers[g]).finish());
    if (!both) continue;
    auto dense = std::move(packers[groups + g]).finish();
    if (total_seconds(dense) < total_seconds(out.back())) out.back() = std::move(dense);
  }
  return out;
}

}  // namespace detail

/// Packs the samples one group runs at degree index k into micro-batches: per bucket, first fit
/// in canonical order (longest first), a sample joining a micro-batch only if the recompute
/// strategy's setting for the union is the one the micro-batch already has and the union fits
/// the budget (packing never adds recomputation). Where the degree has a dense packing setting
/// (placement_input::packing_setting: selective recomputation where fuller micro-steps save
/// more fixed cost than it costs), the group is also packed with its short samples'
/// micro-batches opened at that setting (each falling back to the lightest if it ends up
/// fitting it), and the packing with the shorter total is kept. A micro-batch whose free bytes are
/// below what the group's smallest sample needs is closed; the open ones sit in a segment tree, so
/// finding the first that may hold a sample costs O(log micro-batches), not a scan.
template <class Input>
[[nodiscard]] std::vector<packed_batch> pack_to_budget(const Input& input,
                                                       std::vector<std::size_t> items,
                                                       std::size_t k) {
  const auto before = [&](std::size_t a, std::size_t b) {
    if (input.bucket(a) != input.bucket(b)) return input.bucket(a) > input.bucket(b);
    return a < b;
  };
  if (!std::is_sorted(items.begin(), items.end(), before))
    std::sort(items.begin(), items.end(), before);
  double smallest_need = std::numeric_limits<double>::infinity();
  for (auto i : items) {
    const auto& alone = input.alone(i, k);
    if (alone.feasible)
      smallest_need = std::min(smallest_need, alone.peak_bytes - input.empty_bytes(k));
  }
  const auto pack = [&](bool dense) {
    detail::first_fit_packer<Input> packer(input, k, smallest_need, items.size(), dense);
    for (auto i : items) packer.add(i, input.alone(i, k));
    return std::move(packer).finish();
  };
  auto out = pack(false);
  if (input.packs_denser(k)) {
    auto dense = pack(true);
    if (total_seconds(dense) < total_seconds(out)) out = std::move(dense);
  }
  return out;
}

namespace detail {

/// pack_groups_to_budget's pass: each group's packer (at the lightest setting and, where the
/// degree has a denser one, at that too), fed the groups' samples in packing order.
template <class Input>
class group_packing {
 public:
  group_packing(const Input& input, const std::vector<std::vector<std::size_t>>& groups,
                std::size_t k, std::vector<std::uint32_t>& group_of)
      : input_(input), groups_(groups), k_(k), group_of_(group_of), both_(input.packs_denser(k)) {
    group_of_.assign(input.size(), nowhere);
    std::vector<double> smallest_need(groups.size(), std::numeric_limits<double>::infinity());
    for (std::size_t g = 0; g < groups.size(); ++g)
      for (auto i : groups[g]) group_of_[i] = static_cast<std::uint32_t>(g);
    each([&](std::size_t i, std::uint32_t g) {
      const auto& alone = input.alone(i, k);
      if (alone.feasible)
        smallest_need[g] = std::min(smallest_need[g], alone.peak_bytes - input.empty_bytes(k));
    });
    // Each group packed at the lightest setting and, where the degree has a denser one, at that
    // too; the group keeps the packing with the shorter total.
    packers_.reserve(both_ ? 2 * groups.size() : groups.size());
    for (const bool dense : {false, true}) {
      if (dense && !both_) break;
      for (std::size_t g = 0; g < groups.size(); ++g)
        packers_.emplace_back(input, k, smallest_need[g], groups[g].size(), dense);
    }
  }

  /// Feeds every sample to its group's packers one at a time.
  void feed_one_at_a_time() {
    each([&](std::size_t i, std::uint32_t g) { add(i, g); });
  }

  /// Feeds the samples a chunk of `chunk` at a time, each group's samples in the chunk together
  /// (a stable counting sort: each packer gets its samples in packing order, as one at a time
  /// would feed them).
  void feed_in_chunks(std::size_t chunk) {
    std::size_t grouped = 0;
    for (const auto& group : groups_) grouped += group.size();
    chunk = std::max<std::size_t>(1, std::min(chunk, grouped));
    pending_.reserve(chunk);
    by_group_.resize(chunk);
    first_.resize(groups_.size() + 1);
    each([&](std::size_t i, std::uint32_t g) {
      pending_.emplace_back(static_cast<std::uint32_t>(i), g);
      if (pending_.size() == chunk) feed_chunk();
    });
    feed_chunk();
  }

  /// Each group's packing: the one with the shorter total.
  [[nodiscard]] std::vector<std::vector<packed_batch>> finish() && {
    return finish_groups(std::move(packers_), groups_.size(), both_);
  }

 private:
  static constexpr auto nowhere = std::numeric_limits<std::uint32_t>::max();

  // f(i, group) for every grouped sample i in packing order.
  template <class F>
  void each(F&& f) const {
    const auto& order = input_.packing_order();
    if (order.empty()) {
      for (std::size_t i = 0; i < input_.size(); ++i)
        if (group_of_[i] != nowhere) f(i, group_of_[i]);
    } else {
      for (auto i : order)
        if (group_of_[i] != nowhere) f(i, group_of_[i]);
    }
  }

  void add(std::size_t i, std::uint32_t g) {
    const auto& alone = input_.alone(i, k_);
    packers_[g].add(i, alone);
    if (both_) packers_[groups_.size() + g].add(i, alone);
  }

  // The pending samples by group, fed group after group.
  void feed_chunk() {
    std::fill(first_.begin(), first_.end(), 0);
    for (const auto& [i, g] : pending_) ++first_[g + 1];
    for (std::size_t g = 0; g < groups_.size(); ++g) first_[g + 1] += first_[g];
    for (const auto& [i, g] : pending_) by_group_[first_[g]++] = i;  // first_[g]: group g's end
    // By group the chunk's shapes are read in a scattered order: ask for them a few ahead.
    constexpr std::uint32_t ahead = 8;
    const auto n = static_cast<std::uint32_t>(pending_.size());
    for (std::uint32_t j = 0; j < std::min(ahead, n); ++j) prefetch(&input_.shape(by_group_[j]));
    std::uint32_t begin = 0;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      for (std::uint32_t j = begin; j < first_[g]; ++j) {
        if (j + ahead < n) prefetch(&input_.shape(by_group_[j + ahead]));
        add(by_group_[j], static_cast<std::uint32_t>(g));
      }
      begin = first_[g];
    }
    pending_.clear();
  }

  const Input& input_;
  const std::vector<std::vector<std::size_t>>& groups_;
  std::size_t k_;
  std::vector<std::uint32_t>& group_of_;
  bool both_;
  std::vector<first_fit_packer<Input>> packers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pending_;  // (sample, group), in order
  std::vector<std::uint32_t> by_group_;
  std::vector<std::uint32_t> first_;
};

}  // namespace detail

/// pack_to_budget for every group at once, with the same result: one pass over the samples in
/// packing order feeds each group's packer, so the per-sample tables are read in order rather
/// than once per group at scattered places. Beyond 64 groups (or where `chunk` is given) the
/// pass goes a chunk of `chunk` samples at a time (0: 32 per group, at least 4,096), each
/// group's samples in the chunk fed together, so a packer's state is brought into cache once
/// per chunk rather than once per sample; with a thousand groups, feeding them sample by sample
/// missed the cache on almost every sample of a 10M batch (with 64 or fewer, their packers stay
/// in the cache and the samples go one at a time). Each sample is in at most one group.
/// `group_of_buffer`, where given, holds the sample-to-group table (as long as the batch) from
/// call to call.
template <class Input>
[[nodiscard]] std::vector<std::vector<packed_batch>> pack_groups_to_budget(
    const Input& input, const std::vector<std::vector<std::size_t>>& groups, std::size_t k,
    std::vector<std::uint32_t>* group_of_buffer = nullptr, std::size_t chunk = 0) {
  std::vector<std::uint32_t> own;
  detail::group_packing<Input> packing(input, groups, k,
                                       group_of_buffer != nullptr ? *group_of_buffer : own);
  // A few dozen packers stay in the cache: fed one sample at a time (unless a chunk is asked for).
  if (chunk == 0 && groups.size() <= 64)
    packing.feed_one_at_a_time();
  else
    packing.feed_in_chunks(chunk != 0 ? chunk : std::max<std::size_t>(4096, 32 * groups.size()));
  return std::move(packing).finish();
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
