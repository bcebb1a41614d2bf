#pragma once
// The default placement: choose each sample's degree, pack samples into micro-batches to the
// memory budget, give every group its own number of micro-steps, and minimise the step's
// makespan. Two-phase malleable scheduling:
//  1. allotment — for a target makespan T, each long sample takes the degree with the fewest
//     GPU-seconds whose time is at most T, once as if every sample started at 0 and once long
//     samples first, each placed as chosen so that its start counts; candidates for T are the
//     samples' own degree_option times; besides, every degree as one shared degree for all
//     long samples; and the best-ranked allotment refined one class of like samples (one
//     length and bucket) at a time to the degree that lowers its estimate;
//  2. list scheduling — multi-GPU samples longest-first by degree (descending) on aligned
//     blocks (the buddy order keeps every block's ranks equally loaded, so no rank idles
//     inside a group), then single-GPU samples longest-processing-time-first;
// then per-rank packing and a local search that moves samples off the last rank to finish,
// swaps them for shorter ones, and else swaps whole micro-batches for shorter ones.
// Every allotment scheduled is also scheduled with each block's samples packed into shared
// micro-batches where that is faster, and the best once more with short samples in the room its
// multi-GPU micro-batches leave, as a static layout packs them; the fastest plan counts.
// The result is compared with the best static layout and never slower than it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/placement/detail/block_loads.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/static_layout.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct balanced_placement {
  /// A sample is "long" (gets a degree menu) when its single-GPU time exceeds this fraction of
  /// the average per-GPU load, or when memory forces recomputation or a higher degree.
  double long_fraction = 0.25;
  /// Target makespans tried in full (after a fluid estimate ranks all candidates).
  int full_candidates = 2;
  /// Candidate targets ranked by the fluid estimate.
  int ranked_candidates = 32;
  /// Compare with the static layouts and return the best one if it is faster than ours.
  bool compare_static = true;
  /// Also schedule the best allotment whose node-crossing groups are each unneeded (every one's
  /// in-node option, started where it starts, would end in time, and would take no more
  /// GPU-seconds), and return it when its plan is faster than the best plan without such
  /// groups: together they shorten the step (long in-node runs fill the ranks coarsely). Off,
  /// every crossing group is needed on its own.
  bool cross_nodes_when_faster = true;
  /// Let multi-GPU micro-batches hold several samples: every allotment scheduled is scheduled
  /// again with the long samples given one degree sharing a block's micro-batches where packing
  /// them to the budget is faster than one micro-step each, every degree is also tried as one
  /// shared degree for all long samples, and the best allotment is scheduled once more with
  /// short samples in the room its multi-GPU micro-batches leave; the fastest plan counts, so
  /// sharing never gives a slower plan by the cost model. Off, every multi-GPU micro-step runs
  /// one sample.
  bool share_micro_batches = true;
  /// Report the best static layout's makespan even when it is slower than ours (an exact
  /// search over every degree). Off by default: static layouts whose floor already exceeds our
  /// makespan are then skipped, and the plan reports 0 when none could beat it.
  bool exact_best_static = false;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "balanced"; }
  friend constexpr bool operator==(const balanced_placement&, const balanced_placement&) = default;
};

namespace detail {

template <class Context>
class balanced_solver {
public:
  balanced_solver(const Context& ctx, const balanced_placement& options)
      : ctx_(ctx), options_(options), gpus_(static_cast<std::size_t>(ctx.gpus())),
        workspace_(ctx.workspace()) {
    if (workspace_ == nullptr) return;
    const std::size_t n = ctx.size();
    estimate_ = workspace_->take<double>(n);
    short_sorted_ = workspace_->take<std::pair<double, std::size_t>>(n);
    schedule_blocks_.singles = workspace_->take<std::pair<double, std::size_t>>(n);
    unjoined_ = workspace_->take<std::size_t>(n + 1);
    group_of_ = workspace_->take<std::uint32_t>(n);
    batch_of_ = workspace_->take<std::uint32_t>(n);
  }
  balanced_solver(const balanced_solver&) = delete;
  balanced_solver& operator=(const balanced_solver&) = delete;
  /// Gives the batch-sized buffers back to the workspace.
  ~balanced_solver() {
    if (workspace_ == nullptr) return;
    workspace_->give(std::move(estimate_));
    workspace_->give(std::move(short_sorted_));
    workspace_->give(std::move(schedule_blocks_.singles));
    workspace_->give(std::move(unjoined_));
    workspace_->give(std::move(group_of_));
    workspace_->give(std::move(batch_of_));
    workspace_->give(std::move(spare_steps_));
  }

