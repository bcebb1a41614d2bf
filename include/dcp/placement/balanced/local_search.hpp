#pragma once
// balanced_placement, phase 4: local search on the single-GPU samples of a list schedule,
// between the rank that finishes last and those that finish first.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "dcp/placement/degree_option.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/first_fit_packer.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// While it strictly lowers the later of the two ranks:
/// - a move takes a sample from the late rank to the early one (estimate below the gap, closest
///   to half of it first);
/// - where no move does, a swap trades a sample of the late rank for a shorter one of one of
///   the earliest ranks (estimates differing by less than the gap, closest to half of it
///   first), which is what a late rank holding only long samples needs;
/// - where no sample moves or swaps, whole micro-batches trade (trade_batches).
/// Changes are evaluated incrementally: a sample leaves its micro-batch, which is re-timed (or
/// emptied), and joins its new rank's first micro-batch of its bucket that holds it (first fit,
/// else a new one), so a change costs a few cost-model calls instead of repacking two ranks.
template <class Input>
class local_search {
 public:
  /// The ranks' samples `items` packed as `batches`, ending at `end` (each rank starting at
  /// `base`); `batch_of`: the sample-to-micro-batch table (as long as the batch), reused.
  local_search(const Input& input, std::span<const double> estimate,
               const std::vector<double>& base, std::vector<std::vector<std::size_t>>& items,
               std::vector<std::vector<packed_batch>>& batches, std::vector<double>& end,
               std::vector<std::uint32_t>& batch_of)
      : input_(input),
        estimate_(estimate),
        base_(base),
        items_(items),
        batches_(batches),
        end_(end),
        batch_of_(batch_of),
        gpus_(static_cast<std::size_t>(input.gpus())),
        lightest_(input.packing_setting(0).lightest) {}

  /// Runs the search (at most 4 rounds per rank and 64 more), then drops emptied micro-batches.
  void run() {
    constexpr auto nowhere = std::numeric_limits<std::uint32_t>::max();
    batch_of_.assign(input_.size(), nowhere);
    for (std::size_t r = 0; r < gpus_; ++r)
      for (std::size_t b = 0; b < batches_[r].size(); ++b)
        for (auto i : batches_[r][b].samples) batch_of_[i] = static_cast<std::uint32_t>(b);
    by_end_.resize(gpus_);
    std::iota(by_end_.begin(), by_end_.end(), std::size_t{0});
    const std::size_t rounds = 4 * gpus_ + 64;
    for (std::size_t round = 0; round < rounds; ++round)
      if (!step()) break;
    for (auto& rank : batches_)
      rank.erase(std::remove_if(rank.begin(), rank.end(),
                                [](const packed_batch& b) { return b.samples.empty(); }),
                 rank.end());
  }

 private:
  // One micro-batch of a rank as a change leaves it: its index (the rank's micro-batch count
  // for a new one), its shape and setting afterwards, and how many samples it then holds.
  struct batch_change {
    std::size_t batch;
    micro_batch_shape shape;
    degree_option run;
    std::size_t count;
  };
  // One micro-batch of a rank, or two (second == single for one), and their time.
  static constexpr std::size_t single = std::numeric_limits<std::size_t>::max();
  struct bundle {
    double seconds;
    std::size_t first, second;  // micro-batch positions on the rank
  };
  static constexpr std::size_t tries = 8;  // candidates evaluated per move or swap
  // Pairs are formed among at most this many micro-batches of a rank (the first ones), so a
  // rank of many short micro-batches costs no more than a few hundred pair sums.
  static constexpr std::size_t paired_batches = 24;
  // A swap tries the 4 earliest ranks. Micro-batches trade one for one with the sixteen
  // earliest ranks first; where none trades, pairs too with the 256 earliest (the ranks that
  // can give two micro-batches whose sum fits a late clip's lead are rarely the very earliest:
  // those hold the longest micro-batches).
  static constexpr std::size_t swap_partners = 4;
  static constexpr std::size_t batch_swap_partners = 16;
  static constexpr std::size_t pair_partners = 256;

