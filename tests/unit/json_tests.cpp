// dcp::write_json / dcp::to_json: the "dcp.step_plan/1" document of docs/plan-format.md, read
// back by a small strict JSON reader written here for the test.

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/plan/json_reader.hpp"

using namespace dcp;

namespace {

using json_value = dcp::json::value;

json_value parse(const std::string& text) { return dcp::json::parse(text); }

/// A small real plan: Llama-3-8B on H100 nodes, lengths from 200 to 96k tokens, so that
/// micro-batches pack several samples and the longest need recomputation.
step_plan small_plan(std::int64_t nodes = 1) {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(nodes, gpus::h100_sxm()));
  const DataCentricScheduler<> scheduler(cost);
  std::vector<sample> batch;
  const std::int64_t lengths[] = {200,  350,  512,  800,   1200,  2048,  3000,  4096,
                                  6000, 8192, 9000, 16384, 24000, 32768, 65536, 98304};
  std::uint64_t id = 1000;
  for (auto tokens : lengths) batch.push_back(text_sample(id++, tokens));
  return scheduler.plan(batch);
}

const char* const top_level_fields[] = {"format",
                                        "policy",
                                        "gpus",
                                        "gpus_per_node",
                                        "makespan_seconds",
                                        "lower_bound_seconds",
                                        "gap",
                                        "memory_budget_bytes",
                                        "gradient_sync_seconds",
                                        "best_static_seconds",
                                        "best_static_degree",
                                        "fingerprint",
                                        "total_tokens",
                                        "idle_fraction",
                                        "micro_steps"};

const char* const micro_step_fields[] = {"sequence",
                                         "first_rank",
                                         "degree",
                                         "sp",
                                         "recompute",
                                         "sample_ids",
                                         "tokens",
                                         "loss_units",
                                         "loss_scale",
                                         "start_seconds",
                                         "predicted_seconds",
                                         "predicted_peak_bytes"};

}  // namespace

TEST_CASE("Json.Plan.has_every_documented_field") {
  const auto plan = small_plan();
  REQUIRE(!plan.micro_steps.empty());
  const auto doc = parse(to_json(plan));
  REQUIRE(doc.type == json_value::kind::object);
  for (const char* field : top_level_fields) {
    CAPTURE(field);
    CHECK(doc.has(field));
  }
  CHECK(doc.keys.size() == std::size(top_level_fields));  // no "ranks" unless asked
  CHECK(doc["format"].text == "dcp.step_plan/1");
  CHECK(doc["policy"].text == plan.policy);
  CHECK(doc["gpus"].integer<std::int64_t>() == plan.gpus);
  CHECK(doc["gpus_per_node"].integer<std::int64_t>() == plan.gpus_per_node);
  CHECK(doc["makespan_seconds"].number() == plan.makespan_seconds);
  CHECK(doc["lower_bound_seconds"].number() == plan.lower_bound_seconds);
  CHECK(doc["gap"].number() == plan.gap());
  CHECK(doc["memory_budget_bytes"].number() == plan.memory_budget_bytes);
  CHECK(doc["gradient_sync_seconds"].number() == plan.gradient_sync_seconds);
  CHECK(doc["best_static_seconds"].number() == plan.best_static_seconds);
  CHECK(doc["best_static_degree"].integer<std::int64_t>() == plan.best_static_degree);
  CHECK(doc["total_tokens"].integer<std::int64_t>() == plan.total_tokens());
  CHECK(doc["idle_fraction"].number() == plan.idle_fraction());

  const auto& steps = doc["micro_steps"];
  REQUIRE(steps.type == json_value::kind::array);
  for (const auto& step : steps.items) {
    for (const char* field : micro_step_fields) {
      CAPTURE(field);
      CHECK(step.has(field));
    }
    CHECK(step.keys.size() == std::size(micro_step_fields));
    const auto& sp = step["sp"].text;
    CHECK((sp == "ulysses" || sp == "ring"));
    CHECK(step["recompute"].has("layers"));
    CHECK(step["recompute"]["selective"].type == json_value::kind::boolean);
  }
}

