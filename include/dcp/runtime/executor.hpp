#pragma once
// dcp::micro_batch_executor — what a training framework supplies — and dcp::run_step, which walks
// this rank's micro-steps of a plan in order and hands each one to the executor with its group.

#include <concepts>
#include <cstdint>
#include <exception>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/lockstep.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/plan_agreement.hpp"
#include "dcp/spec/execution_report.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A framework's runner of one micro-batch on a group of ranks.
///
/// Requirements on `E& e`, `const micro_step& m`, `G& group`, `recompute_setting r`, `double s`:
///  1. `e.run(m, group, r, s)` -> `execution_report`: runs forward and backward of the samples
///     m.sample_ids on `group` (collective over it; sequence-parallel across its members) with
///     recompute setting r, multiplying the micro-batch's mean loss by s, accumulating gradients.
///  2. Semantics: a failure throws (run_step adds the rank and micro-step); gradients are only
///     all-reduced after the step, by the framework, so run order within a rank is the plan's.
///     An empty micro-step (no sample ids, loss scale 0: a lockstep plan's padding,
///     plan/lockstep.hpp) trains nothing but must issue the collectives every micro-step issues
///     on this rank (ZeRO-3 / FSDP: the layers' parameter gathers and gradient reduce-scatters,
///     e.g. by running the model on an empty batch), or the other ranks wait in them.
///  3. Optional, for plans with hybrid micro-steps (sequence_parallel::hybrid):
///     `e.run(m, hybrid_groups<G>{whole, ulysses, ring}, r, s)` -> `execution_report`: the same,
///     with the all-to-alls over `ulysses` (node-local) and ring attention over `ring`
///     (hybrid_executor). run_step refuses a plan with a hybrid micro-step, on every rank before
///     any runs, for an executor without it.
/// Models: the recording executors of tests/unit/runtime_tests.cpp; framework adapters later.
template <class E, class G>
concept micro_batch_executor =
    requires(E& e, const micro_step& m, G& group, recompute_setting r, double loss_scale) {
      { e.run(m, group, r, loss_scale) } -> std::same_as<execution_report>;
    };

/// A micro_batch_executor that also runs hybrid micro-steps on their two sub-groups.
template <class E, class G>
concept hybrid_executor =
    micro_batch_executor<E, G> && requires(E& e, const micro_step& m, hybrid_groups<G> groups,
                                           recompute_setting r, double loss_scale) {
      { e.run(m, groups, r, loss_scale) } -> std::same_as<execution_report>;
    };

/// The executor failed on a micro-step; the message keeps the executor's own message.
class step_error : public error {
 public:
  step_error(std::int64_t rank, std::int64_t sequence, const std::string& message)
      : error(message), rank_(rank), sequence_(sequence) {}
  [[nodiscard]] std::int64_t rank() const noexcept { return rank_; }
  [[nodiscard]] std::int64_t sequence() const noexcept { return sequence_; }

 private:
  std::int64_t rank_;
  std::int64_t sequence_;
};

/// One training step on this rank: agrees on the plan with every rank (collective), creates the
/// degrees the plan uses in the cache (collective), then runs this rank's micro-steps in plan
/// order (plan.steps_of(rank)), each on its group, joining a world all-gather at each of the
/// plan's barriers (collective). Returns one report per micro-step run, in that order. An executor
/// exception becomes step_error naming the rank and the micro-step; a micro-step whose group is not
/// an aligned group inside the world, or a plan that says it is in lockstep and is not, throws
/// dcp::error on every rank before any runs.
template <communicator C, class E>
  requires micro_batch_executor<E, typename group_cache<C>::group_type>
