#pragma once
// A step plan as JSON ("dcp.step_plan/1", documented field by field in docs/plan-format.md), for
// launchers and tools in other languages. Hand-written, no dependency; the output is a pure
// function of the plan (same plan, same bytes) and every double round-trips exactly.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "dcp/plan/step_plan.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The value of the top-level "format" field; bumped when a field changes meaning or goes away
/// (adding a field does not bump it).
inline constexpr std::string_view plan_json_format = "dcp.step_plan/1";

struct json_options {
  /// Add "ranks": for each rank, the sequence numbers of its micro-steps in execution order.
  bool ranks = false;
  /// One top-level field, micro-step and rank per line; false: the whole document on one line.
  bool pretty = true;

  friend constexpr bool operator==(const json_options&, const json_options&) = default;
};

namespace detail {

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped; other
/// bytes (UTF-8) copied as they are.
inline void write_json_string(std::ostream& os, std::string_view text) {
  constexpr char hex[] = "0123456789abcdef";
  os << '"';
  constexpr std::string_view named = "\b\f\n\r\t";  // the control characters with short escapes
  constexpr std::string_view letters = "bfnrt";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      os << '\\' << ch;
    } else if (byte < 0x20) {
      const auto at = named.find(ch);
      if (at != std::string_view::npos)
        os << '\\' << letters[at];
      else
        os << "\\u00" << hex[byte >> 4] << hex[byte & 0xf];
    } else {
      os << ch;
    }
  }
  os << '"';
}

/// The shortest decimal that reads back as exactly `value` (std::to_chars); JSON has no
/// infinity or NaN, so those are written as null.
inline void write_json_number(std::ostream& os, double value) {
  if (!std::isfinite(value)) {
    os << "null";
    return;
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  os.write(buffer, result.ptr - buffer);
}

/// Integers through std::to_chars too, so a locale imbued in `os` cannot add separators.
template <class Integer>
  requires std::is_integral_v<Integer>
void write_json_number(std::ostream& os, Integer value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  os.write(buffer, result.ptr - buffer);
}

/// 16 lowercase hex digits: JSON numbers are doubles to most readers, which cannot hold every
/// 64-bit value.
[[nodiscard]] inline std::string fingerprint_hex(std::uint64_t fingerprint) {
  constexpr char hex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int digit = 15; digit >= 0; --digit) {
    out[static_cast<std::size_t>(digit)] = hex[fingerprint & 0xf];
    fingerprint >>= 4;
  }
  return out;
}

/// Writes `"key": ` (or `"key":` on one line) after the right separator.
class json_object_writer {
 public:
  json_object_writer(std::ostream& os, bool pretty, std::string_view indent)
      : os_(os), pretty_(pretty), indent_(indent) {}

  void key(std::string_view name) {
    if (!first_) os_ << (pretty_ && !indent_.empty() ? "," : (pretty_ ? ", " : ","));
    if (pretty_ && !indent_.empty()) os_ << '\n' << indent_;
    first_ = false;
    write_json_string(os_, name);
    os_ << (pretty_ ? ": " : ":");
  }
  template <class T>
  void field(std::string_view name, T value) {
    key(name);
    write_json_number(os_, value);
  }
  void field(std::string_view name, bool value) {
    key(name);
    os_ << (value ? "true" : "false");
  }
  void string_field(std::string_view name, std::string_view value) {
    key(name);
    write_json_string(os_, value);
  }

 private:
  std::ostream& os_;
  bool pretty_;
  std::string_view indent_;  // empty: members inline, on one line
  bool first_ = true;
};