  // One round: a move, else a swap, else a trade of micro-batches; false when none is made.
  bool step() {
    const auto late =
        static_cast<std::size_t>(std::max_element(end_.begin(), end_.end()) - end_.begin());
    const auto early =
        static_cast<std::size_t>(std::min_element(end_.begin(), end_.end()) - end_.begin());
    const double gap = end_[late] - end_[early];
    if (late == early || gap <= 1e-12 * end_[late]) return false;
    if (try_move(late, early, gap)) return true;
    // A swap may need a partner that is not the earliest rank (whose samples can all be
    // longer than the late rank's): the few earliest are tried, earliest first.
    const auto partners = earliest(swap_partners);
    if (std::any_of(partners.begin(), partners.end(), [&](std::size_t q) {
          return q != late && end_[q] < end_[late] && try_swap(late, q, end_[late] - end_[q]);
        }))
      return true;
    // Only for a rank that ends more than 1 % after the mean: each swap opens more rounds of
    // moves, and on Wikipedia at 1,024 x 100K, where moves and swaps leave the late rank within
    // a fraction of a per cent, 31 % more rounds took 40 % more time for no better plan.
    if (end_[late] <=
        1.01 * std::accumulate(end_.begin(), end_.end(), 0.0) / static_cast<double>(gpus_))
      return false;
    return trade_with(late, batch_swap_partners, false) || trade_with(late, pair_partners, true);
  }

  // The `count` ranks that end first (fewer on a smaller cluster), earliest first.
  [[nodiscard]] std::span<const std::size_t> earliest(std::size_t count) {
    const auto partners = std::min(gpus_, count);
    std::partial_sort(by_end_.begin(), by_end_.begin() + static_cast<std::ptrdiff_t>(partners),
                      by_end_.end(), [&](std::size_t x, std::size_t y) {
                        return end_[x] != end_[y] ? end_[x] < end_[y] : x < y;
                      });
    return {by_end_.data(), partners};
  }

  // End of rank r with `changes` applied in order (the later of two to one micro-batch holds),
  // summed as the rank runs its micro-batches; an emptied one takes no time.
  [[nodiscard]] double end_with(std::size_t r,
                                std::initializer_list<const batch_change*> changes) const {
    double t = 0;
    for (std::size_t b = 0; b <= batches_[r].size(); ++b) {
      const batch_change* changed = nullptr;
      for (const auto* c : changes)
        if (c->batch == b) changed = c;
      if (changed != nullptr)
        t += changed->run.seconds;
      else if (b < batches_[r].size() && !batches_[r][b].samples.empty())
        t += batches_[r][b].run.seconds;
    }
    return base_[r] + t;
  }

  // The setting of a changed micro-batch, as the packer leaves one (first_fit_packer::finish):
  // the strategy's lightest where that fits now, else the one it had while that still fits and
  // is the strategy's; nullopt when neither does. `had_bytes`: what runs_with() gave for `had`,
  // if the caller has asked already.
  [[nodiscard]] std::optional<degree_option> settle(
      const micro_batch_shape& shape, const recompute_setting& had,
      std::optional<double> had_bytes = std::nullopt) const {
    if (had != lightest_)
      if (const auto bytes = input_.runs_with(shape, 0, lightest_))
        return input_.run_fitting(shape, 0, lightest_, *bytes);
    if (!had_bytes) had_bytes = input_.runs_with(shape, 0, had);
    if (had_bytes) return input_.run_fitting(shape, 0, had, *had_bytes);
    return std::nullopt;
  }

  // Sample i leaving rank r: the rest of its micro-batch settles (above), else takes the
  // strategy's setting for what is left.
  [[nodiscard]] std::optional<batch_change> leave(std::size_t r, std::size_t i) const {
    const std::size_t from = batch_of_[i];
    const auto& batch = batches_[r][from];
    micro_batch_shape rest;
    for (auto other : batch.samples)
      if (other != i) rest += input_.shape(other);
    degree_option run{true, {}, 0.0, 0.0};
    if (batch.samples.size() > 1) {
      const auto settled = settle(rest, batch.run.recompute);
      run = settled ? *settled : input_.evaluate(rest, 0);
      if (!run.feasible) return std::nullopt;
    }
    return batch_change{from, std::move(rest), run, batch.samples.size() - 1};
  }

