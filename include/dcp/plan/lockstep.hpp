#pragma once
// Lockstep plans (docs/planner.md, "Lockstep"): every rank runs the same number of micro-steps,
// one per round, as ZeRO-3 and FSDP need. make_lockstep puts a plan in rounds and pads the ranks
// a round leaves without work with empty micro-steps, which run the collectives every micro-step
// runs (the parameter gathers) and no samples.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Why `plan` is not in lockstep, or empty when it is: its barriers split its micro-steps, in
/// sequence order, into rounds, and every rank of the cluster runs exactly one micro-step in each
/// round. A plan without micro-steps is in lockstep (no rounds).
[[nodiscard]] inline std::string lockstep_violation(const step_plan& plan) {
  const auto& steps = plan.micro_steps;
  if (steps.empty()) return {};
  if (plan.gpus < 1) return "plan.gpus = " + std::to_string(plan.gpus) + ", must be >= 1";
  std::vector<std::size_t> order(steps.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return steps[a].sequence < steps[b].sequence;
  });
  const auto rounds = static_cast<std::int64_t>(plan.barriers.size()) + 1;
  const auto round_text = [&](std::int64_t k) {
    return "round " + std::to_string(k) + " of " + std::to_string(rounds);
  };
  // last[r]: the round of rank r's latest micro-step so far (-1: none yet); by[r]: its sequence.
  std::vector<std::int64_t> last(static_cast<std::size_t>(plan.gpus), -1);
  std::vector<std::int64_t> by(static_cast<std::size_t>(plan.gpus), -1);
  for (const auto i : order) {
    const auto& m = steps[i];
    const auto k = static_cast<std::int64_t>(
        std::upper_bound(plan.barriers.begin(), plan.barriers.end(), m.sequence) -
        plan.barriers.begin());
    if (m.config.degree < 1 || m.first_rank < 0 || m.last_rank() >= plan.gpus)
      return "micro-step " + std::to_string(m.sequence) + " (ranks " +
             std::to_string(m.first_rank) + ".." + std::to_string(m.last_rank()) +
             ") lies outside the cluster's ranks 0.." + std::to_string(plan.gpus - 1);
    for (auto r = m.first_rank; r <= m.last_rank(); ++r) {
      const auto ri = static_cast<std::size_t>(r);
      if (last[ri] == k)
        return "rank " + std::to_string(r) + " runs micro-steps " + std::to_string(by[ri]) +
               " and " + std::to_string(m.sequence) + " in " + round_text(k) +
               ": lockstep allows one per rank and round";
      if (last[ri] < k - 1)
        return "rank " + std::to_string(r) + " runs no micro-step in " + round_text(last[ri] + 1) +
               ": lockstep needs one per rank and round";
      last[ri] = k;
      by[ri] = m.sequence;
    }
  }
  for (std::int64_t r = 0; r < plan.gpus; ++r)
    if (last[static_cast<std::size_t>(r)] < rounds - 1)
      return "rank " + std::to_string(r) + " runs no micro-step in " +
             round_text(last[static_cast<std::size_t>(r)] + 1) +
             ": lockstep needs one per rank and round";
  return {};
}

/// Throws invalid_plan when `plan` says it is in lockstep (step_plan::lockstep) and is not,
/// naming the rank, the round and what it runs there.
inline void check_lockstep(const step_plan& plan) {
  if (!plan.lockstep) return;
  const auto why = lockstep_violation(plan);
  if (!why.empty()) throw invalid_plan("plan.lockstep is set, but " + why);
}