inline void write_json(std::ostream& os, const micro_step& m, bool pretty) {
  os << '{';
  json_object_writer w(os, pretty, "");
  w.field("sequence", m.sequence);
  w.field("first_rank", m.first_rank);
  w.field("degree", m.config.degree);
  w.string_field("sp", to_string(m.config.sp));
  w.key("recompute");
  {
    os << '{';
    json_object_writer r(os, pretty, "");
    r.field("layers", static_cast<std::int64_t>(m.config.recompute.layers));
    r.field("selective", m.config.recompute.selective);
    os << '}';
  }
  w.key("sample_ids");
  os << '[';
  for (std::size_t i = 0; i < m.sample_ids.size(); ++i) {
    if (i > 0) os << (pretty ? ", " : ",");
    write_json_number(os, m.sample_ids[i]);
  }
  os << ']';
  w.field("tokens", m.tokens);
  w.field("loss_units", m.loss_units);
  w.field("loss_scale", m.loss_scale);
  w.field("start_seconds", m.start_seconds);
  w.field("predicted_seconds", m.seconds);
  w.field("predicted_peak_bytes", m.peak_bytes);
  os << '}';
}

}  // namespace detail

/// Writes `plan` as a "dcp.step_plan/1" JSON document (docs/plan-format.md), ending in a newline.
inline void write_json(std::ostream& os, const step_plan& plan, const json_options& options = {}) {
  const bool pretty = options.pretty;
  const std::string_view indent = pretty ? "  " : "";
  const std::string_view item_indent = "    ";
  os << '{';
  detail::json_object_writer w(os, pretty, indent);
  w.string_field("format", plan_json_format);
  w.string_field("policy", plan.policy);
  w.field("gpus", plan.gpus);
  w.field("gpus_per_node", plan.gpus_per_node);
  w.field("makespan_seconds", plan.makespan_seconds);
  w.field("lower_bound_seconds", plan.lower_bound_seconds);
  w.field("gap", plan.gap());
  w.field("memory_budget_bytes", plan.memory_budget_bytes);
  w.field("gradient_sync_seconds", plan.gradient_sync_seconds);
  w.field("best_static_seconds", plan.best_static_seconds);
  w.field("best_static_degree", plan.best_static_degree);
  w.string_field("fingerprint", detail::fingerprint_hex(plan.fingerprint));
  w.field("total_tokens", plan.total_tokens());
  w.field("idle_fraction", plan.idle_fraction());

  // Arrays of items: one item per line when pretty.
  auto open_item = [&](std::size_t n) {
    if (n > 0) os << ',';
    if (pretty) os << '\n' << item_indent;
  };
  auto close_array = [&](std::size_t items) {
    if (pretty && items > 0) os << '\n' << indent;
    os << ']';
  };

  if (plan.hybrid_ulysses_degree != 0) w.field("hybrid_ulysses_degree", plan.hybrid_ulysses_degree);
  if (plan.lockstep) w.field("lockstep", true);  // optional: absent means false
  if (!plan.barriers.empty()) {                  // optional: most plans have none
    w.key("barriers");
    os << '[';
    for (std::size_t n = 0; n < plan.barriers.size(); ++n) os << (n ? "," : "") << plan.barriers[n];
    os << ']';
  }

  w.key("micro_steps");
  os << '[';
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    open_item(n);
    detail::write_json(os, plan.micro_steps[n], pretty);
  }
  close_array(plan.micro_steps.size());

  if (options.ranks) {
    w.key("ranks");
    os << '[';
    const auto ranks = static_cast<std::size_t>(plan.gpus > 0 ? plan.gpus : 0);
    for (std::size_t rank = 0; rank < ranks; ++rank) {
      open_item(rank);
      os << '[';
      const auto steps = plan.steps_of(static_cast<std::int64_t>(rank));
      for (std::size_t i = 0; i < steps.size(); ++i) {
        if (i > 0) os << (pretty ? ", " : ",");
        detail::write_json_number(os, plan.micro_steps[steps[i]].sequence);
      }
      os << ']';
    }
    close_array(ranks);
  }
  if (pretty) os << '\n';
  os << "}\n";
}

/// The JSON document of `plan` as a string (see write_json).
[[nodiscard]] inline std::string to_json(const step_plan& plan, const json_options& options = {}) {
  std::ostringstream os;
  write_json(os, plan, options);
  return os.str();
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
