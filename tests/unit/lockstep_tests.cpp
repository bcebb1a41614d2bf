// Lockstep plans (plan/lockstep.hpp): every rank runs the same number of micro-steps, round by
// round, as ZeRO-3 needs; the planner makes them under ZeRO-3, the simulator refuses anything
// else there and charges the parameter gathers in every micro-step.

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/cost/calibrated.hpp"
#include "dcp/dcp.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_model.hpp"

#include "../support/batches.hpp"
#include "../support/errors.hpp"

using namespace dcp;

namespace {

/// A micro-step on ranks [first, first + degree) running `ids`, predicted to take `seconds`.
micro_step lockstep_step(std::int64_t sequence, std::int64_t first, std::int64_t degree,
                         std::vector<std::uint64_t> ids, double seconds) {
  micro_step m;
  m.sequence = sequence;
  m.first_rank = first;
  m.config.degree = degree;
  m.sample_ids = std::move(ids);
  m.tokens = static_cast<std::int64_t>(m.sample_ids.size()) * 100;
  m.loss_units = m.tokens;
  m.seconds = seconds;
  return m;
}

/// Four GPUs: rank 0 one 4 s micro-step, rank 1 three of 1 s, ranks 2-3 one of 2 s together.
/// Balanced per rank (4, 3, 2, 2 s) but not in lockstep (1, 3, 1, 1 micro-steps).
step_plan uneven_plan() {
  step_plan p;
  p.gpus = 4;
  p.gpus_per_node = 4;
  p.micro_steps = {lockstep_step(0, 0, 1, {0}, 4.0), lockstep_step(1, 1, 1, {1}, 1.0),
                   lockstep_step(2, 2, 2, {2}, 2.0), lockstep_step(3, 1, 1, {3}, 1.0),
                   lockstep_step(4, 1, 1, {4}, 1.0)};
  for (auto& m : p.micro_steps) m.loss_scale = 0.2;
  p.makespan_seconds = 4.0;
  p.fingerprint = compute_fingerprint(p);
  return p;
}

std::vector<sample> uneven_batch() {
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 5; ++id) batch.push_back({id, 100});
  return batch;
}

std::map<std::uint64_t, double> scale_by_sample(const step_plan& p) {
  std::map<std::uint64_t, double> out;
  for (const auto& m : p.micro_steps)
    for (auto id : m.sample_ids) out[id] = m.loss_scale;
  return out;
}

}  // namespace

TEST_CASE("Lockstep.make_lockstep_pads_every_rank_to_the_same_rounds") {
  const auto before = uneven_plan();
  CHECK(contains(lockstep_violation(before), "rank 1 runs micro-steps 1 and 3 in round 0 of 1"));
  auto plan = before;
  make_lockstep(plan);
  CAPTURE(plan);
  CHECK(plan.lockstep);
  CHECK(lockstep_violation(plan).empty());
  // Kept on their ranks, rank 1's three micro-steps would make three rounds of 4 + 1 + 1 s;
  // dealt afresh, longest first, round 0 holds the 4 s, the 2 s and a 1 s micro-step and round
  // 1 the other two 1 s ones: 4 + 1 s. Each rank runs one micro-step in each round.
  CHECK(plan.barriers.size() == 1);
  for (std::int64_t r = 0; r < 4; ++r) CHECK(plan.steps_of(r).size() == 2);
  CHECK(plan.makespan_seconds == doctest::Approx(5.0));
  for (const auto& m : plan.micro_steps) CHECK(m.first_rank % m.degree() == 0);
  // Samples, groups and loss scales are those of the plan; padding trains nothing.
  CHECK(scale_by_sample(plan) == scale_by_sample(before));
  std::int64_t padding = 0;
  for (const auto& m : plan.micro_steps)
    if (m.sample_ids.empty()) {
      ++padding;
      CHECK(m.degree() == 1);
      CHECK(m.loss_scale == 0.0);
      CHECK(m.tokens == 0);
    }
  CHECK(padding == 4 * 2 - (1 + 3 + 2 * 1));
  CHECK(plan.fingerprint == compute_fingerprint(plan));
  auto checked = plan;
  validate_plan(checked, uneven_batch(), 4);  // one of every sample, numbered 0..n-1
  // Every micro-step of a round starts when the round does.
  for (const auto& m : plan.micro_steps) {
    const auto round = std::upper_bound(plan.barriers.begin(), plan.barriers.end(), m.sequence) -
                       plan.barriers.begin();
    CHECK(m.start_seconds == doctest::Approx(std::array{0.0, 4.0}[round]));
  }
}