namespace detail {

/// A lockstep stretch's rounds: per round, the micro-steps (by index) with the first rank each
/// runs from.
using lockstep_rounds = std::vector<std::vector<std::pair<std::size_t, std::int64_t>>>;

/// Rounds that keep every micro-step on its ranks: taken in `order`, each goes to the earliest
/// round in which all its ranks are free. `Step`: micro_step or placed_micro_step (first_rank,
/// config.degree, seconds).
template <class Step>
[[nodiscard]] lockstep_rounds rounds_keeping_ranks(const std::vector<Step>& steps,
                                                   const std::vector<std::size_t>& order,
                                                   std::size_t gpus) {
  std::vector<std::vector<char>> busy(gpus);  // busy[r][k]: rank r runs something in round k
  lockstep_rounds rounds;
  for (const auto i : order) {
    const auto& m = steps[i];
    const auto last = m.first_rank + m.config.degree - 1;
    std::size_t k = 0;
    for (bool clash = true; clash;) {
      clash = false;
      for (auto r = m.first_rank; r <= last; ++r) {
        const auto& row = busy[static_cast<std::size_t>(r)];
        if (k < row.size() && row[k]) {
          clash = true;
          ++k;
          break;
        }
      }
    }
    for (auto r = m.first_rank; r <= last; ++r) {
      auto& row = busy[static_cast<std::size_t>(r)];
      if (row.size() <= k) row.resize(k + 1, 0);
      row[k] = 1;
    }
    if (rounds.size() <= k) rounds.resize(k + 1);
    rounds[k].emplace_back(i, m.first_rank);
  }
  return rounds;
}

/// Rounds dealt afresh: round after round, the micro-steps left are taken in `order` and each
/// goes to the first aligned group of its degree that is free in the round, until the round is
/// full or nothing left fits. A micro-step's time does not depend on which aligned group runs
/// it, so in `order` (longest first) each round holds micro-steps of similar length.
template <class Step>
[[nodiscard]] lockstep_rounds rounds_dealing_ranks(const std::vector<Step>& steps,
                                                   const std::vector<std::size_t>& order,
                                                   std::size_t gpus) {
  lockstep_rounds rounds;
  std::vector<std::size_t> left = order;
  std::vector<char> busy(gpus);
  while (!left.empty()) {
    std::fill(busy.begin(), busy.end(), 0);
    std::size_t free = gpus;
    auto& round = rounds.emplace_back();
    std::vector<std::size_t> later;
    for (const auto i : left) {
      const auto d = static_cast<std::size_t>(steps[i].config.degree);
      std::size_t first = gpus;
      if (d <= free) {
        for (std::size_t g = 0; g + d <= gpus && first == gpus; g += d)
          if (std::none_of(busy.begin() + static_cast<std::ptrdiff_t>(g),
                           busy.begin() + static_cast<std::ptrdiff_t>(g + d),
                           [](char b) { return b != 0; }))
            first = g;
      }
      if (first == gpus) {
        later.push_back(i);
        continue;
      }
      std::fill_n(busy.begin() + static_cast<std::ptrdiff_t>(first), d, char{1});
      free -= d;
      round.emplace_back(i, static_cast<std::int64_t>(first));
    }
    left = std::move(later);
  }
  return rounds;
}

/// How long `rounds` last: each its longest micro-step, or the padding's `empty_seconds` where
/// the round leaves a rank without work.
template <class Step>
[[nodiscard]] double rounds_seconds(const std::vector<Step>& steps, const lockstep_rounds& rounds,
                                    std::size_t gpus, double empty_seconds) {
  double total = 0;
  for (const auto& round : rounds) {
    double longest = 0;
    std::size_t ranks = 0;
    for (const auto& [i, first] : round) {
      longest = std::max(longest, steps[i].seconds);
      ranks += static_cast<std::size_t>(steps[i].config.degree);
    }
    if (ranks < gpus) longest = std::max(longest, empty_seconds);
    total += longest;
  }
  return total;
}

/// Indices [begin, end) of `steps`, longest first (stable).
template <class Step>
[[nodiscard]] std::vector<std::size_t> longest_first(const std::vector<Step>& steps,
                                                     std::size_t begin, std::size_t end) {
  std::vector<std::size_t> order(end - begin);
  std::iota(order.begin(), order.end(), begin);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return steps[a].seconds > steps[b].seconds;
  });
  return order;
}

/// The rounds make_lockstep makes of `steps` (the indices in `order`, longest first): kept on
/// their ranks or dealt afresh, whichever ends sooner (kept on a tie).
template <class Step>
[[nodiscard]] lockstep_rounds best_rounds(const std::vector<Step>& steps,
                                          const std::vector<std::size_t>& order, std::size_t gpus,
                                          double empty_seconds) {
  auto kept = rounds_keeping_ranks(steps, order, gpus);
  auto dealt = rounds_dealing_ranks(steps, order, gpus);
  return rounds_seconds(steps, dealt, gpus, empty_seconds) <
                 rounds_seconds(steps, kept, gpus, empty_seconds)
             ? std::move(dealt)
             : std::move(kept);
}

}  // namespace detail

/// How long `steps` (micro_step or placed_micro_step, on `gpus` ranks, no barriers) last once
/// put in lockstep as make_lockstep does, with padding of `empty_seconds`: for a placement to
/// compare its candidates by under ZeRO-3.
template <class Step>
[[nodiscard]] double lockstep_seconds(const std::vector<Step>& steps, std::int64_t gpus,
                                      double empty_seconds) {
  const auto n = static_cast<std::size_t>(gpus);
  const auto order = detail::longest_first(steps, 0, steps.size());
  return detail::rounds_seconds(steps, detail::best_rounds(steps, order, n, empty_seconds), n,
                                empty_seconds);
}

