// Findings 06-08 of the reliability review, the JSON plan reader's part: positions tracked as
// the reader goes (linear time), strict types and keys, and validate_plan free of overflow.

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/plan/json_reader.hpp"

#include "../support/errors.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

using members = std::vector<std::pair<std::string, std::string>>;  // key, JSON value as written

std::string object_text(const members& object) {
  std::string out = "{";
  for (std::size_t i = 0; i < object.size(); ++i)
    out += (i ? ", \"" : "\"") + object[i].first + "\": " + object[i].second;
  return out + "}";
}

void set(members& object, const std::string& key, const std::string& raw) {
  for (auto& [k, v] : object)
    if (k == key) {
      v = raw;
      return;
    }
  object.emplace_back(key, raw);
}

/// A small valid plan document with every field of docs/plan-format.md, one top-level member
/// per line and one micro-step per line, as members that a test can change.
struct plan_document {
  members top = {{"format", "\"dcp.step_plan/1\""},
                 {"policy", "\"balanced\""},
                 {"gpus", "4"},
                 {"gpus_per_node", "4"},
                 {"makespan_seconds", "1.5"},
                 {"lower_bound_seconds", "1.25"},
                 {"gap", "0.2"},
                 {"memory_budget_bytes", "80000000000"},
                 {"gradient_sync_seconds", "0.1"},
                 {"best_static_seconds", "1.75"},
                 {"best_static_degree", "2"},
                 {"fingerprint", "\"0123456789abcdef\""},
                 {"total_tokens", "300"},
                 {"idle_fraction", "0.1"},
                 {"ranks", "[[0], [0], [1], [1]]"}};
  std::vector<members> steps = {step("0", "0", "[0, 1]", "200", "0.6666666666666666"),
                                step("1", "2", "[2]", "100", "0.3333333333333333")};

  static members step(const std::string& sequence, const std::string& first_rank,
                      const std::string& ids, const std::string& units, const std::string& scale) {
    return {{"sequence", sequence},
            {"first_rank", first_rank},
            {"degree", "2"},
            {"sp", "\"ulysses\""},
            {"recompute", "{\"layers\": 1, \"selective\": false}"},
            {"sample_ids", ids},
            {"tokens", units},
            {"loss_units", units},
            {"loss_scale", scale},
            {"start_seconds", "0"},
            {"predicted_seconds", "1.5"},
            {"predicted_peak_bytes", "70000000000"}};
  }

  std::string text() const {
    std::string out = "{\n";
    for (const auto& [key, raw] : top) out += "  \"" + key + "\": " + raw + ",\n";
    for (const auto& member : top)
      if (member.first == "micro_steps")
        return out.substr(0, out.size() - 2) + "\n}\n";  // set by the test
    out += "  \"micro_steps\": [\n";
    for (std::size_t n = 0; n < steps.size(); ++n)
      out += (n ? ",\n    " : "    ") + object_text(steps[n]);
    return out + "\n  ]\n}\n";
  }
};

const std::vector<sample> three_samples = {text_sample(0, 100), text_sample(1, 100),
                                           text_sample(2, 100)};

std::string read_error(const std::string& text) {
  return message_of([&] { (void)read_plan_json(text, "x.json"); });
}

/// 1 + the newlines before `at`, and the byte column: what the reader must report.
std::pair<std::size_t, std::size_t> position_of(const std::string& text, std::size_t at) {
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < at; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return {line, at - line_start + 1};
}

