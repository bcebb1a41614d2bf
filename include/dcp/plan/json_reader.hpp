#pragma once
// Reading a plan back from JSON (`dcp.step_plan/1`, docs/plan-format.md), so that a plan made
// by another planner can be evaluated by the simulator on equal terms. A strict RFC 8259 reader
// in one pass (line and column tracked as it goes, so time is linear in the size) whose errors
// name the line, the column and the path; the plan reader's errors name the field and the value.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/lockstep.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/plan/validate_batch.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace json {

/// `text` fit for an error message: control bytes escaped, and cut after `limit` bytes (at a
/// UTF-8 boundary) with "..." and the full length, so a huge value cannot flood the message.
[[nodiscard]] inline std::string excerpt(std::string_view text, std::size_t limit = 40) {
  constexpr char hex[] = "0123456789abcdef";
  std::size_t cut = text.size();
  if (cut > limit) {
    cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string out;
  out.reserve(cut + 24);
  for (std::size_t i = 0; i < cut; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 0xf];
    } else {
      out += text[i];
    }
  }
  if (cut < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

/// The shortest decimal of `x` (std::to_chars), for messages: "nan" and "inf" included.
[[nodiscard]] inline std::string number_text(double x) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

/// A parsed JSON value; numbers keep their text so 64-bit integers are read exactly.
struct value {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  bool boolean = false;
  std::string text;               ///< number text or string contents
  std::vector<value> items;       ///< array elements
  std::vector<std::string> keys;  ///< object members in document order (no key twice)...
  std::vector<value> values;      ///< ...and their values
  std::size_t line = 1;           ///< where the value starts, for error messages (1-based)
  std::size_t column = 1;         ///< byte on that line where it starts (1-based)

  /// The member `key`, or nullptr.
  [[nodiscard]] const value* find(std::string_view key) const noexcept {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &values[i];
    return nullptr;
  }
  [[nodiscard]] bool has(std::string_view key) const noexcept { return find(key) != nullptr; }
  /// The member `key`; throws invalid_plan naming `path` when it is missing.
  [[nodiscard]] const value& at(std::string_view key, std::string_view path) const {
    if (const value* member = find(key)) return *member;
    throw invalid_plan(std::string(path) + ": missing field '" + excerpt(key) +
                       "' (object at line " + std::to_string(line) + ", column " +
                       std::to_string(column) + ")");
  }
  [[nodiscard]] const value& operator[](std::string_view key) const { return at(key, "object"); }
  [[nodiscard]] double number() const;
  template <class T>
  [[nodiscard]] T integer() const;
};

/// "line L, column C" of `v`.
[[nodiscard]] inline std::string location(const value& v) {
  return "line " + std::to_string(v.line) + ", column " + std::to_string(v.column);
}

/// `v` in a few words for an error message: scalars as written (cut when long), containers by size.
[[nodiscard]] inline std::string describe(const value& v) {
  switch (v.type) {
    case value::kind::null:
      return "null";
    case value::kind::boolean:
      return v.boolean ? "true" : "false";
    case value::kind::number:
      return excerpt(v.text);
    case value::kind::string:
      return '"' + excerpt(v.text) + '"';
    case value::kind::array:
      return "an array of " + std::to_string(v.items.size()) + " values";
    case value::kind::object:
      return "an object of " + std::to_string(v.keys.size()) + " members";
  }
  return "a value";
}

class reader {
 public:
  /// Containers nested deeper than this are refused: the parser recurses once per level.
  static constexpr int max_depth = 64;

  reader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  [[nodiscard]] value document() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") {  // a UTF-8 byte-order mark is skipped
      at_ = 3;
      line_start_ = 3;
    }
    auto v = parse_value();
    skip_space();
    if (at_ != text_.size()) fail("trailing characters after the document: found " + found());
    return v;
  }

 private:
  // One step of the path to the value being parsed: a member name (raw, as written) or an index.
  struct segment {
    std::string_view key{};
    std::size_t index = 0;
    bool is_key = false;
  };

  [[nodiscard]] std::size_t column() const noexcept { return at_ - line_start_ + 1; }

  [[nodiscard]] std::string path() const {
    std::string out(source_);
    for (const auto& step : path_) {
      if (step.is_key)
        out += '.' + excerpt(step.key);
      else
        out += '[' + std::to_string(step.index) + ']';
    }
    return out;
  }

  [[noreturn]] void fail_at(std::size_t line, std::size_t column, const std::string& what,
                            bool with_path = true) const {
    std::string message = std::string(source_) + ":" + std::to_string(line) + ":" +
                          std::to_string(column) + ": " + what;
    if (with_path && !path_.empty()) message += " (in " + path() + ")";
    throw invalid_plan(message);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(line_, column(), what); }

  /// The character at the cursor, for "found ..." in messages.
  [[nodiscard]] std::string found() const {
    if (at_ >= text_.size()) return "the end of the input";
    const auto byte = static_cast<unsigned char>(text_[at_]);
    if (byte >= 0x20 && byte < 0x7f) return std::string("'") + text_[at_] + "'";
    constexpr char hex[] = "0123456789abcdef";
    return std::string("byte 0x") + hex[byte >> 4] + hex[byte & 0xf];
  }

  // Newlines occur only here (a raw one in a string is an error), so this is the one place
  // that advances the line.
  void skip_space() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '\n') {
        ++at_;
        ++line_;
        line_start_ = at_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++at_;
      } else {
        break;
      }
    }
  }
  [[nodiscard]] char peek() {
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end of input");
    return text_[at_];
  }
  void expect(char c, std::string_view after) {
    if (peek() != c)
      fail(std::string("expected '") + c + "' " + std::string(after) + ", found " + found());
    ++at_;
  }
  [[nodiscard]] bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  [[nodiscard]] value parse_value() {
    if (++depth_ > max_depth) fail("nesting deeper than " + std::to_string(max_depth) + " levels");
    value v;
    const char c = peek();
    v.line = line_;
    v.column = column();
    if (c == '{') {
      parse_object(v);
    } else if (c == '[') {
      parse_array(v);
    } else if (c == '"') {
      v.type = value::kind::string;
      v.text = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = value::kind::number;
      v.text = parse_number();
    } else if (literal("true")) {
      v.type = value::kind::boolean;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = value::kind::boolean;
    } else if (!literal("null")) {
      fail("expected a value, found " + found());
    }
    --depth_;
    return v;
  }

  void parse_object(value& v) {
    v.type = value::kind::object;
    ++at_;
    if (peek() != '}') {
      path_.push_back({});
      while (true) {
        if (peek() != '"') fail("expected a member name in double quotes, found " + found());
        const std::size_t key_start = at_;
        v.keys.push_back(parse_string());
        path_.back() = segment{text_.substr(key_start + 1, at_ - key_start - 2), 0, true};
        expect(':', "after the member name");
        v.values.push_back(parse_value());
        if (v.keys.size() <= small_object) check_last_key(v);
        if (peek() != ',') break;
        ++at_;
      }
      if (v.keys.size() > small_object) check_keys(v);
      path_.pop_back();
    }
    expect('}', "or ',' after an object member");
  }

  void parse_array(value& v) {
    v.type = value::kind::array;
    ++at_;
    if (peek() != ']') {
      path_.push_back({});
      while (true) {
        path_.back().index = v.items.size();
        v.items.push_back(parse_value());
        if (peek() != ',') break;
        ++at_;
      }
      path_.pop_back();
    }
    expect(']', "or ',' after an array element");
  }

  // Duplicate keys: each new key against the earlier ones while the object is small, then one
  // sort of the names when it is done, so a huge object costs n log n, not n^2.
  static constexpr std::size_t small_object = 16;

  void check_last_key(const value& v) const {
    const std::size_t last = v.keys.size() - 1;
    for (std::size_t i = 0; i < last; ++i)
      if (v.keys[i] == v.keys[last]) duplicate(v, i, last);
  }
  void check_keys(const value& v) {
    std::vector<std::size_t> order(v.keys.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return v.keys[a] < v.keys[b]; });
    std::size_t first = 0, again = v.keys.size();
    for (std::size_t k = 1; k < order.size(); ++k)
      if (v.keys[order[k]] == v.keys[order[k - 1]] && order[k] < again) {
        first = order[k - 1];
        again = order[k];
      }
    if (again == v.keys.size()) return;
    path_.back() = segment{v.keys[again], 0, true};
    duplicate(v, first, again);
  }
  [[noreturn]] void duplicate(const value& v, std::size_t first, std::size_t again) const {
    const value& a = v.values[first];
    const value& b = v.values[again];
    fail_at(b.line, b.column,
            "duplicate key: " + path() + " = " + describe(b) + " repeats the member at " +
                location(a) + " (= " + describe(a) + "); a key may appear only once in an object",
            false);
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  [[nodiscard]] std::string parse_number() {
    const std::size_t start = at_;
    auto digit = [&] { return at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9'; };
    auto digits = [&](std::string_view where) {
      if (!digit()) fail("expected a digit " + std::string(where) + ", found " + found());
      while (digit()) ++at_;
    };
    if (text_[at_] == '-') ++at_;
    if (at_ < text_.size() && text_[at_] == '0') {
      ++at_;
      if (digit())
        fail("a number starting with 0 is followed by a digit (JSON has no leading zeros)");
    } else {
      digits("at the start of the number");
    }
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      digits("after the decimal point");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      digits("in the exponent");
    }
    return std::string(text_.substr(start, at_ - start));
  }

  [[nodiscard]] std::string parse_string() {
    ++at_;  // the opening quote, seen by the caller
    std::string out;
    while (true) {
      const std::size_t run = at_;  // plain ASCII is copied a run at a time
      while (at_ < text_.size()) {
        const auto byte = static_cast<unsigned char>(text_[at_]);
        if (byte == '"' || byte == '\\' || byte < 0x20 || byte >= 0x80) break;
        ++at_;
      }
      out.append(text_.data() + run, at_ - run);
      if (at_ >= text_.size()) fail("unterminated string");
      const auto byte = static_cast<unsigned char>(text_[at_]);
      if (byte == '"') {
        ++at_;
        return out;
      }
      if (byte < 0x20)
        fail("raw control character (" + found() + ") in a string: write it as an escape");
      if (byte >= 0x80) {
        const std::size_t length = utf8_length();
        if (length == 0) fail("invalid UTF-8 (" + found() + ") in a string");
        out.append(text_.data() + at_, length);
        at_ += length;
        continue;
      }
      ++at_;  // the backslash
      if (at_ >= text_.size()) fail("unterminated escape");
      switch (text_[at_++]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xDC00 && code <= 0xDFFF)
            fail("\\u escape of a low surrogate without a high one");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(at_, 2) != "\\u")
              fail("\\u escape of a high surrogate not followed by a low one");
            at_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF)
              fail("\\u escape of a high surrogate not followed by a low one");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          --at_;
          fail("unknown escape: backslash followed by " + found());
      }
    }
  }

  [[nodiscard]] unsigned hex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = at_ < text_.size() ? text_[at_] : '\0';
      unsigned digit = 0;
      if (c >= '0' && c <= '9')
        digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = static_cast<unsigned>(c - 'A' + 10);
      else
        fail("bad \\u escape: expected 4 hex digits, found " + found());
      code = code * 16 + digit;
      ++at_;
    }
    return code;
  }

  // Bytes of the well-formed UTF-8 sequence at the cursor (RFC 3629), 0 if there is none.
  [[nodiscard]] std::size_t utf8_length() const noexcept {
    auto byte = [&](std::size_t i) -> unsigned {
      return at_ + i < text_.size() ? static_cast<unsigned char>(text_[at_ + i]) : 0u;
    };
    const unsigned lead = byte(0);
    std::size_t length = 0;
    unsigned low = 0x80, high = 0xBF;  // the range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // no overlong forms
      if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    } else {
      return 0;
    }
    if (byte(1) < low || byte(1) > high) return 0;
    for (std::size_t i = 2; i < length; ++i)
      if ((byte(i) & 0xC0) != 0x80) return 0;
    return length;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t at_ = 0;
  std::size_t line_ = 1;
  std::size_t line_start_ = 0;  // offset of the first byte of the current line
  int depth_ = 0;
  std::vector<segment> path_;
};