/// Puts `plan` in lockstep. Within each stretch between the plan's own barriers, the micro-steps
/// are taken longest first and put into rounds two ways, and the way whose rounds end sooner is
/// kept (the first on a tie): keeping every micro-step on its ranks, each into the earliest round
/// in which they are all free; or dealing them afresh, round after round, each to the first free
/// aligned group of its degree (its time and bytes do not depend on which aligned group runs
/// it), so that each round holds micro-steps of similar length. A round lasts as long as its
/// longest micro-step; each rank without work in a round gets a copy of `empty`, an empty
/// micro-step (degree 1, no samples, loss scale 0; its predicted seconds and peak bytes as the
/// caller's cost model has them for no samples) that runs the collectives every micro-step runs
/// (ZeRO-3's parameter gathers and gradient reduce-scatter). The micro-steps are renumbered
/// round by round (then by first rank), each starts with its round, a barrier opens every round
/// after the first, the makespan becomes the rounds' and the fingerprint is recomputed. Samples,
/// degrees, configs, predictions and loss scales do not change; the lower bound stays a bound
/// (rounds only add waiting).
inline void make_lockstep(step_plan& plan, const micro_step& empty = {}) {
  if (plan.gpus < 1)
    throw invalid_plan("make_lockstep: plan.gpus = " + std::to_string(plan.gpus) +
                       ", must be >= 1");
  if (!(empty.seconds >= 0) || !std::isfinite(empty.seconds))
    throw invalid_plan("make_lockstep: the empty micro-step's seconds = " +
                       std::to_string(empty.seconds) + ", must be finite and >= 0");
  auto steps = std::move(plan.micro_steps);
  std::stable_sort(steps.begin(), steps.end(), [](const micro_step& a, const micro_step& b) {
    return a.sequence < b.sequence;
  });
  for (const auto& m : steps)
    if (m.config.degree < 1 || m.first_rank < 0 || m.last_rank() >= plan.gpus)
      throw invalid_plan("make_lockstep: micro-step " + std::to_string(m.sequence) + " (ranks " +
                         std::to_string(m.first_rank) + ".." + std::to_string(m.last_rank()) +
                         ") lies outside the cluster's ranks 0.." + std::to_string(plan.gpus - 1));
  const auto gpus = static_cast<std::size_t>(plan.gpus);
  std::vector<micro_step> out;
  std::vector<std::int64_t> barriers;
  double now = 0;
  std::size_t begin = 0;
  std::size_t next_barrier = 0;
  while (begin < steps.size()) {
    // The stretch [begin, end): up to the plan's next barrier.
    while (next_barrier < plan.barriers.size() &&
           plan.barriers[next_barrier] <= steps[begin].sequence)
      ++next_barrier;
    std::size_t end = begin;
    while (end < steps.size() && (next_barrier == plan.barriers.size() ||
                                  steps[end].sequence < plan.barriers[next_barrier]))
      ++end;
    const auto rounds =
        detail::best_rounds(steps, detail::longest_first(steps, begin, end), gpus, empty.seconds);
    for (const auto& placed : rounds) {
      if (!out.empty()) barriers.push_back(static_cast<std::int64_t>(out.size()));
      std::vector<char> busy(gpus, 0);
      std::vector<micro_step> round;
      double longest = 0;
      for (const auto& [i, first] : placed) {
        round.push_back(std::move(steps[i]));
        round.back().first_rank = first;
        longest = std::max(longest, round.back().seconds);
        for (auto r = first; r <= round.back().last_rank(); ++r)
          busy[static_cast<std::size_t>(r)] = 1;
      }
      for (std::size_t r = 0; r < gpus; ++r) {
        if (busy[r]) continue;
        micro_step pad = empty;
        pad.first_rank = static_cast<std::int64_t>(r);
        pad.config.degree = 1;
        pad.sample_ids.clear();
        pad.tokens = pad.loss_units = 0;
        pad.loss_scale = 0;
        longest = std::max(longest, pad.seconds);
        round.push_back(std::move(pad));
      }
      std::sort(round.begin(), round.end(), [](const micro_step& a, const micro_step& b) {
        return a.first_rank < b.first_rank;
      });
      for (auto& m : round) {
        m.sequence = static_cast<std::int64_t>(out.size());
        m.start_seconds = now;
        out.push_back(std::move(m));
      }
      now += longest;
    }
    begin = end;
  }
  plan.micro_steps = std::move(out);
  plan.barriers = std::move(barriers);
  plan.makespan_seconds = now;
  plan.lockstep = true;
  plan.fingerprint = compute_fingerprint(plan);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
