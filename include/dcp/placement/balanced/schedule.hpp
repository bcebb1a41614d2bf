#pragma once
// balanced_placement, phase 3: the list schedule of one allotment. Multi-GPU samples on their
// blocks (block_placer), short samples optionally in the room their micro-batches leave
// (fill_blocks), single-GPU samples assigned to ranks two ways and packed, the faster refined
// by the local search; and the micro-step lists of schedules that lost, recycled.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/placement/balanced/blocks.hpp"
#include "dcp/placement/balanced/local_search.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/first_fit_packer.hpp"
#include "dcp/placement/scratch.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

template <class Input>
class list_scheduler {
 public:
  list_scheduler(const Input& input, const balanced_batch& batch, const block_placer<Input>& blocks,
                 placement_scratch& scratch)
      : input_(input),
        batch_(batch),
        blocks_(blocks),
        scratch_(scratch),
        gpus_(static_cast<std::size_t>(input.gpus())) {}

  /// Full schedule for one allotment: blocks (each block's samples packed together where that
  /// is faster, with `share`), single-GPU samples (after filling the multi-GPU micro-batches'
  /// room, with `fill`), packing, local search; nullopt when a group crosses nodes although its
  /// in-node option would not lengthen the step (unless `allow_unneeded`), when `share` packs
  /// no block, or when `fill` moves no sample.
  [[nodiscard]] std::optional<placement> schedule(const std::vector<std::size_t>& choice,
                                                  bool allow_unneeded, bool share,
                                                  bool fill = false) {
    auto& a = scratch_.schedule_blocks;  // its buffers kept from schedule to schedule
    blocks_.place(choice, true, share, a);
    // A shared schedule without a shared block is the one without sharing: not run twice.
    if (share && !fill && !a.packed) return std::nullopt;
    if (fill && !fill_blocks(a)) return std::nullopt;
    auto ranks = assign_singles(a);
    local_search<Input>(input_, batch_.estimate, a.free, ranks.items, ranks.batches, ranks.end,
                        scratch_.batch_of)
        .run();
    auto out = to_placement(a, ranks.batches);
    if (!allow_unneeded && blocks_.needless_crossing(a, out.makespan_seconds)) {
      recycle(out);
      return std::nullopt;
    }
    return out;
  }

  /// Keeps the micro-step list of a placement that lost for the next schedule to fill.
  void recycle(placement& lost) {
    lost.micro_steps.clear();
    if (lost.micro_steps.capacity() > scratch_.spare_steps.capacity())
      scratch_.spare_steps.swap(lost.micro_steps);
  }

 private:
  // The single-GPU samples of each rank, packed, and when each rank then ends.
  struct rank_assignment {
    std::vector<std::vector<std::size_t>> items;
    std::vector<std::vector<packed_batch>> batches;
    std::vector<double> end;
  };

  // Two assignments of the single-GPU samples, each packed; the one that finishes first is
  // kept. LPT balances best; filling ranks bucket by bucket up to the average load keeps each
  // rank to few buckets, so fewer micro-steps pay the fixed per-micro-step cost. With one
  // bucket (text under varlen_buckets) there are no buckets to keep few and the fill is not
  // tried: it then only balances another way, and on 200 Wikipedia batches of 32 x 1,000 the
  // plans' mean gap moved from 4.0319 % to 4.0321 % without it, and planning took about a
  // fifth less time (docs/planner.md "Planning time").
  [[nodiscard]] rank_assignment assign_singles(const block_assignment& a) {
    rank_assignment out;
    const auto keep_faster = [&](std::vector<std::vector<std::size_t>> assignment) {
      auto packed = pack_groups_to_budget(input_, assignment, 0, &scratch_.group_of);
      std::vector<double> finish(gpus_);
      for (std::size_t r = 0; r < gpus_; ++r) finish[r] = a.free[r] + total_seconds(packed[r]);
      if (out.end.empty() || *std::max_element(finish.begin(), finish.end()) <
                                 *std::max_element(out.end.begin(), out.end.end())) {
        out.items = std::move(assignment);
        out.batches = std::move(packed);
        out.end = std::move(finish);
      }
    };
    keep_faster(lpt_assign_ordered(a.singles, a.free));
    if (batch_.several_buckets) keep_faster(fill_by_bucket(a));
    return out;
  }