/// A plan of `count` one-GPU micro-steps on 8 GPUs, one sample each, made without a planner.
step_plan many_step_plan(std::size_t count) {
  step_plan plan;
  plan.gpus = 8;
  plan.gpus_per_node = 8;
  plan.policy = "test";
  for (std::size_t n = 0; n < count; ++n) {
    micro_step m;
    m.sequence = static_cast<std::int64_t>(n);
    m.first_rank = static_cast<std::int64_t>(n % 8);
    m.sample_ids = {n};
    m.tokens = 100;
    m.loss_units = 100;
    m.loss_scale = 1.0 / static_cast<double>(count);
    m.start_seconds = 0.5 * static_cast<double>(n / 8);
    m.seconds = 0.5;
    plan.micro_steps.push_back(m);
  }
  plan.makespan_seconds = 0.5 * static_cast<double>((count + 7) / 8);
  return plan;
}

}  // namespace

TEST_CASE("Finding.06_linear_time_readers.positions_stay_exact_deep_inside_a_large_document") {
  const auto plan = many_step_plan(4000);
  for (const bool pretty : {true, false}) {
    for (const bool crlf : {false, true}) {
      CAPTURE(pretty);
      CAPTURE(crlf);
      std::string text = to_json(plan, {.ranks = true, .pretty = pretty});
      if (crlf) {
        std::string with_cr;
        for (const char c : text) {
          if (c == '\n') with_cr += '\r';
          with_cr += c;
        }
        text = with_cr;
      }
      REQUIRE(read_plan_json(text, "x.json").micro_steps.size() == 4000);

      // A value of the wrong type in micro-step 3,712: the field's line and column.
      const auto step = text.find("{\"sequence\":" + std::string(pretty ? " " : "") + "3712,");
      REQUIRE(step != std::string::npos);
      const std::string degree_key = pretty ? "\"degree\": " : "\"degree\":";
      const auto degree = text.find(degree_key, step) + degree_key.size();
      std::string wrong = text;
      wrong.replace(degree, 1, "\"one\"");
      const auto [line, column] = position_of(wrong, degree);
      CHECK(line == (pretty ? 3712 + 17 : 1));
      const auto msg = read_error(wrong);
      CHECK(contains(msg, "x.json.micro_steps[3712].degree (line " + std::to_string(line) +
                              ", column " + std::to_string(column) +
                              "): expected an integer, found \"one\""));

      // A syntax error there: "source:line:column:" and the path.
      std::string broken = text;
      const auto comma = text.find(',', step);
      broken[comma] = ';';
      const auto [bad_line, bad_column] = position_of(broken, comma);
      const auto syntax = read_error(broken);
      CHECK(contains(
          syntax, "x.json:" + std::to_string(bad_line) + ":" + std::to_string(bad_column) + ": "));
      CHECK(contains(syntax, "found ';'"));
      CHECK(contains(syntax, "(in x.json.micro_steps[3712])"));

      // The last line of the document: an unexpected end.
      const auto cut = text.substr(0, text.rfind(']') + 1);
      const auto [end_line, end_column] = position_of(cut, cut.size());
      CHECK(contains(read_error(cut), "x.json:" + std::to_string(end_line) + ":" +
                                          std::to_string(end_column) +
                                          ": unexpected end of input"));
    }
  }
}

