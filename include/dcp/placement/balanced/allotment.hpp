#pragma once
// balanced_placement, phase 2: the allotment. Classify the samples (short ones go to single
// GPUs, long ones get a degree menu), list candidate target makespans, allot a degree to every
// long sample for a target, and refine the best-ranked allotment a class of like samples at a
// time.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/placement/balanced/blocks.hpp"
#include "dcp/placement/detail/block_loads.hpp"
#include "dcp/placement/detail/timeline.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// Sample i's degree menu; throws sample_does_not_fit where no degree runs it.
template <class Input>
[[nodiscard]] long_item long_item_of(const Input& input, std::size_t i,
                                     const std::vector<recompute_setting>& lightest) {
  long_item item{};
  item.sample = i;
  bool any = false;
  bool unrecomputed = false;
  for (std::size_t k = 0; k < input.degrees().size(); ++k) {
    item.menu.push_back(input.alone(i, k));
    const auto& o = item.menu.back();
    if (!o.feasible) continue;
    if (!any || o.seconds < item.menu[item.fastest].seconds) item.fastest = k;
    if (!unrecomputed && o.recompute == lightest[k]) {
      item.unrecomputed = k;
      unrecomputed = true;
    }
    any = true;
    if (!input.crosses_nodes(k)) {
      item.fits_intra = true;
      item.fastest_intra = std::min(item.fastest_intra, o.seconds);
      item.cheapest_intra =
          std::min(item.cheapest_intra, static_cast<double>(input.degree(k)) * o.seconds);
    }
  }
  if (!any) input.throw_does_not_fit(i);
  if (!unrecomputed) item.unrecomputed = item.fastest;
  return item;
}

/// Single-GPU time and estimate of every sample (into `estimate`), the short ones sorted for
/// the fill (into `short_sorted`), and menus for the long ones: a sample is long when its
/// estimate exceeds `long_fraction` of the average per-GPU load, or when memory forces
/// recomputation or a higher degree.
template <class Input>
[[nodiscard]] balanced_batch classify_batch(
    const Input& input, double long_fraction, std::vector<double>& estimate,
    std::vector<std::pair<double, std::size_t>>& short_sorted) {
  balanced_batch out;
  const std::size_t n = input.size();
  estimate.resize(n);
  short_sorted.clear();
  const auto relaxed = input.evaluate(micro_batch_shape{}, 0).recompute;
  // The recompute strategy's lightest setting per degree (what an empty micro-batch gets).
  std::vector<recompute_setting> lightest{relaxed};
  for (std::size_t k = 1; k < input.degrees().size(); ++k)
    lightest.push_back(input.evaluate(micro_batch_shape{}, k).recompute);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    out.several_buckets = out.several_buckets || input.bucket(i) != input.bucket(0);
    const auto& single = input.alone(i, 0);
    // Samples of one shape share their option, and so their estimate.
    const auto alike = input.first_alike(i);
    if (alike != i)
      estimate[i] = estimate[alike];
    else
      estimate[i] = single.feasible ? input.packed_estimate(i, 0, single) : 0.0;
    total += single.feasible ? estimate[i] : 0.0;
  }
  const double threshold = long_fraction * total / static_cast<double>(input.gpus());
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = input.alone(i, 0);
    if (s.feasible && s.recompute == relaxed && estimate[i] <= threshold) {
      out.short_sum += estimate[i];
      out.short_max = std::max(out.short_max, estimate[i]);
      short_sorted.emplace_back(estimate[i], i);
      continue;
    }
    out.longs.push_back(long_item_of(input, i, lightest));
  }
  lpt_order(short_sorted);
  // Long samples by their fastest run, longest first: the order allot_placed() places them.
  std::vector<std::pair<double, std::size_t>> by_fastest;
  for (std::size_t j = 0; j < out.longs.size(); ++j)
    by_fastest.emplace_back(out.longs[j].menu[out.longs[j].fastest].seconds, j);
  lpt_order(by_fastest);
  for (const auto& [fastest, j] : by_fastest) out.long_first.push_back(j);
  out.estimate = estimate;
  out.short_sorted = short_sorted;
  return out;
}

/// Degree choices for the long samples (an allotment: a degree index per long item).
template <class Input>
class allotter {
 public:
  allotter(const Input& input, const balanced_batch& batch, const block_placer<Input>& blocks,
           int ranked_candidates)
      : input_(input), batch_(batch), blocks_(blocks), ranked_candidates_(ranked_candidates) {}

