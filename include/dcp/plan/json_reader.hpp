#pragma once
// Reading a plan back from JSON (`dcp.step_plan/1`, docs/plan-format.md), so that a plan made
// by another planner can be evaluated by the simulator on equal terms. A strict RFC 8259 reader
// whose errors name the line and column; the plan reader's errors name the field.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <span>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A plan document that is not valid JSON, or not a valid `dcp.step_plan/1`.
class invalid_plan : public error {
public:
  using error::error;
};

namespace json {

/// A parsed JSON value; numbers keep their text so 64-bit integers are read exactly.
struct value {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  bool boolean = false;
  std::string text;                 ///< number text or string contents
  std::vector<value> items;         ///< array elements
  std::vector<std::string> keys;    ///< object members in document order...
  std::vector<value> values;        ///< ...and their values
  int line = 1;                     ///< where the value starts, for error messages

  bool has(std::string_view key) const noexcept {
    for (const auto& k : keys)
      if (k == key) return true;
    return false;
  }
  /// The member `key`; throws invalid_plan naming `path` when it is missing.
  const value& at(std::string_view key, std::string_view path) const {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return values[i];
    throw invalid_plan(std::string(path) + ": missing field '" + std::string(key) + "' (line " +
                       std::to_string(line) + ")");
  }
  const value& operator[](std::string_view key) const { return at(key, "object"); }
  double number() const;
  template <class T>
  T integer() const;
};

class reader {
public:
  reader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  value document() {
    auto v = parse_value();
    skip_space();
    if (at_ != text_.size()) fail("trailing characters after the document");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = 1, column = 1;
    for (std::size_t i = 0; i < at_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw invalid_plan(std::string(source_) + ":" + std::to_string(line) + ":" +
                       std::to_string(column) + ": " + what);
  }
  int line_now() const {
    int line = 1;
    for (std::size_t i = 0; i < at_ && i < text_.size(); ++i) line += text_[i] == '\n';
    return line;
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r'))
      ++at_;
  }
  char peek() {
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end of input");
    return text_[at_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  value parse_value() {
    if (++depth_ > 64) fail("nesting deeper than 64 levels");
    value v;
    const char c = peek();
    v.line = line_now();
    if (c == '{') {
      v.type = value::kind::object;
      ++at_;
      if (peek() != '}') {
        while (true) {
          if (peek() != '"') fail("expected a member name");
          v.keys.push_back(parse_string());
          expect(':');
          v.values.push_back(parse_value());
          if (peek() != ',') break;
          ++at_;
        }
      }
      expect('}');
    } else if (c == '[') {
      v.type = value::kind::array;
      ++at_;
      if (peek() != ']') {
        while (true) {
          v.items.push_back(parse_value());
          if (peek() != ',') break;
          ++at_;
        }
      }
      expect(']');
    } else if (c == '"') {
      v.type = value::kind::string;
      v.text = parse_string();
    } else if (literal("true")) {
      v.type = value::kind::boolean;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = value::kind::boolean;
    } else if (literal("null")) {
    } else {
      v.type = value::kind::number;
      v.text = parse_number();
    }
    --depth_;
    return v;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string parse_number() {
    const std::size_t start = at_;
    auto digits = [&] {
      const std::size_t from = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      if (at_ == from) fail("expected a value");
    };
    if (text_[at_] == '-') ++at_;
    if (at_ < text_.size() && text_[at_] == '0') ++at_;
    else digits();
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      digits();
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      digits();
    }
    return std::string(text_.substr(start, at_ - start));
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("unterminated string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) fail("unterminated escape");
      switch (const char e = text_[at_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = 0;
          const auto [end, status] = std::from_chars(
              text_.data() + at_, text_.data() + std::min(at_ + 4, text_.size()), code, 16);
          if (status != std::errc{} || end != text_.data() + at_ + 4) fail("bad \\u escape");
          at_ += 4;
          append_utf8(out, code);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {  // surrogates are passed through as-is: plan strings are ASCII
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t at_ = 0;
  int depth_ = 0;
};

/// Parses one JSON document; errors name `source`, the line and the column.
inline value parse(std::string_view text, std::string_view source = "<json>") {
  return reader(text, source).document();
}

/// `v` as a number of type T (integer or double); throws invalid_plan naming `path`.
template <class T>
T as(const value& v, std::string_view path) {
  if (v.type != value::kind::number)
    throw invalid_plan(std::string(path) + " (line " + std::to_string(v.line) +
                       "): expected a number");
  T out{};
  const auto* first = v.text.data();
  const auto* last = first + v.text.size();
  const auto [end, status] = std::from_chars(first, last, out);
  if (status != std::errc{} || end != last)
    throw invalid_plan(std::string(path) + " (line " + std::to_string(v.line) + "): '" + v.text +
                       "' is not a valid " + (std::is_integral_v<T> ? "integer" : "number") +
                       " here");
  return out;
}

inline double value::number() const { return as<double>(*this, "value"); }
template <class T>
T value::integer() const {
  return as<T>(*this, "value");
}

}  // namespace json

/// Reads a `dcp.step_plan/1` document into a step_plan. The structure is checked here (fields,
/// types, format); whether the plan is valid for a batch and a cluster is validate_plan's job.
inline step_plan read_plan_json(std::string_view text, std::string_view source = "<plan>") {
  const auto doc = json::parse(text, source);
  const std::string where(source);
  if (doc.type != json::value::kind::object)
    throw invalid_plan(where + ": the document is not a JSON object");
  const auto& format = doc.at("format", where);
  if (format.type != json::value::kind::string || format.text != "dcp.step_plan/1")
    throw invalid_plan(where + ": format = '" + format.text +
                       "', this reader understands 'dcp.step_plan/1'");
  step_plan plan;
  if (doc.has("policy")) plan.policy = doc.at("policy", where).text;
  plan.gpus = json::as<std::int64_t>(doc.at("gpus", where), where + ".gpus");
  plan.gpus_per_node = doc.has("gpus_per_node")
                           ? json::as<std::int64_t>(doc.at("gpus_per_node", where), where + ".gpus_per_node")
                           : plan.gpus;
  auto optional_number = [&](std::string_view key) {
    return doc.has(key) ? json::as<double>(doc.at(key, where), where + "." + std::string(key)) : 0.0;
  };
  plan.makespan_seconds = optional_number("makespan_seconds");
  plan.lower_bound_seconds = optional_number("lower_bound_seconds");
  plan.memory_budget_bytes = optional_number("memory_budget_bytes");
  plan.gradient_sync_seconds = optional_number("gradient_sync_seconds");
  plan.best_static_seconds = optional_number("best_static_seconds");
  const auto& steps = doc.at("micro_steps", where);
  if (steps.type != json::value::kind::array)
    throw invalid_plan(where + ".micro_steps (line " + std::to_string(steps.line) +
                       "): expected an array");
  for (std::size_t n = 0; n < steps.items.size(); ++n) {
    const auto& s = steps.items[n];
    const std::string path = where + ".micro_steps[" + std::to_string(n) + "]";
    if (s.type != json::value::kind::object)
      throw invalid_plan(path + " (line " + std::to_string(s.line) + "): expected an object");
    micro_step m;
    m.sequence = json::as<std::int64_t>(s.at("sequence", path), path + ".sequence");
    m.first_rank = json::as<std::int64_t>(s.at("first_rank", path), path + ".first_rank");
    m.config.degree = json::as<std::int64_t>(s.at("degree", path), path + ".degree");
    if (s.has("sp")) {
      const auto& sp = s.at("sp", path);
      if (sp.text == "ulysses") m.config.sp = sequence_parallel::ulysses;
      else if (sp.text == "ring") m.config.sp = sequence_parallel::ring;
      else
        throw invalid_plan(path + ".sp (line " + std::to_string(sp.line) + "): '" + sp.text +
                           "', expected 'ulysses' or 'ring'");
    }
    if (s.has("recompute")) {
      const auto& r = s.at("recompute", path);
      if (r.has("layers"))
        m.config.recompute.layers =
            json::as<std::int32_t>(r.at("layers", path), path + ".recompute.layers");
      if (r.has("selective")) m.config.recompute.selective = r.at("selective", path).boolean;
    }
    const auto& ids = s.at("sample_ids", path);
    if (ids.type != json::value::kind::array)
      throw invalid_plan(path + ".sample_ids (line " + std::to_string(ids.line) +
                         "): expected an array");
    for (std::size_t k = 0; k < ids.items.size(); ++k)
      m.sample_ids.push_back(json::as<std::uint64_t>(
          ids.items[k], path + ".sample_ids[" + std::to_string(k) + "]"));
    if (s.has("loss_scale")) m.loss_scale = json::as<double>(s.at("loss_scale", path), path + ".loss_scale");
    if (s.has("start_seconds"))
      m.start_seconds = json::as<double>(s.at("start_seconds", path), path + ".start_seconds");
    if (s.has("predicted_seconds"))
      m.seconds = json::as<double>(s.at("predicted_seconds", path), path + ".predicted_seconds");
    if (s.has("predicted_peak_bytes"))
      m.peak_bytes =
          json::as<double>(s.at("predicted_peak_bytes", path), path + ".predicted_peak_bytes");
    plan.micro_steps.push_back(std::move(m));
  }
  plan.fingerprint = compute_fingerprint(plan);
  return plan;
}

/// Checks that `plan` can run `batch` on `gpus` ranks: every sample exactly once, groups of
/// power-of-two degree, aligned and inside the cluster, sequence numbers unique. Throws
/// invalid_plan naming the micro-step, the field, the value and the limit. Tokens and loss units
/// are filled in from the batch.
inline void validate_plan(step_plan& plan, std::span<const sample> batch, std::int64_t gpus) {
  if (plan.gpus != gpus)
    throw invalid_plan("plan.gpus = " + std::to_string(plan.gpus) + ", the cluster has " +
                       std::to_string(gpus) + " GPUs");
  std::vector<std::pair<std::uint64_t, std::size_t>> ids;  // (id, index in batch)
  ids.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) ids.emplace_back(batch[i].id, i);
  std::sort(ids.begin(), ids.end());
  std::vector<std::int64_t> used_by(batch.size(), -1);
  std::vector<std::int64_t> sequences;
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    auto& m = plan.micro_steps[n];
    const std::string path = "micro_steps[" + std::to_string(n) + "]";
    const auto d = m.config.degree;
    if (d < 1 || (d & (d - 1)) != 0)
      throw invalid_plan(path + ".degree = " + std::to_string(d) + ", must be a power of two >= 1");
    if (m.first_rank < 0 || m.first_rank + d > gpus)
      throw invalid_plan(path + ".first_rank = " + std::to_string(m.first_rank) + " with degree " +
                         std::to_string(d) + " names ranks up to " +
                         std::to_string(m.first_rank + d - 1) + ", outside the cluster's ranks 0.." +
                         std::to_string(gpus - 1));
    if (m.first_rank % d != 0)
      throw invalid_plan(path + ".first_rank = " + std::to_string(m.first_rank) +
                         " is not a multiple of its degree " + std::to_string(d));
    sequences.push_back(m.sequence);
    m.tokens = 0;
    for (std::size_t k = 0; k < m.sample_ids.size(); ++k) {
      const auto id = m.sample_ids[k];
      const auto it = std::lower_bound(ids.begin(), ids.end(), std::make_pair(id, std::size_t{0}));
      if (it == ids.end() || it->first != id)
        throw invalid_plan(path + ".sample_ids[" + std::to_string(k) + "] = " + std::to_string(id) +
                           " is not in the batch");
      auto& owner = used_by[it->second];
      if (owner >= 0)
        throw invalid_plan(path + ".sample_ids[" + std::to_string(k) + "] = " + std::to_string(id) +
                           " is already in micro_steps[" + std::to_string(owner) +
                           "]: every sample must appear exactly once");
      owner = static_cast<std::int64_t>(n);
      m.tokens += batch[it->second].tokens;
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (used_by[i] < 0)
      throw invalid_plan("sample " + std::to_string(batch[i].id) +
                         " of the batch is in no micro-step: every sample must appear exactly once");
  std::sort(sequences.begin(), sequences.end());
  const auto repeat = std::adjacent_find(sequences.begin(), sequences.end());
  if (repeat != sequences.end())
    throw invalid_plan("sequence number " + std::to_string(*repeat) +
                       " is used by two micro-steps; each micro-step needs its own");
}

}  // namespace dcp
