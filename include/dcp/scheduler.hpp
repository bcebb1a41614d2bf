#pragma once
// dcp::DataCentricScheduler: composes a cost model, a bucketing policy, a recompute strategy and
// a placement policy into plan(samples) -> step_plan. Every rank runs it on the same sample list
// and gets the same plan, bit for bit.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/bucketing/log2_buckets.hpp"
#include "dcp/bucketing/varlen_buckets.hpp"
#include "dcp/concepts/bucketing_policy.hpp"
#include "dcp/concepts/cost_model.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/detail/plan_workspace.hpp"
#include "dcp/detail/prefetch.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/balanced.hpp"
#include "dcp/placement/static_layout.hpp"
#include "dcp/plan/lockstep.hpp"
#include "dcp/plan/lower_bound.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

template <cost_model Cost = analytic_cost_model, bucketing_policy Bucketing = varlen_buckets,
          recompute_strategy<Cost> Recompute = selective_pyramid_recompute,
          placement_policy<Cost, Recompute> Placement = balanced_placement>
class DataCentricScheduler {
 public:
  using cost_type = Cost;
  using bucketing_type = Bucketing;
  using recompute_type = Recompute;
  using placement_type = Placement;

  /// Throws invalid_spec where `cost` fails validate_cost, or where this translation unit
  /// contracts multiply-adds (detail::contracts_multiply_add).
  explicit DataCentricScheduler(Cost cost, Bucketing bucketing = Bucketing{},
                                Recompute recompute = Recompute{},
                                Placement placement = Placement{})
      : cost_(std::move(cost)),
        bucketing_(std::move(bucketing)),
        recompute_(std::move(recompute)),
        placement_(std::move(placement)) {
    if (detail::contracts_multiply_add())
      throw invalid_spec(
          "dcp: this translation unit contracts a * b + c into fused multiply-adds (a target with "
          "FMA and -ffp-contract=fast, GCC's default, or Clang's -ffp-contract=on): its plans "
          "could differ from a rank built without them; compile the files that include dcp with "
          "-ffp-contract=off (the dcp::dcp CMake target adds it)");
    validate_cost(cost_);
  }

  [[nodiscard]] const Cost& cost() const noexcept { return cost_; }
  [[nodiscard]] const Bucketing& bucketing() const noexcept { return bucketing_; }
  [[nodiscard]] const Recompute& recompute() const noexcept { return recompute_; }
  [[nodiscard]] const Placement& placement_policy() const noexcept { return placement_; }

  /// Lets go of the arrays kept from earlier plans (only batches of 512K samples or more keep
  /// any: detail/plan_workspace.hpp); the next large plan allocates afresh. Not while a plan
  /// runs on another thread.
  void release_memory() {
    const std::lock_guard hold(workspace_->in_use());
    workspace_->release();
  }
  /// Bytes of the arrays kept from earlier plans.
  [[nodiscard]] std::size_t kept_bytes() const {
    const std::lock_guard hold(workspace_->in_use());
    return workspace_->kept_bytes();
  }

  /// Replaces the cost model; plans made afterwards use it (e.g. a calibrated<M> after
  /// observe()). Every rank must make the same replacement before its next plan.
  void set_cost(Cost cost) {
    validate_cost(cost);
    cost_ = std::move(cost);
  }

  /// Throws invalid_spec for a cost model, of any type, whose model, cluster or training spec
  /// is invalid or whose memory budget is not finite and > 0: the constructor and set_cost
  /// check every cost model they are given, not only those that validate themselves.
  static void validate_cost(const Cost& cost) {
    const model_spec& model = cost.model();
    const cluster_spec& cluster = cost.cluster();
    const training_spec& training = cost.training();
    model.validate();
    cluster.validate();
    training.validate(cluster);
    detail::require_finite_positive(static_cast<double>(cost.memory_budget()),
                                    "cost model: ", "memory_budget()");
  }