/// Parses one JSON document; errors name `source`, the line, the column and the path.
[[nodiscard]] inline value parse(std::string_view text, std::string_view source = "<json>") {
  return reader(text, source).document();
}

/// Throws invalid_plan: "`path` (line L, column C): `what`".
[[noreturn]] inline void reject(const value& v, std::string_view path, const std::string& what) {
  throw invalid_plan(std::string(path) + " (" + location(v) + "): " + what);
}

/// `v` if it is of kind `type`; else throws invalid_plan naming `path` and the value found.
inline const value& require(const value& v, value::kind type, std::string_view path) {
  if (v.type == type) return v;
  const char* expected = "null";
  switch (type) {
    case value::kind::null:
      break;
    case value::kind::boolean:
      expected = "true or false";
      break;
    case value::kind::number:
      expected = "a number";
      break;
    case value::kind::string:
      expected = "a string";
      break;
    case value::kind::array:
      expected = "an array";
      break;
    case value::kind::object:
      expected = "an object";
      break;
  }
  reject(v, path, std::string("expected ") + expected + ", found " + describe(v));
}

/// "a 64-bit integer (-9223372036854775808..9223372036854775807)" and the like.
template <class T>
[[nodiscard]] std::string integer_kind() {
  return std::string(std::is_signed_v<T> ? "a " : "an unsigned ") + std::to_string(sizeof(T) * 8) +
         "-bit integer (" + std::to_string(std::numeric_limits<T>::min()) + ".." +
         std::to_string(std::numeric_limits<T>::max()) + ")";
}

