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
//
// The phases live in placement/balanced/: blocks.hpp (long items, block placement, fluid
// estimate), allotment.hpp (classify, targets, allot, refine), schedule.hpp (schedule, fills,
// recycle) and local_search.hpp; this header keeps the knobs and the recipe.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/balanced/allotment.hpp"
#include "dcp/placement/balanced/blocks.hpp"
#include "dcp/placement/balanced/schedule.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/placement/scratch.hpp"
#include "dcp/placement/static_layout.hpp"
#include "dcp/plan/lockstep.hpp"

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

/// Whether a micro-step of several GPUs ends when the plan does.
[[nodiscard]] inline bool ends_on_multi(const placement& p) {
  return std::any_of(p.micro_steps.begin(), p.micro_steps.end(), [&p](const placed_micro_step& m) {
    return m.config.degree > 1 && m.start_seconds + m.seconds >= p.makespan_seconds * (1.0 - 1e-12);
  });
}

/// The fastest plan scheduled so far, with the allotment and the schedule options it came from.
/// Each allotment is scheduled with one micro-step per multi-GPU sample and, with `share`, once
/// more with each block's samples packed together where any block packs; the faster plan
/// counts. Sharing thus only adds plans to choose from.
template <class Input>
class best_plan {
 public:
  /// `lockstep_empty_seconds`: >= 0 where the plan will be put in lockstep (plan/lockstep.hpp),
  /// the time of its padding; candidates are then compared by their makespan in lockstep.
  best_plan(list_scheduler<Input>& scheduler, bool share, std::int64_t gpus,
            double lockstep_empty_seconds = -1)
      : scheduler_(scheduler), share_(share), gpus_(gpus), empty_(lockstep_empty_seconds) {}

  /// Keeps `candidate` if it is faster; false where there is none (an invalid schedule).
  bool keep(std::optional<placement> candidate, const std::vector<std::size_t>& choice,
            bool allow_unneeded, bool share) {
    if (!candidate) return false;
    const double score = empty_ < 0 ? candidate->makespan_seconds
                                    : lockstep_seconds(candidate->micro_steps, gpus_, empty_);
    if (!plan || score < score_) {
      if (plan) scheduler_.recycle(*plan);
      score_ = score;
      plan = std::move(candidate);
      allotment = choice;
      unneeded = allow_unneeded;
      shared = share;
    } else {
      scheduler_.recycle(*candidate);
    }
    return true;
  }
  /// Schedules `choice` without sharing and, if that is valid, with; whether it was valid.
  bool consider(const std::vector<std::size_t>& choice, bool allow_unneeded = false) {
    const bool valid =
        keep(scheduler_.schedule(choice, allow_unneeded, false), choice, allow_unneeded, false);
    if (valid && share_)
      keep(scheduler_.schedule(choice, allow_unneeded, true), choice, allow_unneeded, true);
    return valid;
  }
  [[nodiscard]] double makespan() const { return plan->makespan_seconds; }

  std::optional<placement> plan;
  std::vector<std::size_t> allotment;  // the allotment it came from
  bool unneeded = false;               // scheduled allowing unneeded crossings
  bool shared = false;                 // scheduled with shared micro-batches

 private:
  list_scheduler<Input>& scheduler_;
  bool share_;
  std::int64_t gpus_;
  double empty_;
  double score_ = 0;  // the plan's makespan, in lockstep where empty_ >= 0
};

/// balanced_placement's solver: the recipe in solve(), the phases in placement/balanced/.
template <class Input>
class balanced_solver {
 public:
  /// The solver of `input` with `options`, working in `scratch` (handed in once, by place()).
  balanced_solver(const Input& input, const balanced_placement& options, placement_scratch& scratch)
      : input_(input),
        options_(options),
        blocks_(input, batch_),
        allot_(input, batch_, blocks_, options.ranked_candidates),
        schedule_(input, batch_, blocks_, scratch) {
    batch_ = classify_batch(input, options.long_fraction, scratch.estimate, scratch.short_sorted);
  }
  balanced_solver(const balanced_solver&) = delete;
  balanced_solver& operator=(const balanced_solver&) = delete;

  [[nodiscard]] placement solve() {
    auto ranking = rank_allotments();
    const auto shared = shared_allotment();
    ranking.sort();
    // The best-ranked allotment refined a class of like samples at a time (refine()):
    // scheduled below beside the others rather than ranked among them (the fluid estimate that
    // refines it does not see the fill, so it only adds a plan to choose from), and what the
    // capped shared degrees are built around.
    std::optional<std::pair<double, std::vector<std::size_t>>> refined;
    if (!ranking.empty()) refined = allot_.refine(ranking.choice(0), ranking.estimate(0));
    const auto capped = capped_allotment(ranking, refined);
    // Under lockstep (ZeRO-3) the plan's rounds decide the step: candidates are compared in
    // lockstep, padded with empty micro-steps at the cost model's time for no samples.
    double empty = -1;
    if (input_.cost().training().runs_in_lockstep())
      empty = input_.cost().seconds(micro_batch_shape{}, input_.config(0));
    best_plan<Input> best(schedule_, options_.share_micro_batches, input_.gpus(), empty);
    schedule_ranked(ranking, best);
    schedule_alternatives(ranking, refined, shared, capped, best);
    tighten(best);
    best.plan->policy = "balanced";
    return std::move(*best.plan);
  }