TEST_CASE("Finding.07_strict_json.every_field_of_the_wrong_type_is_named_with_its_value") {
  const plan_document valid;
  {
    auto plan = read_plan_json(valid.text(), "x.json");  // the baseline is a valid plan
    validate_plan(plan, three_samples, 4);
    CHECK(plan.best_static_degree == 2);
    CHECK(plan.micro_steps[0].loss_units == 200);
  }
  struct wrong_field {
    int step;  // -1: top level
    const char* key;
    const char* raw;
    const char* path;
    const char* shown;
  };
  const wrong_field cases[] = {
      {-1, "format", "7", "x.json.format", "found 7"},
      {-1, "policy", "42", "x.json.policy", "expected a string, found 42"},
      {-1, "gpus", "\"4\"", "x.json.gpus", "found \"4\""},
      {-1, "gpus_per_node", "true", "x.json.gpus_per_node", "found true"},
      {-1, "makespan_seconds", "\"1.5\"", "x.json.makespan_seconds", "found \"1.5\""},
      {-1, "lower_bound_seconds", "null", "x.json.lower_bound_seconds", "found null"},
      {-1, "gap", "[]", "x.json.gap", "found an array of 0 values"},
      {-1, "memory_budget_bytes", "{}", "x.json.memory_budget_bytes",
       "found an object of 0 members"},
      {-1, "gradient_sync_seconds", "false", "x.json.gradient_sync_seconds", "found false"},
      {-1, "best_static_seconds", "\"fast\"", "x.json.best_static_seconds", "found \"fast\""},
      {-1, "best_static_degree", "2.5", "x.json.best_static_degree", "2.5 is not an integer"},
      {-1, "fingerprint", "123", "x.json.fingerprint", "expected a string, found 123"},
      {-1, "fingerprint", "\"12ab\"", "x.json.fingerprint",
       "\"12ab\", expected 16 lowercase hex digits"},
      {-1, "total_tokens", "\"300\"", "x.json.total_tokens", "found \"300\""},
      {-1, "idle_fraction", "true", "x.json.idle_fraction", "found true"},
      {-1, "ranks", "5", "x.json.ranks", "expected an array, found 5"},
      {-1, "ranks", "[[0], 1, [1], [1]]", "x.json.ranks[1]", "expected an array, found 1"},
      {-1, "ranks", "[[0], [0], [\"a\"], [1]]", "x.json.ranks[2][0]", "found \"a\""},
      {-1, "micro_steps", "{}", "x.json.micro_steps", "expected an array, found an object"},
      {-1, "micro_steps", "[5]", "x.json.micro_steps[0]", "expected an object, found 5"},
      {0, "sequence", "\"0\"", "x.json.micro_steps[0].sequence", "found \"0\""},
      {0, "first_rank", "null", "x.json.micro_steps[0].first_rank", "found null"},
      {1, "degree", "\"two\"", "x.json.micro_steps[1].degree", "found \"two\""},
      {0, "sp", "42", "x.json.micro_steps[0].sp", "expected a string, found 42"},
      {0, "sp", "\"tree\"", "x.json.micro_steps[0].sp",
       "\"tree\", expected \"ulysses\", \"ring\" or \"hybrid\""},
      {0, "recompute", "5", "x.json.micro_steps[0].recompute", "expected an object, found 5"},
      {0, "recompute", "{\"layers\": \"1\"}", "x.json.micro_steps[0].recompute.layers",
       "found \"1\""},
      {1, "recompute", "{\"layers\": 1, \"selective\": \"yes\"}",
       "x.json.micro_steps[1].recompute.selective", "expected true or false, found \"yes\""},
      {0, "sample_ids", "\"0,1\"", "x.json.micro_steps[0].sample_ids",
       "expected an array, found \"0,1\""},
      {0, "sample_ids", "[0, \"1\"]", "x.json.micro_steps[0].sample_ids[1]", "found \"1\""},
      {0, "tokens", "3.5", "x.json.micro_steps[0].tokens", "3.5 is not an integer"},
      {0, "loss_units", "\"200\"", "x.json.micro_steps[0].loss_units", "found \"200\""},
      {0, "loss_scale", "\"0.5\"", "x.json.micro_steps[0].loss_scale", "found \"0.5\""},
      {0, "start_seconds", "null", "x.json.micro_steps[0].start_seconds", "found null"},
      {1, "predicted_seconds", "[1.5]", "x.json.micro_steps[1].predicted_seconds",
       "found an array of 1 values"},
      {0, "predicted_peak_bytes", "\"7e10\"", "x.json.micro_steps[0].predicted_peak_bytes",
       "found \"7e10\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.raw);
    plan_document doc;
    if (c.step < 0) {
      if (std::string(c.key) == "micro_steps") doc.steps.clear();
      set(doc.top, c.key, c.raw);
    } else {
      set(doc.steps[static_cast<std::size_t>(c.step)], c.key, c.raw);
    }
    const auto msg = read_error(doc.text());
    CAPTURE(msg);
    CHECK(contains(msg, std::string(c.path) + " (line "));
    CHECK(contains(msg, c.shown));
  }
}

TEST_CASE("Finding.07_strict_json.duplicate_keys_are_named_with_both_values") {
  {
    plan_document doc;
    doc.top.emplace_back("gpus", "8");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg,
                   "x.json:17:11: duplicate key: x.json.gpus = 8 repeats the member at line 4, "
                   "column 11 (= 4)"));
  }
  {
    plan_document doc;
    doc.steps[1].emplace_back("degree", "4");
    const auto msg = read_error(doc.text());
    CHECK(contains(
        msg, "duplicate key: x.json.micro_steps[1].degree = 4 repeats the member at line 19"));
    CHECK(contains(msg, "(= 2)"));
  }
  {
    plan_document doc;
    set(doc.steps[0], "recompute", "{\"layers\": 1, \"selective\": false, \"layers\": 0}");
    CHECK(contains(read_error(doc.text()),
                   "duplicate key: x.json.micro_steps[0].recompute.layers = 0"));
  }
  {  // an object too large for the pairwise check: found by the sort when it closes
    plan_document doc;
    for (int i = 0; i < 100; ++i)
      doc.top.emplace_back("extra_" + std::to_string(i), std::to_string(i));
    doc.top.emplace_back("extra_37", "\"again\"");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg,
                   "duplicate key: x.json.extra_37 = \"again\" repeats the member at line 54, "
                   "column 15 (= 37)"));
  }
  // Members of different objects may share names; unknown members are ignored.
  plan_document doc;
  doc.top.emplace_back("comment", "{\"gpus\": 1, \"sequence\": 2}");
  CHECK(read_plan_json(doc.text(), "x.json").gpus == 4);
}