  [[nodiscard]] placement solve() {
    classify();
    const auto targets = candidate_targets();
    // Two allotments per target: each sample's cheapest degree that meets the target alone, and
    // the long-sample-first one that also counts when its block frees. Rank every distinct one by
    // the fluid estimate, then schedule the best few in full.
    std::vector<std::pair<double, std::size_t>> ranked;
    std::vector<std::vector<std::size_t>> seen;  // distinct allotments only
    std::vector<std::uint64_t> seen_hash;        // a hash of each, compared first
    std::optional<std::pair<double, std::size_t>> loose;  // the best with unneeded crossings
    const auto offer = [&](std::vector<std::size_t> choice) {
      std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the degree indices
      for (const auto k : choice) hash = (hash ^ k) * 0x100000001b3ULL;
      for (std::size_t n = 0; n < seen.size(); ++n)
        if (seen_hash[n] == hash && seen[n] == choice) return;
      const auto fluid = fluid_estimate(choice);
      seen.push_back(std::move(choice));
      seen_hash.push_back(hash);
      // An allotment whose node-crossing groups are not needed (the step lasts longer than
      // their fastest in-node option would end) cannot give a plan without such groups: it is
      // kept aside, the best of them scheduled below only if it may beat the others.
      if (!fluid.needless_crossing) ranked.emplace_back(fluid.estimate, seen.size() - 1);
      else if (!loose || fluid.estimate < loose->first) loose.emplace(fluid.estimate, seen.size() - 1);
    };
    // allot_placed() gives one allotment for every target in [same.first, same.second) (each
    // run's end compares with them alike): a target there would only offer it again.
    std::pair<double, double> same{1.0, 0.0};  // empty
    for (const double target : targets) {
      offer(allot(target));
      if (!(same.first <= target && target < same.second)) offer(allot_placed(target, same));
    }
    for (std::size_t doubled = 0; doubled < 5; ++doubled) offer(allot_unrecomputed(doubled));
    // Every degree as one shared degree for the long samples, ranked by its fluid estimate
    // with each block's samples packed together: the best one is scheduled below.
    std::optional<std::pair<double, std::vector<std::size_t>>> shared;
    if (options_.share_micro_batches)
      for (std::size_t k = 1; k < ctx_.degrees().size(); ++k) {
        auto choice = allot_shared(k);
        const auto fluid = fluid_estimate(choice, true);
        if (!fluid.needless_crossing && (!shared || fluid.estimate < shared->first))
          shared.emplace(fluid.estimate, std::move(choice));
      }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    // The best-ranked allotment refined a class of like samples at a time (refine()): scheduled
    // below beside the others rather than ranked among them (the fluid estimate that refines it
    // does not see the fill, so it only adds a plan to choose from), and what the shared
    // degrees below are built around.
    std::optional<std::pair<double, std::vector<std::size_t>>> refined;
    if (!ranked.empty()) refined = refine(seen[ranked.front().second], ranked.front().first);
    // Each shared degree once more around the best-ranked (or refined) allotment: a long sample that alone
    // at the shared degree would outlast that allotment's estimated step keeps its degree there
    // (one very long sample on many GPUs, the others packed on fewer, as FlexSP's groups do).
    // Its packed blocks may cross nodes where each of their samples alone would not need to:
    // the best is scheduled as `loose` is, only with cross_nodes_when_faster.
    struct capped_choice {
      double estimate;
      std::vector<std::size_t> choice;
      bool needless;
    };
    std::optional<capped_choice> capped;
    if (options_.share_micro_batches && !ranked.empty())
      for (std::size_t k = 1; k < ctx_.degrees().size(); ++k) {
        auto choice = refined ? allot_shared(k, refined->first, refined->second)
                              : allot_shared(k, ranked.front().first, seen[ranked.front().second]);
        if (!choice) continue;
        const auto fluid = fluid_estimate(*choice, true);
        if (fluid.needless_crossing && !options_.cross_nodes_when_faster) continue;
        if (!capped || fluid.estimate < capped->estimate)
          capped = capped_choice{fluid.estimate, std::move(*choice), fluid.needless_crossing};
      }
    // Schedule the best-ranked allotments in full until `full_candidates` of them give valid
    // plans; the relaxed one (every sample at its cheapest degree, groups inside a node unless
    // memory forces otherwise) is always valid and tried when none of them was.
    // Each is scheduled with one micro-step per multi-GPU sample and, with
    // `share_micro_batches`, once more with each block's samples packed together where any
    // block packs; the faster plan counts. Sharing thus only adds plans to choose from.
    std::optional<placement> best;
    std::vector<std::size_t> best_choice;
    bool best_unneeded = false;
    bool best_shared = false;
    auto keep = [&](std::optional<placement> candidate, const std::vector<std::size_t>& choice, bool allow_unneeded,
                    bool share) {
      if (!candidate) return false;
      if (!best || candidate->makespan_seconds < best->makespan_seconds) {
        if (best) recycle(*best);
        best = std::move(candidate);
        best_choice = choice;
        best_unneeded = allow_unneeded;
        best_shared = share;
      } else {
        recycle(*candidate);
      }
      return true;
    };
    auto consider = [&](const std::vector<std::size_t>& choice, bool allow_unneeded = false) {
      const bool valid = keep(schedule(choice, allow_unneeded, false), choice, allow_unneeded, false);
      if (valid && options_.share_micro_batches) keep(schedule(choice, allow_unneeded, true), choice, allow_unneeded, true);
      return valid;
    };
    int valid = 0;
    for (std::size_t n = 0; n < ranked.size() && valid < std::max(1, options_.full_candidates); ++n)
      if (consider(seen[ranked[n].second])) ++valid;
    if (!best && !consider(allot(std::numeric_limits<double>::infinity())))
      throw error("balanced_placement: internal error, the relaxed target gave no valid plan");
    // The refined allotment, only where its estimate is within 5 % of the best plan's makespan
    // (the estimate is coarse: a first plan the local search balanced well can fall below the
    // estimate of a refined allotment whose plan is faster still), and only where refining
    // lowered the estimate by a part in 100,000 at least: a full schedule is a fifth of the
    // planning time, and one that small moves a handful of samples (on a 1M-sample Wikipedia
    // batch, 2 of 4,036 long samples for an estimate 2e-6 lower; on the scenario matrix every
    // refined allotment scheduled lowered it by 8e-5 or more).
    if (refined && refined->first < 1.05 * best->makespan_seconds &&
        refined->first < (1.0 - 1e-5) * ranked.front().first)
      consider(refined->second);
    // One more full schedule, only where the fluid estimate says unneeded crossings may win.
    if (options_.cross_nodes_when_faster && loose && loose->first < best->makespan_seconds)
      consider(seen[loose->second], true);
    if (shared && shared->first < best->makespan_seconds) keep(schedule(shared->second, false, true), shared->second, false, true);
    if (capped && capped->estimate < best->makespan_seconds)
      keep(schedule(capped->choice, capped->needless, true), capped->choice, capped->needless, true);
    // The best allotment once more with short samples in its multi-GPU micro-batches' room.
    if (options_.share_micro_batches) {
      const auto chosen = best_choice;
      keep(schedule(chosen, best_unneeded, best_shared, true), chosen, best_unneeded, best_shared);
    }
    // Where a multi-GPU micro-step ends the best plan, the allotments for a target just below
    // its makespan, twice at most: the fluid estimate ranks allotments by the average load plus
    // half the longest single-GPU sample, which cannot tell a long sample's cheap but slow
    // degree (its run then sets the step) from a faster one that takes a few more GPU-seconds;
    // these give every sample whose run reaches the makespan a degree that ends sooner. Each is
    // scheduled with one micro-step per multi-GPU sample, shared, and with the fill, once (the
    // same choice gives the same plans).
    std::vector<std::vector<std::size_t>> tightened;
    for (int round = 0; round < 2 && ends_on_multi(*best); ++round) {
      const double from = best->makespan_seconds;
      const double target = from * (1.0 - 1e-9);
      std::pair<double, double> unused;
      for (const auto& choice : {allot(target), allot_placed(target, unused)}) {
        if (choice == best_choice || std::find(tightened.begin(), tightened.end(), choice) != tightened.end())
          continue;
        tightened.push_back(choice);
        if (consider(choice) && options_.share_micro_batches)
          keep(schedule(choice, false, false, true), choice, false, false);
      }
      if (!(best->makespan_seconds < from)) break;
    }
    best->policy = "balanced";
    return std::move(*best);
  }

private:
  struct long_item {
    std::size_t sample = 0;
    std::vector<degree_option> menu{};  // per degree index
    std::size_t fastest = 0;            // degree index of the fastest feasible option (first)
    std::size_t unrecomputed = 0;       // the smallest with the strategy's lightest setting, else fastest
    double fastest_intra = std::numeric_limits<double>::infinity();
    double cheapest_intra = std::numeric_limits<double>::infinity();  // GPU-seconds
    bool fits_intra = false;
  };

