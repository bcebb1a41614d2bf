// The promises of docs/planner.md ("The promises and their tests") as property tests over
// seeded heavy-tailed batches.

#include <algorithm>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../support/batches.hpp"
#include "../support/promises.hpp"

using namespace dcp;
using dcp::test::check_promises;
using dcp::test::scenario;
using dcp::test::shuffled;

namespace {

template <class Recompute = DataCentricScheduler<>::recompute_type>
double best_static_of(const analytic_cost_model& cost, const std::vector<sample>& batch) {
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, Recompute, best_static_placement>
      baseline(cost);
  return baseline.plan(batch).makespan_seconds;
}

}  // namespace

TEST_CASE("Scheduler.Promises.hold_over_1000_heavy_tailed_batches") {
  // Rotate through clusters, models, ZeRO stages and SP styles so each promise is exercised
  // on many shapes of problem.
  const std::vector<scenario> scenarios = {
      {models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()), {}},
      {models::llama3_8b(), hgx_cluster(2, gpus::h100_sxm()), {}},
      {models::qwen25_7b(), hgx_cluster(4, gpus::h200_sxm()), {}},
      {models::llama3_8b(),
       [] {
         auto c = hgx_cluster(2, gpus::h200_sxm());
         return c;
       }(),
       [] {
         training_spec t;
         t.sp = sequence_parallel::ring;
         t.zero_stage = 3;
         return t;
       }()},
      {models::llama3_70b(), hgx_cluster(4, gpus::h200_sxm()),
       [] {
         training_spec t;
         t.zero_stage = 3;
         return t;
       }()},
      {models::llama3_8b(), hgx_cluster(2, gpus::h200_sxm()),
       [] {
         training_spec t;
         t.normalise_by = loss_normalisation::samples;
         return t;
       }()},
  };
  int planned = 0;
  for (std::uint64_t seed = 1; seed <= 1000; ++seed) {
    CAPTURE(seed);
    const auto& sc = scenarios[seed % scenarios.size()];
    const analytic_cost_model cost(sc.model, sc.cluster, sc.training);
    const DataCentricScheduler<> scheduler(cost);
    const std::size_t count = 8 + static_cast<std::size_t>(seed * 37 % 150);
    const auto batch = dcp::test::heavy_tailed_batch(seed, count, 65536);
    const auto plan = scheduler.plan(batch);
    check_promises(plan, batch, cost, best_static_of(cost, batch));
    // 3. Deterministic: same plan bit for bit for any permutation of the input.
    if (seed % 5 == 0) CHECK(scheduler.plan(shuffled(batch, seed)) == plan);
    ++planned;
  }
  CHECK(planned == 1000);
}

TEST_CASE("Scheduler.Promises.hold_on_wikipedia_batches") {
  if (dcp::test::skip_without_wikipedia()) return;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  const DataCentricScheduler<> scheduler(cost);
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    const auto batch = dcp::test::wikipedia_batch(seed, 1'000'000, 65536);
    const auto plan = scheduler.plan(batch);
    check_promises(plan, batch, cost, best_static_of(cost, batch));
    CHECK(scheduler.plan(shuffled(batch, seed)) == plan);
  }
}

TEST_CASE("Scheduler.Promises.hold_with_every_recompute_strategy") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(2, gpus::h100_sxm()));
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const auto batch = dcp::test::heavy_tailed_batch(seed, 60, 32768);
    {
      const DataCentricScheduler<analytic_cost_model, varlen_buckets, full_recompute> s(cost);
      check_promises(s.plan(batch), batch, cost, best_static_of<full_recompute>(cost, batch));
    }
    {
      const DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_recompute> s(cost);
      check_promises(s.plan(batch), batch, cost, best_static_of<selective_recompute>(cost, batch));
    }
    {
      const DataCentricScheduler<analytic_cost_model, log2_buckets, no_recompute> s(cost);
      check_promises(s.plan(batch), batch, cost, 0.0);
    }
  }
}