TEST_CASE("Finding.07_strict_json.utf8_byte_order_mark_is_skipped") {
  const plan_document doc;
  const auto with_bom = "\xEF\xBB\xBF" + doc.text();
  const auto plan = read_plan_json(with_bom, "x.json");
  CHECK(plan.fingerprint == read_plan_json(doc.text(), "x.json").fingerprint);
  CHECK(plan.gpus == 4);
  // Columns on the first line count from after the mark.
  CHECK(contains(read_error("\xEF\xBB\xBF{\"format\": 5}"), "x.json.format (line 1, column 12)"));
  // Only at the very start: elsewhere it is a stray byte.
  CHECK(contains(read_error(" \xEF\xBB\xBF" + doc.text()),
                 "x.json:1:2: expected a value, found byte 0xef"));
  CHECK(contains(read_error("\xEF\xBB\xBF\xEF\xBB\xBF" + doc.text()), "found byte 0xef"));
}

TEST_CASE("Finding.07_strict_json.long_values_are_cut_in_messages") {
  const std::string huge_number = "1" + std::string(5000, '0');
  const std::string huge_text(10000, 'a');
  {
    plan_document doc;
    set(doc.top, "gpus", huge_number);
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "x.json.gpus"));
    CHECK(contains(msg, "... (5001 bytes) is outside the range of a 64-bit integer"));
    CHECK(msg.size() < 300);
  }
  {
    plan_document doc;
    set(doc.top, "format", "\"" + huge_text + "\"");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "... (10000 bytes)"));
    CHECK(msg.size() < 300);
  }
  {
    plan_document doc;
    set(doc.steps[0], "sp", "\"" + huge_text + "\"");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "x.json.micro_steps[0].sp"));
    CHECK(contains(msg, "... (10000 bytes)"));
    CHECK(msg.size() < 300);
  }
  {
    plan_document doc;
    set(doc.steps[0], "loss_scale", "0." + huge_number + "e99999");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "x.json.micro_steps[0].loss_scale"));
    CHECK(msg.size() < 400);
  }
  {  // a long key, duplicated: the path is cut too
    plan_document doc;
    doc.top.emplace_back(huge_text, "1");
    doc.top.emplace_back(huge_text, "2");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "duplicate key"));
    CHECK(msg.size() < 400);
  }
  // Control characters in a quoted value are escaped, not printed raw.
  plan_document doc;
  set(doc.steps[0], "sp", "\"ul\\nysses\"");
  CHECK(contains(read_error(doc.text()), "\"ul\\x0aysses\""));
}

