// The command line of dcp-plan (tools/dcp_plan_cli.hpp): defaults, every flag in both
// spellings, and the usage errors that make the program exit with status 2.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../../tools/dcp_plan_cli.hpp"

using namespace dcp;
using namespace dcp::tool;

namespace {

plan_options parse_plan(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> list(args);
  return parse_arguments(std::span<const std::string_view>(list.data(), list.size()));
}

}  // namespace

TEST_CASE("Tool.Cli.defaults_plan_llama3_8b_on_4x8_h200") {
  const auto o = parse_plan({});
  CHECK(o.model == "llama3-8b");
  CHECK(o.gpu == "h200");
  CHECK(o.recompute == recompute_choice::selective_pyramid);
  CHECK(o.bucketing == bucketing_choice::varlen);
  CHECK(o.placement == placement_choice::balanced);
  CHECK(o.tokens == 1'000'000);
  CHECK(o.context == 65536);
  CHECK_FALSE(o.context_given);
  CHECK_FALSE(o.json);
  CHECK_FALSE(o.input.has_value());
  const auto cluster = cluster_of(o);
  CHECK(cluster.gpus == 32);
  CHECK(cluster.gpus_per_node == 8);
  CHECK(cluster.gpu == gpus::h200_sxm());
  CHECK(training_of(o) == training_spec{});
  CHECK(model_named(o.model) == models::llama3_8b());
}

TEST_CASE("Tool.Cli.parses_every_flag") {
  const auto o = parse_plan({"--model",
                             "qwen2.5-72b",
                             "--gpu=h100",
                             "--nodes",
                             "2",
                             "--gpus-per-node=4",
                             "--zero",
                             "3",
                             "--headroom-gib=6.5",
                             "--sp",
                             "ring",
                             "--recompute",
                             "selective",
                             "--bucketing=padding-optimal:5",
                             "--placement",
                             "static:8",
                             "--tokens",
                             "20000",
                             "--context=4096",
                             "--seed",
                             "42",
                             "--json",
                             "--ranks",
                             "lengths.txt"});
  CHECK(o.model == "qwen2.5-72b");
  CHECK(o.gpu == "h100");
  CHECK(o.nodes == 2);
  CHECK(o.gpus_per_node == 4);
  CHECK(o.zero_stage == 3);
  REQUIRE(o.headroom_gib.has_value());
  CHECK(*o.headroom_gib == 6.5);
  CHECK(o.sp == sequence_parallel::ring);
  CHECK(o.recompute == recompute_choice::selective);
  CHECK(o.bucketing == bucketing_choice::padding_optimal);
  CHECK(o.padding_buckets == 5);
  CHECK(o.placement == placement_choice::static_degree);
  CHECK(o.static_degree == 8);
  CHECK(o.tokens == 20000);
  CHECK(o.context == 4096);
  CHECK(o.context_given);
  CHECK(o.seed == 42);
  CHECK(o.json);
  CHECK(o.ranks);
  CHECK(o.input == "lengths.txt");

  const auto cluster = cluster_of(o);
  CHECK(cluster.gpus == 8);
  CHECK(cluster.gpus_per_node == 4);
  CHECK(cluster.gpu == gpus::h100_sxm());
  const auto training = training_of(o);
  CHECK(training.zero_stage == 3);
  CHECK(training.headroom_bytes == 6.5 * gib);
  CHECK(training.sp == sequence_parallel::ring);

  CHECK(parse_plan({"--placement", "best-static"}).placement == placement_choice::best_static);
  CHECK(parse_plan({"--bucketing", "log2"}).bucketing == bucketing_choice::log2);
  CHECK(parse_plan({"--recompute=none"}).recompute == recompute_choice::none);
  CHECK(parse_plan({"--recompute", "full"}).recompute == recompute_choice::full);
  CHECK(parse_plan({"--recompute", "pyramid"}).recompute == recompute_choice::pyramid);
  CHECK(parse_plan({"-"}).input == "-");
  CHECK(parse_plan({"--", "--odd-name"}).input == "--odd-name");
  CHECK(parse_plan({"--help"}).help);
}

