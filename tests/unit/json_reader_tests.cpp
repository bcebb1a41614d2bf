// Reading plans back from JSON, and the errors for plans that cannot run a batch.

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/plan/json_reader.hpp"

#include "../support/batches.hpp"
#include "../support/errors.hpp"

using namespace dcp;

namespace {

struct fixture {
  std::vector<sample> batch = dcp::test::heavy_tailed_batch(3, 120, 40000);
  analytic_cost_model cost{models::llama3_8b(), hgx_cluster(2, gpus::h100_sxm())};
  step_plan plan = DataCentricScheduler<>(cost).plan(batch);
};

using dcp::test::contains;
using dcp::test::message_of;

}  // namespace

TEST_CASE("PlanJson.Reader.round_trips_what_the_writer_wrote") {
  fixture f;
  auto read = read_plan_json(to_json(f.plan), "plan.json");
  validate_plan(read, f.batch, f.plan.gpus);
  REQUIRE(read.micro_steps.size() == f.plan.micro_steps.size());
  CHECK(read.fingerprint == f.plan.fingerprint);
  CHECK(read.makespan_seconds == f.plan.makespan_seconds);
  for (std::size_t n = 0; n < read.micro_steps.size(); ++n) {
    CAPTURE(n);
    const auto& a = read.micro_steps[n];
    const auto& b = f.plan.micro_steps[n];
    CHECK(a.sample_ids == b.sample_ids);
    CHECK(a.config == b.config);
    CHECK(a.first_rank == b.first_rank);
    CHECK(a.loss_scale == b.loss_scale);  // shortest round-trip doubles: bit for bit
    CHECK(a.seconds == b.seconds);
    CHECK(a.tokens == b.tokens);
  }
}

TEST_CASE("PlanJson.Reader.syntax_errors_name_line_and_column") {
  const auto msg = message_of([] {
    (void)read_plan_json("{\n  \"format\": \"dcp.step_plan/1\",\n  \"gpus\": 8,,\n}", "bad.json");
  });
  CHECK(contains(msg, "bad.json:3:"));
  CHECK(contains(msg, "expected"));
  CHECK(contains(message_of([] { (void)read_plan_json("{\"format\": \"other/2\"}", "x.json"); }),
                 "'other/2'"));
  CHECK(contains(message_of([] {
                   (void)read_plan_json("{\"format\": \"dcp.step_plan/1\", \"gpus\": 8}", "x.json");
                 }),
                 "missing field 'micro_steps'"));
  CHECK(contains(message_of([] {
                   (void)read_plan_json(
                       "{\"format\": \"dcp.step_plan/1\", \"gpus\": 8, \"micro_steps\": "
                       "[{\"sequence\": 0, \"first_rank\": 0, \"degree\": \"two\", "
                       "\"sample_ids\": []}]}",
                       "x.json");
                 }),
                 "x.json.micro_steps[0].degree"));
}

TEST_CASE("PlanJson.Validate.dropped_sample_is_named") {
  fixture f;
  auto plan = f.plan;
  const auto dropped = plan.micro_steps[0].sample_ids.back();
  plan.micro_steps[0].sample_ids.pop_back();
  const auto msg = message_of([&] { validate_plan(plan, f.batch, plan.gpus); });
  CHECK(contains(msg, "sample " + std::to_string(dropped)));
  CHECK(contains(msg, "in no micro-step"));
}

TEST_CASE("PlanJson.Validate.duplicated_sample_names_both_micro_steps") {
  fixture f;
  auto plan = f.plan;
  REQUIRE(plan.micro_steps.size() >= 2);
  const auto twice = plan.micro_steps[0].sample_ids.front();
  plan.micro_steps[1].sample_ids.push_back(twice);
  const auto msg = message_of([&] { validate_plan(plan, f.batch, plan.gpus); });
  CHECK(contains(msg, "micro_steps[1].sample_ids"));
  CHECK(contains(msg, std::to_string(twice)));
  CHECK(contains(msg, "already in micro_steps[0]"));
}

TEST_CASE("PlanJson.Validate.rank_outside_the_cluster_is_named") {
  fixture f;
  auto plan = f.plan;
  plan.micro_steps[2].first_rank = 16;
  plan.micro_steps[2].config.degree = 1;
  const auto msg = message_of([&] { validate_plan(plan, f.batch, plan.gpus); });
  CHECK(contains(msg, "micro_steps[2].first_rank = 16"));
  CHECK(contains(msg, "0..15"));
  plan.micro_steps[2].first_rank = 2;
  plan.micro_steps[2].config.degree = 4;
  CHECK(contains(message_of([&] { validate_plan(plan, f.batch, plan.gpus); }),
                 "not a multiple of its degree 4"));
  plan.micro_steps[2].config.degree = 3;
  CHECK(contains(message_of([&] { validate_plan(plan, f.batch, plan.gpus); }),
                 "degree = 3, must be a power of two"));
  CHECK(contains(message_of([&] { validate_plan(plan, f.batch, 8); }), "the cluster has 8 GPUs"));
}

TEST_CASE("PlanJson.Reader.barriers_round_trip_and_bad_ones_are_named") {
  fixture f;
  auto plan = f.plan;
  REQUIRE(plan.micro_steps.size() >= 3);
  // Without barriers the document has no "barriers" field: plans of dcp's own policies read as
  // before.
  CHECK(!contains(to_json(plan), "barriers"));
  plan.barriers = {1, 2};
  plan.fingerprint = compute_fingerprint(plan);
  CHECK(plan.fingerprint != f.plan.fingerprint);  // ranks that disagree on barriers are caught
  auto read = read_plan_json(to_json(plan), "plan.json");
  validate_plan(read, f.batch, plan.gpus);
  CHECK(read.barriers == plan.barriers);
  CHECK(read.fingerprint == plan.fingerprint);
  read.barriers = {2, 2};
  CHECK(contains(message_of([&] { validate_plan(read, f.batch, plan.gpus); }),
                 "plan.barriers[1] = 2, must be greater than barriers[0] = 2"));
  read.barriers = {-1};
  CHECK(contains(message_of([&] { validate_plan(read, f.batch, plan.gpus); }),
                 "plan.barriers[0] = -1"));
  CHECK(contains(message_of([] {
                   (void)read_plan_json(
                       "{\"format\": \"dcp.step_plan/1\", \"gpus\": 8, \"barriers\": [\"x\"], "
                       "\"micro_steps\": []}",
                       "x.json");
                 }),
                 "x.json.barriers[0]"));
}