/// `v` as T when it is a number that T holds exactly (integers: written as integers, in range);
/// no message is built, for hot loops. as() says why not.
template <class T>
[[nodiscard]] bool try_as(const value& v, T& out) noexcept {
  if (v.type != value::kind::number) return false;
  const auto* first = v.text.data();
  const auto* last = first + v.text.size();
  const auto [end, status] = std::from_chars(first, last, out);
  return status == std::errc{} && end == last;
}

/// `v` as a number of type T (integer or double); throws invalid_plan naming `path` and the
/// value: not a number, not an integer, or outside T's range (1e400 is not a double).
template <class T>
[[nodiscard]] T as(const value& v, std::string_view path) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  if (v.type != value::kind::number)
    reject(v, path,
           std::string(std::is_integral_v<T> ? "expected an integer" : "expected a number") +
               ", found " + describe(v));
  T out{};
  if (try_as(v, out)) return out;
  if constexpr (std::is_integral_v<T>) {
    if (v.text.find_first_of(".eE") != std::string::npos)
      reject(v, path, excerpt(v.text) + " is not an integer: expected " + integer_kind<T>());
    if (std::is_unsigned_v<T> && !v.text.empty() && v.text.front() == '-')
      reject(v, path, excerpt(v.text) + " is negative: expected " + integer_kind<T>());
    reject(v, path, excerpt(v.text) + " is outside the range of " + integer_kind<T>());
  } else {
    reject(v, path,
           excerpt(v.text) + " is not representable as a double (nonzero magnitudes " +
               number_text(std::numeric_limits<double>::denorm_min()) + " to " +
               number_text(std::numeric_limits<double>::max()) + ")");
  }
}