TEST_CASE("Finding.07_strict_json.malformed_text_is_rejected_where_it_is") {
  auto with_policy = [](const std::string& raw) {
    plan_document doc;
    set(doc.top, "policy", raw);
    return doc.text();
  };
  CHECK(contains(read_error(with_policy("\"\\ud800\"")), "x.json:3:"));
  CHECK(contains(read_error(with_policy("\"\\ud800\"")), "high surrogate"));
  CHECK(contains(read_error(with_policy("\"\\udc00x\"")), "low surrogate"));
  CHECK(contains(read_error(with_policy("\"caf\xff\"")), "x.json:3:17: invalid UTF-8 (byte 0xff)"));
  CHECK(contains(read_error(with_policy("\"\xc0\xaf\"")), "invalid UTF-8"));      // overlong '/'
  CHECK(contains(read_error(with_policy("\"\xed\xa0\x80\"")), "invalid UTF-8"));  // a surrogate
  CHECK(contains(read_error(with_policy("\"\xc3\"")), "invalid UTF-8"));          // cut short
  CHECK(contains(read_error(with_policy("\"\\x\"")), "unknown escape: backslash followed by 'x'"));
  CHECK(contains(read_error(with_policy("\"\\u12g4\"")), "expected 4 hex digits, found 'g'"));
  CHECK(read_plan_json(with_policy("\"\\ud83d\\ude00 caf\xc3\xa9\""), "x.json").policy ==
        "\xF0\x9F\x98\x80 caf\xc3\xa9");
  plan_document doc;
  set(doc.top, "gpus", "04");
  CHECK(contains(read_error(doc.text()), "JSON has no leading zeros"));
  set(doc.top, "gpus", "-");
  CHECK(contains(read_error(doc.text()), "expected a digit at the start of the number"));
  set(doc.top, "gpus", "4.");
  CHECK(contains(read_error(doc.text()), "expected a digit after the decimal point"));
  set(doc.top, "gpus", "+4");
  CHECK(contains(read_error(doc.text()), "x.json:4:11: expected a value, found '+'"));
}

TEST_CASE("Finding.08_overflow_in_validate_plan.first_rank_near_int64_max_is_outside_the_cluster") {
  plan_document doc;
  doc.steps = {plan_document::step("0", "9223372036854775806", "[0, 1, 2]", "300", "1")};
  set(doc.top, "ranks", "[[], [], [], []]");
  auto plan = read_plan_json(doc.text(), "x.json");
  REQUIRE(plan.micro_steps[0].first_rank == 9223372036854775806);
  const auto msg = message_of([&] { validate_plan(plan, three_samples, 4); });
  CHECK(contains(msg,
                 "micro_steps[0].first_rank = 9223372036854775806 with degree 2 names ranks up to "
                 "9223372036854775807, outside the cluster's ranks 0..3"));

  // The same in code, where the last rank is not an int64 either.
  plan.micro_steps[0].config.degree = 1;
  plan.micro_steps[0].first_rank = std::numeric_limits<std::int64_t>::max();
  CHECK(contains(
      message_of([&] { validate_plan(plan, three_samples, 4); }),
      "first_rank = 9223372036854775807 with degree 1 names ranks up to 9223372036854775807,"));
  plan.micro_steps[0].config.degree = 2;
  plan.micro_steps[0].first_rank = std::numeric_limits<std::int64_t>::max();
  CHECK(contains(message_of([&] { validate_plan(plan, three_samples, 4); }),
                 "names ranks up to 9223372036854775807 + 1, outside"));
  // A degree so large that first_rank + degree wraps.
  plan.micro_steps[0].config.degree = std::int64_t{1} << 62;
  plan.micro_steps[0].first_rank = std::int64_t{1} << 62;
  CHECK(contains(message_of([&] { validate_plan(plan, three_samples, 4); }),
                 "micro_steps[0].degree = 4611686018427387904, more than the cluster's 4 GPUs"));
  plan.micro_steps[0].config.degree = 4;
  plan.micro_steps[0].first_rank = std::numeric_limits<std::int64_t>::min();
  CHECK(contains(message_of([&] { validate_plan(plan, three_samples, 4); }),
                 "first_rank = -9223372036854775808 with degree 4"));
  CHECK(contains(message_of([&] { validate_plan(plan, three_samples, 0); }), "gpus = 0"));
  CHECK(contains(message_of([&] { validate_plan(plan, three_samples, -4); }), "gpus = -4"));
  plan.micro_steps[0].first_rank = 0;
  validate_plan(plan, three_samples, 4);  // and a group that fits is fine
}