  /// The plan of one training step for this batch. Throws invalid_sample for malformed samples
  /// and sample_does_not_fit for a sample no configuration can hold.
  [[nodiscard]] step_plan plan(std::span<const sample> batch) const {
    // On a batch whose arrays the allocator would map afresh (detail::plan_workspace), they come
    // from the workspace, kept from the last plan, unless another thread's plan holds it (then
    // this plan allocates its own). Smaller batches leave their memory to the allocator alone.
    std::unique_lock hold(workspace_->in_use(), std::defer_lock);
    if (batch.size() >= detail::plan_workspace::from_samples) static_cast<void>(hold.try_lock());
    detail::plan_workspace* const kept = hold.owns_lock() ? workspace_.get() : nullptr;
    detail::check_batch(batch, kept);
    detail::kept_buffer<sample> ordered(kept, batch.size());
    const auto& samples = *ordered;
    detail::canonical_order_into(batch, *ordered, kept);
    const auto labels = bucketing_.assign(samples);
    // The placement's input, built once: the placement and the lower bound read the same
    // per-sample options. Its scratch memory comes from the workspace where there is one, taken
    // here at once and given back below at once.
    placement_scratch scratch;
    if (kept != nullptr) scratch.take(*kept, samples.size());
    const placement_input<Cost, Recompute> input({samples, labels, cost_, recompute_}, scratch);
    auto placed = placement_.place(input);
    // ZeRO-3 (and lockstep on): every rank runs the same number of micro-steps, in rounds
    // (plan/lockstep.hpp). The balanced placement compares its candidates in rounds; the best
    // static layout, whose micro-steps are alike, is put in rounds too, reported as the best
    // static makespan (what that layout takes on a stack that needs rounds) and kept where its
    // rounds end sooner (a peer's placement is only put in rounds).
    const bool lockstep = cost_.training().runs_in_lockstep() && !samples.empty();
    auto out = assemble(placed, samples, input);
    if (lockstep) {
      const auto empty = empty_micro_step();
      make_lockstep(out, empty);
      if constexpr (std::same_as<Placement, balanced_placement>) {
        placement static_placed;
        try {
          static_placed = best_static_placement{}.place(input);
        } catch (const sample_does_not_fit&) {  // no one degree holds every sample
        }
        if (!static_placed.micro_steps.empty()) {
          auto alternative = assemble(static_placed, samples, input);
          make_lockstep(alternative, empty);
          out.best_static_seconds = alternative.makespan_seconds;
          out.best_static_degree = static_placed.best_static_degree;
          if (alternative.makespan_seconds < out.makespan_seconds) {
            alternative.policy = out.policy + " (its best static layout, in lockstep)";
            alternative.best_static_seconds = out.best_static_seconds;
            alternative.best_static_degree = out.best_static_degree;
            out = std::move(alternative);
          }
          out.fingerprint = compute_fingerprint(out);
        }
      }
    }
    if (kept != nullptr) {  // the placement's list and scratch, for the next plan's
      placed.micro_steps.clear();
      kept->give(std::move(placed.micro_steps));
      scratch.give(*kept);
    }
    return out;
  }

  [[nodiscard]] step_plan plan(const std::vector<sample>& batch) const {
    return plan(std::span<const sample>(batch.data(), batch.size()));
  }