TEST_CASE("Lockstep.padding_takes_the_empty_micro_steps_prediction_and_rounds_their_longest") {
  const auto before = uneven_plan();
  auto plan = before;
  micro_step empty;
  empty.seconds = 1.5;  // e.g. ZeRO-3's parameter gathers, which an empty micro-step still runs
  empty.peak_bytes = 3.0;
  make_lockstep(plan, empty);
  // Dealt: rounds of 4 and max(1, 1.5) s (on their ranks: 4 + 1.5 + 1.5 s).
  CHECK(plan.makespan_seconds == doctest::Approx(5.5));
  // A micro-step keeps its predicted time and bytes; the padding takes the empty one's.
  std::map<std::uint64_t, double> seconds_before;
  for (const auto& m : before.micro_steps)
    for (auto id : m.sample_ids) seconds_before[id] = m.seconds;
  for (const auto& m : plan.micro_steps) {
    if (m.sample_ids.empty()) {
      CHECK(m.seconds == 1.5);
      CHECK(m.peak_bytes == 3.0);
    } else {
      CHECK(m.seconds == seconds_before.at(m.sample_ids.front()));
    }
  }
  empty.seconds = -1.0;
  CHECK_THROWS_WITH_AS(make_lockstep(plan, empty), doctest::Contains("seconds = -1"), invalid_plan);
}

TEST_CASE("Lockstep.violations_name_the_rank_and_the_round") {
  auto plan = uneven_plan();
  make_lockstep(plan);
  SUBCASE("a rank runs two micro-steps in one round") {
    plan.barriers.erase(plan.barriers.begin());
    CHECK(contains(lockstep_violation(plan), "in round 0 of 1: lockstep allows one"));
  }
  SUBCASE("a rank runs none in a round") {
    const auto pad = std::find_if(plan.micro_steps.begin(), plan.micro_steps.end(),
                                  [](const micro_step& m) { return m.sample_ids.empty(); });
    REQUIRE(pad != plan.micro_steps.end());
    plan.micro_steps.erase(pad);
    for (std::size_t n = 0; n < plan.micro_steps.size(); ++n)
      plan.micro_steps[n].sequence = static_cast<std::int64_t>(n);
    for (auto& b : plan.barriers) b -= b > 0 ? 1 : 0;  // renumbered: may now split elsewhere
    const auto why = lockstep_violation(plan);
    CAPTURE(why);
    CHECK(contains(why, "rank "));
    CHECK(contains(why, " round "));
    // validate_plan checks the claim.
    auto batch = uneven_batch();
    CHECK_THROWS_WITH_AS(validate_plan(plan, batch, 4),
                         doctest::Contains("plan.lockstep is set, but rank"), invalid_plan);
  }
}

TEST_CASE("Lockstep.planner_under_zero3_plans_in_lockstep") {
  cluster_spec cluster = hgx_cluster(2, gpus::h200_sxm());
  const auto batch = dcp::test::heavy_tailed_batch(11, 192, 65536);
  for (int zero : {1, 3}) {
    for (auto mode : {lockstep_mode::automatic, lockstep_mode::on}) {
      training_spec training;
      training.zero_stage = zero;
      training.lockstep = mode;
      const analytic_cost_model cost(models::llama3_8b(), cluster, training);
      const auto plan = DataCentricScheduler<>(cost).plan(batch);
      CAPTURE(zero);
      CAPTURE(to_string(mode));
      const bool expected = zero == 3 || mode == lockstep_mode::on;
      CHECK(plan.lockstep == expected);
      if (!expected) continue;
      CHECK(lockstep_violation(plan).empty());
      const auto rounds = plan.steps_of(0).size();
      for (std::int64_t r = 0; r < cluster.gpus; ++r) CHECK(plan.steps_of(r).size() == rounds);
      auto checked = plan;
      validate_plan(checked, batch, cluster.gpus);  // every sample exactly once
      // The rounds only add waiting: the bound stays below the makespan.
      CHECK(plan.lower_bound_seconds <= plan.makespan_seconds);
      CHECK(plan.makespan_seconds >= static_cast<double>(rounds) * cost.parameter_gather_seconds());
      // The best static layout is reported as it runs in lockstep: laid out, put in rounds,
      // and never faster than the plan, which keeps the faster of the two.
      auto static_plan =
          DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_pyramid_recompute,
                               best_static_placement>(cost)
              .plan(batch);
      REQUIRE(static_plan.lockstep);
      CHECK(plan.best_static_degree == static_plan.best_static_degree);
      CHECK(plan.best_static_seconds ==
            doctest::Approx(static_plan.makespan_seconds).epsilon(1e-12));
      CHECK(plan.makespan_seconds <= plan.best_static_seconds);
    }
  }
  training_spec off;
  off.zero_stage = 3;
  off.lockstep = lockstep_mode::off;
  CHECK_THROWS_WITH_AS(analytic_cost_model(models::llama3_8b(), cluster, off),
                       doctest::Contains("lockstep = off with zero_stage = 3"), invalid_spec);
}

TEST_CASE("Lockstep.zero3_charges_the_gathers_in_every_micro_step") {
  const cluster_spec cluster = hgx_cluster(2, gpus::h200_sxm());
  training_spec z1, z3;
  z3.zero_stage = 3;
  const sim::truth_model t1(models::llama3_8b(), cluster, z1), t3(models::llama3_8b(), cluster, z3);
  const analytic_cost_model a1(models::llama3_8b(), cluster, z1),
      a3(models::llama3_8b(), cluster, z3);
  // Three passes of the parameters in every micro-step, none at the end of the step (ZeRO-1:
  // two, at the end).
  CHECK(t3.gradient_sync_seconds() == 0.0);
  CHECK(t3.parameter_gather_seconds() == doctest::Approx(1.5 * t1.gradient_sync_seconds()));
  CHECK(t1.parameter_gather_seconds() == 0.0);
  CHECK(a3.gradient_sync_seconds() == 0.0);
  CHECK(a1.parameter_gather_seconds() == 0.0);
  CHECK(a3.parameter_gather_seconds() > a1.gradient_sync_seconds());
  // An empty micro-step under ZeRO-3 lasts the gathers; a short one at least as long.
  const execution_config c{};
  CHECK(t3.micro_step_parts(micro_batch_shape{}, c).seconds() >= t3.parameter_gather_seconds());
  const auto short_shape = micro_batch_shape::of(sample{0, 64});
  CHECK(t3.seconds(short_shape, c) >= t3.parameter_gather_seconds());
  CHECK(t3.seconds(short_shape, c) > t1.seconds(short_shape, c));
}

TEST_CASE("Lockstep.simulator_refuses_uneven_plans_under_zero3_and_synchronises_rounds") {
  const cluster_spec cluster = hgx_cluster(2, gpus::h200_sxm());
  training_spec z3;
  z3.zero_stage = 3;
  const sim::truth_model truth(models::llama3_8b(), cluster, z3);
  const auto batch = dcp::test::heavy_tailed_batch(5, 1200, 65536);
  training_spec z1_lockstep_off;  // ZeRO-1 plans: no rounds
  const analytic_cost_model z1(models::llama3_8b(), cluster, z1_lockstep_off);
  const auto uneven = DataCentricScheduler<>(z1).plan(batch);
  REQUIRE(!lockstep_violation(uneven).empty());
  CHECK_THROWS_WITH_AS((void)sim::simulate(uneven, batch, truth),
                       doctest::Contains("the training runs in lockstep (ZeRO-3 or lockstep on), "
                                         "and the plan is not: rank"),
                       invalid_spec);

  const analytic_cost_model z3_cost(models::llama3_8b(), cluster, z3);
  const auto plan = DataCentricScheduler<>(z3_cost).plan(batch);
  REQUIRE(plan.lockstep);
  sim::sim_options quiet;
  quiet.noise_sigma = 0;
  const auto result = sim::simulate(plan, batch, truth, quiet);
  CHECK(result.oom_events == 0);
  CHECK(result.gradient_sync_seconds == 0.0);
  // Every micro-step of round k starts when the last of round k - 1 ends (the gathers
  // synchronise the world), and lasts at least the gathers.
  std::vector<double> round_start, round_end;
  for (std::size_t i = 0; i < plan.micro_steps.size(); ++i) {
    const auto round = static_cast<std::size_t>(
        std::upper_bound(plan.barriers.begin(), plan.barriers.end(), plan.micro_steps[i].sequence) -
        plan.barriers.begin());
    if (round_start.size() <= round) {
      round_start.resize(round + 1, 1e300);
      round_end.resize(round + 1, 0.0);
    }
    const auto& out = result.micro_steps[i];
    round_start[round] = std::min(round_start[round], out.start_seconds);
    round_end[round] = std::max(round_end[round], out.end_seconds);
    CHECK(out.end_seconds - out.start_seconds >= truth.parameter_gather_seconds());
  }
  for (std::size_t k = 0; k < round_start.size(); ++k) {
    for (std::size_t i = 0; i < plan.micro_steps.size(); ++i) {
      const auto round =
          static_cast<std::size_t>(std::upper_bound(plan.barriers.begin(), plan.barriers.end(),
                                                    plan.micro_steps[i].sequence) -
                                   plan.barriers.begin());
      if (round == k)
        CHECK(result.micro_steps[i].start_seconds ==
              doctest::Approx(k == 0 ? 0.0 : round_end[k - 1]));
    }
  }
  CHECK(result.makespan_seconds == doctest::Approx(round_end.back()));
}

TEST_CASE("Lockstep.calibrated_skips_padding_observations") {
  const cluster_spec cluster = hgx_cluster(1, gpus::h200_sxm());
  calibrated<analytic_cost_model> cost(analytic_cost_model(models::llama3_8b(), cluster));
  observation pad;  // an empty micro-step's: no samples, no tokens
  pad.report.seconds = 0.5;
  CHECK_NOTHROW(cost.observe(pad));
  CHECK(cost.observations().empty());
  observation bad;  // tokens without samples: malformed, refused
  bad.shape.tokens = 5;
  bad.report.seconds = 0.5;
  CHECK_THROWS_WITH_AS(cost.observe(bad), doctest::Contains("shape has samples = 0, tokens = 5"),
                       invalid_spec);
}

TEST_CASE("Lockstep.json_round_trip_keeps_the_claim") {
  auto plan = uneven_plan();
  make_lockstep(plan);
  const auto text = to_json(plan);
  CHECK(contains(text, "\"lockstep\""));
  const auto back = read_plan_json(text);
  CHECK(back.lockstep);
  CHECK(back.barriers == plan.barriers);
  CHECK(compute_fingerprint(back) == plan.fingerprint);
}