  // Single-GPU time and estimate of every sample; menus for the long ones.
  void classify() {
    const std::size_t n = ctx_.size();
    estimate_.resize(n);
    is_long_.assign(n, false);
    const auto relaxed = ctx_.evaluate(micro_batch_shape{}, 0).recompute;
    // The recompute strategy's lightest setting per degree (what an empty micro-batch gets).
    std::vector<recompute_setting> lightest{relaxed};
    for (std::size_t k = 1; k < ctx_.degrees().size(); ++k)
      lightest.push_back(ctx_.evaluate(micro_batch_shape{}, k).recompute);
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      several_buckets_ = several_buckets_ || ctx_.bucket(i) != ctx_.bucket(0);
      const auto& single = ctx_.alone(i, 0);
      // Samples of one shape share their option, and so their estimate.
      const auto alike = ctx_.first_alike(i);
      if (alike != i) estimate_[i] = estimate_[alike];
      else estimate_[i] = single.feasible ? ctx_.packed_estimate(i, 0, single) : 0.0;
      total += single.feasible ? estimate_[i] : 0.0;
    }
    const double threshold = options_.long_fraction * total / static_cast<double>(gpus_);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& s = ctx_.alone(i, 0);
      if (s.feasible && s.recompute == relaxed && estimate_[i] <= threshold) {
        short_sum_ += estimate_[i];
        short_max_ = std::max(short_max_, estimate_[i]);
        short_sorted_.emplace_back(estimate_[i], i);
        continue;
      }
      is_long_[i] = true;
      long_item item{};
      item.sample = i;
      bool any = false;
      bool unrecomputed = false;
      for (std::size_t k = 0; k < ctx_.degrees().size(); ++k) {
        item.menu.push_back(ctx_.alone(i, k));
        const auto& o = item.menu.back();
        if (!o.feasible) continue;
        if (!any || o.seconds < item.menu[item.fastest].seconds) item.fastest = k;
        if (!unrecomputed && o.recompute == lightest[k]) {
          item.unrecomputed = k;
          unrecomputed = true;
        }
        any = true;
        if (!ctx_.crosses_nodes(k)) {
          item.fits_intra = true;
          item.fastest_intra = std::min(item.fastest_intra, o.seconds);
          item.cheapest_intra = std::min(item.cheapest_intra, static_cast<double>(ctx_.degree(k)) * o.seconds);
        }
      }
      if (!any) ctx_.throw_does_not_fit(i);
      if (!unrecomputed) item.unrecomputed = item.fastest;
      longs_.push_back(std::move(item));
    }
    lpt_order(short_sorted_);
    // Long samples by their fastest run, longest first: the order allot_placed() places them.
    std::vector<std::pair<double, std::size_t>> by_fastest;
    for (std::size_t j = 0; j < longs_.size(); ++j)
      by_fastest.emplace_back(longs_[j].menu[longs_[j].fastest].seconds, j);
    lpt_order(by_fastest);
    long_first_.clear();
    for (const auto& [fastest, j] : by_fastest) long_first_.push_back(j);
  }

  // Targets worth trying: the samples' own degree_option times (thinned evenly by rank), a geometric
  // grid from the slowest "fastest option" of a long sample (no lower target can be met by
  // all) to the largest degree_option time, and infinity (every sample at its cheapest degree).
  [[nodiscard]] std::vector<double> candidate_targets() const {
    double floor = 0;
    for (const auto& item : longs_) floor = std::max(floor, item.menu[item.fastest].seconds);
    std::vector<double> values;
    for (const auto& item : longs_)
      for (const auto& o : item.menu)
        if (o.feasible) values.push_back(o.seconds);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    std::vector<double> targets;
    const auto limit = static_cast<std::size_t>(std::max(2, options_.ranked_candidates));
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

  // Crossing nodes at degree index k takes fewer GPU-seconds than any in-node option (which then
  // recomputes so much that keeping the sample in a node would take GPU time from the others),
  // or nothing fits inside a node.
  [[nodiscard]] bool crossing_saves_work(const long_item& item, std::size_t k) const {
    return !item.fits_intra || static_cast<double>(ctx_.degree(k)) * item.menu[k].seconds < item.cheapest_intra;
  }

  [[nodiscard]] bool may_use(const long_item& item, std::size_t k, double target) const {
    if (!item.menu[k].feasible) return false;
    // Groups stay inside a node unless nothing fits there or the fastest in-node degree_option is
    // longer than the target makespan.
    return !ctx_.crosses_nodes(k) || !item.fits_intra || item.fastest_intra > target;
  }

  // Degree index per long item for a target makespan.
  [[nodiscard]] std::vector<std::size_t> allot(double target) const {
    std::vector<std::size_t> choice(longs_.size(), 0);
    for (std::size_t j = 0; j < longs_.size(); ++j) {
      const auto& item = longs_[j];
      std::size_t best = item.menu.size();
      double best_cost = std::numeric_limits<double>::infinity();
      std::size_t fastest = item.menu.size();
      for (std::size_t k = 0; k < item.menu.size(); ++k) {
        if (!may_use(item, k, target)) continue;
        const double t = item.menu[k].seconds;
        if (fastest == item.menu.size() || t < item.menu[fastest].seconds) fastest = k;
        const double cost = static_cast<double>(ctx_.degree(k)) * t;
        if (t <= target && cost < best_cost) {
          best_cost = cost;
          best = k;
        }
      }
      choice[j] = best < item.menu.size() ? best : fastest;
    }
    return choice;
  }

  // Degree index per long item for a target makespan, long samples first, each placed as it is
  // chosen: the degree with the fewest GPU-seconds (its run plus the idle time its block waits)
  // whose run, started when its earliest aligned block frees, ends by the target; groups stay
  // inside a node when an in-node degree does, unless crossing takes fewer GPU-seconds (the
  // in-node runs recompute). A sample that no degree brings in by the target
  // takes the one that ends first. Unlike allot(), a sample behind a world-sized one sees that it
  // starts late, so it is given the larger degree that still ends in time.
  // The target is read only by comparing ends with it: `same` is set to the range of targets
  // that compare every end alike, [latest end in time, earliest end late), which make the same
  // choices.
  [[nodiscard]] std::vector<std::size_t> allot_placed(double target, std::pair<double, double>& same) const {
    same = {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    std::vector<std::size_t> choice(longs_.size(), 0);
    block_loads blocks(ctx_.gpus());
    for (const auto j : long_first_) {
      const auto& item = longs_[j];
      std::size_t best = item.menu.size();
      double best_cost = std::numeric_limits<double>::infinity();
      bool best_preferred = false;
      std::size_t soonest = item.menu.size();
      double soonest_end = std::numeric_limits<double>::infinity();
      block_loads::slot best_slot{};
      for (std::size_t k = 0; k < item.menu.size(); ++k) {
        const auto& o = item.menu[k];
        if (!o.feasible) continue;
        const auto d = ctx_.degree(k);
        const bool preferred = !ctx_.crosses_nodes(k) || crossing_saves_work(item, k);
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
      if (best == item.menu.size()) {
        best = soonest;
        best_slot = ctx_.degree(best) > 1 ? blocks.earliest(ctx_.degree(best)) : block_loads::slot{};
      }
      choice[j] = best;
      const auto d = ctx_.degree(best);
      if (d > 1) blocks.occupy(best_slot.first_rank, d, best_slot.start + item.menu[best].seconds);
    }
    return choice;
  }

  // The allotment `choice` (fluid estimate `estimate`) changed a class of like long samples
  // (one length and bucket, one degree) at a time to another degree each may use, where that
  // lowers the fluid estimate: the allotments above give every sample a degree for one target,
  // so none of them runs the longest clips at a degree that saves GPU-seconds while the
  // shorter ones keep the larger degree that keeps their runs short. Classes with the most
  // GPU-seconds first, at most `evaluations` fluid estimates; the refined allotment's estimate
  // and the allotment, nullopt when nothing improves.
  [[nodiscard]] std::optional<std::pair<double, std::vector<std::size_t>>> refine(std::vector<std::size_t> choice,
                                                                                 double estimate) const {
    constexpr std::size_t evaluations = 16;
    std::size_t left = evaluations;
    bool changed = false;
    std::vector<std::size_t> order(longs_.size());
    const auto key = [&](std::size_t j) {
      return std::tuple{choice[j], ctx_.bucket(longs_[j].sample), ctx_.shape(longs_[j].sample).tokens};
    };
    for (bool improved = true; improved && left > 0;) {
      improved = false;
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return key(a) != key(b) ? key(a) < key(b) : a < b;
      });
      // Classes as [begin, end) runs of `order`, by GPU-seconds descending.
      std::vector<std::tuple<double, std::size_t, std::size_t>> classes;
      for (std::size_t b = 0; b < order.size();) {
        std::size_t e = b + 1;
        while (e < order.size() && key(order[e]) == key(order[b])) ++e;
        const auto& o = longs_[order[b]].menu[choice[order[b]]];
        classes.emplace_back(-static_cast<double>(e - b) * static_cast<double>(ctx_.degree(choice[order[b]])) * o.seconds,
                             b, e);
        b = e;
      }
      std::sort(classes.begin(), classes.end());
      for (const auto& [weight, b, e] : classes) {
        if (left == 0) break;
        const auto from = choice[order[b]];
        for (std::size_t k = 0; k < ctx_.degrees().size() && left > 0; ++k) {
          if (k == from || !std::all_of(order.begin() + static_cast<std::ptrdiff_t>(b),
                                        order.begin() + static_cast<std::ptrdiff_t>(e),
                                        [&](std::size_t j) { return may_use(longs_[j], k, estimate); }))
            continue;
          auto trial = choice;
          for (auto x = b; x < e; ++x) trial[order[x]] = k;
          --left;
          const auto fluid = fluid_estimate(trial);
          if (fluid.needless_crossing || !(fluid.estimate < estimate * (1.0 - 1e-9))) continue;
          choice = std::move(trial);
          estimate = fluid.estimate;
          changed = improved = true;
          break;
        }
        if (improved) break;  // classes change with the choice
      }
    }
    if (!changed) return std::nullopt;
    return std::pair{estimate, std::move(choice)};
  }

  // Degree index per long item: the smallest degree at which it runs with the recompute
  // strategy's lightest setting (what an empty micro-batch gets), else its fastest, then
  // `doubled` degrees higher where that is feasible — the allotments of a token cap per GPU
  // halved `doubled` times (verl's), which keep every run short and unrecomputed.
  [[nodiscard]] std::vector<std::size_t> allot_unrecomputed(std::size_t doubled) const {
    std::vector<std::size_t> choice(longs_.size(), 0);
    for (std::size_t j = 0; j < longs_.size(); ++j) {
      const auto& item = longs_[j];
      std::size_t pick = item.unrecomputed;
      for (std::size_t step = 0; step < doubled && pick + 1 < item.menu.size() && item.menu[pick + 1].feasible; ++step)
        ++pick;
      choice[j] = pick;
    }
    return choice;
  }

  // Degree index per long item: k for every one that runs there, else its smallest feasible
  // degree above k, else its fastest — the long samples laid out like a static layout at degree
  // k (packed together on the degree's blocks by place_blocks), the short ones on single GPUs.
  [[nodiscard]] std::vector<std::size_t> allot_shared(std::size_t k) const {
    std::vector<std::size_t> choice(longs_.size(), 0);
    for (std::size_t j = 0; j < longs_.size(); ++j) {
      const auto& item = longs_[j];
      std::size_t pick = k;
      while (pick < item.menu.size() && !item.menu[pick].feasible) ++pick;
      choice[j] = pick < item.menu.size() ? pick : item.fastest;
    }
    return choice;
  }
  // allot_shared(k) with every long item whose degree there would take longer alone than
  // `horizon` at its degree in `fallback`; nullopt when none would (allot_shared(k) itself).
  [[nodiscard]] std::optional<std::vector<std::size_t>> allot_shared(std::size_t k, double horizon,
                                                                     const std::vector<std::size_t>& fallback) const {
    auto choice = allot_shared(k);
    bool changed = false;
    for (std::size_t j = 0; j < longs_.size(); ++j) {
      const auto& o = longs_[j].menu[choice[j]];
      if ((!o.feasible || o.seconds > horizon) && choice[j] != fallback[j]) {
        choice[j] = fallback[j];
        changed = true;
      }
    }
    if (!changed) return std::nullopt;
    return choice;
  }

  struct block_assignment {
    std::vector<double> free;                       // per rank, after the multi-GPU samples
    struct block {
      std::size_t first_item;          // its items: members[first_item, first_item + items)
      std::size_t items;
      std::vector<std::size_t> beside{};  // short samples in the same micro-batch (fill_blocks)
      std::size_t k;                   // degree index
      std::int64_t first_rank;
      double start;
      degree_option run;
    };
    std::vector<block> multi;  // in the order they run
    // Indices into longs_, block after block: each block's run together as one micro-batch
    // (one list for all rather than one per block, which would cost an allocation per sample).
    std::vector<std::size_t> members;
    [[nodiscard]] std::span<const std::size_t> items_of(const block& b) const noexcept {
      return {members.data() + b.first_item, b.items};
    }
    bool packed = false;       // some block runs several samples in one micro-batch
    std::vector<std::pair<double, std::size_t>> singles;      // (estimate, sample)
  };

  // Multi-GPU samples on aligned blocks, degree descending: each degree's samples go longest
  // first to the block that frees first, then each block's samples are packed to the memory
  // budget at that degree (long documents that share a degree share micro-batches, so fewer
  // micro-steps pay the fixed cost) where that is faster than one micro-step each. Into `a`,
  // whose buffers are reused (the fluid estimate of every allotment tried writes into the same
  // one, every schedule into another).
  void place_blocks(const std::vector<std::size_t>& choice, bool with_short, bool share, block_assignment& a) const {
    a.free.assign(gpus_, 0.0);
    a.multi.clear();
    a.members.clear();
    a.packed = false;
    a.singles.clear();
    auto& [order, load, apart, block_of, begin, placed, next] = placing_;
    order.clear();
    order.reserve(longs_.size());
    a.singles.reserve(longs_.size());
    for (std::size_t j = 0; j < longs_.size(); ++j) {
      if (ctx_.degree(choice[j]) > 1) order.push_back(j);
      else a.singles.emplace_back(estimate_[longs_[j].sample], longs_[j].sample);  // menu[0] is alone(i, 0)
    }
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto dx = ctx_.degree(choice[x]);
      const auto dy = ctx_.degree(choice[y]);
      if (dx != dy) return dx > dy;
      const double tx = longs_[x].menu[choice[x]].seconds;
      const double ty = longs_[y].menu[choice[y]].seconds;
      if (tx != ty) return tx > ty;
      return longs_[x].sample < longs_[y].sample;
    });
    a.multi.reserve(order.size());
    a.members.reserve(order.size());
    // Per degree: each block's load and its time with one micro-step per sample; each sample's
    // block; the samples by block (on block b: placed[begin[b], begin[b + 1]), longest first).
    for (std::size_t from = 0; from < order.size();) {
      const auto k = choice[order[from]];
      const auto d = ctx_.degree(k);
      std::size_t to = from;
      while (to < order.size() && choice[order[to]] == k) ++to;
      // Longest first onto the aligned block that frees first (ranks of an aligned block free
      // together: larger degrees came first on the buddy order).
      const auto blocks = static_cast<std::size_t>(ctx_.gpus() / d);
      load.resize(blocks);
      for (std::size_t b = 0; b < blocks; ++b) load[b] = a.free[b * static_cast<std::size_t>(d)];
      apart.assign(blocks, 0.0);
      block_of.resize(to - from);
      begin.assign(blocks + 1, 0);
      for (std::size_t n = from; n < to; ++n) {
        const auto b = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        const auto& item = longs_[order[n]];
        block_of[n - from] = b;
        ++begin[b + 1];
        load[b] += share && to - from > blocks ? ctx_.packed_estimate(item.sample, k, item.menu[k]) : item.menu[k].seconds;
        apart[b] += item.menu[k].seconds;
      }
      std::partial_sum(begin.begin(), begin.end(), begin.begin());
      placed.resize(to - from);
      next = begin;
      for (std::size_t n = from; n < to; ++n) placed[next[block_of[n - from]]++] = order[n];
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::span<const std::size_t> on_b(placed.data() + begin[b], begin[b + 1] - begin[b]);
        if (on_b.empty()) continue;
        const auto first = static_cast<std::int64_t>(b) * d;
        double t = a.free[static_cast<std::size_t>(first)];
        const auto one_each = [&] {
          for (const auto j : on_b) {
            a.multi.push_back({a.members.size(), 1, {}, k, first, t, longs_[j].menu[k]});
            a.members.push_back(j);
            t += longs_[j].menu[k].seconds;
          }
        };
        if (on_b.size() == 1 || !share) {
          one_each();
        } else {
          std::vector<std::pair<std::size_t, std::size_t>> item_of;  // (sample, longs_ index)
          std::vector<std::size_t> samples;
          for (const auto j : on_b) {
            item_of.emplace_back(longs_[j].sample, j);
            samples.push_back(longs_[j].sample);
          }
          std::sort(item_of.begin(), item_of.end());
          auto packed = pack_to_budget(ctx_, std::move(samples), k);
          if (packed.size() < on_b.size() && total_seconds(packed) < apart[b]) {
            a.packed = true;
            for (const auto& batch : packed) {
              a.multi.push_back({a.members.size(), batch.samples.size(), {}, k, first, t, batch.run});
              for (const auto i : batch.samples)
                a.members.push_back(std::lower_bound(item_of.begin(), item_of.end(), std::pair{i, std::size_t{0}})->second);
              t += batch.run.seconds;
            }
          } else {
            one_each();
          }
        }
        for (auto r = first; r < first + d; ++r) a.free[static_cast<std::size_t>(r)] = t;
      }
      from = to;
    }
    if (with_short) {
      // Merge the long single-GPU samples into the short ones, sorted once in classify().
      // In place, from the back (a's list is kept from schedule to schedule: on a 10M batch it
      // holds 160 MB that a fresh list would map and fault in afresh each time).
      lpt_order(a.singles);
      const auto first_of = [](const auto& x, const auto& y) {
        if (x.first != y.first) return x.first > y.first;
        return x.second < y.second;
      };
      std::size_t i = a.singles.size();
      std::size_t j = short_sorted_.size();
      a.singles.resize(i + j);
      for (std::size_t w = i + j; j > 0;)
        a.singles[--w] = i > 0 && first_of(short_sorted_[j - 1], a.singles[i - 1]) ? a.singles[--i] : short_sorted_[--j];
    }
  }

  struct fluid {
    double estimate;         // of the makespan
    bool needless_crossing;  // a node-crossing group whose in-node option would end by the floor
  };

  // The fluid view of an allotment: the floor is what no list schedule of these estimates can
  // beat (the busiest block, or the average load); the estimate adds half the longest
  // single-GPU item for the granularity of the fill.
  [[nodiscard]] fluid fluid_estimate(const std::vector<std::size_t>& choice, bool share = false) const {
    auto& a = fluid_blocks_;
    place_blocks(choice, false, share, a);
    double sum = std::accumulate(a.free.begin(), a.free.end(), 0.0) + short_sum_;
    double longest_single = short_max_;
    for (const auto& [e, i] : a.singles) {
      sum += e;
      longest_single = std::max(longest_single, e);
    }
    const double top = *std::max_element(a.free.begin(), a.free.end());
    const double floor = std::max(top, sum / static_cast<double>(gpus_));
    return {std::max(top, sum / static_cast<double>(gpus_) + 0.5 * longest_single),
            needless_crossing(a, floor)};
  }

  // Whether a group of `a` crosses nodes although it is not needed: its fastest in-node option,
  // started when the group starts, would end by `makespan`, and it would take no more
  // GPU-seconds than the crossing group.
  [[nodiscard]] bool needless_crossing(const block_assignment& a, double makespan) const {
    return std::any_of(a.multi.begin(), a.multi.end(), [&](const auto& b) {
      const auto items = a.items_of(b);
      return ctx_.crosses_nodes(b.k) && std::any_of(items.begin(), items.end(), [&](std::size_t j) {
               return !crossing_saves_work(longs_[j], b.k) && b.start + longs_[j].fastest_intra <= makespan;
             });
    });
  }

  // Full schedule for one allotment: blocks (each block's samples packed together where that
  // is faster, with `share`), single-GPU samples (after filling the multi-GPU micro-batches'
  // room, with `fill`), packing, local search; nullopt when a group crosses nodes although its
  // in-node option would not lengthen the step (unless `allow_unneeded`), when `share` packs no
  // block, or when `fill` moves no sample.
  [[nodiscard]] std::optional<placement> schedule(const std::vector<std::size_t>& choice, bool allow_unneeded,
                                                  bool share, bool fill = false) {
    auto& a = schedule_blocks_;  // its buffers kept from schedule to schedule
    place_blocks(choice, true, share, a);
    // A shared schedule without a shared block is the one without sharing: not run twice.
    if (share && !fill && !a.packed) return std::nullopt;
    if (fill && !fill_blocks(a)) return std::nullopt;
    // Two assignments of the single-GPU samples, each packed; the one that finishes first is
    // refined. LPT balances best; filling ranks bucket by bucket up to the average load keeps
    // each rank to few buckets, so fewer micro-steps pay the fixed per-micro-step cost. With one
    // bucket (text under varlen_buckets) there are no buckets to keep few and the fill is not
    // tried: it then only balances another way, and on 200 Wikipedia batches of 32 x 1,000 the
    // plans' mean gap moved from 4.0319 % to 4.0321 % without it, and planning took about a fifth
    // less time (docs/planner.md "Planning time").
    std::vector<std::vector<std::size_t>> per_rank;
    std::vector<std::vector<packed_batch>> batches;
    std::vector<double> end;
    const auto keep_faster = [&](std::vector<std::vector<std::size_t>> assignment) {
      auto packed = pack_groups_to_budget(ctx_, assignment, 0, &group_of_);
      std::vector<double> finish(gpus_);
      for (std::size_t r = 0; r < gpus_; ++r) finish[r] = a.free[r] + total_seconds(packed[r]);
      if (end.empty() || *std::max_element(finish.begin(), finish.end()) <
                             *std::max_element(end.begin(), end.end())) {
        per_rank = std::move(assignment);
        batches = std::move(packed);
        end = std::move(finish);
      }
    };
    keep_faster(lpt_assign_ordered(a.singles, a.free));
    if (several_buckets_) keep_faster(fill_by_bucket(a));
    improve(a.free, per_rank, batches, end);

    placement out;
    std::size_t steps = a.multi.size();
    for (const auto& on_rank : batches) steps += on_rank.size();
    // Into the list of a schedule that lost (recycle()), or one kept from an earlier plan: a
    // 10M plan's list is ~75 MB, which a fresh one maps and faults in afresh.
    if (spare_steps_.capacity() < steps && workspace_ != nullptr) {
      auto kept = workspace_->take<placed_micro_step>(steps);
      if (kept.capacity() > spare_steps_.capacity()) spare_steps_.swap(kept);
      if (kept.capacity() > 0) workspace_->give(std::move(kept));
    }
    out.micro_steps.swap(spare_steps_);
    out.micro_steps.reserve(steps);
    std::vector<double> free(gpus_, 0.0);
    for (const auto& block : a.multi) {
      placed_micro_step step;
      step.first_rank = block.first_rank;
      step.config = ctx_.config_of(block.k, block.run);
      for (const auto j : a.items_of(block)) step.samples.push_back(longs_[j].sample);
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
                                         ctx_.config(0), free[r]);
      out.makespan_seconds = std::max(out.makespan_seconds, finish);
    }
    if (!allow_unneeded && needless_crossing(a, out.makespan_seconds)) {
      recycle(out);
      return std::nullopt;
    }
    return out;
  }

  // Short samples into the room the multi-GPU micro-batches leave, as a static layout at their
  // degree would pack them, so that they pay for no micro-step of their own: each micro-batch
  // takes the longest single-GPU samples that still fit at its setting and keep its ranks within
  // the average finish of all ranks (first fit decreasing; a micro-batch stops looking after a
  // few that do not fit, each sending the search on to the first shorter sample the budget
  // holds), and keeps them where that saves GPU-seconds by the estimates; its ranks then free
  // later by what they add. False when no micro-batch kept any.
  bool fill_blocks(block_assignment& a) const {
    const std::size_t n = a.singles.size();
    if (a.multi.empty() || n == 0) return false;
    double total = std::accumulate(a.free.begin(), a.free.end(), 0.0);
    for (const auto& single : a.singles) total += single.first;
    const double average = total / static_cast<double>(gpus_);
    std::vector<double> delay(gpus_, 0.0);  // what joined samples add to each rank's end
    // next[p]: the first position at or after p whose sample has not joined (path halving).
    auto& next = unjoined_;
    next.resize(n + 1);
    std::iota(next.begin(), next.end(), std::size_t{0});
    const auto unjoined = [&](std::size_t p) {
      while (next[p] != p) p = next[p] = next[next[p]];
      return p;
    };
    bool any = false;
    std::vector<std::size_t> taken;  // positions of the singles one block takes
    for (auto& block : a.multi) {
      const auto d = ctx_.degree(block.k);
      double latest = 0;
      for (auto r = block.first_rank; r < block.first_rank + d; ++r)
        latest = std::max(latest, a.free[static_cast<std::size_t>(r)] + delay[static_cast<std::size_t>(r)]);
      // Single-GPU time the block's ranks can still take, about `d` times their time in the group.
      double headroom = static_cast<double>(d) * (average - latest);
      if (headroom <= 0) continue;
      micro_batch_shape shape;
      for (const auto j : a.items_of(block)) shape += ctx_.shape(longs_[j].sample);
      const auto bucket = ctx_.bucket(longs_[a.members[block.first_item]].sample);
      // Singles come longest first: the first at or after `from` that the headroom holds, by
      // binary search (as the headroom shrinks, the ones it no longer holds are skipped at once).
      const auto held_from = [&](std::size_t from) {
        return static_cast<std::size_t>(
            std::partition_point(a.singles.begin() + static_cast<std::ptrdiff_t>(from), a.singles.end(),
                                 [&](const auto& x) { return x.first > headroom; }) -
            a.singles.begin());
      };
      std::size_t misses = 0;
      taken.clear();
      // The samples taken before the first miss of the budget (first fit, always kept) and what
      // the block looks like with them; the single-GPU estimates of those taken past it. The scan
      // only moves forward, so the samples taken need no mark until the block keeps them.
      std::size_t first_fit = std::numeric_limits<std::size_t>::max();
      micro_batch_shape first_fit_shape;
      double moved = 0;
      for (std::size_t p = unjoined(held_from(0)); p < n && misses < 8; p = unjoined(p + 1)) {
        if (a.singles[p].first > headroom) {
          p = unjoined(held_from(p));
          if (p == n) break;
        }
        const auto [estimate, i] = a.singles[p];
        const auto with = shape + ctx_.shape(i);
        if (ctx_.bucket(i) != bucket) {
          ++misses;
          continue;
        }
        if (!ctx_.runs_with(with, block.k, block.run.recompute, block.run.sp)) {
          ++misses;
          if (first_fit == std::numeric_limits<std::size_t>::max()) {
            first_fit = taken.size();
            first_fit_shape = shape;
          }
          // Out of memory: a shorter single may still fit. Singles come longest first, so the
          // first later one that fits is found by galloping then bisecting from here (exact where
          // their bytes fall with their estimates, as they do within a bucket; none fits if the
          // shortest does not); the loop goes on from there.
          const auto fits_beside = [&](std::size_t q) {
            return ctx_.runs_with(shape + ctx_.shape(a.singles[q].second), block.k, block.run.recompute,
                                  block.run.sp).has_value();
          };
          if (!fits_beside(n - 1)) break;
          std::size_t low = p + 1;  // the first that may fit
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
            if (fits_beside(mid)) high = mid;
            else low = mid + 1;
          }
          p = low - 1;  // the loop's unjoined(p + 1) resumes at `low`, or the first after it not yet joined
          continue;
        }
        shape = with;
        headroom -= estimate;
        taken.push_back(p);
        if (first_fit != std::numeric_limits<std::size_t>::max()) moved += estimate;
      }
      if (taken.empty()) continue;
      auto run = ctx_.run(shape, block.k, block.run.recompute, block.run.sp);
      if (first_fit < taken.size()) {
        // Those taken past a miss stay only where they save GPU-seconds by the estimates: the
        // block's d GPUs take longer by what they add to its micro-batch, alone they would take
        // their estimates. (Short samples are what evens out the single-GPU ranks: taking them
        // where that saves nothing costs a schedule and can leave the ranks coarser.)
        const auto without = first_fit > 0 ? ctx_.run(first_fit_shape, block.k, block.run.recompute, block.run.sp)
                                           : block.run;
        if (static_cast<double>(d) * (run.seconds - without.seconds) >= moved) {
          taken.resize(first_fit);
          if (taken.empty()) continue;
          run = without;
        }
      }
      const double added = run.seconds - block.run.seconds;
      for (const auto p : taken) {
        next[p] = p + 1;
        block.beside.push_back(a.singles[p].second);
      }
      block.run = run;
      for (auto r = block.first_rank; r < block.first_rank + d; ++r) delay[static_cast<std::size_t>(r)] += added;
      any = true;
    }
    if (!any) return false;
    // The singles that joined no block leave the list, in place (its memory is kept from
    // schedule to schedule).
    std::size_t kept = 0;
    for (std::size_t p = unjoined(0); p < n; p = unjoined(p + 1)) a.singles[kept++] = a.singles[p];
    a.singles.resize(kept);
    std::fill(a.free.begin(), a.free.end(), 0.0);
    for (auto& block : a.multi) {
      block.start = a.free[static_cast<std::size_t>(block.first_rank)];
      for (auto r = block.first_rank; r < block.first_rank + ctx_.degree(block.k); ++r)
        a.free[static_cast<std::size_t>(r)] = block.start + block.run.seconds;
    }
    return true;
  }

  // Whether a micro-step of several GPUs ends when the plan does.
  [[nodiscard]] static bool ends_on_multi(const placement& p) {
    return std::any_of(p.micro_steps.begin(), p.micro_steps.end(), [&p](const placed_micro_step& m) {
      return m.config.degree > 1 && m.start_seconds + m.seconds >= p.makespan_seconds * (1.0 - 1e-12);
    });
  }

  // Single-GPU samples grouped by bucket (longest first within one), poured into the ranks in
  // order of their load after the multi-GPU samples, each rank filled up to the average
  // finish; what is left goes longest-processing-time-first.
  [[nodiscard]]
  std::vector<std::vector<std::size_t>> fill_by_bucket(const block_assignment& a) const {
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
  [[nodiscard]] std::vector<std::pair<double, std::size_t>>
  by_bucket_descending(const std::vector<std::pair<double, std::size_t>>& items) const {
    if (items.empty()) return {};
    std::int64_t low = ctx_.bucket(items.front().second);
    std::int64_t high = low;
    for (const auto& item : items) {
      low = std::min<std::int64_t>(low, ctx_.bucket(item.second));
      high = std::max<std::int64_t>(high, ctx_.bucket(item.second));
    }
    if (high - low > static_cast<std::int64_t>(items.size())) {
      auto sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) {
        return ctx_.bucket(x.second) > ctx_.bucket(y.second);
      });
      return sorted;
    }
    // Slot of bucket b: high - b, so the highest bucket comes first.
    std::vector<std::size_t> next(static_cast<std::size_t>(high - low) + 2, 0);
    for (const auto& item : items) ++next[static_cast<std::size_t>(high - ctx_.bucket(item.second)) + 1];
    std::partial_sum(next.begin(), next.end(), next.begin());
    std::vector<std::pair<double, std::size_t>> sorted(items.size());
    for (const auto& item : items) sorted[next[static_cast<std::size_t>(high - ctx_.bucket(item.second))]++] = item;
    return sorted;
  }

  // One micro-batch of a rank as a move leaves it: its index (the rank's micro-batch count for a
  // new one), its shape and setting afterwards, and how many samples it then holds.
  struct batch_change {
    std::size_t batch;
    micro_batch_shape shape;
    degree_option run;
    std::size_t count;
  };

  // Local search on the single-GPU samples, between the rank that finishes last and the one that
  // finishes first, while it strictly lowers the later of the two:
  // - a move takes a sample from the late rank to the early one (estimate below the gap, closest
  //   to half of it first);
  // - where no move does, a swap trades a sample of the late rank for a shorter one of the early
  //   rank (estimates differing by less than the gap, closest to half of it first), which is
  //   what a late rank holding only long samples needs.
  // Changes are evaluated incrementally: a sample leaves its micro-batch, which is re-timed (or
  // emptied), and joins its new rank's first micro-batch of its bucket that holds it (first fit,
  // else a new one), so a change costs a few cost-model calls instead of repacking two ranks.
  void improve(const std::vector<double>& base, std::vector<std::vector<std::size_t>>& items,
               std::vector<std::vector<packed_batch>>& batches, std::vector<double>& end) const {
    constexpr auto nowhere = std::numeric_limits<std::uint32_t>::max();
    auto& batch_of = batch_of_;  // micro-batch on its rank
    batch_of.assign(ctx_.size(), nowhere);
    for (std::size_t r = 0; r < gpus_; ++r)
      for (std::size_t b = 0; b < batches[r].size(); ++b)
        for (auto i : batches[r][b].samples) batch_of[i] = static_cast<std::uint32_t>(b);
    // End of rank r with `changes` applied in order (the later of two to one micro-batch holds),
    // summed as the rank runs its micro-batches; an emptied one takes no time.
    const auto end_with = [&](std::size_t r, std::initializer_list<const batch_change*> changes) {
      double t = 0;
      for (std::size_t b = 0; b <= batches[r].size(); ++b) {
        const batch_change* changed = nullptr;
        for (const auto* c : changes)
          if (c->batch == b) changed = c;
        if (changed != nullptr)
          t += changed->run.seconds;
        else if (b < batches[r].size() && !batches[r][b].samples.empty())
          t += batches[r][b].run.seconds;
      }
      return base[r] + t;
    };
    // The setting of a changed micro-batch, as the packer leaves one (first_fit_packer::finish):
    // the strategy's lightest where that fits now, else the one it had while that still fits
    // and is the strategy's; nullopt when neither does.
    const auto& lightest = ctx_.packing_setting(0).lightest;
    // `had_bytes`: what runs_with() gave for `had`, if the caller has asked already.
    const auto settle = [&](const micro_batch_shape& shape, const recompute_setting& had,
                            std::optional<double> had_bytes = std::nullopt) -> std::optional<degree_option> {
      if (had != lightest)
        if (const auto bytes = ctx_.runs_with(shape, 0, lightest)) return ctx_.run_fitting(shape, 0, lightest, *bytes);
      if (!had_bytes) had_bytes = ctx_.runs_with(shape, 0, had);
      if (had_bytes) return ctx_.run_fitting(shape, 0, had, *had_bytes);
      return std::nullopt;
    };
    // Sample i leaving rank r: the rest of its micro-batch settles (above), else takes the
    // strategy's setting for what is left.
    const auto leave = [&](std::size_t r, std::size_t i) -> std::optional<batch_change> {
      const std::size_t from = batch_of[i];
      const auto& batch = batches[r][from];
      micro_batch_shape rest;
      for (auto other : batch.samples)
        if (other != i) rest += ctx_.shape(other);
      degree_option run{true, {}, 0.0, 0.0};
      if (batch.samples.size() > 1) {
        const auto settled = settle(rest, batch.run.recompute);
        run = settled ? *settled : ctx_.evaluate(rest, 0);
        if (!run.feasible) return std::nullopt;
      }
      return batch_change{from, std::move(rest), run, batch.samples.size() - 1};
    };
    // Sample i joining rank r (after `left`, if given, changed one of its micro-batches): first
    // fit among the rank's micro-batches of its bucket, else a micro-batch of its own.
    const auto join = [&](std::size_t r, std::size_t i, const batch_change* left) -> std::optional<batch_change> {
      const auto& alone = ctx_.alone(i, 0);
      const double need = 0.999 * (alone.peak_bytes - ctx_.empty_bytes(0));
      for (std::size_t b = 0; b < batches[r].size(); ++b) {
        const auto& batch = batches[r][b];
        const bool changed = left != nullptr && left->batch == b;
        const auto count = changed ? left->count : batch.samples.size();
        const auto& run = changed ? left->run : batch.run;
        // A micro-batch holds one bucket, so its first sample names it even if that one leaves.
        if (count == 0 || ctx_.bucket(batch.samples.front()) != ctx_.bucket(i) ||
            ctx_.budget() - run.peak_bytes < need)
          continue;
        auto with = (changed ? left->shape : batch.shape) + ctx_.shape(i);
        // With the bytes for its own setting given, settle() always has an answer.
        if (const auto bytes = ctx_.runs_with(with, 0, run.recompute))
          return batch_change{b, std::move(with), *settle(with, run.recompute, bytes), count + 1};
      }
      if (!alone.feasible) return std::nullopt;
      return batch_change{batches[r].size(), ctx_.shape(i), alone, 1};
    };
    const auto apply_leave = [&](std::size_t r, std::size_t i, const batch_change& c) {
      auto& batch = batches[r][c.batch];
      batch.samples.erase(std::find(batch.samples.begin(), batch.samples.end(), i));
      batch.shape = c.shape;
      batch.run = c.run;
      items[r].erase(std::find(items[r].begin(), items[r].end(), i));
    };
    const auto apply_join = [&](std::size_t r, std::size_t i, const batch_change& c) {
      if (c.batch == batches[r].size()) batches[r].push_back({{}, {}, {}});
      auto& batch = batches[r][c.batch];
      batch.samples.push_back(i);
      batch.shape = c.shape;
      batch.run = c.run;
      batch_of[i] = static_cast<std::uint32_t>(c.batch);
      items[r].push_back(i);
    };
    // A change of the two ranks' micro-batches (`apply`) that ends them at `late_end` and
    // `early_end` is made if it strictly lowers the later of the two.
    const auto accept = [&](std::size_t late, std::size_t early, double late_end, double early_end, auto&& apply) {
      if (!(std::max(late_end, early_end) < end[late] * (1.0 - 1e-12))) return false;
      apply();
      end[late] = late_end;
      end[early] = early_end;
      return true;
    };
    constexpr std::size_t tries = 8;  // candidates evaluated per move or swap
    std::vector<std::size_t> candidates;
    const auto try_move = [&](std::size_t late, std::size_t early, double gap) {
      candidates.clear();
      for (const auto i : items[late])
        if (estimate_[i] < gap) candidates.push_back(i);
      const auto closer = [&](std::size_t x, std::size_t y) {
        const double ex = std::abs(estimate_[x] - 0.5 * gap);
        const double ey = std::abs(estimate_[y] - 0.5 * gap);
        if (ex != ey) return ex < ey;
        return x < y;
      };
      const auto kept = std::min(candidates.size(), tries);
      std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(kept),
                        candidates.end(), closer);
      candidates.resize(kept);
      for (const auto i : candidates) {
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
    };
    std::vector<std::pair<double, std::size_t>> shorter;  // the early rank's samples by estimate
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    const auto try_swap = [&](std::size_t late, std::size_t early, double gap) {
      shorter.clear();
      for (const auto y : items[early]) shorter.emplace_back(estimate_[y], y);
      std::sort(shorter.begin(), shorter.end(), pair_less{});
      // For each sample x of the late rank, the early rank's samples nearest below and above
      // estimate(x) - gap / 2 that still differ from it by more than 0 and less than the gap.
      pairs.clear();
      for (const auto x : items[late]) {
        const double want = estimate_[x] - 0.5 * gap;
        const auto at = std::lower_bound(shorter.begin(), shorter.end(), std::pair{want, std::size_t{0}}, pair_less{});
        for (auto it : {at, at == shorter.begin() ? shorter.end() : std::prev(at)})
          if (it != shorter.end() && it->first < estimate_[x] && estimate_[x] - it->first < gap)
            pairs.emplace_back(x, it->second);
      }
      const auto off = [&](const std::pair<std::size_t, std::size_t>& p) {
        return std::abs(estimate_[p.first] - estimate_[p.second] - 0.5 * gap);
      };
      const auto kept = std::min(pairs.size(), tries);
      std::partial_sort(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(kept), pairs.end(),
                        [&](const auto& p, const auto& q) { return off(p) != off(q) ? off(p) < off(q) : p < q; });
      pairs.resize(kept);
      for (const auto& pair : pairs) {
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
    };
    // Where no sample moves or swaps, whole micro-batches trade: one micro-batch of the late rank
    // for one or two shorter ones of a rank that finishes earlier, or two of the late rank's for
    // one of the other's, whose times differ by less than the gap (closest to half of it first).
    // A micro-batch at degree 1 takes the same time on every rank, so nothing is re-timed. One
    // for one is what a late rank of single long clips needs where the earliest ranks hold only
    // longer ones and the shorter clips are packed elsewhere; one for two what it needs where its
    // clips are each longer than the gap and every shorter micro-batch elsewhere is shorter than
    // a clip by more than the gap (three 0.65 s clips against ranks of 0.3 s micro-batches).
    constexpr std::size_t single = std::numeric_limits<std::size_t>::max();
    struct bundle {
      double seconds;
      std::size_t first, second;  // micro-batch positions on the rank; second == single for one
    };
    // Pairs are formed among at most this many micro-batches of a rank (the first ones), so a
    // rank of many short micro-batches costs no more than a few hundred pair sums.
    constexpr std::size_t paired_batches = 24;
    const auto by_seconds = [](const bundle& x, const bundle& y) {
      return x.seconds != y.seconds ? x.seconds < y.seconds
                                    : std::pair{x.first, x.second} < std::pair{y.first, y.second};
    };
    std::vector<bundle> late_ones, late_pairs, early_ones, early_pairs;
    const auto bundles_of = [&](std::size_t r, std::vector<bundle>& ones, std::vector<bundle>& pairs, bool paired) {
      ones.clear();
      pairs.clear();
      for (std::size_t q = 0; q < batches[r].size(); ++q)
        if (!batches[r][q].samples.empty()) ones.push_back({batches[r][q].run.seconds, q, single});
      const auto m = paired ? std::min(ones.size(), paired_batches) : 0;
      for (std::size_t x = 0; x < m; ++x)
        for (std::size_t y = x + 1; y < m; ++y)
          pairs.push_back({ones[x].seconds + ones[y].seconds, ones[x].first, ones[y].first});
      std::sort(ones.begin(), ones.end(), by_seconds);
      std::sort(pairs.begin(), pairs.end(), by_seconds);
    };
    // Micro-batch q of rank `from` and its samples now on rank `to`, at position `at`.
    const auto relabel = [&](std::size_t from, std::size_t q, std::size_t to, std::size_t at) {
      for (const auto i : batches[from][q].samples) {
        items[from].erase(std::find(items[from].begin(), items[from].end(), i));
        items[to].push_back(i);
        batch_of[i] = static_cast<std::uint32_t>(at);
      }
    };
    // With late_ones and late_pairs already the late rank's bundles (bundles_of(late, ...)).
    const auto trade_batches = [&](std::size_t late, std::size_t early, bool paired) {
      const double gap = end[late] - end[early];
      bundles_of(early, early_ones, early_pairs, paired);
      double best_off = std::numeric_limits<double>::infinity();
      bundle give{}, take{};
      const auto search = [&](const bundle& g, const std::vector<bundle>& partner) {
        const auto at = std::lower_bound(partner.begin(), partner.end(), bundle{g.seconds - 0.5 * gap, 0, 0}, by_seconds);
        for (auto it : {at, at == partner.begin() ? partner.end() : std::prev(at)}) {
          if (it == partner.end() || !(it->seconds < g.seconds) || !(g.seconds - it->seconds < gap)) continue;
          const double off = std::abs(g.seconds - it->seconds - 0.5 * gap);
          if (off < best_off) {
            best_off = off;
            give = g;
            take = *it;
          }
        }
      };
      for (const auto& g : late_ones) {
        search(g, early_ones);
        search(g, early_pairs);
      }
      for (const auto& g : late_pairs) search(g, early_ones);
      if (best_off == std::numeric_limits<double>::infinity()) return false;
      const double delta = give.seconds - take.seconds;
      return accept(late, early, end[late] - delta, end[early] + delta, [&] {
        relabel(late, give.first, early, take.first);
        relabel(early, take.first, late, give.first);
        std::swap(batches[late][give.first], batches[early][take.first]);
        // The second micro-batch of a pair joins the other rank at its end; its place stays empty.
        const auto hand_over = [&](std::size_t from, std::size_t q, std::size_t to) {
          relabel(from, q, to, batches[to].size());
          batches[to].push_back(std::move(batches[from][q]));
          batches[from][q] = packed_batch{};
        };
        if (give.second != single) hand_over(late, give.second, early);
        if (take.second != single) hand_over(early, take.second, late);
      });
    };
    // One for one with the sixteen earliest ranks first; where none trades, pairs too with the
    // 256 earliest (the ranks that can give two micro-batches whose sum fits a late clip's lead
    // are rarely the very earliest: those hold the longest micro-batches).
    constexpr std::size_t batch_swap_partners = 16;
    constexpr std::size_t pair_partners = 256;
    constexpr std::size_t swap_partners = 4;
    std::vector<std::size_t> by_end(gpus_);
    std::iota(by_end.begin(), by_end.end(), std::size_t{0});
    const std::size_t rounds = 4 * gpus_ + 64;
    for (std::size_t round = 0; round < rounds; ++round) {
      const auto late = static_cast<std::size_t>(std::max_element(end.begin(), end.end()) - end.begin());
      const auto early = static_cast<std::size_t>(std::min_element(end.begin(), end.end()) - end.begin());
      const double gap = end[late] - end[early];
      if (late == early || gap <= 1e-12 * end[late]) break;
      if (try_move(late, early, gap)) continue;
      // A swap may need a partner that is not the earliest rank (whose samples can all be
      // longer than the late rank's): the few earliest are tried, earliest first.
      const auto partners = std::min(gpus_, swap_partners);
      std::partial_sort(by_end.begin(), by_end.begin() + static_cast<std::ptrdiff_t>(partners), by_end.end(),
                        [&](std::size_t x, std::size_t y) { return end[x] != end[y] ? end[x] < end[y] : x < y; });
      if (std::any_of(by_end.begin(), by_end.begin() + static_cast<std::ptrdiff_t>(partners), [&](std::size_t q) {
            return q != late && end[q] < end[late] && try_swap(late, q, end[late] - end[q]);
          }))
        continue;
      // Only for a rank that ends more than 1 % after the mean: each swap opens more rounds of
      // moves, and on Wikipedia at 1,024 x 100K, where moves and swaps leave the late rank within
      // a fraction of a per cent, 31 % more rounds took 40 % more time for no better plan.
      if (end[late] <= 1.01 * std::accumulate(end.begin(), end.end(), 0.0) / static_cast<double>(gpus_)) break;
      const auto trade_with = [&](std::size_t partners, bool paired) {
        partners = std::min(gpus_, partners);
        bundles_of(late, late_ones, late_pairs, paired);  // once for every partner
        std::partial_sort(by_end.begin(), by_end.begin() + static_cast<std::ptrdiff_t>(partners), by_end.end(),
                          [&](std::size_t x, std::size_t y) { return end[x] != end[y] ? end[x] < end[y] : x < y; });
        return std::any_of(by_end.begin(), by_end.begin() + static_cast<std::ptrdiff_t>(partners), [&](std::size_t q) {
          return q != late && end[q] < end[late] && trade_batches(late, q, paired);
        });
      };
      if (!trade_with(batch_swap_partners, false) && !trade_with(pair_partners, true)) break;
    }
    for (auto& rank : batches)
      rank.erase(std::remove_if(rank.begin(), rank.end(),
                                [](const packed_batch& b) { return b.samples.empty(); }),
                 rank.end());
  }

  const Context& ctx_;
  const balanced_placement& options_;
  std::size_t gpus_;
  plan_workspace* workspace_;  // the scheduler's, where it gave one (placement_input::workspace)
  std::vector<double> estimate_;
  std::vector<bool> is_long_;
  std::vector<long_item> longs_;
  std::vector<std::size_t> long_first_;  // indices into longs_, fastest run descending
  std::vector<std::pair<double, std::size_t>> short_sorted_;
  double short_sum_ = 0;
  double short_max_ = 0;
  bool several_buckets_ = false;  // whether the samples span more than one bucket
  // Buffers place_blocks() reuses from allotment to allotment (it is asked about dozens of
  // allotments per plan): the long samples in placing order, and per degree each block's load
  // and time apart, each sample's block, the samples by block and a cursor per block.
  struct placing_buffers {
    std::vector<std::size_t> order;
    std::vector<double> load, apart;
    std::vector<std::size_t> block_of, begin, placed, next;
  };
  mutable placing_buffers placing_;
  mutable block_assignment fluid_blocks_;  // what fluid_estimate() places into
  // What schedule() places into (with the singles' list), fill_blocks()'s links past joined singles and the packer's sample-to-rank table: each as long as the batch, kept from schedule to
  // schedule (a plan schedules several allotments; arrays of a 10M batch allocated afresh each
  // time are mapped and faulted in afresh each time).
  mutable block_assignment schedule_blocks_;
  mutable std::vector<std::size_t> unjoined_;
  mutable std::vector<std::uint32_t> group_of_;  // pack_groups_to_budget()'s sample-to-rank table
  mutable std::vector<std::uint32_t> batch_of_;  // improve()'s sample-to-micro-batch table
  // The micro-step list of a schedule that lost, emptied, for the next schedule to fill.
  std::vector<placed_micro_step> spare_steps_;
  void recycle(placement& lost) {
    lost.micro_steps.clear();
    if (lost.micro_steps.capacity() > spare_steps_.capacity()) spare_steps_.swap(lost.micro_steps);
  }
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement balanced_placement::place(const placement_input<M, R>& input) const {
  {
    const auto& ctx = input;
    if (ctx.size() == 0) return placement{{}, 0, 0, 0, "balanced"};
    auto ours = detail::balanced_solver<dcp::placement_input<M, R>>(ctx, *this).solve();
    if (!compare_static) return ours;
    const double beat = exact_best_static ? std::numeric_limits<double>::infinity() : ours.makespan_seconds;
    auto best_static = detail::best_static_layout(ctx, beat);
    // Under an automatic style a static micro-batch takes the style its first sample runs
    // fastest alone; one style for the whole layout can be faster when micro-batches are filled
    // (the fixed per-micro-step cost of ZeRO-3 favours few, large ones). Each fixed style's best
    // static layout is searched too, against the best so far, at the degrees where the
    // automatic style had a choice (elsewhere its layout already is one style's).
    std::string style_name;  // the fixed style of the best static layout, if it has one
    if (ctx.sp() == sequence_parallel::automatic)
      for (const auto style : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
        const dcp::placement_input<M, R> fixed(input, style);
        const auto chose = [&](std::size_t k) {
          const auto& all = ctx.degrees();
          const auto at = std::find(all.begin(), all.end(), fixed.degree(k));
          return at != all.end() && ctx.style_count(static_cast<std::size_t>(at - all.begin())) > 1;
        };
        auto candidate =
            detail::best_static_layout(fixed, best_static ? best_static->makespan_seconds : beat, chose);
        if (candidate && (!best_static || candidate->makespan_seconds < best_static->makespan_seconds)) {
          best_static = std::move(candidate);
          style_name = ", " + std::string(to_string(style)) + ",";
        }
      }
    if (!best_static) return ours;
    ours.best_static_seconds = best_static->makespan_seconds;
    ours.best_static_degree = best_static->best_static_degree;
    if (best_static->makespan_seconds < ours.makespan_seconds) {
      best_static->policy = "balanced (static degree " + std::to_string(best_static->best_static_degree) +
                            style_name + " was faster)";
      return std::move(*best_static);
    }
    return ours;
  }
}

}  // namespace dcp
