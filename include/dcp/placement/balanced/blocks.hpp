#pragma once
// balanced_placement, phase 1: the long samples and their degree menus, multi-GPU samples on
// aligned blocks (block_placer::place), and the fluid estimate that ranks allotments.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "dcp/placement/balanced/block_assignment.hpp"
#include "dcp/placement/degree_option.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/first_fit_packer.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// A sample that gets a degree menu (balanced_placement::long_fraction).
struct long_item {
  std::size_t sample = 0;
  std::vector<degree_option> menu{};  // per degree index
  std::size_t fastest = 0;            // degree index of the fastest feasible option (first)
  std::size_t unrecomputed = 0;  // the smallest with the strategy's lightest setting, else fastest
  double fastest_intra = std::numeric_limits<double>::infinity();
  double cheapest_intra = std::numeric_limits<double>::infinity();  // GPU-seconds
  bool fits_intra = false;
};

/// The batch as the balanced solver sees it (classify_batch, allotment.hpp): every sample's
/// single-GPU estimate, the long samples with their menus, and the short ones sorted for the
/// fill.
struct balanced_batch {
  std::span<const double> estimate;  // per sample
  std::vector<long_item> longs;
  std::vector<std::size_t> long_first;  // indices into longs, fastest run descending
  std::span<const std::pair<double, std::size_t>> short_sorted;  // (estimate, sample), LPT order
  double short_sum = 0;
  double short_max = 0;
  bool several_buckets = false;  // whether the samples span more than one bucket
};

/// Crossing nodes at degree index k takes fewer GPU-seconds than any in-node option (which then
/// recomputes so much that keeping the sample in a node would take GPU time from the others),
/// or nothing fits inside a node.
[[nodiscard]] inline bool crossing_saves_work(const long_item& item, std::int64_t degree,
                                              std::size_t k) {
  return !item.fits_intra ||
         static_cast<double>(degree) * item.menu[k].seconds < item.cheapest_intra;
}

/// The fluid view of an allotment (block_placer::fluid_estimate).
struct fluid {
  double estimate;         // of the makespan
  bool needless_crossing;  // a node-crossing group whose in-node option would end by the floor
};

/// Places allotments' multi-GPU samples on aligned blocks; its buffers are reused from
/// allotment to allotment (it is asked about dozens of allotments per plan).
template <class Input>
class block_placer {
 public:
  block_placer(const Input& input, const balanced_batch& batch)
      : input_(input), batch_(batch), gpus_(static_cast<std::size_t>(input.gpus())) {}

  /// Multi-GPU samples on aligned blocks, degree descending: each degree's samples go longest
  /// first to the block that frees first, then each block's samples are packed to the memory
  /// budget at that degree (long documents that share a degree share micro-batches, so fewer
  /// micro-steps pay the fixed cost) where that is faster than one micro-step each (`share`).
  /// Into `a`, whose buffers are reused (the fluid estimate of every allotment tried writes
  /// into the same one, every schedule into another). With `with_short`, a's singles are
  /// merged with the short samples.
  void place(const std::vector<std::size_t>& choice, bool with_short, bool share,
             block_assignment& a) const {
    a.free.assign(gpus_, 0.0);
    a.multi.clear();
    a.members.clear();
    a.packed = false;
    a.singles.clear();
    order_multi(choice, a);
    a.multi.reserve(placing_.order.size());
    a.members.reserve(placing_.order.size());
    for (std::size_t from = 0; from < placing_.order.size();)
      from = place_degree(choice, from, share, a);
    if (with_short) merge_short(a);
  }

  /// The fluid view of an allotment: the floor is what no list schedule of these estimates can
  /// beat (the busiest block, or the average load); the estimate adds half the longest
  /// single-GPU item for the granularity of the fill.
  [[nodiscard]] fluid fluid_estimate(const std::vector<std::size_t>& choice,
                                     bool share = false) const {
    auto& a = fluid_blocks_;
    place(choice, false, share, a);
    double sum = std::accumulate(a.free.begin(), a.free.end(), 0.0) + batch_.short_sum;
    double longest_single = batch_.short_max;
    for (const auto& [e, i] : a.singles) {
      sum += e;
      longest_single = std::max(longest_single, e);
    }
    const double top = *std::max_element(a.free.begin(), a.free.end());
    const double floor = std::max(top, sum / static_cast<double>(gpus_));
    return {std::max(top, sum / static_cast<double>(gpus_) + 0.5 * longest_single),
            needless_crossing(a, floor)};
  }

  /// Whether a group of `a` crosses nodes although it is not needed: its fastest in-node option,
  /// started when the group starts, would end by `makespan`, and it would take no more
  /// GPU-seconds than the crossing group.
  [[nodiscard]] bool needless_crossing(const block_assignment& a, double makespan) const {
    return std::any_of(a.multi.begin(), a.multi.end(), [&](const auto& b) {
      const auto items = a.items_of(b);
      return input_.crosses_nodes(b.k) &&
             std::any_of(items.begin(), items.end(), [&](std::size_t j) {
               const auto& item = batch_.longs[j];
               return !crossing_saves_work(item, input_.degree(b.k), b.k) &&
                      b.start + item.fastest_intra <= makespan;
             });
    });
  }