  // The placement of `a`'s blocks and the ranks' packed single-GPU micro-batches.
  [[nodiscard]] placement to_placement(const block_assignment& a,
                                       std::vector<std::vector<packed_batch>>& batches) {
    placement out;
    std::size_t steps = a.multi.size();
    for (const auto& on_rank : batches) steps += on_rank.size();
    out.micro_steps = spare_steps(steps);
    out.micro_steps.reserve(steps);
    std::vector<double> free(gpus_, 0.0);
    for (const auto& block : a.multi) {
      placed_micro_step step;
      step.first_rank = block.first_rank;
      step.config = input_.config_of(block.k, block.run);
      for (const auto j : a.items_of(block)) step.samples.push_back(batch_.longs[j].sample);
      step.samples.insert(step.samples.end(), block.beside.begin(), block.beside.end());
      step.start_seconds = free[static_cast<std::size_t>(block.first_rank)];
      step.seconds = block.run.seconds;
      step.peak_bytes = block.run.peak_bytes;
      for (auto r = block.first_rank; r < block.first_rank + step.config.degree; ++r)
        free[static_cast<std::size_t>(r)] = step.start_seconds + block.run.seconds;
      out.micro_steps.push_back(std::move(step));
    }
    for (std::size_t r = 0; r < gpus_; ++r) {
      const double finish = append_group(out, std::move(batches[r]), static_cast<std::int64_t>(r),
                                         input_.config(0), free[r]);
      out.makespan_seconds = std::max(out.makespan_seconds, finish);
    }
    return out;
  }

  // An empty micro-step list: the list of a schedule that lost (recycle()), or the one kept
  // from an earlier plan where that holds more.
  [[nodiscard]] std::vector<placed_micro_step> spare_steps(std::size_t steps) {
    auto& spare = scratch_.spare_steps;
    if (spare.capacity() < steps && scratch_.kept_steps.capacity() > spare.capacity())
      spare.swap(scratch_.kept_steps);
    std::vector<placed_micro_step> out;
    out.swap(spare);
    return out;
  }

  // Short samples into the room the multi-GPU micro-batches leave, as a static layout at their
  // degree would pack them, so that they pay for no micro-step of their own: each micro-batch
  // takes the longest single-GPU samples that still fit at its setting and keep its ranks
  // within the average finish of all ranks (first fit decreasing; a micro-batch stops looking
  // after a few that do not fit, each sending the search on to the first shorter sample the
  // budget holds), and keeps them where that saves GPU-seconds by the estimates; its ranks
  // then free later by what they add. False when no micro-batch kept any.
  bool fill_blocks(block_assignment& a) {
    const std::size_t n = a.singles.size();
    if (a.multi.empty() || n == 0) return false;
    double total = std::accumulate(a.free.begin(), a.free.end(), 0.0);
    for (const auto& single : a.singles) total += single.first;
    const double average = total / static_cast<double>(gpus_);
    std::vector<double> delay(gpus_, 0.0);  // what joined samples add to each rank's end
    // next[p]: the first position at or after p whose sample has not joined (path halving).
    auto& next = scratch_.unjoined;
    next.resize(n + 1);
    std::iota(next.begin(), next.end(), std::size_t{0});
    bool any = false;
    for (auto& block : a.multi) any = fill_block(block, a, average, delay) || any;
    if (!any) return false;
    // The singles that joined no block leave the list, in place (its memory is kept from
    // schedule to schedule).
    std::size_t kept = 0;
    for (std::size_t p = unjoined(0); p < n; p = unjoined(p + 1)) a.singles[kept++] = a.singles[p];
    a.singles.resize(kept);
    std::fill(a.free.begin(), a.free.end(), 0.0);
    for (auto& block : a.multi) {
      block.start = a.free[static_cast<std::size_t>(block.first_rank)];
      for (auto r = block.first_rank; r < block.first_rank + input_.degree(block.k); ++r)
        a.free[static_cast<std::size_t>(r)] = block.start + block.run.seconds;
    }
    return true;
  }

  // The first position at or after p whose single has not joined a block (path halving).
  [[nodiscard]] std::size_t unjoined(std::size_t p) {
    auto& next = scratch_.unjoined;
    while (next[p] != p) p = next[p] = next[next[p]];
    return p;
  }

  // What one block's scan of the singles took (fill_block).
  struct block_fill {
    micro_batch_shape shape;  // the block's micro-batch with what it took
    double headroom = 0;      // single-GPU time its ranks can still take
    std::size_t first_fit = std::numeric_limits<std::size_t>::max();  // taken before a miss
    micro_batch_shape first_fit_shape;                                // the micro-batch with those
    double moved = 0;  // estimates of those taken past the first miss
  };