/// as<T>, and at least `min`.
template <class T>
[[nodiscard]] T at_least(const value& v, std::string_view path, T min) {
  const T out = as<T>(v, path);
  if (out < min) {
    if constexpr (std::is_integral_v<T>)
      reject(v, path, describe(v) + ", must be >= " + std::to_string(min));
    else
      reject(v, path, describe(v) + ", must be >= " + number_text(min));
  }
  return out;
}

[[nodiscard]] inline double value::number() const { return as<double>(*this, "value"); }
template <class T>
[[nodiscard]] T value::integer() const {
  return as<T>(*this, "value");
}

}  // namespace json

/// Reads a `dcp.step_plan/1` document into a step_plan. The structure is checked here: every
/// field of docs/plan-format.md that is present has its documented type, counts and times are
/// not negative, integers fit their type; unknown fields are ignored. Whether the plan is valid
/// for a batch and a cluster is validate_plan's job. Errors name the field's path, its line and
/// column, and the value found.
[[nodiscard]] inline step_plan read_plan_json(std::string_view text,
                                              std::string_view source = "<plan>") {
  using json::value;
  using kind = value::kind;
  const auto doc = json::parse(text, source);
  const std::string where(source);
  if (doc.type != kind::object)
    json::reject(doc, where, "the document is " + json::describe(doc) + ", expected an object");
  const auto& format = json::require(doc.at("format", where), kind::string, where + ".format");
  if (format.text != "dcp.step_plan/1")
    throw invalid_plan(where + ": format = '" + json::excerpt(format.text) +
                       "', this reader understands 'dcp.step_plan/1'");
  auto field = [](const std::string& parent, std::string_view key) {
    return parent + "." + std::string(key);
  };
  step_plan plan;
  if (const auto* policy = doc.find("policy"))
    plan.policy = json::require(*policy, kind::string, where + ".policy").text;
  plan.gpus = json::at_least<std::int64_t>(doc.at("gpus", where), where + ".gpus", 1);
  plan.gpus_per_node = plan.gpus;
  if (const auto* per_node = doc.find("gpus_per_node"))
    plan.gpus_per_node = json::at_least<std::int64_t>(*per_node, where + ".gpus_per_node", 1);
  auto amount = [&](const value& object, const std::string& parent, std::string_view key,
                    double& out) {
    if (const auto* v = object.find(key)) out = json::at_least(*v, field(parent, key), 0.0);
  };
  amount(doc, where, "makespan_seconds", plan.makespan_seconds);
  amount(doc, where, "lower_bound_seconds", plan.lower_bound_seconds);
  amount(doc, where, "memory_budget_bytes", plan.memory_budget_bytes);
  amount(doc, where, "gradient_sync_seconds", plan.gradient_sync_seconds);
  amount(doc, where, "best_static_seconds", plan.best_static_seconds);
  if (const auto* degree = doc.find("best_static_degree"))
    plan.best_static_degree =
        json::at_least<std::int64_t>(*degree, where + ".best_static_degree", 0);
  // Derived fields, recomputed from the rest: checked for their type, not kept.
  for (const std::string_view key : {"gap", "idle_fraction"})
    if (const auto* v = doc.find(key)) (void)json::as<double>(*v, field(where, key));
  if (const auto* total = doc.find("total_tokens"))
    (void)json::at_least<std::int64_t>(*total, where + ".total_tokens", 0);
  if (const auto* fingerprint = doc.find("fingerprint")) {
    const auto& hex = json::require(*fingerprint, kind::string, where + ".fingerprint").text;
    if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      json::reject(*fingerprint, where + ".fingerprint",
                   json::describe(*fingerprint) + ", expected 16 lowercase hex digits");
  }
  if (const auto* u = doc.find("hybrid_ulysses_degree"))
    plan.hybrid_ulysses_degree =
        json::at_least<std::int64_t>(*u, where + ".hybrid_ulysses_degree", 0);
  if (const auto* lockstep = doc.find("lockstep"))
    plan.lockstep = json::require(*lockstep, kind::boolean, where + ".lockstep").boolean;
  if (const auto* barriers = doc.find("barriers")) {
    const auto& items = json::require(*barriers, kind::array, where + ".barriers").items;
    plan.barriers.reserve(items.size());
    for (std::size_t n = 0; n < items.size(); ++n)
      plan.barriers.push_back(json::at_least<std::int64_t>(
          items[n], where + ".barriers[" + std::to_string(n) + "]", 0));
  }
  if (const auto* ranks = doc.find("ranks")) {
    const auto& lists = json::require(*ranks, kind::array, where + ".ranks").items;
    auto rank_path = [&](std::size_t r) { return where + ".ranks[" + std::to_string(r) + "]"; };
    for (std::size_t r = 0; r < lists.size(); ++r) {
      if (lists[r].type != kind::array) json::require(lists[r], kind::array, rank_path(r));
      const auto& sequences = lists[r].items;
      for (std::size_t i = 0; i < sequences.size(); ++i) {
        std::int64_t sequence = 0;  // messages are built only for a bad entry
        if (!json::try_as(sequences[i], sequence) || sequence < 0)
          (void)json::at_least<std::int64_t>(sequences[i],
                                             rank_path(r) + "[" + std::to_string(i) + "]", 0);
      }
    }
  }

  const auto& steps =
      json::require(doc.at("micro_steps", where), kind::array, where + ".micro_steps");
  plan.micro_steps.reserve(steps.items.size());
  for (std::size_t n = 0; n < steps.items.size(); ++n) {
    const std::string path = where + ".micro_steps[" + std::to_string(n) + "]";
    const auto& s = json::require(steps.items[n], kind::object, path);
    micro_step m;
    m.sequence = json::at_least<std::int64_t>(s.at("sequence", path), path + ".sequence", 0);
    m.first_rank = json::at_least<std::int64_t>(s.at("first_rank", path), path + ".first_rank", 0);
    m.config.degree = json::at_least<std::int64_t>(s.at("degree", path), path + ".degree", 1);
    if (const auto* sp = s.find("sp")) {
      const auto& style = json::require(*sp, kind::string, path + ".sp").text;
      const auto parsed = parse_sequence_parallel(style);
      if (parsed && is_micro_batch_style(*parsed))
        m.config.sp = *parsed;
      else
        json::reject(*sp, path + ".sp",
                     json::describe(*sp) + ", expected \"ulysses\", \"ring\" or \"hybrid\"");
    }
    if (const auto* recompute = s.find("recompute")) {
      const auto& r = json::require(*recompute, kind::object, path + ".recompute");
      if (const auto* layers = r.find("layers"))
        m.config.recompute.layers =
            json::at_least<std::int32_t>(*layers, path + ".recompute.layers", 0);
      if (const auto* selective = r.find("selective"))
        m.config.recompute.selective =
            json::require(*selective, kind::boolean, path + ".recompute.selective").boolean;
    }
    const auto& ids =
        json::require(s.at("sample_ids", path), kind::array, path + ".sample_ids").items;
    m.sample_ids.resize(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k)
      if (!json::try_as(ids[k], m.sample_ids[k]))  // the message is built only for a bad id
        (void)json::as<std::uint64_t>(ids[k], path + ".sample_ids[" + std::to_string(k) + "]");
    if (const auto* tokens = s.find("tokens"))
      m.tokens = json::at_least<std::int64_t>(*tokens, path + ".tokens", 0);
    if (const auto* units = s.find("loss_units"))
      m.loss_units = json::at_least<std::int64_t>(*units, path + ".loss_units", 0);
    amount(s, path, "loss_scale", m.loss_scale);
    amount(s, path, "start_seconds", m.start_seconds);
    amount(s, path, "predicted_seconds", m.seconds);
    amount(s, path, "predicted_peak_bytes", m.peak_bytes);
    plan.micro_steps.push_back(std::move(m));
  }
  plan.fingerprint = compute_fingerprint(plan);
  return plan;
}