TEST_CASE("Json.Plan.micro_steps_match_the_plan") {
  const auto plan = small_plan();
  const auto doc = parse(to_json(plan));
  const auto& steps = doc["micro_steps"].items;
  REQUIRE(steps.size() == plan.micro_steps.size());
  for (std::size_t n = 0; n < steps.size(); ++n) {
    CAPTURE(n);
    const auto& m = plan.micro_steps[n];
    const auto& s = steps[n];
    CHECK(s["sequence"].integer<std::int64_t>() == m.sequence);
    CHECK(s["first_rank"].integer<std::int64_t>() == m.first_rank);
    CHECK(s["degree"].integer<std::int64_t>() == m.degree());
    CHECK(s["sp"].text == to_string(m.config.sp));
    CHECK(s["recompute"]["layers"].integer<std::int32_t>() == m.config.recompute.layers);
    CHECK(s["recompute"]["selective"].boolean == m.config.recompute.selective);
    CHECK(s["tokens"].integer<std::int64_t>() == m.tokens);
    CHECK(s["loss_units"].integer<std::int64_t>() == m.loss_units);
    CHECK(s["loss_scale"].number() == m.loss_scale);
    CHECK(s["start_seconds"].number() == m.start_seconds);
    CHECK(s["predicted_seconds"].number() == m.seconds);
    CHECK(s["predicted_peak_bytes"].number() == m.peak_bytes);
    const auto& ids = s["sample_ids"].items;
    REQUIRE(ids.size() == m.sample_ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
      CHECK(ids[i].integer<std::uint64_t>() == m.sample_ids[i]);
  }
}

TEST_CASE("Json.Plan.lists_every_sample_id_once") {
  const auto plan = small_plan();
  const auto doc = parse(to_json(plan));
  std::multiset<std::uint64_t> seen;
  for (const auto& step : doc["micro_steps"].items)
    for (const auto& id : step["sample_ids"].items) {
      // Ids are plain integers, not strings or floats.
      CHECK(id.text.find_first_of(".eE") == std::string::npos);
      seen.insert(id.integer<std::uint64_t>());
    }
  CHECK(seen.size() == 16);
  for (std::uint64_t id = 1000; id < 1016; ++id) CHECK(seen.count(id) == 1);
}

TEST_CASE("Json.Plan.fingerprint_is_sixteen_hex_digits") {
  const auto plan = small_plan();
  const auto doc = parse(to_json(plan));
  const auto& text = doc["fingerprint"].text;
  REQUIRE(doc["fingerprint"].type == json_value::kind::string);
  REQUIRE(text.size() == 16);
  std::uint64_t value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  CHECK(status == std::errc{});
  CHECK(end == text.data() + text.size());
  CHECK(value == plan.fingerprint);
  CHECK(value == compute_fingerprint(plan));
  CHECK(detail::fingerprint_hex(0) == "0000000000000000");
  CHECK(detail::fingerprint_hex(0xfedcba9876543210ull) == "fedcba9876543210");
}

TEST_CASE("Json.Plan.is_deterministic") {
  const auto plan = small_plan();
  CHECK(to_json(plan) == to_json(plan));
  CHECK(to_json(plan) == to_json(small_plan()));
  const json_options compact{false, false};
  CHECK(to_json(plan, compact) == to_json(small_plan(), compact));
  // Compact output is one line and parses to the same document.
  const auto one_line = to_json(plan, compact);
  CHECK(one_line.find('\n') == one_line.size() - 1);
  CHECK(parse(one_line)["micro_steps"].items.size() == plan.micro_steps.size());
}

TEST_CASE("Json.Plan.round_trips_numbers") {
  const double values[] = {0.0,
                           1.0,
                           0.1,
                           1.0 / 3.0,
                           2.5e-7,
                           123456789.123456789,
                           150323855360.0,
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min(),
                           -0.0,
                           -42.125};
  for (double v : values) {
    CAPTURE(v);
    std::ostringstream os;
    detail::write_json_number(os, v);
    json_value parsed = parse(os.str());
    CHECK(parsed.number() == v);
    CHECK(std::signbit(parsed.number()) == std::signbit(v));
  }
  std::ostringstream os;
  detail::write_json_number(os, std::numeric_limits<double>::infinity());
  detail::write_json_number(os, std::numeric_limits<double>::quiet_NaN());
  CHECK(os.str() == "nullnull");  // JSON has neither; null keeps the document valid
  std::ostringstream big;
  detail::write_json_number(big, std::numeric_limits<std::uint64_t>::max());
  CHECK(big.str() == "18446744073709551615");
}

TEST_CASE("Json.Plan.escapes_strings") {
  auto plan = small_plan();
  plan.policy = "say \"hi\"\\ \n\t\x01 caf\xc3\xa9 \b\f\r\x1f";
  const auto text = to_json(plan);
  CHECK(text.find(R"("policy": "say \"hi\"\\ \n\t\u0001 caf)") != std::string::npos);
  CHECK(text.find(R"( \b\f\r\u001f")") != std::string::npos);
  CHECK(parse(text)["policy"].text == plan.policy);
}

TEST_CASE("Json.Plan.ranks_list_each_ranks_micro_steps_in_order") {
  const auto plan = small_plan(2);
  const auto doc = parse(to_json(plan, json_options{true, true}));
  REQUIRE(doc.has("ranks"));
  const auto& ranks = doc["ranks"].items;
  REQUIRE(ranks.size() == static_cast<std::size_t>(plan.gpus));
  std::size_t memberships = 0;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    CAPTURE(rank);
    const auto expected = plan.steps_of(static_cast<std::int64_t>(rank));
    REQUIRE(ranks[rank].items.size() == expected.size());
    std::int64_t previous = -1;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto sequence = ranks[rank].items[i].integer<std::int64_t>();
      CHECK(sequence == plan.micro_steps[expected[i]].sequence);
      CHECK(sequence > previous);
      previous = sequence;
    }
    memberships += expected.size();
  }
  std::size_t expected_memberships = 0;
  for (const auto& m : plan.micro_steps)
    expected_memberships += static_cast<std::size_t>(m.degree());
  CHECK(memberships == expected_memberships);
}

TEST_CASE("Json.Plan.empty_plan_is_valid") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h100_sxm()));
  const auto plan = DataCentricScheduler<>(cost).plan(std::vector<sample>{});
  const auto doc = parse(to_json(plan, json_options{true, true}));
  CHECK(doc["micro_steps"].items.empty());
  CHECK(doc["total_tokens"].integer<std::int64_t>() == 0);
  CHECK(doc["ranks"].items.size() == 8);
}