 private:
  // The multi-GPU samples in placing order (degree descending, then time descending, then
  // sample); the single-GPU long samples into a's singles.
  void order_multi(const std::vector<std::size_t>& choice, block_assignment& a) const {
    const auto& longs = batch_.longs;
    auto& order = placing_.order;
    order.clear();
    order.reserve(longs.size());
    a.singles.reserve(longs.size());
    for (std::size_t j = 0; j < longs.size(); ++j) {
      if (input_.degree(choice[j]) > 1)
        order.push_back(j);
      else
        a.singles.emplace_back(batch_.estimate[longs[j].sample], longs[j].sample);  // alone(i, 0)
    }
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto dx = input_.degree(choice[x]);
      const auto dy = input_.degree(choice[y]);
      if (dx != dy) return dx > dy;
      const double tx = longs[x].menu[choice[x]].seconds;
      const double ty = longs[y].menu[choice[y]].seconds;
      if (tx != ty) return tx > ty;
      return longs[x].sample < longs[y].sample;
    });
  }

  // The samples of one degree, order[from, to): longest first onto the aligned block that frees
  // first (ranks of an aligned block free together: larger degrees came first on the buddy
  // order), then each block's run. Per degree: each block's load and its time with one
  // micro-step per sample; each sample's block; the samples by block (on block b:
  // placed[begin[b], begin[b + 1]), longest first). Returns `to`.
  std::size_t place_degree(const std::vector<std::size_t>& choice, std::size_t from, bool share,
                           block_assignment& a) const {
    auto& [order, load, apart, block_of, begin, placed, next] = placing_;
    const auto k = choice[order[from]];
    const auto d = input_.degree(k);
    std::size_t to = from;
    while (to < order.size() && choice[order[to]] == k) ++to;
    const auto blocks = static_cast<std::size_t>(input_.gpus() / d);
    load.resize(blocks);
    for (std::size_t b = 0; b < blocks; ++b) load[b] = a.free[b * static_cast<std::size_t>(d)];
    apart.assign(blocks, 0.0);
    block_of.resize(to - from);
    begin.assign(blocks + 1, 0);
    for (std::size_t n = from; n < to; ++n) {
      const auto b =
          static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      const auto& item = batch_.longs[order[n]];
      block_of[n - from] = b;
      ++begin[b + 1];
      load[b] += share && to - from > blocks ? input_.packed_estimate(item.sample, k, item.menu[k])
                                             : item.menu[k].seconds;
      apart[b] += item.menu[k].seconds;
    }
    std::partial_sum(begin.begin(), begin.end(), begin.begin());
    placed.resize(to - from);
    next = begin;
    for (std::size_t n = from; n < to; ++n) placed[next[block_of[n - from]]++] = order[n];
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::span<const std::size_t> on_b(placed.data() + begin[b], begin[b + 1] - begin[b]);
      if (!on_b.empty()) run_block(on_b, k, static_cast<std::int64_t>(b) * d, share, apart[b], a);
    }
    return to;
  }

  // The samples `on_b` of the block at `first` (degree index k): packed together where that
  // gives fewer micro-steps and less time than `apart` (their time one micro-step each), else
  // one micro-step each; the block's ranks then free when its last micro-step ends.
  void run_block(std::span<const std::size_t> on_b, std::size_t k, std::int64_t first, bool share,
                 double apart, block_assignment& a) const {
    const auto& longs = batch_.longs;
    double t = a.free[static_cast<std::size_t>(first)];
    const auto one_each = [&] {
      for (const auto j : on_b) {
        a.multi.push_back({a.members.size(), 1, {}, k, first, t, longs[j].menu[k]});
        a.members.push_back(j);
        t += longs[j].menu[k].seconds;
      }
    };
    if (on_b.size() == 1 || !share) {
      one_each();
    } else {
      std::vector<std::pair<std::size_t, std::size_t>> item_of;  // (sample, longs index)
      std::vector<std::size_t> samples;
      for (const auto j : on_b) {
        item_of.emplace_back(longs[j].sample, j);
        samples.push_back(longs[j].sample);
      }
      std::sort(item_of.begin(), item_of.end());
      auto packed = pack_to_budget(input_, std::move(samples), k);
      if (packed.size() < on_b.size() && total_seconds(packed) < apart) {
        a.packed = true;
        for (const auto& batch : packed) {
          a.multi.push_back({a.members.size(), batch.samples.size(), {}, k, first, t, batch.run});
          for (const auto i : batch.samples)
            a.members.push_back(
                std::lower_bound(item_of.begin(), item_of.end(), std::pair{i, std::size_t{0}})
                    ->second);
          t += batch.run.seconds;
        }
      } else {
        one_each();
      }
    }
    const auto d = input_.degree(k);
    for (auto r = first; r < first + d; ++r) a.free[static_cast<std::size_t>(r)] = t;
  }

  // Merges the long single-GPU samples into the short ones, sorted once in classify_batch().
  // In place, from the back (a's list is kept from schedule to schedule: on a 10M batch it
  // holds 160 MB that a fresh list would map and fault in afresh each time).
  void merge_short(block_assignment& a) const {
    lpt_order(a.singles);
    const auto first_of = [](const auto& x, const auto& y) {
      if (x.first != y.first) return x.first > y.first;
      return x.second < y.second;
    };
    const auto& short_sorted = batch_.short_sorted;
    std::size_t i = a.singles.size();
    std::size_t j = short_sorted.size();
    a.singles.resize(i + j);
    for (std::size_t w = i + j; j > 0;)
      a.singles[--w] = i > 0 && first_of(short_sorted[j - 1], a.singles[i - 1]) ? a.singles[--i]
                                                                                : short_sorted[--j];
  }

  const Input& input_;
  const balanced_batch& batch_;
  std::size_t gpus_;
  // The long samples in placing order, and per degree each block's load and time apart, each
  // sample's block, the samples by block and a cursor per block.
  struct placing_buffers {
    std::vector<std::size_t> order;
    std::vector<double> load, apart;
    std::vector<std::size_t> block_of, begin, placed, next;
  };
  mutable placing_buffers placing_;
  mutable block_assignment fluid_blocks_;  // what fluid_estimate() places into
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