  // Sample i joining rank r (after `left`, if given, changed one of its micro-batches): first
  // fit among the rank's micro-batches of its bucket, else a micro-batch of its own.
  [[nodiscard]] std::optional<batch_change> join(std::size_t r, std::size_t i,
                                                 const batch_change* left) const {
    const auto& alone = input_.alone(i, 0);
    const double need = 0.999 * (alone.peak_bytes - input_.empty_bytes(0));
    for (std::size_t b = 0; b < batches_[r].size(); ++b) {
      const auto& batch = batches_[r][b];
      const bool changed = left != nullptr && left->batch == b;
      const auto count = changed ? left->count : batch.samples.size();
      const auto& run = changed ? left->run : batch.run;
      // A micro-batch holds one bucket, so its first sample names it even if that one leaves.
      if (count == 0 || input_.bucket(batch.samples.front()) != input_.bucket(i) ||
          input_.budget() - run.peak_bytes < need)
        continue;
      auto with = (changed ? left->shape : batch.shape) + input_.shape(i);
      // With the bytes for its own setting given, settle() always has an answer.
      if (const auto bytes = input_.runs_with(with, 0, run.recompute))
        return batch_change{b, std::move(with), *settle(with, run.recompute, bytes), count + 1};
    }
    if (!alone.feasible) return std::nullopt;
    return batch_change{batches_[r].size(), input_.shape(i), alone, 1};
  }

  void apply_leave(std::size_t r, std::size_t i, const batch_change& c) {
    auto& batch = batches_[r][c.batch];
    batch.samples.erase(std::find(batch.samples.begin(), batch.samples.end(), i));
    batch.shape = c.shape;
    batch.run = c.run;
    items_[r].erase(std::find(items_[r].begin(), items_[r].end(), i));
  }
  void apply_join(std::size_t r, std::size_t i, const batch_change& c) {
    if (c.batch == batches_[r].size()) batches_[r].push_back({{}, {}, {}});
    auto& batch = batches_[r][c.batch];
    batch.samples.push_back(i);
    batch.shape = c.shape;
    batch.run = c.run;
    batch_of_[i] = static_cast<std::uint32_t>(c.batch);
    items_[r].push_back(i);
  }

  // A change of the two ranks' micro-batches (`apply`) that ends them at `late_end` and
  // `early_end` is made if it strictly lowers the later of the two.
  template <class Apply>
  bool accept(std::size_t late, std::size_t early, double late_end, double early_end,
              Apply&& apply) {
    if (!(std::max(late_end, early_end) < end_[late] * (1.0 - 1e-12))) return false;
    apply();
    end_[late] = late_end;
    end_[early] = early_end;
    return true;
  }