 private:
  // A shared-degree allotment capped around the best-ranked one (capped_allotment).
  struct capped_choice {
    double estimate;
    std::vector<std::size_t> choice;
    bool needless;
  };
  using estimated_choice = std::pair<double, std::vector<std::size_t>>;

  // Two allotments per target: each sample's cheapest degree that meets the target alone, and
  // the long-sample-first one that also counts when its block frees; and the allotments of a
  // halved token cap. Every distinct one ranked by the fluid estimate.
  [[nodiscard]] allotment_ranking rank_allotments() const {
    allotment_ranking ranking;
    // allot_placed() gives one allotment for every target in [same.first, same.second) (each
    // run's end compares with them alike): a target there would only offer it again.
    std::pair<double, double> same{1.0, 0.0};  // empty
    for (const double target : allot_.candidate_targets()) {
      ranking.offer(allot_.allot(target), blocks_);
      if (!(same.first <= target && target < same.second))
        ranking.offer(allot_.allot_placed(target, same), blocks_);
    }
    for (std::size_t doubled = 0; doubled < 5; ++doubled)
      ranking.offer(allot_.allot_unrecomputed(doubled), blocks_);
    return ranking;
  }

  // Every degree as one shared degree for the long samples, ranked by its fluid estimate with
  // each block's samples packed together: the best one (scheduled by schedule_alternatives).
  [[nodiscard]] std::optional<estimated_choice> shared_allotment() const {
    std::optional<estimated_choice> shared;
    if (!options_.share_micro_batches) return shared;
    for (std::size_t k = 1; k < input_.degrees().size(); ++k) {
      auto choice = allot_.allot_shared(k);
      const auto fluid = blocks_.fluid_estimate(choice, true);
      if (!fluid.needless_crossing && (!shared || fluid.estimate < shared->first))
        shared.emplace(fluid.estimate, std::move(choice));
    }
    return shared;
  }

  // Each shared degree once more around the best-ranked (or refined) allotment: a long sample
  // that alone at the shared degree would outlast that allotment's estimated step keeps its
  // degree there (one very long sample on many GPUs, the others packed on fewer, as FlexSP's
  // groups do). Its packed blocks may cross nodes where each of their samples alone would not
  // need to: the best is scheduled as the loose allotment is, only with
  // cross_nodes_when_faster.
  [[nodiscard]] std::optional<capped_choice> capped_allotment(
      const allotment_ranking& ranking, const std::optional<estimated_choice>& refined) const {
    std::optional<capped_choice> capped;
    if (!options_.share_micro_batches || ranking.empty()) return capped;
    for (std::size_t k = 1; k < input_.degrees().size(); ++k) {
      auto choice = refined ? allot_.allot_shared(k, refined->first, refined->second)
                            : allot_.allot_shared(k, ranking.estimate(0), ranking.choice(0));
      if (!choice) continue;
      const auto fluid = blocks_.fluid_estimate(*choice, true);
      if (fluid.needless_crossing && !options_.cross_nodes_when_faster) continue;
      if (!capped || fluid.estimate < capped->estimate)
        capped = capped_choice{fluid.estimate, std::move(*choice), fluid.needless_crossing};
    }
    return capped;
  }

  // Schedule the best-ranked allotments in full until `full_candidates` of them give valid
  // plans; the relaxed one (every sample at its cheapest degree, groups inside a node unless
  // memory forces otherwise) is always valid and tried when none of them was.
  void schedule_ranked(const allotment_ranking& ranking, best_plan<Input>& best) {
    int valid = 0;
    for (std::size_t n = 0; n < ranking.size() && valid < std::max(1, options_.full_candidates);
         ++n)
      if (best.consider(ranking.choice(n))) ++valid;
    if (!best.plan && !best.consider(allot_.allot(std::numeric_limits<double>::infinity())))
      throw error("balanced_placement: internal error, the relaxed target gave no valid plan");
  }