TEST_CASE("Tool.Cli.names_every_model_and_gpu") {
  CHECK(model_named("llama3-70b") == models::llama3_70b());
  CHECK(model_named("qwen2.5-7b") == models::qwen25_7b());
  CHECK(model_named("qwen2.5-72b") == models::qwen25_72b());
  CHECK(model_named("qwen3-32b") == models::qwen3_32b());
  CHECK(parse_plan({"--model", "qwen3-32b"}).model == "qwen3-32b");
  CHECK(model_named("stdit3-xl") == models::stdit3_xl());
  CHECK(model_named("wan2.1-14b") == models::wan21_14b());
  CHECK(gpu_named("h100") == gpus::h100_sxm());
  CHECK_THROWS_AS(model_named("gpt-5"), usage_error);
  CHECK_THROWS_AS(gpu_named("a100"), usage_error);
}

TEST_CASE("Tool.Cli.gpus_makes_one_small_node_or_whole_nodes") {
  const auto small = cluster_of(parse_plan({"--gpus", "4"}));
  CHECK(small.gpus == 4);
  CHECK(small.gpus_per_node == 4);
  const auto whole = cluster_of(parse_plan({"--gpus=64"}));
  CHECK(whole.gpus == 64);
  CHECK(whole.gpus_per_node == 8);
  CHECK_NOTHROW(whole.validate());
  // Not a multiple of the node size: the cluster spec, not the parser, rejects it.
  CHECK_THROWS_AS(cluster_of(parse_plan({"--gpus", "12"})).validate(), invalid_spec);
}

TEST_CASE("Tool.Cli.rejects_bad_command_lines") {
  const std::vector<std::vector<std::string_view>> bad = {
      {"--bogus"},
      {"-x"},
      {"--nodes"},
      {"--nodes", "two"},
      {"--nodes", "0"},
      {"--nodes", "-3"},
      {"--nodes", "99999999999999999999"},
      {"--nodes", "4096", "--gpus-per-node", "64"},
      {"--zero", "4"},
      {"--headroom-gib", "-1"},
      {"--headroom-gib", "lots"},
      {"--model", "gpt-5"},
      {"--gpu", "a100"},
      {"--sp", "tree"},
      {"--recompute", "some"},
      {"--bucketing", "padding-optimal:0"},
      {"--bucketing", "padding-optimal:"},
      {"--bucketing", "fixed"},
      {"--placement", "static:3"},
      {"--placement", "static:0"},
      {"--placement", "dynamic"},
      {"--tokens", "0"},
      {"--tokens", "1e6"},
      {"--context", "0"},
      {"--seed", "-1"},
      {"--json=yes"},
      {"--ranks"},
      {"--gpus", "16", "--nodes", "2"},
      {"a.txt", "b.txt"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (auto a : args) joined += std::string(a) + ' ';
    CAPTURE(joined);
    CHECK_THROWS_AS(parse_arguments(std::span<const std::string_view>(args.data(), args.size())),
                    usage_error);
  }
}

TEST_CASE("Tool.Cli.errors_name_the_flag_and_value") {
  try {
    parse_plan({"--zero", "7"});
    FAIL("no usage_error");
  } catch (const usage_error& e) {
    const std::string what = e.what();
    CHECK(what.find("--zero") != std::string::npos);
    CHECK(what.find('7') != std::string::npos);
  }
}

TEST_CASE("Tool.Cli.runtime_bucketing_labels_like_its_policy") {
  std::vector<sample> batch;
  for (std::int64_t t : {100, 300, 1000, 5000, 70000})
    batch.push_back(text_sample(static_cast<std::uint64_t>(t), t));
  const std::span<const sample> view(batch.data(), batch.size());

  const runtime_bucketing varlen(parse_plan({}));
  CHECK(varlen.label() == "varlen");
  CHECK(varlen.assign(view) == varlen_buckets{}.assign(view));

  const runtime_bucketing log2(parse_plan({"--bucketing", "log2"}));
  CHECK(log2.label() == "log2");
  CHECK(log2.assign(view) == log2_buckets{}.assign(view));

  const runtime_bucketing padding(parse_plan({"--bucketing", "padding-optimal:2"}));
  CHECK(padding.label() == "padding-optimal:2");
  CHECK(padding.name() == "padding-optimal");
  CHECK(padding.assign(view) == padding_optimal_buckets(2).assign(view));
}

TEST_CASE("Tool.Cli.usage_text_lists_every_flag") {
  const auto text = usage_text();
  for (const char* flag : {"--model", "--gpu ", "--nodes", "--gpus-per-node", "--gpus ", "--zero",
                           "--headroom-gib", "--sp", "--recompute", "--bucketing", "--placement",
                           "--tokens", "--context", "--seed", "--json", "--ranks", "--help"}) {
    CAPTURE(flag);
    CHECK(text.find(flag) != std::string::npos);
  }
}