namespace detail {

/// The loss scales of a plan whose micro-steps' tokens are filled in: every micro-step counts
/// its tokens (normalisation by tokens) or every one its samples (by samples) in loss_units, and
/// each loss_scale is its units over the batch's (within 1e-9), so that the scales sum to 1 and
/// the step's gradient is the static layout's.
inline void validate_loss_scales(const step_plan& plan) {
  const auto units = [](const micro_step& m, bool by_tokens) {
    return by_tokens ? m.tokens : static_cast<std::int64_t>(m.sample_ids.size());
  };
  const auto first_off = [&](bool by_tokens) {
    const auto& steps = plan.micro_steps;
    return static_cast<std::size_t>(
        std::find_if(steps.begin(), steps.end(),
                     [&](const micro_step& m) { return m.loss_units != units(m, by_tokens); }) -
        steps.begin());
  };
  const auto off_tokens = first_off(true), off_samples = first_off(false);
  const auto n = plan.micro_steps.size();
  if (off_tokens < n && off_samples < n) {
    const auto at = std::max(off_tokens, off_samples);
    const auto& m = plan.micro_steps[at];
    throw invalid_plan("micro_steps[" + std::to_string(at) +
                       "].loss_units = " + std::to_string(m.loss_units) + ", must be its tokens (" +
                       std::to_string(m.tokens) + ") where the loss is normalised by tokens, or " +
                       "its samples (" + std::to_string(m.sample_ids.size()) +
                       ") by samples, the same for every micro-step");
  }
  const bool by_tokens = off_tokens == n;
  std::int64_t total = 0;  // at most the batch's tokens, which validate_batch bounds
  for (const auto& m : plan.micro_steps) total += units(m, by_tokens);
  for (std::size_t k = 0; k < n; ++k) {
    const auto& m = plan.micro_steps[k];
    const double expected =
        total > 0 ? static_cast<double>(m.loss_units) / static_cast<double>(total) : 0.0;
    if (!(std::abs(m.loss_scale - expected) <= 1e-9 * expected))  // false for NaN too
      throw invalid_plan(
          "micro_steps[" + std::to_string(k) + "].loss_scale = " + json::number_text(m.loss_scale) +
          ", must be its loss_units over the " + "batch's, " + std::to_string(m.loss_units) +
          " / " + std::to_string(total) + " = " + json::number_text(expected) +
          " (within 1e-9), so that the scales sum to 1");
  }
}

}  // namespace detail