  /// Targets worth trying: the samples' own degree_option times (thinned evenly by rank), a
  /// geometric grid from the slowest "fastest option" of a long sample (no lower target can be
  /// met by all) to the largest degree_option time, and infinity (every sample at its cheapest
  /// degree).
  [[nodiscard]] std::vector<double> candidate_targets() const {
    double floor = 0;
    for (const auto& item : batch_.longs) floor = std::max(floor, item.menu[item.fastest].seconds);
    std::vector<double> values;
    for (const auto& item : batch_.longs)
      for (const auto& o : item.menu)
        if (o.feasible) values.push_back(o.seconds);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    std::vector<double> targets;
    const auto limit = static_cast<std::size_t>(std::max(2, ranked_candidates_));
    if (values.size() <= limit) {
      targets = values;
    } else {
      for (std::size_t j = 0; j < limit; ++j)
        targets.push_back(values[j * (values.size() - 1) / (limit - 1)]);
    }
    if (!values.empty() && values.back() > floor && floor > 0) {
      const double ratio = values.back() / floor;
      for (int j = 0; j <= 16; ++j) targets.push_back(floor * std::pow(ratio, j / 16.0));
    }
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    targets.push_back(std::numeric_limits<double>::infinity());
    return targets;
  }

  /// Degree index per long item for a target makespan: the fewest GPU-seconds whose time is at
  /// most the target, else the fastest.
  [[nodiscard]] std::vector<std::size_t> allot(double target) const {
    std::vector<std::size_t> choice(batch_.longs.size(), 0);
    for (std::size_t j = 0; j < batch_.longs.size(); ++j) {
      const auto& item = batch_.longs[j];
      std::size_t best = item.menu.size();
      double best_cost = std::numeric_limits<double>::infinity();
      std::size_t fastest = item.menu.size();
      for (std::size_t k = 0; k < item.menu.size(); ++k) {
        if (!may_use(item, k, target)) continue;
        const double t = item.menu[k].seconds;
        if (fastest == item.menu.size() || t < item.menu[fastest].seconds) fastest = k;
        const double cost = static_cast<double>(input_.degree(k)) * t;
        if (t <= target && cost < best_cost) {
          best_cost = cost;
          best = k;
        }
      }
      choice[j] = best < item.menu.size() ? best : fastest;
    }
    return choice;
  }

