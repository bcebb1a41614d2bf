// Reliability findings on the loaders and the command-line tools (06, 10, 11): each test case is
// named Finding.<NN>_<slug>.<what_it_checks>.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/bucketing/padding_optimal.hpp"
#include "dcp/dcp.hpp"
#include "dcp/error.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/plan/json_reader.hpp"
#include "dcp/plan/match_batch.hpp"
#include "dcp/workload/loaders.hpp"

#include "../support/errors.hpp"
#include "../support/tool_runs.hpp"

namespace w = dcp::workload;
using dcp::test::contains;
using dcp::test::message_of;
using dcp::test::run_plan;
using dcp::test::run_sim;

namespace {

/// A file in the temporary folder, removed when the test ends.
class temp_file {
 public:
  temp_file(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() / ("dcp_reliability_tools_" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~temp_file() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// A stream whose every write fails, like stdout redirected to /dev/full.
class failing_buffer : public std::streambuf {
 protected:
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

std::string lengths_text(std::initializer_list<int> lengths) {
  std::string text;
  for (const int n : lengths) text += std::to_string(n) + "\n";
  return text;
}

std::string usage_message(std::initializer_list<std::string_view> args) {
  try {
    const std::vector<std::string_view> list(args);
    (void)dcp::tool::parse_sim_arguments(list);
  } catch (const dcp::tool::usage_error& e) {
    return e.what();
  }
  return "(no usage_error)";
}

}  // namespace

// ---- 06: linear-time loaders ----------------------------------------------------------------

TEST_CASE("Finding.06_linear_loaders.a_line_longer_than_the_block_is_read_whole") {
  // 1 MiB of blanks before the number: the line spans 16 blocks of 64 KiB.
  const std::string long_line = std::string(std::size_t{1} << 20, ' ') + "4096";
  std::istringstream in("7\n" + long_line + "\n# " + std::string(300000, 'x') + "\n12\n");
  const auto samples = w::read_lengths(in, "long.txt");
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].tokens == 7);
  CHECK(samples[1].tokens == 4096);
  CHECK(samples[2].tokens == 12);
  CHECK(samples[2].id == 2);
}

TEST_CASE("Finding.06_linear_loaders.errors_after_long_lines_name_the_right_line") {
  const std::string long_line = std::string(200000, ' ') + "5";
  {
    std::istringstream in("1\n" + long_line + "\n" + long_line + "\n2\nabc\n");
    const auto message = message_of([&] { (void)w::read_lengths(in, "long.txt"); });
    CAPTURE(message);
    CHECK(contains(message, "long.txt:5: 'abc' is not a positive integer"));
  }
  {
    // The long line itself is the bad one: named by its number, its text cut short.
    std::istringstream in("1\n" + std::string(300000, '9') + "\n");
    const auto message = message_of([&] { (void)w::read_lengths(in, "long.txt"); });
    CAPTURE(message.substr(0, 200));
    CHECK(contains(message, "long.txt:2: '9999"));
    CHECK(contains(message, "(300000 characters)"));
    CHECK(message.size() < 300);
  }
  {
    std::istringstream in("frames,height,width\n2,3,4\n" + std::string(150000, ' ') +
                          "5, 6 ,7\n1,2\n");
    const auto message = message_of([&] { (void)w::read_video_csv(in, "clips.csv"); });
    CAPTURE(message);
    CHECK(contains(message, "clips.csv:4: '1,2' has 2 fields"));
  }
}

TEST_CASE("Finding.06_linear_loaders.one_byte_blocks_give_the_same_lines") {
  // One byte per block: the long line is split across 1,000,000 blocks. (Searching the whole
  // pending line after every block, the old loop, makes this 5 x 10^11 byte comparisons;
  // searching only the new bytes, 10^6. The speed itself is measured by dcp_bench_loaders.)
  const std::string text = "3\n" + std::string(1'000'000, ' ') + "17\n\n8";
  std::istringstream in(text);
  std::vector<std::pair<std::int64_t, std::size_t>> lines;  // (number, length)
  w::detail::for_each_line(
      in, "tiny",
      [&](std::int64_t number, std::string_view line) { lines.emplace_back(number, line.size()); },
      1);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == std::pair<std::int64_t, std::size_t>{1, 1});
  CHECK(lines[1] == std::pair<std::int64_t, std::size_t>{2, 1'000'002});
  CHECK(lines[2] == std::pair<std::int64_t, std::size_t>{3, 0});
  CHECK(lines[3] == std::pair<std::int64_t, std::size_t>{4, 1});
}

// ---- 10: a plan is checked against its batch ------------------------------------------------

namespace {

std::vector<dcp::sample> text_batch(const std::vector<std::int64_t>& lengths) {
  std::vector<dcp::sample> batch;
  for (std::size_t i = 0; i < lengths.size(); ++i) batch.push_back(dcp::text_sample(i, lengths[i]));
  return batch;
}

// Two long samples and short ones on 16 H100: planned as more than one micro-step, whose token
// counts change when the lengths are reversed (with one micro-step holding the whole batch, as
// the same batch without the 65,536-token sample gets, any order would match).
const std::vector<std::int64_t> some_lengths = {98304, 65536, 16384, 8000, 4000, 3000,
                                                2000,  1000,  1000,  800,  600,  500,
                                                500,   400,   300,   200,  100};

dcp::analytic_cost_model two_h100_nodes() {
  return dcp::analytic_cost_model(dcp::models::llama3_8b(),
                                  dcp::hgx_cluster(2, dcp::gpus::h100_sxm()));
}

}  // namespace

TEST_CASE("Finding.10_plan_matches_batch.a_plan_for_the_reversed_batch_is_refused") {
  const auto cost = two_h100_nodes();
  const auto batch = text_batch(some_lengths);
  const auto text = dcp::to_json(dcp::DataCentricScheduler<>(cost).plan(batch));
  const auto plan = dcp::read_plan_json(text, "p.json");
  const auto stated = dcp::read_stated_tokens(text, "p.json");
  REQUIRE(stated.size() == plan.micro_steps.size());

  // The plan's own batch, in any order, passes.
  auto shuffled = batch;
  std::reverse(shuffled.begin(), shuffled.end());
  CHECK_NOTHROW(dcp::check_plan_matches_batch(plan, stated, shuffled));

  // The same ids with the lengths reversed: every id is there, the tokens are not.
  auto reversed_lengths = some_lengths;
  std::reverse(reversed_lengths.begin(), reversed_lengths.end());
  const auto reversed = text_batch(reversed_lengths);
  const auto message =
      message_of([&] { dcp::check_plan_matches_batch(plan, stated, reversed, "plan 'p.json'"); });
  CAPTURE(message);
  CHECK(contains(message, "plan 'p.json' was not made for this batch"));
  CHECK(contains(message, "micro-steps state other tokens than their samples have in the batch"));
  // The first mismatch is named with its samples and both token counts.
  CHECK(contains(message, "micro_steps[0] (sample"));
  CHECK(contains(message,
                 ": " + std::to_string(plan.micro_steps[0].tokens) + " tokens in the plan, "));
  CHECK(contains(message, " of " + std::to_string(plan.micro_steps.size()) + " micro-steps"));
  CHECK_THROWS_AS(dcp::check_plan_matches_batch(plan, stated, reversed), dcp::invalid_plan);
}

TEST_CASE("Finding.10_plan_matches_batch.ids_on_either_side_only_are_counted") {
  const auto cost = two_h100_nodes();
  const auto batch = text_batch(some_lengths);
  const auto text = dcp::to_json(dcp::DataCentricScheduler<>(cost).plan(batch));
  const auto plan = dcp::read_plan_json(text, "p.json");
  const auto stated = dcp::read_stated_tokens(text, "p.json");
  // Ids shifted by 100: no plan id is in the batch, no batch id in the plan.
  auto other = batch;
  for (auto& s : other) s.id += 100;
  const auto message = message_of([&] { dcp::check_plan_matches_batch(plan, stated, other); });
  CAPTURE(message);
  CHECK(contains(message, "17 sample ids of the plan not in the batch ("));
  CHECK(contains(message, ", ... (17 in all)"));
  CHECK(contains(
      message,
      "17 of the batch's 17 samples in no micro-step (100, 101, 102, 103, 104, ... (17 in all))"));
  // Without stated tokens (an older or hand-written plan) only the ids are compared.
  const std::vector<std::optional<std::int64_t>> none;
  auto reversed_lengths = some_lengths;
  std::reverse(reversed_lengths.begin(), reversed_lengths.end());
  CHECK_NOTHROW(dcp::check_plan_matches_batch(plan, none, text_batch(reversed_lengths)));
}

TEST_CASE("Finding.10_plan_matches_batch.dcp_sim_plan_refuses_a_plan_for_another_batch") {
  std::string forward, backward;
  for (const auto n : some_lengths) forward += std::to_string(n) + "\n";
  for (auto it = some_lengths.rbegin(); it != some_lengths.rend(); ++it)
    backward += std::to_string(*it) + "\n";
  const temp_file lengths("forward.txt", forward);
  const temp_file reversed("backward.txt", backward);
  const auto planned = run_plan({"--json", "--gpus", "16", "--gpu", "h100", lengths.path()});
  REQUIRE(planned.status == 0);
  const temp_file plan("plan.json", planned.out);

  const auto same = run_sim({"--file", lengths.path(), "--plan", plan.path(), "--nodes", "2",
                             "--gpu", "h100", "--policies", "dcp"});
  CAPTURE(same.err);
  CHECK(same.status == 0);
  CHECK(contains(same.out, "external"));

  const auto other = run_sim({"--file", reversed.path(), "--plan", plan.path(), "--nodes", "2",
                              "--gpu", "h100", "--policies", "dcp"});
  CAPTURE(other.err);
  CHECK(other.status == 1);
  CHECK(other.out.empty());
  CHECK(contains(other.err, "is for another batch than '" + reversed.path() + "'"));
  const auto first = dcp::read_plan_json(planned.out, "plan.json").micro_steps.at(0);
  CHECK(contains(other.err, "micro_steps[0] (sample"));
  CHECK(contains(other.err, ": " + std::to_string(first.tokens) + " tokens in the plan, "));
}

// ---- 11: tools ------------------------------------------------------------------------------

TEST_CASE("Finding.11_tools.dcp_sim_refuses_an_empty_file_like_dcp_plan") {
  const temp_file empty("empty.txt", "# only a comment\n\n");
  const auto sim = run_sim({"--file", empty.path(), "--nodes", "1", "--policies", "dcp"});
  CHECK(sim.status == 1);
  CHECK(contains(sim.err,
                 empty.path() + ": no sample lengths (expected one positive integer per line)"));
  CHECK(sim.out.empty());
  const auto plan = run_plan({empty.path()});
  CHECK(plan.status == 1);
  CHECK(contains(plan.err,
                 empty.path() + ": no sample lengths (expected one positive integer per line)"));
  const temp_file csv("empty.csv", "frames,height,width\n");
  const auto video = run_sim({"--file", csv.path(), "--video-csv", "--model", "stdit3-xl"});
  CHECK(video.status == 1);
  CHECK(contains(video.err, csv.path() + ": no video samples"));
}

TEST_CASE("Finding.11_tools.an_unwritable_stdout_is_an_error_in_both_tools") {
  failing_buffer buffer;
  std::ostream full(&buffer);
  std::ostringstream err;
  const std::vector<std::string_view> help = {"--help"};
  CHECK(dcp::tool::sim_main(help, full, err) == 1);
  CHECK(contains(err.str(), "dcp-sim: cannot write to standard output"));

  const temp_file lengths("write.txt", lengths_text({3000, 2000, 100}));
  const std::string path = lengths.path();
  const std::vector<std::string_view> sim_args = {"--file",     path,  "--nodes", "1",
                                                  "--policies", "dcp", "--steps", "1"};
  std::ostream full_again(&buffer);
  err.str("");
  CHECK(dcp::tool::sim_main(sim_args, full_again, err) == 1);
  CAPTURE(err.str());
  CHECK(contains(err.str(), "dcp-sim: cannot write to standard output"));

  std::istringstream in;
  std::ostream full_plan(&buffer);
  err.str("");
  const std::vector<std::string_view> plan_args = {"--gpus", "8", path};
  CHECK(dcp::tool::plan_main(plan_args, in, full_plan, err) == 1);
  CAPTURE(err.str());
  CHECK(contains(err.str(), "dcp-plan: cannot write to standard output"));
}

TEST_CASE("Finding.11_tools.control_bytes_from_input_files_are_escaped") {
  CHECK(dcp::tool::printable("a\x1b[31mb\x7f\tc") == "a\\x1b[31mb\\x7f\\x09c");
  const temp_file bad("control.txt", "100\n12\x1b[2J\n");
  const auto sim = run_sim({"--file", bad.path(), "--nodes", "1", "--policies", "dcp"});
  CAPTURE(sim.err);
  CHECK(sim.status == 1);
  CHECK(sim.err.find('\x1b') == std::string::npos);
  CHECK(contains(sim.err, ":2: '12\\x1b[2J' is not a positive integer"));
  const auto plan = run_plan({bad.path()});
  CHECK(plan.err.find('\x1b') == std::string::npos);
  CHECK(contains(plan.err, ":2: '12\\x1b[2J' is not a positive integer"));
}

TEST_CASE("Finding.11_tools.dcp_sim_reports_out_of_memory_and_guards_huge_splits") {
  std::ostringstream err;
  const int status = dcp::tool::run_tool("dcp-sim", err, []() -> int { throw std::bad_alloc(); });
  CHECK(status == 1);
  CHECK(contains(err.str(), "dcp-sim: out of memory"));
  // A split into more samples than the tools accept is refused before allocating them.
  const temp_file huge("huge.txt", "1000000000\n");
  const auto sim = run_sim({"--file", huge.path(), "--context", "1", "--nodes", "1"});
  CHECK(sim.status == 2);
  CHECK(contains(sim.err, "--context = 1 would cut the batch into more than 20000000 samples"));
  const auto drawn = run_sim({"--tokens", "1000000000", "--context", "1"});
  CHECK(drawn.status == 2);
  CHECK(contains(drawn.err,
                 "--context = 1 would cut 1000000000 tokens into more than 20000000 samples"));
}

TEST_CASE("Finding.11_tools.padding_optimal_bounds_K_and_its_table") {
  using dcp::padding_optimal_buckets;
  const auto big = message_of([] { (void)padding_optimal_buckets(1'000'000); });
  CHECK(contains(big, "buckets (K) = 1000000, must be in [1, 4096]"));
  CHECK_THROWS_AS((void)padding_optimal_buckets(0), dcp::invalid_spec);
  CHECK_NOTHROW((void)padding_optimal_buckets(padding_optimal_buckets::max_buckets));

  // 40,000 distinct lengths: K = 4096 would need 1.6 x 10^8 split points; refused, naming K,
  // the lengths and the limit.
  std::vector<dcp::sample> batch;
  for (std::uint64_t i = 0; i < 40'000; ++i)
    batch.push_back(dcp::text_sample(i, static_cast<std::int64_t>(i) + 1));
  const auto table = message_of([&] { (void)padding_optimal_buckets(4096).assign(batch); });
  CAPTURE(table);
  CHECK(contains(table, "buckets (K) = 4096 over 40000 distinct lengths"));
  CHECK(contains(table, "limit 67108864; use K <= 1677"));
  // K at least the distinct lengths: every length its own bucket, no table at all.
  std::vector<dcp::sample> few;
  for (std::uint64_t i = 0; i < 300; ++i)
    few.push_back(dcp::text_sample(i, static_cast<std::int64_t>(i % 50) * 7 + 1));
  const auto bounds = padding_optimal_buckets(4096).boundaries(few);
  CHECK(bounds.size() == 50);
  CHECK(bounds == padding_optimal_buckets(50).boundaries(few));

  // The command line stops it first.
  const std::vector<std::string_view> args = {"--bucketing", "padding-optimal:1000000"};
  std::string message;
  try {
    (void)dcp::tool::parse_arguments(args);
  } catch (const dcp::tool::usage_error& e) {
    message = e.what();
  }
  CHECK(contains(message, "--bucketing padding-optimal:K = 1000000, must be in [1, 4096]"));
}

TEST_CASE("Finding.11_tools.seed_beyond_64_bits_is_out_of_range") {
  const auto message = usage_message({"--seed", "18446744073709551616"});
  CHECK(contains(
      message,
      "--seed = 18446744073709551616 is out of range, must be in [0, 18446744073709551615]"));
  CHECK(contains(usage_message({"--seed", "-1"}),
                 "--seed = -1 is out of range, must be in [0, 18446744073709551615]"));
  CHECK(dcp::tool::parse_sim_arguments(
            std::vector<std::string_view>{"--seed", "18446744073709551615"})
            .seed == 18446744073709551615ull);
  const auto plan = run_plan({"--seed", "18446744073709551616"});
  CHECK(plan.status == 2);
  CHECK(contains(plan.err, "is out of range, must be in [0, 18446744073709551615]"));
  // In the type's range but outside the flag's: the limit, as before.
  CHECK(contains(usage_message({"--steps", "0"}), "--steps = 0, must be in [1, 100000]"));
  CHECK(contains(usage_message({"--steps", "99999999999999999999"}),
                 "--steps = 99999999999999999999 is out of range, must be in [1, 100000]"));
}

namespace {

/// Splits a table line at runs of two or more blanks: the cells, if no two ran together.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t at = line.find_first_not_of(' ');
  while (at != std::string::npos) {
    auto end = line.find("  ", at);
    cells.push_back(line.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return cells;
}

}  // namespace

TEST_CASE("Finding.11_tools.summary_tables_size_columns_to_content") {
  // dcp-sim's table with the figures of a run at 10^6 samples.
  dcp::evaluation::scenario sc;
  sc.name = "big";
  sc.model = dcp::models::llama3_8b();
  sc.cluster = dcp::hgx_cluster(128, dcp::gpus::h200_sxm());
  dcp::evaluation::scenario_result r;
  r.name = "big";
  dcp::evaluation::policy_result p;
  p.name = "megatron-dcp";
  p.steps.resize(1);
  p.steps[0].tokens = 1'000'000'000'000;
  p.median_step_s = 123456.789;
  p.tokens_per_s = 12'345'678'901'234.0;
  p.speedup_vs_best_static = 1234.5;
  p.speedup_vs_paper_baseline = 12345.6;
  p.gap_to_bound = 1234.5;
  p.idle_fraction = 0.5;
  p.peak_bytes = 1e15;
  p.oom_events = 1'000'000;
  p.planning_ms = 123'456'789.0;
  r.policies.push_back(p);
  std::ostringstream os;
  dcp::tool::sim_detail::print_table(os, sc, r);
  std::istringstream lines(os.str());
  std::string header, row;
  std::getline(lines, header);  // "scenario ..."
  std::getline(lines, header);
  std::getline(lines, row);
  CAPTURE(os.str());
  CHECK(cells_of(header).size() == 13);
  CHECK(cells_of(row).size() == 13);

  // dcp-plan's degree table with 10^6 samples and 10^12 tokens in one degree.
  dcp::tool::text_table table({"degree", "micro-steps", "samples", "tokens"}, {});
  table.add_row({"1", "999,999", "1,000,000", "1,000,000,000,000"});
  table.add_row({"2048", "1", "1", "1"});
  std::ostringstream plan_table;
  table.print(plan_table, "   ");
  std::istringstream plan_lines(plan_table.str());
  for (std::string line; std::getline(plan_lines, line);) {
    CAPTURE(line);
    CHECK(cells_of(line).size() == 4);
  }
}

TEST_CASE("Tools.Sim.a_run_of_a_few_policies_reproduces_their_rows_of_the_full_run") {
  // Each policy's simulated noise mixes in its place in the full list, so `--policies` picks rows
  // of the full run rather than drawing new noise; a policy named twice gets a second draw.
  const std::vector<std::string_view> args{"--model", "llama3-8b", "--workload", "wikipedia",
                                           "--nodes", "1",         "--tokens",   "250000",
                                           "--steps", "2"};
  const auto options = dcp::tool::parse_sim_arguments(args);
  const auto scenarios = dcp::tool::sim_detail::make_scenarios(options);
  REQUIRE(!scenarios.empty());
  const auto& sc = scenarios.front();
  const auto full = dcp::evaluation::run(sc, dcp::tool::sim_detail::make_policies(sc, {}));
  const auto few = dcp::evaluation::run(
      sc, dcp::tool::sim_detail::make_policies(sc, {"flexsp", "dcp-calibrated", "dcp", "flexsp"}));
  const auto row = [&](const std::string& name) {
    for (const auto& p : full.policies)
      if (p.name == name) return p;
    FAIL("no row " << name);
    return full.policies.front();
  };
  REQUIRE(few.policies.size() == 4);
  for (std::size_t k = 0; k < 3; ++k) {
    const auto& p = few.policies[k];
    CAPTURE(p.name);
    CHECK(p.tokens_per_s == row(p.name).tokens_per_s);
    CHECK(p.noise_free_tokens_per_s == row(p.name).noise_free_tokens_per_s);
  }
  // The second flexsp: the same plans, other noise.
  CHECK(few.policies[3].noise_free_tokens_per_s == few.policies[0].noise_free_tokens_per_s);
  CHECK(few.policies[3].tokens_per_s != few.policies[0].tokens_per_s);
}

TEST_CASE("Tools.Sim.a_policys_noise_follows_its_name_not_its_place_in_the_list") {
  // The same scheduler under two names, in either order and alone: each name keeps its row, and
  // the two names draw different noise over the same plans.
  const std::vector<std::string_view> args{"--model", "llama3-8b", "--workload", "wikipedia",
                                           "--nodes", "1",         "--tokens",   "250000",
                                           "--steps", "2"};
  const auto options = dcp::tool::parse_sim_arguments(args);
  const auto sc = dcp::tool::sim_detail::make_scenarios(options).front();
  const dcp::analytic_cost_model cost(sc.model, sc.cluster, sc.training);
  const auto entry = [&](std::string name) {
    const auto scheduler = std::make_shared<dcp::DataCentricScheduler<>>(cost);
    return dcp::evaluation::policy_entry{
        std::move(name),
        [scheduler](std::span<const dcp::sample> b) { return scheduler->plan(b); }};
  };
  const auto alone = dcp::evaluation::run(sc, {entry("b")});
  const auto ab = dcp::evaluation::run(sc, {entry("a"), entry("b")});
  const auto ba = dcp::evaluation::run(sc, {entry("b"), entry("a")});
  CHECK(ab.policies[1].tokens_per_s == alone.policies[0].tokens_per_s);
  CHECK(ba.policies[0].tokens_per_s == alone.policies[0].tokens_per_s);
  CHECK(ab.policies[0].tokens_per_s == ba.policies[1].tokens_per_s);
  CHECK(ab.policies[0].noise_free_tokens_per_s == ab.policies[1].noise_free_tokens_per_s);
  CHECK(ab.policies[0].tokens_per_s != ab.policies[1].tokens_per_s);
  CHECK(dcp::evaluation::noise_seed(7, "b") == dcp::evaluation::noise_seed(7, "b", 0));
  CHECK(dcp::evaluation::noise_seed(7, "b", 1) != dcp::evaluation::noise_seed(7, "b", 0));
}

// ---- 36h: limits and messages ----------------------------------------------------------------

TEST_CASE("Finding.36h_limits.a_lengths_file_whose_total_passes_int64_is_named_not_overflowed") {
  const temp_file huge("huge.txt", "9223372036854775000\n9223372036854775000\n");
  const auto sim = run_sim({"--file", huge.path(), "--nodes", "1", "--policies", "dcp"});
  CHECK(sim.status == 1);
  CHECK(contains(sim.err, "9223372036854775807"));
  CHECK(contains(sim.err, "sample 1 (index 1)"));
}

TEST_CASE("Finding.36h_limits.a_directory_as_input_names_the_directory") {
  const auto folder = std::filesystem::temp_directory_path().string();
  const auto sim = run_sim({"--file", folder, "--nodes", "1", "--policies", "dcp"});
  CHECK(sim.status == 1);
  CHECK(contains(sim.err, folder + ": is a directory, not a file"));
  const auto plan_file = run_sim({"--plan", folder, "--nodes", "1"});
  CHECK(plan_file.status == 1);
  CHECK(contains(plan_file.err, folder + ": is a directory, not a file"));
}

TEST_CASE("Finding.36h_limits.nul_bytes_and_a_byte_order_mark_are_shown_in_messages") {
  const temp_file nul("nul.txt", std::string("12\n3\0"
                                             "4x\n",
                                             7));
  const auto sim = run_sim({"--file", nul.path(), "--nodes", "1", "--policies", "dcp"});
  CHECK(sim.status == 1);
  CHECK(contains(sim.err, "'3\\x004x' is not a positive integer"));
  const temp_file bom("bom.txt",
                      "\xEF\xBB\xBF"
                      "12\n");
  const auto with_bom = run_sim({"--file", bom.path(), "--nodes", "1", "--policies", "dcp"});
  CHECK(with_bom.status == 1);
  CHECK(contains(with_bom.err, "'\\ufeff12' is not a positive integer"));
  CHECK(dcp::workload::detail::visible("a\tb\x7f") == "a\\x09b\\x7f");
}

TEST_CASE("Finding.36h_limits.a_file_of_too_many_samples_is_refused_at_its_line") {
  // Not 67M lines on disk: the check the readers make before every sample.
  const auto limit = dcp::workload::detail::max_samples_per_file;
  CHECK_NOTHROW(dcp::workload::detail::check_sample_count(limit - 1, "big.txt", 9));
  const auto msg =
      message_of([&] { dcp::workload::detail::check_sample_count(limit, "big.txt", 70000000); });
  CHECK(contains(msg, "big.txt:70000000: more than 67108864 samples"));
}

TEST_CASE("Finding.36h_limits.empty_policy_lists_and_video_on_a_text_model_are_usage_errors") {
  const auto empty = run_sim({"--policies", ""});
  CHECK(empty.status == 2);
  CHECK(contains(empty.err, "--policies: empty list"));
  const temp_file csv("grid.csv", "4,8,8\n");
  const auto video = run_sim({"--file", csv.path(), "--video-csv"});
  CHECK(video.status == 2);
  CHECK(contains(video.err, "--model llama3-8b (the default) is a text model"));
}

TEST_CASE("Finding.36h_limits.a_ratio_to_a_policy_that_did_not_run_reads_a_dash") {
  const auto sim = run_sim({"--model", "llama3-8b", "--nodes", "1", "--tokens", "200000", "--steps",
                            "1", "--policies", "dcp,static"});
  REQUIRE(sim.status == 0);
  CHECK(!contains(sim.out, "0.00x"));
}
