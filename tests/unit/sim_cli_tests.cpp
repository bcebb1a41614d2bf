// dcp-sim's command line.

#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "../../tools/dcp_sim_cli.hpp"

using dcp::tool::parse_sim_arguments;
using dcp::tool::usage_error;

namespace {
dcp::tool::sim_options_cli parse_sim(std::vector<std::string_view> args) {
  return parse_sim_arguments(std::span<const std::string_view>(args.data(), args.size()));
}
std::string error_of(std::vector<std::string_view> args) {
  try {
    parse_sim(std::move(args));
  } catch (const usage_error& e) {
    return e.what();
  }
  return "(no usage_error)";
}
}  // namespace

TEST_CASE("Tool.SimCli.defaults_are_the_documented_comparison") {
  const auto o = parse_sim({});
  CHECK(o.steps == 50);
  CHECK(o.nodes * o.gpus_per_node == 32);
  CHECK(o.gpu == "h200");
  CHECK(o.policies.empty());
  CHECK_FALSE(o.model_given);
  CHECK_FALSE(o.json);
  CHECK(dcp::tool::sim_cluster_of(o).gpus == 32);
}

TEST_CASE("Tool.SimCli.flags_are_read_in_both_spellings") {
  const auto o =
      parse_sim({"--model", "stdit3-xl", "--steps=7", "--policies", "dcp,static", "--json", "--out",
                 "figs", "--tokens", "5000", "--seed=9", "--sp", "ring", "--zero", "3"});
  CHECK(o.model == "stdit3-xl");
  CHECK(o.model_given);
  CHECK(o.steps == 7);
  CHECK(o.policies == std::vector<std::string>{"dcp", "static"});
  CHECK(o.json);
  CHECK(o.out == "figs");
  CHECK(o.tokens == 5000);
  CHECK(o.seed == 9);
  CHECK(o.sp == dcp::sequence_parallel::ring);
  CHECK(dcp::tool::sim_training_of(o).zero_stage == 3);
}

TEST_CASE("Tool.SimCli.errors_name_the_flag_and_value") {
  CHECK(error_of({"--steps", "0"}).find("--steps = 0") != std::string::npos);
  CHECK(error_of({"--model", "gpt5"}).find("gpt5") != std::string::npos);
  CHECK(error_of({"--workload", "imagenet"}).find("imagenet") != std::string::npos);
  CHECK(error_of({"--policies", "dcp,,static"}).find("empty policy") != std::string::npos);
  CHECK(error_of({"--frobnicate"}).find("--frobnicate") != std::string::npos);
  CHECK(error_of({"--video-csv"}).find("--file") != std::string::npos);
  CHECK(error_of({"--seed"}).find("needs a value") != std::string::npos);
}

TEST_CASE("Tool.SimCli.host_cost_takes_seconds_or_a_named_host") {
  CHECK_FALSE(parse_sim({}).host_cost.has_value());  // the models' default: the x86 host
  CHECK(*parse_sim({"--host-cost", "x86"}).host_cost == dcp::x86_host.seconds_per_kernel);
  CHECK(*parse_sim({"--host-cost", "grace"}).host_cost == dcp::grace_host.seconds_per_kernel);
  CHECK(*parse_sim({"--host-cost", "graphs"}).host_cost == 0.0);
  CHECK(*parse_sim({"--host-cost", "2e-5"}).host_cost == 2e-5);
  const auto named = error_of({"--host-cost", "arm"});
  CHECK(named.find("'arm'") != std::string::npos);
  CHECK(named.find("x86, grace, graphs") != std::string::npos);
  CHECK(error_of({"--host-cost", "0.5"}).find("at most 0.01") != std::string::npos);
  CHECK(error_of({"--host-cost", "-1e-6"}) != "(no usage_error)");
}

TEST_CASE("Tool.SimCli.pipeline_takes_only_json_steps_and_seed") {
  const auto o = parse_sim({"--pipeline", "--steps", "2", "--seed", "5", "--json"});
  CHECK(o.pipeline);
  CHECK(o.steps == 2);
  for (const auto& extra : std::vector<std::vector<std::string_view>>{
           {"--model", "llama3-8b"}, {"--nodes", "2"}, {"--matrix"}, {"--policies", "dcp"}}) {
    auto args = extra;
    args.insert(args.begin(), "--pipeline");
    CAPTURE(extra.front());
    CHECK(error_of(args).find("--pipeline runs fixed tensor x pipeline scenarios") !=
          std::string::npos);
  }
}