TEST_CASE("Finding.08_overflow_in_validate_plan.integers_beyond_their_type_are_named") {
  struct case_ {
    int step;
    const char* key;
    const char* raw;
    const char* path;
    const char* shown;
  };
  const case_ cases[] = {
      {-1, "gpus", "9223372036854775808", "x.json.gpus",
       "9223372036854775808 is outside the range of a 64-bit integer "
       "(-9223372036854775808..9223372036854775807)"},
      {0, "first_rank", "9223372036854775808", "x.json.micro_steps[0].first_rank",
       "outside the range of a 64-bit integer"},
      {0, "sequence", "-9223372036854775809", "x.json.micro_steps[0].sequence",
       "outside the range of a 64-bit integer"},
      {0, "degree", "18446744073709551618", "x.json.micro_steps[0].degree",
       "outside the range of a 64-bit integer"},
      {0, "sample_ids", "[0, 18446744073709551616]", "x.json.micro_steps[0].sample_ids[1]",
       "18446744073709551616 is outside the range of an unsigned 64-bit integer "
       "(0..18446744073709551615)"},
      {0, "recompute", "{\"layers\": 2147483648}", "x.json.micro_steps[0].recompute.layers",
       "outside the range of a 32-bit integer (-2147483648..2147483647)"},
      {1, "tokens", "99999999999999999999999", "x.json.micro_steps[1].tokens", "outside the range"},
      {1, "loss_units", "-99999999999999999999999", "x.json.micro_steps[1].loss_units",
       "outside the range"},
      {-1, "total_tokens", "9223372036854775808", "x.json.total_tokens", "outside the range"},
      {-1, "best_static_degree", "9223372036854775808", "x.json.best_static_degree",
       "outside the range"},
      {-1, "ranks", "[[0], [0], [1], [9223372036854775808]]", "x.json.ranks[3][0]",
       "outside the range"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.raw);
    plan_document doc;
    if (c.step < 0)
      set(doc.top, c.key, c.raw);
    else
      set(doc.steps[static_cast<std::size_t>(c.step)], c.key, c.raw);
    const auto msg = read_error(doc.text());
    CAPTURE(msg);
    CHECK(contains(msg, std::string(c.path) + " (line "));
    CHECK(contains(msg, c.shown));
  }
  // The largest values that fit are read exactly.
  plan_document doc;
  set(doc.steps[0], "sample_ids", "[0, 18446744073709551615]");
  set(doc.steps[1], "sequence", "9223372036854775807");
  const auto plan = read_plan_json(doc.text(), "x.json");
  CHECK(plan.micro_steps[0].sample_ids[1] == std::numeric_limits<std::uint64_t>::max());
  CHECK(plan.micro_steps[1].sequence == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("Finding.08_overflow_in_validate_plan.numbers_beyond_a_double_are_named") {
  const std::pair<const char*, const char*> top_level[] = {{"makespan_seconds", "1e400"},
                                                           {"lower_bound_seconds", "-1e400"},
                                                           {"gap", "1e999"},
                                                           {"idle_fraction", "1e-400"},
                                                           {"memory_budget_bytes", "2E+308"}};
  for (const auto& member : top_level) {
    const std::string key = member.first, raw = member.second;  // no structured bindings: CAPTURE
    CAPTURE(key);
    plan_document doc;
    set(doc.top, key, raw);
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "x.json." + std::string(key) + " (line "));
    CHECK(contains(msg, std::string(raw) + " is not representable as a double"));
  }
  for (const char* key :
       {"loss_scale", "start_seconds", "predicted_seconds", "predicted_peak_bytes"}) {
    CAPTURE(key);
    plan_document doc;
    set(doc.steps[1], key, "1e400");
    const auto msg = read_error(doc.text());
    CHECK(contains(msg, "x.json.micro_steps[1]." + std::string(key) + " (line 19, column "));
    CHECK(contains(msg, "1e400 is not representable as a double"));
  }
}