  /// Degree index per long item for a target makespan, long samples first, each placed as it
  /// is chosen: the degree with the fewest GPU-seconds (its run plus the idle time its block
  /// waits) whose run, started when its earliest aligned block frees, ends by the target;
  /// groups stay inside a node when an in-node degree does, unless crossing takes fewer
  /// GPU-seconds (the in-node runs recompute). A sample that no degree brings in by the target
  /// takes the one that ends first. Unlike allot(), a sample behind a world-sized one sees that
  /// it starts late, so it is given the larger degree that still ends in time. The target is
  /// read only by comparing ends with it: `same` is set to the range of targets that compare
  /// every end alike, [latest end in time, earliest end late), which make the same choices.
  [[nodiscard]] std::vector<std::size_t> allot_placed(double target,
                                                      std::pair<double, double>& same) const {
    same = {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    std::vector<std::size_t> choice(batch_.longs.size(), 0);
    block_loads blocks(input_.gpus());
    for (const auto j : batch_.long_first) {
      const auto& item = batch_.longs[j];
      const auto [best, slot] = place_by_target(item, target, blocks, same);
      choice[j] = best;
      const auto d = input_.degree(best);
      if (d > 1) blocks.occupy(slot.first_rank, d, slot.start + item.menu[best].seconds);
    }
    return choice;
  }

  /// The allotment `choice` (fluid estimate `estimate`) changed a class of like long samples
  /// (one length and bucket, one degree) at a time to another degree each may use, where that
  /// lowers the fluid estimate: the allotments above give every sample a degree for one
  /// target, so none of them runs the longest clips at a degree that saves GPU-seconds while
  /// the shorter ones keep the larger degree that keeps their runs short. Classes with the most
  /// GPU-seconds first, at most `evaluations` fluid estimates; the refined allotment's estimate
  /// and the allotment, nullopt when nothing improves.
  [[nodiscard]] std::optional<std::pair<double, std::vector<std::size_t>>> refine(
      std::vector<std::size_t> choice, double estimate) const {
    constexpr std::size_t evaluations = 16;
    std::size_t left = evaluations;
    bool changed = false;
    std::vector<std::size_t> order(batch_.longs.size());
    for (bool improved = true; improved && left > 0;) {
      improved = false;
      for (const auto& [weight, b, e] : classes_of(choice, order)) {
        if (left == 0) break;
        improved = move_class(choice, estimate, order, b, e, left);
        if (improved) break;  // classes change with the choice
      }
      changed = changed || improved;
    }
    if (!changed) return std::nullopt;
    return std::pair{estimate, std::move(choice)};
  }

  /// Degree index per long item: the smallest degree at which it runs with the recompute
  /// strategy's lightest setting (what an empty micro-batch gets), else its fastest, then
  /// `doubled` degrees higher where that is feasible — the allotments of a token cap per GPU
  /// halved `doubled` times (verl's), which keep every run short and unrecomputed.
  [[nodiscard]] std::vector<std::size_t> allot_unrecomputed(std::size_t doubled) const {
    std::vector<std::size_t> choice(batch_.longs.size(), 0);
    for (std::size_t j = 0; j < batch_.longs.size(); ++j) {
      const auto& item = batch_.longs[j];
      std::size_t pick = item.unrecomputed;
      for (std::size_t step = 0;
           step < doubled && pick + 1 < item.menu.size() && item.menu[pick + 1].feasible; ++step)
        ++pick;
      choice[j] = pick;
    }
    return choice;
  }

  /// Degree index per long item: k for every one that runs there, else its smallest feasible
  /// degree above k, else its fastest — the long samples laid out like a static layout at
  /// degree k (packed together on the degree's blocks by block_placer), the short ones on
  /// single GPUs.
  [[nodiscard]] std::vector<std::size_t> allot_shared(std::size_t k) const {
    std::vector<std::size_t> choice(batch_.longs.size(), 0);
    for (std::size_t j = 0; j < batch_.longs.size(); ++j) {
      const auto& item = batch_.longs[j];
      std::size_t pick = k;
      while (pick < item.menu.size() && !item.menu[pick].feasible) ++pick;
      choice[j] = pick < item.menu.size() ? pick : item.fastest;
    }
    return choice;
  }
  /// allot_shared(k) with every long item whose degree there would take longer alone than
  /// `horizon` at its degree in `fallback`; nullopt when none would (allot_shared(k) itself).
  [[nodiscard]] std::optional<std::vector<std::size_t>> allot_shared(
      std::size_t k, double horizon, const std::vector<std::size_t>& fallback) const {
    auto choice = allot_shared(k);
    bool changed = false;
    for (std::size_t j = 0; j < batch_.longs.size(); ++j) {
      const auto& o = batch_.longs[j].menu[choice[j]];
      if ((!o.feasible || o.seconds > horizon) && choice[j] != fallback[j]) {
        choice[j] = fallback[j];
        changed = true;
      }
    }
    if (!changed) return std::nullopt;
    return choice;
  }

 private:
  [[nodiscard]] bool may_use(const long_item& item, std::size_t k, double target) const {
    if (!item.menu[k].feasible) return false;
    // Groups stay inside a node unless nothing fits there or the fastest in-node degree_option
    // is longer than the target makespan.
    return !input_.crosses_nodes(k) || !item.fits_intra || item.fastest_intra > target;
  }

  // allot_placed()'s degree and block for one long item, given the blocks' loads so far.
  [[nodiscard]] std::pair<std::size_t, block_loads::slot> place_by_target(
      const long_item& item, double target, const block_loads& blocks,
      std::pair<double, double>& same) const {
    std::size_t best = item.menu.size();
    double best_cost = std::numeric_limits<double>::infinity();
    bool best_preferred = false;
    std::size_t soonest = item.menu.size();
    double soonest_end = std::numeric_limits<double>::infinity();
    block_loads::slot best_slot{};
    for (std::size_t k = 0; k < item.menu.size(); ++k) {
      const auto& o = item.menu[k];
      if (!o.feasible) continue;
      const auto d = input_.degree(k);
      const bool preferred = !input_.crosses_nodes(k) || crossing_saves_work(item, d, k);
      // Once a degree meets the target, one that cannot beat it (its run alone costs as many
      // GPU-seconds, or it is of a less preferred kind) need not ask when its block frees.
      if (best != item.menu.size() &&
          ((best_preferred && !preferred) ||
           (preferred == best_preferred && static_cast<double>(d) * o.seconds >= best_cost)))
        continue;
      // Single-GPU runs join the fill, which balances them: no block to wait for.
      const auto slot = d > 1 ? blocks.earliest(d) : block_loads::slot{};
      const double end = slot.start + o.seconds;
      if (end < soonest_end) {
        soonest_end = end;
        soonest = k;
      }
      if (end > target) {
        same.second = std::min(same.second, end);
        continue;
      }
      same.first = std::max(same.first, end);
      const double cost = static_cast<double>(d) * o.seconds + slot.idle;
      if ((preferred && !best_preferred) || (preferred == best_preferred && cost < best_cost)) {
        best = k;
        best_cost = cost;
        best_preferred = preferred;
        best_slot = slot;
      }
    }
    if (best != item.menu.size()) return {best, best_slot};
    const auto d = input_.degree(soonest);
    return {soonest, d > 1 ? blocks.earliest(d) : block_loads::slot{}};
  }

  // The classes of like long samples under `choice` (one degree, bucket and length), as
  // [begin, end) runs of `order` (which it sorts), by GPU-seconds descending.
  [[nodiscard]] std::vector<std::tuple<double, std::size_t, std::size_t>> classes_of(
      const std::vector<std::size_t>& choice, std::vector<std::size_t>& order) const {
    const auto& longs = batch_.longs;
    const auto key = [&](std::size_t j) {
      return std::tuple{choice[j], input_.bucket(longs[j].sample),
                        input_.shape(longs[j].sample).tokens};
    };
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return key(a) != key(b) ? key(a) < key(b) : a < b;
    });
    std::vector<std::tuple<double, std::size_t, std::size_t>> classes;
    for (std::size_t b = 0; b < order.size();) {
      std::size_t e = b + 1;
      while (e < order.size() && key(order[e]) == key(order[b])) ++e;
      const auto& o = longs[order[b]].menu[choice[order[b]]];
      classes.emplace_back(-static_cast<double>(e - b) *
                               static_cast<double>(input_.degree(choice[order[b]])) * o.seconds,
                           b, e);
      b = e;
    }
    std::sort(classes.begin(), classes.end());
    return classes;
  }

  // Moves the class order[b, e) to the first other degree each of its samples may use whose
  // allotment lowers the fluid estimate, counting evaluations down in `left`; whether it moved.
  bool move_class(std::vector<std::size_t>& choice, double& estimate,
                  const std::vector<std::size_t>& order, std::size_t b, std::size_t e,
                  std::size_t& left) const {
    const auto from = choice[order[b]];
    for (std::size_t k = 0; k < input_.degrees().size() && left > 0; ++k) {
      if (k == from ||
          !std::all_of(order.begin() + static_cast<std::ptrdiff_t>(b),
                       order.begin() + static_cast<std::ptrdiff_t>(e),
                       [&](std::size_t j) { return may_use(batch_.longs[j], k, estimate); }))
        continue;
      auto trial = choice;
      for (auto x = b; x < e; ++x) trial[order[x]] = k;
      --left;
      const auto fluid = blocks_.fluid_estimate(trial);
      if (fluid.needless_crossing || !(fluid.estimate < estimate * (1.0 - 1e-9))) continue;
      choice = std::move(trial);
      estimate = fluid.estimate;
      return true;
    }
    return false;
  }

  const Input& input_;
  const balanced_batch& batch_;
  const block_placer<Input>& blocks_;
  int ranked_candidates_;
};