TEST_CASE("Scheduler.Promises.groups_cross_nodes_only_when_needed") {
  // Each crossing group is needed on its own, or the plan is faster than the best the planner
  // finds with every crossing group needed on its own (balanced_placement::cross_nodes_when_faster
  // off).
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h100_sxm()));
  const DataCentricScheduler<> scheduler(cost);
  balanced_placement strict_options;
  strict_options.cross_nodes_when_faster = false;
  const DataCentricScheduler<analytic_cost_model, varlen_buckets,
                             DataCentricScheduler<>::recompute_type, balanced_placement>
      strict(cost, {}, {}, strict_options);
  int together = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const auto batch = dcp::test::heavy_tailed_batch(seed, 200, 262144);
    const auto plan = scheduler.plan(batch);
    if (plan.policy != "balanced") continue;  // a static fallback is judged as a static layout
    bool each_needed = true;
    const auto strict_plan = strict.plan(batch);
    for (const auto& m : plan.micro_steps) {
      if (m.degree() <= plan.gpus_per_node) continue;
      // A crossing micro-batch may hold several samples (long ones sharing the degree, short
      // ones in its room); the group is needed when one of them needs it.
      bool group_needed = false;
      for (const auto id : m.sample_ids) {
        const auto it =
            std::find_if(batch.begin(), batch.end(), [&](const sample& s) { return s.id == id; });
        const auto shape = micro_batch_shape::of(*it);
        // Needed: nothing fits inside a node, or the fastest in-node option, started when the
        // group starts, would end after the step, or every in-node option takes more
        // GPU-seconds than the sample alone in the crossing group (it recomputes so much that
        // it would take GPU time from the other samples).
        double fastest_intra = 1e300;
        double cheapest_intra = 1e300;
        for (std::int64_t d = 1; d <= plan.gpus_per_node; d *= 2) {
          const execution_config c{d, sequence_parallel::ulysses, {}};
          if (auto r = DataCentricScheduler<>::recompute_type{}.choose(cost, shape, c)) {
            auto with = c;
            with.recompute = *r;
            const double seconds = cost.seconds(shape, with);
            fastest_intra = std::min(fastest_intra, seconds);
            cheapest_intra = std::min(cheapest_intra, static_cast<double>(d) * seconds);
          }
        }
        auto crossing = m.config;
        const auto r = DataCentricScheduler<>::recompute_type{}.choose(
            cost, shape, execution_config{m.degree(), m.config.sp, {}});
        REQUIRE(r.has_value());
        crossing.recompute = *r;
        const bool ends_late = m.start_seconds + fastest_intra > plan.makespan_seconds;
        const bool saves_work =
            static_cast<double>(m.degree()) * cost.seconds(shape, crossing) < cheapest_intra;
        if (ends_late || saves_work) group_needed = true;
      }
      if (!group_needed) each_needed = false;
    }
    if (!each_needed) {
      ++together;
      CHECK(plan.makespan_seconds < strict_plan.makespan_seconds);
    } else {
      CHECK(plan.makespan_seconds <= strict_plan.makespan_seconds);
    }
  }
  MESSAGE(together << " of 40 plans use crossing groups that are needed only together");
}

TEST_CASE("Scheduler.Empty.batch_gives_empty_plan_with_zero_time") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const auto plan = DataCentricScheduler<>(cost).plan(std::vector<sample>{});
  CHECK(plan.micro_steps.empty());
  CHECK(plan.makespan_seconds == 0.0);
  CHECK(plan.lower_bound_seconds == 0.0);
  CHECK(plan.step_seconds() == 0.0);
  CHECK(plan.gap() == 0.0);
}

TEST_CASE("Scheduler.Dynamic.uses_several_degrees_for_a_lopsided_batch") {
  // One 60K sequence among many short ones: the long one needs a group, the short ones do not.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  std::vector<sample> batch{text_sample(0, 60000)};
  for (std::uint64_t i = 1; i <= 200; ++i)
    batch.push_back(text_sample(i, 300 + 7 * static_cast<std::int64_t>(i)));
  const auto plan = DataCentricScheduler<>(cost).plan(batch);
  std::int64_t max_degree = 0, min_degree = 1 << 20;
  for (const auto& m : plan.micro_steps) {
    max_degree = std::max(max_degree, m.degree());
    min_degree = std::min(min_degree, m.degree());
  }
  CHECK(max_degree > 1);
  CHECK(min_degree == 1);
  CHECK(plan.makespan_seconds < best_static_of(cost, batch));
  // With the exact search the plan itself reports the best static layout.
  balanced_placement exact;
  exact.exact_best_static = true;
  const DataCentricScheduler<analytic_cost_model, varlen_buckets,
                             DataCentricScheduler<>::recompute_type, balanced_placement>
      reporting(cost, {}, {}, exact);
  CHECK(reporting.plan(batch).best_static_seconds == doctest::Approx(best_static_of(cost, batch)));
}