/// Checks that `plan` can run `batch` on `gpus` ranks: every sample exactly once, groups of
/// power-of-two degree, aligned and inside the cluster, sequence numbers 0..n-1, barriers
/// increasing and not negative, times and bytes finite and not negative, loss units the
/// micro-steps' tokens (or all their sample counts) and loss scales their share of the batch's
/// (detail::validate_loss_scales), and a plan that says it is in lockstep is (check_lockstep).
/// Every
/// check is free of overflow, whatever the integers. Throws invalid_plan naming the
/// micro-step, the field, the value and the limit (invalid_sample for a malformed batch).
/// Tokens are filled in from the batch.
inline void validate_plan(step_plan& plan, std::span<const sample> batch, std::int64_t gpus) {
  if (gpus < 1)
    throw invalid_plan("gpus = " + std::to_string(gpus) + ": the cluster needs at least 1 GPU");
  if (plan.gpus != gpus)
    throw invalid_plan("plan.gpus = " + std::to_string(plan.gpus) + ", the cluster has " +
                       std::to_string(gpus) + " GPUs");
  if (plan.gpus_per_node < 1)
    throw invalid_plan("plan.gpus_per_node = " + std::to_string(plan.gpus_per_node) +
                       ", must be >= 1");
  constexpr double finite = std::numeric_limits<double>::max();
  auto amount = [](std::string_view owner, std::string_view field, double value, double limit) {
    if (!(value >= 0 && value <= limit))  // false for NaN too
      throw invalid_plan(
          std::string(owner) + "." + std::string(field) + " = " + json::number_text(value) +
          ", must be a finite number " +
          (limit == finite ? std::string(">= 0") : "in 0.." + json::number_text(limit)));
  };
  amount("plan", "makespan_seconds", plan.makespan_seconds, finite);
  amount("plan", "lower_bound_seconds", plan.lower_bound_seconds, finite);
  amount("plan", "memory_budget_bytes", plan.memory_budget_bytes, finite);
  amount("plan", "gradient_sync_seconds", plan.gradient_sync_seconds, finite);
  amount("plan", "best_static_seconds", plan.best_static_seconds, finite);
  if (plan.best_static_degree < 0)
    throw invalid_plan("plan.best_static_degree = " + std::to_string(plan.best_static_degree) +
                       ", must be >= 0");
  for (std::size_t n = 0; n < plan.barriers.size(); ++n) {
    const auto b = plan.barriers[n];
    if (b < 0)
      throw invalid_plan("plan.barriers[" + std::to_string(n) + "] = " + std::to_string(b) +
                         ", must be >= 0");
    if (n > 0 && b <= plan.barriers[n - 1])
      throw invalid_plan("plan.barriers[" + std::to_string(n) + "] = " + std::to_string(b) +
                         ", must be greater than barriers[" + std::to_string(n - 1) +
                         "] = " + std::to_string(plan.barriers[n - 1]) + " (increasing)");
  }
  validate_batch(batch);  // positive tokens and unique ids, or the lookups below mislead
  std::vector<std::pair<std::uint64_t, std::size_t>> ids;  // (id, index in batch)
  ids.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) ids.emplace_back(batch[i].id, i);
  std::sort(ids.begin(), ids.end());
  std::vector<std::int64_t> used_by(batch.size(), -1);
  std::vector<std::int64_t> sequences;
  sequences.reserve(plan.micro_steps.size());
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    auto& m = plan.micro_steps[n];
    const std::string path = "micro_steps[" + std::to_string(n) + "]";
    const auto d = m.config.degree;
    if (d < 1 || (d & (d - 1)) != 0)
      throw invalid_plan(path + ".degree = " + std::to_string(d) + ", must be a power of two >= 1");
    if (d > gpus)
      throw invalid_plan(path + ".degree = " + std::to_string(d) + ", more than the cluster's " +
                         std::to_string(gpus) + " GPUs");
    // 1 <= d <= gpus, so gpus - d cannot overflow; first_rank + d could.
    if (m.first_rank < 0 || m.first_rank > gpus - d) {
      const bool fits = m.first_rank <= std::numeric_limits<std::int64_t>::max() - (d - 1);
      const std::string last = fits ? std::to_string(m.first_rank + (d - 1))
                                    : std::to_string(m.first_rank) + " + " + std::to_string(d - 1);
      throw invalid_plan(path + ".first_rank = " + std::to_string(m.first_rank) + " with degree " +
                         std::to_string(d) + " names ranks up to " + last +
                         ", outside the cluster's ranks 0.." + std::to_string(gpus - 1));
    }
    if (m.first_rank % d != 0)
      throw invalid_plan(path + ".first_rank = " + std::to_string(m.first_rank) +
                         " is not a multiple of its degree " + std::to_string(d));
    if (m.sequence < 0)
      throw invalid_plan(path + ".sequence = " + std::to_string(m.sequence) + ", must be >= 0");
    if (m.config.recompute.layers < 0)
      throw invalid_plan(path + ".recompute.layers = " + std::to_string(m.config.recompute.layers) +
                         ", must be >= 0");
    if (!is_micro_batch_style(m.config.sp))
      throw invalid_plan(path + ".sp = " + std::string(to_string(m.config.sp)) +
                         ", must be ulysses, ring or hybrid");
    if (m.config.sp == sequence_parallel::hybrid) {
      // 2 <= u < d, u a power of two (so it divides d): a Ulysses group and a ring of >= 2.
      const auto u = plan.hybrid_ulysses_degree;
      if (!valid_hybrid_split(u, d) || u > plan.gpus_per_node)
        throw invalid_plan(path + " is hybrid at degree " + std::to_string(d) +
                           " with plan.hybrid_ulysses_degree = " + std::to_string(u) +
                           ", must be a power of two in [2, " +
                           std::to_string(std::min(d - 1, plan.gpus_per_node)) +
                           "] (below the degree, within a node of " +
                           std::to_string(plan.gpus_per_node) + ")");
    }
    if (m.loss_units < 0)
      throw invalid_plan(path + ".loss_units = " + std::to_string(m.loss_units) + ", must be >= 0");
    amount(path, "loss_scale", m.loss_scale, 1.0);
    amount(path, "start_seconds", m.start_seconds, finite);
    amount(path, "predicted_seconds", m.seconds, finite);
    amount(path, "predicted_peak_bytes", m.peak_bytes, finite);
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
      const auto tokens = batch[it->second].tokens;  // >= 1 (validate_batch)
      if (m.tokens > std::numeric_limits<std::int64_t>::max() - tokens)
        throw invalid_plan(path + ": the tokens of its samples sum past " +
                           std::to_string(std::numeric_limits<std::int64_t>::max()) +
                           " at sample_ids[" + std::to_string(k) + "] = " + std::to_string(id));
      m.tokens += tokens;
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (used_by[i] < 0)
      throw invalid_plan(
          "sample " + std::to_string(batch[i].id) +
          " of the batch is in no micro-step: every sample must appear exactly once");
  std::sort(sequences.begin(), sequences.end());
  const auto repeat = std::adjacent_find(sequences.begin(), sequences.end());
  if (repeat != sequences.end())
    throw invalid_plan("sequence number " + std::to_string(*repeat) +
                       " is used by two micro-steps; each micro-step needs its own");
  for (std::size_t n = 0; n < sequences.size(); ++n)
    if (sequences[n] != static_cast<std::int64_t>(n))
      throw invalid_plan("sequence number " + std::to_string(n) + " is missing (the plan's " +
                         std::to_string(sequences.size()) + " micro-steps use " +
                         std::to_string(sequences[n]) + " instead): they must be numbered 0.." +
                         std::to_string(sequences.size() - 1));
  detail::validate_loss_scales(plan);
  check_lockstep(plan);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