  // The allotments kept aside, each scheduled where its estimate may beat the best plan, then
  // the best allotment once more with short samples in its multi-GPU micro-batches' room.
  void schedule_alternatives(const allotment_ranking& ranking,
                             const std::optional<estimated_choice>& refined,
                             const std::optional<estimated_choice>& shared,
                             const std::optional<capped_choice>& capped, best_plan<Input>& best) {
    // The refined allotment, only where its estimate is within 5 % of the best plan's makespan
    // (the estimate is coarse: a first plan the local search balanced well can fall below the
    // estimate of a refined allotment whose plan is faster still), and only where refining
    // lowered the estimate by a part in 100,000 at least: a full schedule is a fifth of the
    // planning time, and one that small moves a handful of samples (on a 1M-sample Wikipedia
    // batch, 2 of 4,036 long samples for an estimate 2e-6 lower; on the scenario matrix every
    // refined allotment scheduled lowered it by 8e-5 or more).
    if (refined && refined->first < 1.05 * best.makespan() &&
        refined->first < (1.0 - 1e-5) * ranking.estimate(0))
      best.consider(refined->second);
    // One more full schedule, only where the fluid estimate says unneeded crossings may win.
    if (options_.cross_nodes_when_faster && ranking.has_loose() &&
        ranking.loose_estimate() < best.makespan())
      best.consider(ranking.loose_choice(), true);
    if (shared && shared->first < best.makespan())
      best.keep(schedule_.schedule(shared->second, false, true), shared->second, false, true);
    if (capped && capped->estimate < best.makespan())
      best.keep(schedule_.schedule(capped->choice, capped->needless, true), capped->choice,
                capped->needless, true);
    if (!options_.share_micro_batches) return;
    const auto chosen = best.allotment;
    const bool unneeded = best.unneeded;
    const bool shared_blocks = best.shared;
    best.keep(schedule_.schedule(chosen, unneeded, shared_blocks, true), chosen, unneeded,
              shared_blocks);
  }

  // Where a multi-GPU micro-step ends the best plan, the allotments for a target just below
  // its makespan, twice at most: the fluid estimate ranks allotments by the average load plus
  // half the longest single-GPU sample, which cannot tell a long sample's cheap but slow
  // degree (its run then sets the step) from a faster one that takes a few more GPU-seconds;
  // these give every sample whose run reaches the makespan a degree that ends sooner. Each is
  // scheduled with one micro-step per multi-GPU sample, shared, and with the fill, once (the
  // same choice gives the same plans).
  void tighten(best_plan<Input>& best) {
    std::vector<std::vector<std::size_t>> tightened;
    for (int round = 0; round < 2 && ends_on_multi(*best.plan); ++round) {
      const double from = best.makespan();
      const double target = from * (1.0 - 1e-9);
      std::pair<double, double> unused;
      for (const auto& choice : {allot_.allot(target), allot_.allot_placed(target, unused)}) {
        if (choice == best.allotment ||
            std::find(tightened.begin(), tightened.end(), choice) != tightened.end())
          continue;
        tightened.push_back(choice);
        if (best.consider(choice) && options_.share_micro_batches)
          best.keep(schedule_.schedule(choice, false, false, true), choice, false, false);
      }
      if (!(best.makespan() < from)) break;
    }
  }

  const Input& input_;
  const balanced_placement& options_;
  balanced_batch batch_;
  block_placer<Input> blocks_;
  allotter<Input> allot_;
  list_scheduler<Input> schedule_;
};

/// The best static layout of `input` faster than `beat`, and, where it runs one fixed style
/// under an automatic one, that style's name (", ring," and the like). Under an automatic style
/// a static micro-batch takes the style its first sample runs fastest alone; one style for the
/// whole layout can be faster when micro-batches are filled (the fixed per-micro-step cost of
/// ZeRO-3 favours few, large ones). Each fixed style's best static layout is searched too,
/// against the best so far, at the degrees where the automatic style had a choice (elsewhere
/// its layout already is one style's).
template <class Input>
[[nodiscard]] std::pair<std::optional<placement>, std::string> best_static_in_any_style(
    const Input& input, double beat) {
  auto best = best_static_layout(input, beat);
  std::string style_name;
  if (input.sp() != sequence_parallel::automatic) return {std::move(best), style_name};
  for (const auto style :
       {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    const Input fixed(input, style);
    const auto chose = [&](std::size_t k) {
      const auto& all = input.degrees();
      const auto at = std::find(all.begin(), all.end(), fixed.degree(k));
      return at != all.end() && input.style_count(static_cast<std::size_t>(at - all.begin())) > 1;
    };
    auto candidate = best_static_layout(fixed, best ? best->makespan_seconds : beat, chose);
    if (candidate && (!best || candidate->makespan_seconds < best->makespan_seconds)) {
      best = std::move(candidate);
      style_name = ", " + std::string(to_string(style)) + ",";
    }
  }
  return {std::move(best), style_name};
}

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement balanced_placement::place(const placement_input<M, R>& input) const {
  if (input.size() == 0) return placement{{}, 0, 0, 0, "balanced"};
  auto ours = detail::balanced_solver<placement_input<M, R>>(input, *this, input.scratch()).solve();
  if (!compare_static) return ours;
  const double beat =
      exact_best_static ? std::numeric_limits<double>::infinity() : ours.makespan_seconds;
  auto [best_static, style_name] = detail::best_static_in_any_style(input, beat);
  if (!best_static) return ours;
  ours.best_static_seconds = best_static->makespan_seconds;
  ours.best_static_degree = best_static->best_static_degree;
  if (best_static->makespan_seconds < ours.makespan_seconds) {
    best_static->policy = "balanced (static degree " +
                          std::to_string(best_static->best_static_degree) + style_name +
                          " was faster)";
    return std::move(*best_static);
  }
  return ours;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