TEST_CASE("Finding.08_overflow_in_validate_plan.negative_and_fractional_integers_are_rejected") {
  struct case_ {
    int step;
    const char* key;
    const char* raw;
    const char* shown;
  };
  const case_ cases[] = {
      {-1, "gpus", "0", "x.json.gpus (line 4, column 11): 0, must be >= 1"},
      {-1, "gpus", "-4", "x.json.gpus (line 4, column 11): -4, must be >= 1"},
      {-1, "gpus", "4.0", "x.json.gpus (line 4, column 11): 4.0 is not an integer"},
      {-1, "gpus_per_node", "0", "x.json.gpus_per_node (line 5, column 20): 0, must be >= 1"},
      {-1, "best_static_degree", "-2", "x.json.best_static_degree"},
      {-1, "total_tokens", "-1", "x.json.total_tokens"},
      {-1, "makespan_seconds", "-0.5",
       "x.json.makespan_seconds (line 6, column 23): -0.5, must be >= 0"},
      {0, "sequence", "-1",
       "x.json.micro_steps[0].sequence (line 18, column 18): -1, must be >= 0"},
      {0, "first_rank", "-2",
       "x.json.micro_steps[0].first_rank (line 18, column 35): -2, must be >= 0"},
      {0, "degree", "0", "x.json.micro_steps[0].degree (line 18, column 48): 0, must be >= 1"},
      {0, "degree", "2.0",
       "x.json.micro_steps[0].degree (line 18, column 48): 2.0 is not an integer"},
      {0, "degree", "2e0", "2e0 is not an integer"},
      {0, "sample_ids", "[0, -1]", "x.json.micro_steps[0].sample_ids[1]"},
      {0, "sample_ids", "[0, 1.5]", "1.5 is not an integer"},
      {0, "tokens", "1e2", "x.json.micro_steps[0].tokens"},
      {0, "loss_units", "-200", "x.json.micro_steps[0].loss_units"},
      {0, "recompute", "{\"layers\": -1}", "x.json.micro_steps[0].recompute.layers"},
      {0, "loss_scale", "-0.5", "x.json.micro_steps[0].loss_scale"},
      {0, "start_seconds", "-1", "x.json.micro_steps[0].start_seconds"},
      {0, "predicted_seconds", "-1e-9", "x.json.micro_steps[0].predicted_seconds"},
      {0, "predicted_peak_bytes", "-1", "x.json.micro_steps[0].predicted_peak_bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.raw);
    plan_document doc;
    if (c.step < 0)
      set(doc.top, c.key, c.raw);
    else
      set(doc.steps[static_cast<std::size_t>(c.step)], c.key, c.raw);
    const auto msg = read_error(doc.text());
    CAPTURE(msg);
    CHECK(contains(msg, c.shown));
  }
  CHECK(read_error(plan_document().text()) == "(no dcp::error thrown)");
}

TEST_CASE(
    "Finding.08_overflow_in_validate_plan.non_finite_or_negative_times_and_scales_are_named") {
  const auto valid = read_plan_json(plan_document().text(), "x.json");
  struct case_ {
    void (*change)(step_plan&);
    const char* shown;
  };
  const case_ cases[] = {
      {[](step_plan& p) {
         p.micro_steps[1].start_seconds = std::numeric_limits<double>::quiet_NaN();
       },
       "micro_steps[1].start_seconds = nan, must be a finite number >= 0"},
      {[](step_plan& p) { p.micro_steps[0].seconds = std::numeric_limits<double>::infinity(); },
       "micro_steps[0].predicted_seconds = inf"},
      {[](step_plan& p) { p.micro_steps[0].peak_bytes = -1; },
       "micro_steps[0].predicted_peak_bytes = -1"},
      {[](step_plan& p) { p.micro_steps[0].loss_scale = 1.5; },
       "micro_steps[0].loss_scale = 1.5, must be a finite number in 0..1"},
      {[](step_plan& p) { p.micro_steps[0].loss_scale = -std::numeric_limits<double>::infinity(); },
       "micro_steps[0].loss_scale = -inf"},
      {[](step_plan& p) { p.makespan_seconds = std::numeric_limits<double>::quiet_NaN(); },
       "plan.makespan_seconds = nan"},
      {[](step_plan& p) { p.gradient_sync_seconds = -0.25; }, "plan.gradient_sync_seconds = -0.25"},
      {[](step_plan& p) { p.memory_budget_bytes = std::numeric_limits<double>::infinity(); },
       "plan.memory_budget_bytes = inf"},
      {[](step_plan& p) { p.micro_steps[1].sequence = -3; },
       "micro_steps[1].sequence = -3, must be >= 0"},
      {[](step_plan& p) { p.micro_steps[1].loss_units = -3; },
       "micro_steps[1].loss_units = -3, must be >= 0"},
      {[](step_plan& p) { p.micro_steps[1].config.recompute.layers = -1; },
       "micro_steps[1].recompute.layers = -1"},
      {[](step_plan& p) { p.gpus_per_node = 0; }, "plan.gpus_per_node = 0, must be >= 1"},
      {[](step_plan& p) { p.best_static_degree = -1; },
       "plan.best_static_degree = -1, must be >= 0"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.shown);
    auto plan = valid;
    c.change(plan);
    CHECK(contains(message_of([&] { validate_plan(plan, three_samples, 4); }), c.shown));
  }
}

TEST_CASE("Finding.08_overflow_in_validate_plan.token_sums_and_batch_ids_are_checked") {
  auto plan = read_plan_json(plan_document().text(), "x.json");
  constexpr auto half = std::numeric_limits<std::int64_t>::max() / 2 + 1;
  const std::vector<sample> huge = {text_sample(0, half), text_sample(1, half),
                                    text_sample(2, 100)};
  // Caught by validate_batch (the batch's total) or by the sum of the micro-step, never wrapped.
  const auto overflow = message_of([&] { validate_plan(plan, huge, 4); });
  CHECK(contains(overflow, "tokens"));
  CHECK(contains(overflow, "9223372036854775807"));
  const std::vector<sample> twice = {text_sample(0, 100), text_sample(1, 100), text_sample(1, 100),
                                     text_sample(2, 100)};
  CHECK(contains(message_of([&] { validate_plan(plan, twice, 4); }), "duplicate sample id 1"));
  validate_plan(plan, three_samples, 4);
  CHECK(plan.micro_steps[0].tokens == 200);
  CHECK(plan.micro_steps[1].tokens == 100);
}