/// The distinct allotments offered, each with its fluid estimate: those without needless
/// node-crossing groups ranked (best first once sorted), the best with them kept aside.
class allotment_ranking {
 public:
  /// Offers `choice` unless it was offered before; `blocks` gives its fluid estimate.
  template <class Blocks>
  void offer(std::vector<std::size_t> choice, const Blocks& blocks) {
    std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the degree indices
    for (const auto k : choice) hash = (hash ^ k) * 0x100000001b3ULL;
    for (std::size_t n = 0; n < seen_.size(); ++n)
      if (seen_hash_[n] == hash && seen_[n] == choice) return;
    const auto fluid = blocks.fluid_estimate(choice);
    seen_.push_back(std::move(choice));
    seen_hash_.push_back(hash);
    // An allotment whose node-crossing groups are not needed (the step lasts longer than
    // their fastest in-node option would end) cannot give a plan without such groups: it is
    // kept aside, and scheduled only if it may beat the others.
    if (!fluid.needless_crossing)
      ranked_.emplace_back(fluid.estimate, seen_.size() - 1);
    else if (!loose_ || fluid.estimate < loose_->first)
      loose_.emplace(fluid.estimate, seen_.size() - 1);
  }
  /// Ranks the allotments by estimate (stable: the first offered first among equals).
  void sort() {
    std::stable_sort(ranked_.begin(), ranked_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  [[nodiscard]] bool empty() const noexcept { return ranked_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return ranked_.size(); }
  /// The n-th ranked allotment, and its estimate.
  [[nodiscard]] const std::vector<std::size_t>& choice(std::size_t n) const {
    return seen_[ranked_[n].second];
  }
  [[nodiscard]] double estimate(std::size_t n) const { return ranked_[n].first; }
  /// The best allotment with needless crossings, if any was offered.
  [[nodiscard]] bool has_loose() const noexcept { return loose_.has_value(); }
  [[nodiscard]] double loose_estimate() const { return loose_->first; }
  [[nodiscard]] const std::vector<std::size_t>& loose_choice() const {
    return seen_[loose_->second];
  }

 private:
  std::vector<std::pair<double, std::size_t>> ranked_;  // (estimate, index into seen_)
  std::vector<std::vector<std::size_t>> seen_;          // distinct allotments only
  std::vector<std::uint64_t> seen_hash_;                // a hash of each, compared first
  std::optional<std::pair<double, std::size_t>> loose_;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