 private:
  /// The step plan of a placement's result for `samples` (in canonical order): sequence numbers
  /// by predicted start, loss scales, the bound, the barriers and the fingerprint.
  [[nodiscard]] step_plan assemble(placement& placed, const std::vector<sample>& samples,
                                   const placement_input<Cost, Recompute>& input) const {
    step_plan out;
    out.gpus = cost_.cluster().gpus;
    out.gpus_per_node = cost_.cluster().gpus_per_node;
    out.memory_budget_bytes = cost_.memory_budget();
    out.policy = std::move(placed.policy);
    out.best_static_seconds = placed.best_static_seconds;
    out.best_static_degree = placed.best_static_degree;
    for (const auto& m : placed.micro_steps)
      if (m.config.sp == sequence_parallel::hybrid) {  // the same split for every hybrid degree
        out.hybrid_ulysses_degree =
            hybrid_ulysses_degree(m.config.degree, cost_.model(), cost_.cluster());
        break;
      }
    if (samples.empty()) {
      out.fingerprint = compute_fingerprint(out);
      return out;
    }
    out.gradient_sync_seconds = gradient_sync(cost_);
    out.lower_bound_seconds = detail::lower_bound_seconds(input);

    // Sequence numbers follow predicted start times (then first rank), so each rank's own
    // micro-steps are numbered in the order it runs them.
    auto& steps = placed.micro_steps;
    std::stable_sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
      if (a.start_seconds != b.start_seconds) return a.start_seconds < b.start_seconds;
      return a.first_rank < b.first_rank;
    });
    const bool by_tokens = cost_.training().normalise_by == loss_normalisation::tokens;
    std::int64_t total_units = 0;
    for (const auto& s : samples) total_units += by_tokens ? s.tokens : 1;
    out.micro_steps.reserve(steps.size());
    for (std::size_t n = 0; n < steps.size(); ++n) {
      auto& placed_step = steps[n];
      std::sort(placed_step.samples.begin(), placed_step.samples.end());
      micro_step m;
      m.sequence = static_cast<std::int64_t>(n);
      m.first_rank = placed_step.first_rank;
      m.config = placed_step.config;
      m.sample_ids.reserve(placed_step.samples.size());
      // A micro-step's samples lie far apart in the batch: on a batch larger than the cache,
      // each read is asked for a few samples ahead.
      constexpr std::size_t ahead = 8;
      const bool far = samples.size() >= detail::samples_beyond_cache;
      for (std::size_t j = 0; j < placed_step.samples.size(); ++j) {
        if (far && j + ahead < placed_step.samples.size())
          detail::prefetch(&samples[placed_step.samples[j + ahead]]);
        const auto i = placed_step.samples[j];
        m.sample_ids.push_back(samples[i].id);
        m.tokens += samples[i].tokens;
        m.loss_units += by_tokens ? samples[i].tokens : 1;
      }
      m.loss_scale = static_cast<double>(m.loss_units) / static_cast<double>(total_units);
      m.start_seconds = placed_step.start_seconds;
      m.seconds = placed_step.seconds;
      m.peak_bytes = placed_step.peak_bytes;
      out.makespan_seconds = std::max(out.makespan_seconds, m.end_seconds());
      out.micro_steps.push_back(std::move(m));
    }
    out.barriers = barrier_sequences(out, placed.barrier_seconds);
    out.fingerprint = compute_fingerprint(out);
    return out;
  }

  /// A placement's barrier times as sequence numbers: the barrier at time t sits before the
  /// first micro-step that starts at or after t. Barriers before the first or after the last
  /// micro-step order nothing and are dropped.
  [[nodiscard]] static std::vector<std::int64_t> barrier_sequences(const step_plan& plan,
                                                                   std::vector<double> times) {
    std::sort(times.begin(), times.end());
    std::vector<std::int64_t> out;
    const auto& steps = plan.micro_steps;
    for (const double t : times) {
      const auto at = std::partition_point(
          steps.begin(), steps.end(), [t](const micro_step& m) { return m.start_seconds < t; });
      const auto b = static_cast<std::int64_t>(at - steps.begin());
      // Relative slack for the rounding of sums of seconds.
      const double slack = 1e-9 * std::max(1.0, std::abs(t));
      for (auto m = steps.begin(); m != at; ++m)
        if (m->end_seconds() > t + slack)
          throw error("placement '" + plan.policy + "': micro-step " + std::to_string(m->sequence) +
                      " runs from " + std::to_string(m->start_seconds) + " s to " +
                      std::to_string(m->end_seconds()) + " s, across its barrier at " +
                      std::to_string(t) + " s");
      if (b > 0 && b < static_cast<std::int64_t>(steps.size()) && (out.empty() || out.back() != b))
        out.push_back(b);
    }
    return out;
  }

  template <class C>
  [[nodiscard]] static double gradient_sync(const C& cost) {
    if constexpr (requires { cost.gradient_sync_seconds(); })
      return cost.gradient_sync_seconds();
    else
      return 0.0;
  }

  /// The empty micro-step a lockstep plan pads a round with: degree 1, no recomputation, its
  /// time and bytes the cost model's for no samples (the weights, gradients and optimizer state
  /// stay resident).
  [[nodiscard]] micro_step empty_micro_step() const {
    micro_step empty;
    empty.config.sp = cost_.training().sp == sequence_parallel::automatic
                          ? sequence_parallel::ulysses
                          : cost_.training().sp;
    empty.seconds = cost_.seconds(micro_batch_shape{}, empty.config);
    empty.peak_bytes = cost_.peak_bytes(micro_batch_shape{}, empty.config);
    return empty;
  }

  Cost cost_;
  Bucketing bucketing_;
  Recompute recompute_;
  Placement placement_;
  // The planner's batch-sized arrays between plans (detail/plan_workspace.hpp); copies of a
  // scheduler share it, one plan at a time.
  std::shared_ptr<detail::plan_workspace> workspace_ = std::make_shared<detail::plan_workspace>();
};

/// snake_case spelling for code that prefers the standard library's naming.
template <cost_model Cost = analytic_cost_model, bucketing_policy Bucketing = varlen_buckets,
          recompute_strategy<Cost> Recompute = selective_pyramid_recompute,
          placement_policy<Cost, Recompute> Placement = balanced_placement>
using data_centric_scheduler = DataCentricScheduler<Cost, Bucketing, Recompute, Placement>;

static_assert(placement_policy<balanced_placement, analytic_cost_model, pyramid_recompute>);
static_assert(placement_policy<static_placement, analytic_cost_model, pyramid_recompute>);
static_assert(placement_policy<best_static_placement, analytic_cost_model, pyramid_recompute>);
static_assert(
    placement_policy<balanced_placement, analytic_cost_model, selective_pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