std::vector<execution_report> run_step(C& comm, group_cache<C>& cache, const step_plan& plan,
                                       E& executor) {
  const auto rank = static_cast<std::int64_t>(comm.rank());
  if (&cache.world() != &comm)
    throw error("run_step: the group cache was made for another communicator than rank " +
                std::to_string(rank) + "'s");
  agree_on_plan(comm, plan);
  // Every rank holds the same plan now, so every rank throws here or none does. A micro-step
  // outside the world would be run by no rank: its samples would silently go untrained.
  const auto world = static_cast<std::int64_t>(comm.size());
  for (std::size_t i = 0; i < plan.micro_steps.size(); ++i) {
    const auto& m = plan.micro_steps[i];
    const auto d = m.degree();
    // first_rank <= world - d, not first_rank + d <= world: the sum can overflow.
    const bool inside = d >= 1 && d <= world && (d & (d - 1)) == 0 && m.first_rank >= 0 &&
                        m.first_rank % d == 0 && m.first_rank <= world - d;
    if (!inside)
      throw error("run_step: micro-step " + std::to_string(m.sequence) + " (index " +
                  std::to_string(i) + ") has first_rank = " + std::to_string(m.first_rank) +
                  ", degree = " + std::to_string(d) +
                  ": not an aligned group (degree a power of two, first_rank a multiple of it) "
                  "inside the world of " +
                  std::to_string(world) + " ranks");
    if (m.config.sp == sequence_parallel::hybrid) {
      if constexpr (!hybrid_executor<E, typename group_cache<C>::group_type>)
        throw error("run_step: micro-step " + std::to_string(m.sequence) + " (index " +
                    std::to_string(i) +
                    ") is hybrid (Ulysses inside a node, ring across), and this executor has no "
                    "run(micro_step, hybrid_groups, recompute_setting, double); plan with sp "
                    "ulysses or ring");
      const auto u = plan.hybrid_ulysses_degree;
      if (!valid_hybrid_split(u, d))
        throw error("run_step: micro-step " + std::to_string(m.sequence) + " (index " +
                    std::to_string(i) + ") is hybrid at degree " + std::to_string(d) +
                    " with plan.hybrid_ulysses_degree = " + std::to_string(u) +
                    ", must be a power of two in [2, degree)");
    }
  }
  // A plan that says it is in lockstep must be one: otherwise ranks would wait in collectives
  // (ZeRO-3's gathers) that some never join. Every rank holds the same plan: all throw or none.
  if (plan.lockstep) {
    const auto why = lockstep_violation(plan);
    if (!why.empty()) throw error("run_step: plan.lockstep is set, but " + why);
  }
  cache.prepare(plan);
  std::vector<execution_report> reports;
  const auto mine = plan.steps_of(rank);
  reports.reserve(mine.size());
  // World barriers: before the first of its micro-steps numbered >= b (or at the end), every
  // rank joins one all-gather over the world, so none starts past b before all have arrived.
  std::size_t barrier = 0;
  const auto pass_barriers_below = [&](std::int64_t sequence) {
    for (; barrier < plan.barriers.size() && plan.barriers[barrier] <= sequence; ++barrier) {
      const std::int64_t mark = plan.barriers[barrier];
      try {
        (void)comm.all_gather(std::span<const std::int64_t>(&mark, 1));
      } catch (const std::exception& e) {
        throw step_error(rank, mark,
                         "rank " + std::to_string(rank) +
                             " failed in the world barrier before micro-step " +
                             std::to_string(mark) + ": " + e.what());
      }
    }
  };
  for (const auto index : mine) {
    const auto& m = plan.micro_steps[index];
    pass_barriers_below(m.sequence);
    const auto where = [&] {
      return "rank " + std::to_string(rank) + " failed in micro-step " +
             std::to_string(m.sequence) + " (ranks " + std::to_string(m.first_rank) + ".." +
             std::to_string(m.last_rank()) + "): ";
    };
    try {
      if constexpr (hybrid_executor<E, typename group_cache<C>::group_type>) {
        if (m.config.sp == sequence_parallel::hybrid) {
          reports.push_back(
              executor.run(m, cache.hybrid(m.first_rank, m.degree(), plan.hybrid_ulysses_degree),
                           m.config.recompute, m.loss_scale));
          continue;
        }
      }
      reports.push_back(
          executor.run(m, cache.group(m.first_rank, m.degree()), m.config.recompute, m.loss_scale));
    } catch (const std::exception& e) {
      throw step_error(rank, m.sequence, where() + e.what());
    } catch (...) {
      throw step_error(rank, m.sequence, where() + "unknown exception");
    }
  }
  pass_barriers_below(std::numeric_limits<std::int64_t>::max());
  return reports;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
