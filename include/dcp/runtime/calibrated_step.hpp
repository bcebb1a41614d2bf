#pragma once
// dcp::run_calibrated_step: one training step with online calibration. Plans with the
// scheduler's calibrated<M>, runs the plan (run_step), shares every rank's measurements so all
// ranks observe the same micro-batches in the same order, refits, and — if any micro-batch ran
// out of memory — discards the step's gradients, re-plans with the tightened model and runs it
// again instead of crashing.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dcp/cost/calibrated.hpp"
#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {
template <class T>
struct is_calibrated : std::false_type {};
template <class M>
struct is_calibrated<calibrated<M>> : std::true_type {};
}  // namespace detail

/// A DataCentricScheduler (or any type with plan(span<const sample>), cost() and set_cost())
/// whose cost model is a calibrated<M>.
template <class S>
concept calibrating_scheduler =
    detail::is_calibrated<typename S::cost_type>::value &&
    requires(S& s, const S& cs, std::span<const sample> batch, typename S::cost_type cost) {
      { cs.plan(batch) } -> std::same_as<step_plan>;
      { cs.cost() } -> std::convertible_to<const typename S::cost_type&>;
      s.set_cost(std::move(cost));
    };

struct calibrated_step_options {
  /// Plans tried before giving up: the first, and one re-plan per attempt that ran out of memory.
  int max_attempts = 3;
};

struct calibrated_step_result {
  step_plan plan;                         ///< the plan that finished without running out of memory
  std::vector<execution_report> reports;  ///< this rank's reports of that plan, in run order
  std::vector<observation> observations;  ///< every micro-step of that plan, all ranks, by sequence
  int attempts = 1;                       ///< plans run (1 = no re-plan)
  std::int64_t out_of_memory = 0;         ///< micro-steps that ran out of memory, all attempts
};

/// One observation per micro-step of `plan` (indexed like plan.micro_steps): its config and the
/// shape of its samples in `batch`, with an empty report for the caller to fill. Throws
/// dcp::error naming the micro-step and the id of a sample that is not in the batch.
[[nodiscard]] inline std::vector<observation> plan_observations(const step_plan& plan,
                                                                std::span<const sample> batch) {
  std::unordered_map<std::uint64_t, const sample*> by_id;
  by_id.reserve(batch.size());
  for (const auto& s : batch) by_id.emplace(s.id, &s);
  std::vector<observation> out(plan.micro_steps.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& m = plan.micro_steps[i];
    out[i].config = m.config;
    for (const auto id : m.sample_ids) {
      const auto found = by_id.find(id);
      if (found == by_id.end())
        throw error("plan_observations: micro-step " + std::to_string(m.sequence) +
                    " holds sample id=" + std::to_string(id) + ", which is not in the batch");
      out[i].shape += micro_batch_shape::of(*found->second);
    }
  }
  return out;
}

/// Every micro-step of `plan` as measured by its group: collective over `comm`. A micro-step's
/// time and peak are the largest its members report; it ran out of memory if any member did.
/// `reports` are this rank's, in the order of plan.steps_of(rank) (what run_step returns).
template <communicator C>
[[nodiscard]] std::vector<observation> share_observations(
    C& comm, const step_plan& plan, std::span<const sample> batch,
    std::span<const execution_report> reports) {
  const auto rank = static_cast<std::int64_t>(comm.rank());
  const auto mine = plan.steps_of(rank);
  if (mine.size() != reports.size())
    throw error("share_observations: rank " + std::to_string(rank) + " has " +
                std::to_string(reports.size()) + " reports for its " + std::to_string(mine.size()) +
                " micro-steps");
  // Three values per micro-step: seconds and peak bytes as the bits of their doubles (exact),
  // and -1 (not a member), 0 (ran) or 1 (ran out of memory).
  const std::size_t count = plan.micro_steps.size();
  std::vector<std::int64_t> values(3 * count, 0);
  for (std::size_t i = 0; i < count; ++i) values[3 * i + 2] = -1;
  for (std::size_t j = 0; j < mine.size(); ++j) {
    const std::size_t i = mine[j];
    values[3 * i] = std::bit_cast<std::int64_t>(reports[j].seconds);
    values[3 * i + 1] = std::bit_cast<std::int64_t>(reports[j].peak_bytes);
    values[3 * i + 2] = reports[j].out_of_memory ? 1 : 0;
  }
  const auto all = comm.all_gather(std::span<const std::int64_t>(values));

  auto out = plan_observations(plan, batch);
  const auto ranks = static_cast<std::size_t>(comm.size());
  for (std::size_t i = 0; i < count; ++i) {
    auto& o = out[i];
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::int64_t* v = &all[r * 3 * count + 3 * i];
      if (v[2] < 0) continue;
      o.report.seconds = std::max(o.report.seconds, std::bit_cast<double>(v[0]));
      o.report.peak_bytes = std::max(o.report.peak_bytes, std::bit_cast<double>(v[1]));
      o.report.out_of_memory = o.report.out_of_memory || v[2] == 1;
    }
  }
  return out;
}