  // fill_blocks() for one block; whether it kept any single.
  bool fill_block(typename block_assignment::block& block, block_assignment& a, double average,
                  std::vector<double>& delay) {
    const auto d = input_.degree(block.k);
    double latest = 0;
    for (auto r = block.first_rank; r < block.first_rank + d; ++r)
      latest = std::max(latest,
                        a.free[static_cast<std::size_t>(r)] + delay[static_cast<std::size_t>(r)]);
    // Single-GPU time the block's ranks can still take, about `d` times their time in the group.
    block_fill fill;
    fill.headroom = static_cast<double>(d) * (average - latest);
    if (fill.headroom <= 0) return false;
    for (const auto j : a.items_of(block)) fill.shape += input_.shape(batch_.longs[j].sample);
    taken_.clear();
    scan_singles(block, a, fill);
    if (taken_.empty()) return false;
    auto run = input_.run(fill.shape, block.k, block.run.recompute, block.run.sp);
    if (fill.first_fit < taken_.size()) {
      // Those taken past a miss stay only where they save GPU-seconds by the estimates: the
      // block's d GPUs take longer by what they add to its micro-batch, alone they would take
      // their estimates. (Short samples are what evens out the single-GPU ranks: taking them
      // where that saves nothing costs a schedule and can leave the ranks coarser.)
      const auto without = fill.first_fit > 0 ? input_.run(fill.first_fit_shape, block.k,
                                                           block.run.recompute, block.run.sp)
                                              : block.run;
      if (static_cast<double>(d) * (run.seconds - without.seconds) >= fill.moved) {
        taken_.resize(fill.first_fit);
        if (taken_.empty()) return false;
        run = without;
      }
    }
    const double added = run.seconds - block.run.seconds;
    for (const auto p : taken_) {
      scratch_.unjoined[p] = p + 1;
      block.beside.push_back(a.singles[p].second);
    }
    block.run = run;
    for (auto r = block.first_rank; r < block.first_rank + d; ++r)
      delay[static_cast<std::size_t>(r)] += added;
    return true;
  }

  // The singles one block takes, longest first, into taken_: each of its bucket that the
  // headroom holds and that fits its micro-batch, until 8 misses. The scan only moves forward,
  // so the samples taken need no mark until the block keeps them.
  void scan_singles(const typename block_assignment::block& block, const block_assignment& a,
                    block_fill& fill) {
    const std::size_t n = a.singles.size();
    const auto bucket = input_.bucket(batch_.longs[a.members[block.first_item]].sample);
    // Singles come longest first: the first at or after `from` that the headroom holds, by
    // binary search (as the headroom shrinks, the ones it no longer holds are skipped at once).
    const auto held_from = [&](std::size_t from) {
      return static_cast<std::size_t>(
          std::partition_point(a.singles.begin() + static_cast<std::ptrdiff_t>(from),
                               a.singles.end(),
                               [&](const auto& x) { return x.first > fill.headroom; }) -
          a.singles.begin());
    };
    std::size_t misses = 0;
    for (std::size_t p = unjoined(held_from(0)); p < n && misses < 8; p = unjoined(p + 1)) {
      if (a.singles[p].first > fill.headroom) {
        p = unjoined(held_from(p));
        if (p == n) break;
      }
      const auto [estimate, i] = a.singles[p];
      const auto with = fill.shape + input_.shape(i);
      if (input_.bucket(i) != bucket) {
        ++misses;
        continue;
      }
      if (!input_.runs_with(with, block.k, block.run.recompute, block.run.sp)) {
        ++misses;
        if (fill.first_fit == std::numeric_limits<std::size_t>::max()) {
          fill.first_fit = taken_.size();
          fill.first_fit_shape = fill.shape;
        }
        const auto low = first_fitting_after(p, fill.shape, block, a);
        if (!low) break;
        p = *low - 1;  // the loop's unjoined(p + 1) resumes at `low`, or the first unjoined after
        continue;
      }
      fill.shape = with;
      fill.headroom -= estimate;
      taken_.push_back(p);
      if (fill.first_fit != std::numeric_limits<std::size_t>::max()) fill.moved += estimate;
    }
  }

