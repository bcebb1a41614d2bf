// User-defined policies plug into DataCentricScheduler through the concepts alone.

#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../support/batches.hpp"
#include "../support/promises.hpp"

namespace user {

/// Every sample alone in its micro-batch.
struct one_per_bucket {
  std::vector<std::int32_t> assign(std::span<const dcp::sample> batch) const {
    std::vector<std::int32_t> labels;
    for (std::size_t i = 0; i < batch.size(); ++i) labels.push_back(static_cast<std::int32_t>(i));
    return labels;
  }
  std::string_view name() const { return "one-per-bucket"; }
};

/// Full recompute whenever more than half the budget would be used, else none.
struct half_budget_recompute {
  template <dcp::cost_model M>
  std::optional<dcp::recompute_setting> choose(const M& m, const dcp::micro_batch_shape& s,
                                               dcp::execution_config c) const {
    c.recompute = {};
    if (m.peak_bytes(s, c) <= 0.5 * m.memory_budget()) return dcp::recompute_setting::none();
    c.recompute = dcp::recompute_setting::full(m.model().layers);
    if (m.peak_bytes(s, c) <= m.memory_budget()) return c.recompute;
    return std::nullopt;
  }
  std::string_view name() const { return "half-budget"; }
};

/// Round robin over single GPUs, one micro-batch per sample, back to back.
struct round_robin {
  template <dcp::cost_model M, dcp::recompute_strategy<M> R>
  dcp::placement place(const dcp::placement_input<M, R>& p) const {
    dcp::placement out;
    out.policy = "round-robin";
    std::vector<double> free(static_cast<std::size_t>(p.cost().cluster().gpus), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const auto shape = dcp::micro_batch_shape::of(p.sample(i));
      dcp::execution_config c{1, p.cost().training().sp, {}};
      const auto r = p.recompute().choose(p.cost(), shape, c);
      if (!r) throw dcp::sample_does_not_fit("round_robin: sample does not fit on one GPU");
      c.recompute = *r;
      const auto rank = i % free.size();
      dcp::placed_micro_step step{
          static_cast<std::int64_t>(rank), c, {i}, free[rank], p.cost().seconds(shape, c),
          p.cost().peak_bytes(shape, c)};
      free[rank] += step.seconds;
      out.makespan_seconds = std::max(out.makespan_seconds, free[rank]);
      out.micro_steps.push_back(step);
    }
    return out;
  }
  std::string_view name() const { return "round-robin"; }
};

}  // namespace user

static_assert(dcp::bucketing_policy<user::one_per_bucket>);
static_assert(dcp::recompute_strategy<user::half_budget_recompute, dcp::analytic_cost_model>);
static_assert(dcp::placement_policy<user::round_robin, dcp::analytic_cost_model,
                                    user::half_budget_recompute>);

TEST_CASE("Scheduler.Composition.user_defined_policies_plug_in") {
  const dcp::analytic_cost_model cost(dcp::models::llama3_8b(),
                                      dcp::hgx_cluster(1, dcp::gpus::h200_sxm()));
  const dcp::DataCentricScheduler<dcp::analytic_cost_model, user::one_per_bucket,
                                  user::half_budget_recompute, user::round_robin>
      scheduler(cost);
  const auto batch = dcp::test::heavy_tailed_batch(11, 40, 16384);
  const auto plan = scheduler.plan(batch);
  CHECK(plan.policy == "round-robin");
  CHECK(plan.micro_steps.size() == batch.size());
  dcp::test::check_promises(plan, batch, cost, 0.0);
  // The user's recompute rule is what the plan carries.
  for (const auto& m : plan.micro_steps) {
    const auto shape = dcp::micro_batch_shape::of(*std::find_if(
        batch.begin(), batch.end(), [&](const dcp::sample& s) { return s.id == m.sample_ids[0]; }));
    dcp::execution_config none{1, dcp::sequence_parallel::ulysses, {}};
    const bool light = cost.peak_bytes(shape, none) <= 0.5 * cost.memory_budget();
    CHECK(m.config.recompute ==
          (light ? dcp::recompute_setting::none() : dcp::recompute_setting::full(32)));
  }
  // Default template arguments: the common case needs none.
  const dcp::DataCentricScheduler<> defaults(cost);
  CHECK(defaults.plan(batch).policy.rfind("balanced", 0) == 0);
}