/// One training step with online calibration (collective over `comm`; every rank passes the
/// same batch and a scheduler in the same state):
///  1. plan with the scheduler's calibrated model and run the plan (run_step: plan agreement,
///     groups, this rank's micro-steps in order);
///  2. share every micro-step's measurements (share_observations) and refit the model on every
///     rank with the same observations in the same order, so the next plans agree too;
///  3. if a micro-step ran out of memory (the executor reported out_of_memory instead of
///     throwing), call executor.discard_gradients() and go back to 1 with the tightened model,
///     at most options.max_attempts plans in all.
/// Throws dcp::error naming the attempts and the micro-step when every attempt ran out of
/// memory, or when an executor reports out_of_memory but has no discard_gradients().
template <communicator C, calibrating_scheduler S, class E>
  requires micro_batch_executor<E, typename group_cache<C>::group_type>
calibrated_step_result run_calibrated_step(C& comm, group_cache<C>& cache, S& scheduler,
                                           std::span<const sample> batch, E& executor,
                                           const calibrated_step_options& options = {}) {
  if (options.max_attempts < 1)
    throw error("run_calibrated_step: max_attempts = " + std::to_string(options.max_attempts) +
                ", must be >= 1");
  calibrated_step_result result;
  for (int attempt = 1;; ++attempt) {
    auto plan = scheduler.plan(batch);
    auto reports = run_step(comm, cache, plan, executor);
    auto observations = share_observations(comm, plan, batch, reports);
    auto cost = scheduler.cost();
    cost.observe(observations);
    scheduler.set_cost(std::move(cost));

    const auto ran_out = [](const observation& o) { return o.report.out_of_memory; };
    const auto failures = std::count_if(observations.begin(), observations.end(), ran_out);
    result.out_of_memory += failures;
    if (failures == 0) {
      result.plan = std::move(plan);
      result.reports = std::move(reports);
      result.observations = std::move(observations);
      result.attempts = attempt;
      return result;
    }
    const auto failed = std::find_if(observations.begin(), observations.end(), ran_out);
    const auto& step = plan.micro_steps[static_cast<std::size_t>(failed - observations.begin())];
    const std::string what = std::to_string(failures) + " micro-step(s) ran out of memory, first " +
                             std::to_string(step.sequence) + " (ranks " +
                             std::to_string(step.first_rank) + ".." +
                             std::to_string(step.last_rank()) + ", " + std::to_string(step.tokens) +
                             " tokens, recompute " + to_string(step.config.recompute) + ")";
    if constexpr (requires { executor.discard_gradients(); }) {
      if (attempt >= options.max_attempts)
        throw error("run_calibrated_step: attempt " + std::to_string(attempt) + " of " +
                    std::to_string(options.max_attempts) + ": " + what);
      executor.discard_gradients();
    } else {
      throw error("run_calibrated_step: " + what +
                  ", and the executor has no discard_gradients() to undo the partial step");
    }
  }
}

template <communicator C, calibrating_scheduler S, class E>
  requires micro_batch_executor<E, typename group_cache<C>::group_type>
calibrated_step_result run_calibrated_step(C& comm, group_cache<C>& cache, S& scheduler,
                                           const std::vector<sample>& batch, E& executor,
                                           const calibrated_step_options& options = {}) {
  return run_calibrated_step(comm, cache, scheduler, std::span<const sample>(batch), executor,
                             options);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
