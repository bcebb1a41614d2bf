#pragma once
// What the command-line tools (dcp-plan, dcp-sim) share: usage errors, number parsing that
// names the flag, the model and GPU presets by name, the guards that keep a typo from asking
// for an absurd batch, terminal-safe messages, tables sized to their content, the check that
// standard output was written, and the mapping from exceptions to exit statuses.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool {

/// A bad command line: the tool prints the message and exits with status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// `text` as an integer in [minimum, maximum]; usage_error naming the flag otherwise. A number
/// outside the type's range (--seed 18446744073709551616, or -1 for an unsigned flag) is "out
/// of range" with the range given, not "must be >= 0".
template <class Integer>
Integer parse_integer(std::string_view flag, std::string_view text, Integer minimum,
                      Integer maximum = std::numeric_limits<Integer>::max()) {
  const auto range = [&] {
    return "[" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]";
  };
  const auto all_digits = [](std::string_view digits) {
    return !digits.empty() &&
           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  Integer value{};
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool negative_for_unsigned =
      std::is_unsigned_v<Integer> && text.starts_with('-') && all_digits(text.substr(1));
  if (status == std::errc::result_out_of_range || negative_for_unsigned)
    throw usage_error(std::string(flag) + " = " + std::string(text) +
                      " is out of range, must be in " + range());
  if (text.empty() || status != std::errc{} || end != text.data() + text.size())
    throw usage_error(std::string(flag) + ": '" + std::string(text) + "' is not an integer");
  if (value < minimum || value > maximum) {
    const std::string limit = maximum == std::numeric_limits<Integer>::max()
                                  ? ">= " + std::to_string(minimum)
                                  : "in " + range();
    throw usage_error(std::string(flag) + " = " + std::string(text) + ", must be " + limit);
  }
  return value;
}

inline double parse_non_negative(std::string_view flag, std::string_view text) {
  double value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || status != std::errc{} || end != text.data() + text.size() || !(value >= 0) ||
      value > 1e9)
    throw usage_error(std::string(flag) + ": '" + std::string(text) +
                      "' is not a non-negative number");
  return value;
}

[[noreturn]] inline void bad_choice(std::string_view flag, std::string_view text,
                                    std::string_view choices) {
  throw usage_error(std::string(flag) + ": unknown value '" + std::string(text) + "', expected " +
                    std::string(choices));
}

}  // namespace detail

inline model_spec model_named(std::string_view name) {
  if (name == "llama3-8b") return models::llama3_8b();
  if (name == "llama3-70b") return models::llama3_70b();
  if (name == "qwen2.5-7b") return models::qwen25_7b();
  if (name == "qwen2.5-72b") return models::qwen25_72b();
  if (name == "qwen3-32b") return models::qwen3_32b();
  if (name == "stdit3-xl") return models::stdit3_xl();
  if (name == "wan2.1-14b") return models::wan21_14b();
  throw usage_error("unknown model '" + std::string(name) + "'");
}

inline gpu_spec gpu_named(std::string_view name) {
  if (name == "h100") return gpus::h100_sxm();
  if (name == "h200") return gpus::h200_sxm();
  throw usage_error("unknown GPU '" + std::string(name) + "'");
}

/// More samples than this is a mistake (a huge --tokens, or --context 1 on long lengths), not
/// a batch: refused before they are allocated.
inline constexpr std::int64_t max_samples = 20'000'000;

/// Throws usage_error when splitting `samples` at `context` tokens would make more than
/// max_samples pieces; counted before anything is allocated.
inline void check_split_count(std::span<const sample> samples, std::int64_t context) {
  std::int64_t pieces = 0;
  for (const auto& s : samples) {
    pieces += (s.tokens - 1) / context + 1;
    if (pieces > max_samples)
      throw usage_error("--context = " + std::to_string(context) + " would cut the batch into " +
                        "more than " + std::to_string(max_samples) + " samples");
  }
}

/// The same guard for a drawn batch of about `tokens` tokens: its documents are cut into at
/// most documents + tokens / context pieces.
inline void check_split_count(std::int64_t tokens, std::int64_t context) {
  if (tokens / context > max_samples)
    throw usage_error("--context = " + std::to_string(context) + " would cut " +
                      std::to_string(tokens) + " tokens into more than " +
                      std::to_string(max_samples) + " samples");
}

/// An input file with no record is refused: a table of zeros would look like a result.
[[noreturn]] inline void throw_no_samples(std::string_view source, bool video_csv = false) {
  throw error(std::string(source) +
              (video_csv ? ": no video samples (expected one frames,height,width line per sample)"
                         : ": no sample lengths (expected one positive integer per line)"));
}

/// `text` fit for a terminal: messages and names quote the input, which may be a binary file
/// read by mistake, so control characters (below 0x20, and DEL) are written as \xHH.
inline std::string printable(std::string_view text) {
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

/// A table whose columns are as wide as their widest cell (header included), two blanks apart,
/// so that no value runs into its neighbour however large it grows.
class text_table {
 public:
  enum class align : std::uint8_t { left, right };

  /// `aligns[c]` for column c; columns past the list are right-aligned.
  text_table(std::vector<std::string> headers, const std::vector<align>& aligns)
      : headers_(std::move(headers)), aligns_(headers_.size(), align::right) {
    for (std::size_t c = 0; c < aligns.size() && c < aligns_.size(); ++c) aligns_[c] = aligns[c];
  }

  void add_row(std::vector<std::string> cells) {
    cells.resize(headers_.size());
    rows_.push_back(std::move(cells));
  }

  /// Every line starts with `indent`; each ends with '\n'.
  void print(std::ostream& os, std::string_view indent = {}) const {
    std::vector<std::size_t> widths(headers_.size());
    for (std::size_t c = 0; c < headers_.size(); ++c) widths[c] = headers_[c].size();
    for (const auto& row : rows_)
      for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    auto line = [&](const std::vector<std::string>& cells) {
      std::string out(indent);
      for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c > 0) out += "  ";
        const std::string pad(widths[c] - cells[c].size(), ' ');
        out += aligns_[c] == align::left ? cells[c] + pad : pad + cells[c];
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      os << out << '\n';
    };
    line(headers_);
    for (const auto& row : rows_) line(row);
  }

 private:
  std::vector<std::string> headers_;
  std::vector<align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

/// Flushes `out` and throws dcp::error when anything written to it was lost (a full disk,
/// a closed pipe, `> /dev/full`): a tool whose output did not arrive must not exit 0.
inline void finish_output(std::ostream& out, std::string_view what = "standard output") {
  out.flush();
  if (!out) throw error("cannot write to " + std::string(what));
}

/// Runs a tool's body and maps what it throws to an exit status, with one line on `err` named
/// after the tool: 2 for usage_error (plus a hint to --help), 1 for dcp::error, out of memory
/// and any other exception. Every message goes through printable().
template <class Body>
int run_tool(std::string_view tool, std::ostream& err, Body&& body) noexcept {
  try {
    try {
      return body();
    } catch (const usage_error& e) {
      err << tool << ": " << printable(e.what()) << "\nTry '" << tool << " --help'.\n";
      return 2;
    } catch (const error& e) {
      err << tool << ": " << printable(e.what()) << '\n';
      return 1;
    } catch (const std::bad_alloc&) {
      err << tool
          << ": out of memory (the batch, or what the options ask for, is too large "
             "for this machine)\n";
      return 1;
    } catch (const std::exception& e) {
      err << tool << ": " << printable(e.what()) << '\n';
      return 1;
    }
  } catch (...) {
    return 1;  // writing the message itself failed
  }
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool
