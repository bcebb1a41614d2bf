// The simulator inside a tensor x pipeline grid (dcp/sim/pipeline_truth.hpp,
// dcp/evaluation/pipeline_compare.hpp): the truth model disagrees with the planner's where it
// should, its bound is a bound for every plan, and the comparison trains the same tokens.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/evaluation/pipeline_compare.hpp"
#include "dcp/evaluation/pipeline_svg.hpp"
#include "dcp/pipeline.hpp"
#include "dcp/sim/pipeline_truth.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/presets.hpp"

#include "../../tools/dcp_sim_pipeline_policies.hpp"
#include "../support/errors.hpp"

using namespace dcp;

namespace {

struct grid_case {
  std::int64_t nodes;
  model_parallel_grid grid;
  model_spec model;
};

std::vector<grid_case> grid_cases() {
  return {{16, {8, 4, 1}, models::llama3_70b()},
          {32, {8, 4, 2}, models::llama3_70b()},
          {8, {8, 4, 1}, models::llama3_8b()},
          {4, {4, 2, 1}, models::llama3_8b()}};
}

std::vector<sample> corpus_step(std::uint64_t seed, std::int64_t tokens,
                                std::int64_t context = 131072) {
  const auto documents = workload::draw_batch(workload::long_context_corpus(), tokens, seed);
  return workload::split_to_context(documents, context).samples;
}

/// Steps with ids numbered through the run, as dcp-sim --pipeline draws them.
std::vector<std::vector<sample>> numbered(std::vector<std::vector<sample>> steps) {
  std::uint64_t id = 0;
  for (auto& step : steps)
    for (auto& s : step) s.id = id++;
  return steps;
}

}  // namespace

TEST_CASE("PipelineSim.Truth.small_micro_batches_cost_more_than_the_planner_thinks") {
  // The truth's GEMMs lose efficiency at few tokens per GPU (n_half), the planner's do not:
  // truth / planner grows as the micro-batch shrinks.
  const auto cluster = hgx_cluster(16, gpus::h100_sxm());
  const model_parallel_grid grid{8, 4, 1};
  const pipeline_cost_model planner(models::llama3_70b(), cluster, training_spec{}, grid);
  const sim::pipeline_truth_model truth(models::llama3_70b(), cluster, training_spec{}, grid);
  const auto ratio = [&](std::int64_t tokens) {
    const auto shape = micro_batch_shape::of(text_sample(0, tokens));
    const auto a = planner.chunk(shape, 1, recompute_setting{}, 1);
    const auto b = truth.chunk(shape, 1, recompute_setting{}, 1);
    return (b.forward + b.backward) / (a.forward + a.backward);
  };
  CHECK(ratio(128) > ratio(32768));
  CHECK(ratio(32768) == doctest::Approx(1.0).epsilon(0.25));  // the two agree at scale
  // Fragmentation: the truth's bytes are larger than the planner's accounting.
  const auto shape = micro_batch_shape::of(text_sample(0, 16384));
  CHECK(truth.chunk(shape, 1, recompute_setting{}, 1).stored_bytes >
        planner.chunk(shape, 1, recompute_setting{}, 1).stored_bytes);
}

TEST_CASE("PipelineSim.Truth.marginals_add_up_to_no_more_than_the_micro_batch") {
  // The bound's premise: a micro-batch's device time is at least its fixed part plus each
  // sample's marginal.
  const sim::pipeline_truth_model truth(models::llama3_70b(), hgx_cluster(16, gpus::h100_sxm()),
                                        training_spec{}, {8, 4, 1});
  const std::vector<std::int64_t> lengths{37, 1000, 4096, 20000, 77777};
  for (const std::int64_t degree : {1, 2, 4}) {
    micro_batch_shape all;
    for (std::size_t k = 0; k < lengths.size(); ++k)
      all += micro_batch_shape::of(text_sample(k, lengths[k]));
    for (std::int64_t c = 0; c < 4; ++c) {
      double forward = truth.chunk_fixed(c).forward;
      double backward = truth.chunk_fixed(c).backward;
      for (std::size_t k = 0; k < lengths.size(); ++k) {
        const auto m = truth.marginal(micro_batch_shape::of(text_sample(k, lengths[k])), degree,
                                      recompute_setting{}, c);
        forward += m.forward;
        backward += m.backward;
      }
      const auto whole = truth.chunk(all, degree, recompute_setting{}, c);
      CAPTURE(degree);
      CAPTURE(c);
      CHECK(forward <= whole.forward * (1 + 1e-12));
      CHECK(backward <= whole.backward * (1 + 1e-12));
    }
  }
}

TEST_CASE("PipelineSim.Bound.never_exceeds_a_plans_truth_makespan") {
  for (const auto& job : grid_cases()) {
    const auto cluster = hgx_cluster(job.nodes, gpus::h100_sxm());
    const pipeline_planner planner(
        pipeline_cost_model(job.model, cluster, training_spec{}, job.grid));
    const sim::pipeline_truth_model truth(job.model, cluster, training_spec{}, job.grid);
    for (const std::uint64_t seed : {11u, 12u, 13u}) {
      const auto batch = corpus_step(seed, 25'000 * cluster.gpus);
      const auto plan = planner.plan(batch);
      const auto timeline =
          simulate_pipeline(pipeline_instance_of(truth, plan.micro_batches, plan.slots));
      CAPTURE(job.nodes);
      CAPTURE(job.grid);
      CAPTURE(seed);
      CHECK(pipeline_batch_lower_bound(truth, std::span<const sample>(batch)) <=
            timeline.makespan * (1 + 1e-12));
      CHECK(timeline.peak() <= truth.capacity_bytes());  // no OOM on the truth either
    }
  }
}

TEST_CASE("PipelineSim.Compare.refuses_a_policy_that_drops_tokens") {
  const auto cluster = hgx_cluster(16, gpus::h100_sxm());
  const model_parallel_grid grid{8, 4, 1};
  const pipeline_planner planner(
      pipeline_cost_model(models::llama3_70b(), cluster, training_spec{}, grid));
  const sim::pipeline_truth_model truth(models::llama3_70b(), cluster, training_spec{}, grid);
  const auto steps = numbered({corpus_step(1, 2'000'000), corpus_step(2, 2'000'000)});
  auto dropping = evaluation::dcp_pipeline_policy(planner, "drops-one");
  auto inner = dropping.plan;
  dropping.plan = [inner](const std::vector<std::vector<sample>>& all) {
    auto plans = inner(all);
    auto& mb = plans.front().micro_batches.front();
    mb.sample_ids.clear();
    mb.shape = micro_batch_shape{};
    return plans;
  };
  const auto message = test::message_of(
      [&] { (void)evaluation::compare_pipeline_policies(truth, steps, {dropping}); });
  CHECK(test::contains(message, "policy drops-one trains"));
  CHECK(test::contains(message, "tokens of the"));
  // A sample drawn in two steps is refused before any policy runs.
  auto twice = steps;
  twice[1].push_back(twice[0].front());
  CHECK(test::contains(test::message_of([&] {
                         (void)evaluation::compare_pipeline_policies(
                             truth, twice, {evaluation::dcp_pipeline_policy(planner)});
                       }),
                       "is drawn twice"));
  const auto rows = evaluation::compare_pipeline_policies(
      truth, steps, {evaluation::dcp_pipeline_policy(planner)});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].steps == 2);
  CHECK(rows[0].oom_steps == 0);
  CHECK(rows[0].gap() >= 0);
  CHECK(rows[0].bubble > 0);
  CHECK(rows[0].bubble < 1);
}

TEST_CASE("PipelineSim.Bound.never_exceeds_any_policys_truth_makespan") {
  // Every policy dcp-sim --pipeline compares, on two steps of a 64-GPU grid in each schedule:
  // the truth bound of the samples each step trains is at or below the step's noise-free
  // makespan, every drawn token is trained once (compare_pipeline_policies refuses otherwise),
  // and dcp is not slower than any peer.
  for (const std::int64_t v : {1, 2}) {
    const auto cluster = hgx_cluster(8, gpus::h100_sxm());
    const model_parallel_grid grid{8, 4, v};
    const pipeline_cost_model cost(models::llama3_8b(), cluster, training_spec{}, grid);
    const sim::pipeline_truth_model truth(models::llama3_8b(), cluster, training_spec{}, grid);
    const auto steps = numbered({corpus_step(21, 400'000, 65536), corpus_step(22, 400'000, 65536)});
    const auto rows = evaluation::compare_pipeline_policies(
        truth, steps, tool::sim_detail::pipeline_policies(cost, 65536));
    REQUIRE(rows.size() == 6);
    CAPTURE(v);
    for (const auto& row : rows) {
      CAPTURE(row.name);
      if (!row.refused.empty()) {
        CHECK(v == 2);  // DynaPipe refuses interleaving with a decoder-only model
        CHECK(row.name == "dynapipe");
        continue;
      }
      CHECK(row.bound_seconds <= row.seconds * (1 + 1e-12));
      CHECK(row.oom_steps == 0);
      CHECK(rows.front().seconds <= row.seconds * 1.005);
    }
  }
}

TEST_CASE("PipelineSim.Svg.draws_every_op_on_its_stage_row") {
  const auto cluster = hgx_cluster(8, gpus::h100_sxm());
  const model_parallel_grid grid{8, 4, 1};
  const pipeline_planner planner(
      pipeline_cost_model(models::llama3_8b(), cluster, training_spec{}, grid));
  const sim::pipeline_truth_model truth(models::llama3_8b(), cluster, training_spec{}, grid);
  const auto plan = planner.plan(corpus_step(31, 300'000, 65536));
  const auto instance = pipeline_instance_of(truth, plan.micro_batches, plan.slots);
  const auto timeline = simulate_pipeline(instance);
  // Every op of every device is recorded once, inside the makespan.
  CHECK(timeline.ops.size() ==
        static_cast<std::size_t>(2 * plan.slots * grid.pipeline * plan.pipelines));
  for (const auto& op : timeline.ops) {
    CHECK(op.start >= 0);
    CHECK(op.end <= timeline.pipeline_seconds * (1 + 1e-12));
  }
  const auto svg = evaluation::pipeline_timeline_svg(instance, timeline, "a <step>");
  std::size_t boxes = 0;
  for (std::size_t at = svg.find("<rect x="); at != std::string::npos;
       at = svg.find("<rect x=", at + 1))
    ++boxes;
  CHECK(boxes == timeline.ops.size());
  CHECK(test::contains(svg, "a &lt;step&gt;"));
  CHECK(test::contains(svg, "stage 3"));
}