  bool try_move(std::size_t late, std::size_t early, double gap) {
    candidates_.clear();
    for (const auto i : items_[late])
      if (estimate_[i] < gap) candidates_.push_back(i);
    const auto closer = [&](std::size_t x, std::size_t y) {
      const double ex = std::abs(estimate_[x] - 0.5 * gap);
      const double ey = std::abs(estimate_[y] - 0.5 * gap);
      if (ex != ey) return ex < ey;
      return x < y;
    };
    const auto kept = std::min(candidates_.size(), tries);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(kept),
                      candidates_.end(), closer);
    candidates_.resize(kept);
    for (const auto i : candidates_) {
      const auto left = leave(late, i);
      if (!left) continue;
      const auto joined = join(early, i, nullptr);
      if (!joined) continue;
      if (accept(late, early, end_with(late, {&*left}), end_with(early, {&*joined}), [&] {
            apply_leave(late, i, *left);
            apply_join(early, i, *joined);
          }))
        return true;
    }
    return false;
  }

  // For each sample x of the late rank, the early rank's samples nearest below and above
  // estimate(x) - gap / 2 that still differ from it by more than 0 and less than the gap,
  // closest to half the gap first, at most `tries` of them (into pairs_).
  void swap_candidates(std::size_t late, std::size_t early, double gap) {
    shorter_.clear();
    for (const auto y : items_[early]) shorter_.emplace_back(estimate_[y], y);
    std::sort(shorter_.begin(), shorter_.end(), pair_less{});
    pairs_.clear();
    for (const auto x : items_[late]) {
      const double want = estimate_[x] - 0.5 * gap;
      const auto at = std::lower_bound(shorter_.begin(), shorter_.end(),
                                       std::pair{want, std::size_t{0}}, pair_less{});
      for (auto it : {at, at == shorter_.begin() ? shorter_.end() : std::prev(at)})
        if (it != shorter_.end() && it->first < estimate_[x] && estimate_[x] - it->first < gap)
          pairs_.emplace_back(x, it->second);
    }
    const auto off = [&](const std::pair<std::size_t, std::size_t>& p) {
      return std::abs(estimate_[p.first] - estimate_[p.second] - 0.5 * gap);
    };
    const auto kept = std::min(pairs_.size(), tries);
    std::partial_sort(
        pairs_.begin(), pairs_.begin() + static_cast<std::ptrdiff_t>(kept), pairs_.end(),
        [&](const auto& p, const auto& q) { return off(p) != off(q) ? off(p) < off(q) : p < q; });
    pairs_.resize(kept);
  }

  bool try_swap(std::size_t late, std::size_t early, double gap) {
    swap_candidates(late, early, gap);
    for (const auto& pair : pairs_) {
      const std::size_t x = pair.first;  // not a structured binding: the lambda below captures it
      const std::size_t y = pair.second;
      const auto x_left = leave(late, x);
      const auto y_left = x_left ? leave(early, y) : std::nullopt;
      if (!y_left) continue;
      const auto y_joined = join(late, y, &*x_left);
      const auto x_joined = y_joined ? join(early, x, &*y_left) : std::nullopt;
      if (!x_joined) continue;
      const double late_end = end_with(late, {&*x_left, &*y_joined});
      if (accept(late, early, late_end, end_with(early, {&*y_left, &*x_joined}), [&] {
            apply_leave(late, x, *x_left);
            apply_leave(early, y, *y_left);
            apply_join(late, y, *y_joined);
            apply_join(early, x, *x_joined);
          }))
        return true;
    }
    return false;
  }

  // Where no sample moves or swaps, whole micro-batches trade: one micro-batch of the late
  // rank for one or two shorter ones of a rank that finishes earlier, or two of the late
  // rank's for one of the other's, whose times differ by less than the gap (closest to half of
  // it first). A micro-batch at degree 1 takes the same time on every rank, so nothing is
  // re-timed. One for one is what a late rank of single long clips needs where the earliest
  // ranks hold only longer ones and the shorter clips are packed elsewhere; one for two what
  // it needs where its clips are each longer than the gap and every shorter micro-batch
  // elsewhere is shorter than a clip by more than the gap (three 0.65 s clips against ranks of
  // 0.3 s micro-batches). With the `partners` earliest ranks, earliest first.
  bool trade_with(std::size_t late, std::size_t partners, bool paired) {
    bundles_of(late, late_ones_, late_pairs_, paired);  // once for every partner
    const auto ranks = earliest(partners);
    return std::any_of(ranks.begin(), ranks.end(), [&](std::size_t q) {
      return q != late && end_[q] < end_[late] && trade_batches(late, q, paired);
    });
  }

  [[nodiscard]] static bool by_seconds(const bundle& x, const bundle& y) {
    return x.seconds != y.seconds ? x.seconds < y.seconds
                                  : std::pair{x.first, x.second} < std::pair{y.first, y.second};
  }

  // Rank r's non-empty micro-batches as bundles of one, and (`paired`) of two, by seconds.
  void bundles_of(std::size_t r, std::vector<bundle>& ones, std::vector<bundle>& pairs,
                  bool paired) const {
    ones.clear();
    pairs.clear();
    for (std::size_t q = 0; q < batches_[r].size(); ++q)
      if (!batches_[r][q].samples.empty()) ones.push_back({batches_[r][q].run.seconds, q, single});
    const auto m = paired ? std::min(ones.size(), paired_batches) : 0;
    for (std::size_t x = 0; x < m; ++x)
      for (std::size_t y = x + 1; y < m; ++y)
        pairs.push_back({ones[x].seconds + ones[y].seconds, ones[x].first, ones[y].first});
    std::sort(ones.begin(), ones.end(), by_seconds);
    std::sort(pairs.begin(), pairs.end(), by_seconds);
  }

  // Micro-batch q of rank `from` and its samples now on rank `to`, at position `at`.
  void relabel(std::size_t from, std::size_t q, std::size_t to, std::size_t at) {
    for (const auto i : batches_[from][q].samples) {
      items_[from].erase(std::find(items_[from].begin(), items_[from].end(), i));
      items_[to].push_back(i);
      batch_of_[i] = static_cast<std::uint32_t>(at);
    }
  }

  // The trade of the late rank's bundles (late_ones_, late_pairs_) with the early rank's
  // closest to half the gap, if it strictly lowers the later of the two.
  bool trade_batches(std::size_t late, std::size_t early, bool paired) {
    const double gap = end_[late] - end_[early];
    bundles_of(early, early_ones_, early_pairs_, paired);
    double best_off = std::numeric_limits<double>::infinity();
    bundle give{}, take{};
    const auto search = [&](const bundle& g, const std::vector<bundle>& partner) {
      const auto at = std::lower_bound(partner.begin(), partner.end(),
                                       bundle{g.seconds - 0.5 * gap, 0, 0}, by_seconds);
      for (auto it : {at, at == partner.begin() ? partner.end() : std::prev(at)}) {
        if (it == partner.end() || !(it->seconds < g.seconds) || !(g.seconds - it->seconds < gap))
          continue;
        const double off = std::abs(g.seconds - it->seconds - 0.5 * gap);
        if (off < best_off) {
          best_off = off;
          give = g;
          take = *it;
        }
      }
    };
    for (const auto& g : late_ones_) {
      search(g, early_ones_);
      search(g, early_pairs_);
    }
    for (const auto& g : late_pairs_) search(g, early_ones_);
    if (best_off == std::numeric_limits<double>::infinity()) return false;
    const double delta = give.seconds - take.seconds;
    return accept(late, early, end_[late] - delta, end_[early] + delta,
                  [&] { swap_bundles(late, give, early, take); });
  }

  // The late rank's bundle `give` and the early rank's `take` change ranks.
  void swap_bundles(std::size_t late, const bundle& give, std::size_t early, const bundle& take) {
    relabel(late, give.first, early, take.first);
    relabel(early, take.first, late, give.first);
    std::swap(batches_[late][give.first], batches_[early][take.first]);
    // The second micro-batch of a pair joins the other rank at its end; its place stays empty.
    const auto hand_over = [&](std::size_t from, std::size_t q, std::size_t to) {
      relabel(from, q, to, batches_[to].size());
      batches_[to].push_back(std::move(batches_[from][q]));
      batches_[from][q] = packed_batch{};
    };
    if (give.second != single) hand_over(late, give.second, early);
    if (take.second != single) hand_over(early, take.second, late);
  }

  const Input& input_;
  std::span<const double> estimate_;  // per sample
  const std::vector<double>& base_;   // per rank: when its single-GPU samples start
  std::vector<std::vector<std::size_t>>& items_;
  std::vector<std::vector<packed_batch>>& batches_;
  std::vector<double>& end_;
  std::vector<std::uint32_t>& batch_of_;  // micro-batch on its rank, per sample
  std::size_t gpus_;
  const recompute_setting& lightest_;
  std::vector<std::size_t> candidates_;                     // try_move's
  std::vector<std::pair<double, std::size_t>> shorter_;     // the early rank's samples by estimate
  std::vector<std::pair<std::size_t, std::size_t>> pairs_;  // try_swap's
  std::vector<bundle> late_ones_, late_pairs_, early_ones_, early_pairs_;
  std::vector<std::size_t> by_end_;  // ranks, the earliest first once sorted
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