  // Out of memory at single p: a shorter single may still fit. Singles come longest first, so
  // the first later one that fits beside `shape` is found by galloping then bisecting (exact
  // where their bytes fall with their estimates, as they do within a bucket); nullopt if the
  // shortest does not fit.
  [[nodiscard]] std::optional<std::size_t> first_fitting_after(
      std::size_t p, const micro_batch_shape& shape, const typename block_assignment::block& block,
      const block_assignment& a) const {
    const std::size_t n = a.singles.size();
    const auto fits_beside = [&](std::size_t q) {
      return input_
          .runs_with(shape + input_.shape(a.singles[q].second), block.k, block.run.recompute,
                     block.run.sp)
          .has_value();
    };
    if (!fits_beside(n - 1)) return std::nullopt;
    std::size_t low = p + 1;   // the first that may fit
    std::size_t high = n - 1;  // one that fits
    for (std::size_t step = 1; low + step < high; step *= 2) {
      if (fits_beside(low + step)) {
        high = low + step;
        break;
      }
      low += step + 1;
    }
    while (low < high) {
      const std::size_t mid = low + (high - low) / 2;
      if (fits_beside(mid))
        high = mid;
      else
        low = mid + 1;
    }
    return low;
  }

  // Single-GPU samples grouped by bucket (longest first within one), poured into the ranks in
  // order of their load after the multi-GPU samples, each rank filled up to the average
  // finish; what is left goes longest-processing-time-first.
  [[nodiscard]] std::vector<std::vector<std::size_t>> fill_by_bucket(
      const block_assignment& a) const {
    const auto items = by_bucket_descending(a.singles);
    double total = std::accumulate(a.free.begin(), a.free.end(), 0.0);
    for (const auto& [e, i] : items) total += e;
    const double target = total / static_cast<double>(gpus_);
    std::vector<std::size_t> ranks(gpus_);
    std::iota(ranks.begin(), ranks.end(), std::size_t{0});
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](std::size_t x, std::size_t y) { return a.free[x] < a.free[y]; });
    std::vector<std::vector<std::size_t>> assigned(gpus_);
    std::vector<double> load = a.free;
    std::vector<std::pair<double, std::size_t>> rest;
    std::size_t next = 0;
    for (const auto& item : items) {
      while (next < ranks.size() && load[ranks[next]] + 0.5 * item.first > target) ++next;
      if (next == ranks.size()) {
        rest.push_back(item);
        continue;
      }
      assigned[ranks[next]].push_back(item.second);
      load[ranks[next]] += item.first;
    }
    lpt_order(rest);
    const auto spill = lpt_assign_ordered(rest, load);
    for (std::size_t r = 0; r < gpus_; ++r)
      assigned[r].insert(assigned[r].end(), spill[r].begin(), spill[r].end());
    return assigned;
  }

  // `items` stably ordered by bucket, highest first: a counting sort when the buckets span no
  // more values than there are items (the usual case: a few buckets), else a stable sort.
  [[nodiscard]] std::vector<std::pair<double, std::size_t>> by_bucket_descending(
      const std::vector<std::pair<double, std::size_t>>& items) const {
    if (items.empty()) return {};
    std::int64_t low = input_.bucket(items.front().second);
    std::int64_t high = low;
    for (const auto& item : items) {
      low = std::min<std::int64_t>(low, input_.bucket(item.second));
      high = std::max<std::int64_t>(high, input_.bucket(item.second));
    }
    if (high - low > static_cast<std::int64_t>(items.size())) {
      auto sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) {
        return input_.bucket(x.second) > input_.bucket(y.second);
      });
      return sorted;
    }
    // Slot of bucket b: high - b, so the highest bucket comes first.
    const auto slot = [&](std::size_t i) {
      return static_cast<std::size_t>(high - input_.bucket(i));
    };
    std::vector<std::size_t> next(static_cast<std::size_t>(high - low) + 2, 0);
    for (const auto& item : items) ++next[slot(item.second) + 1];
    std::partial_sum(next.begin(), next.end(), next.begin());
    std::vector<std::pair<double, std::size_t>> sorted(items.size());
    for (const auto& item : items) sorted[next[slot(item.second)]++] = item;
    return sorted;
  }

  const Input& input_;
  const balanced_batch& batch_;
  const block_placer<Input>& blocks_;
  placement_scratch& scratch_;
  std::size_t gpus_;
  std::vector<std::size_t> taken_;  // positions of the singles one block takes
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
