#pragma once
// Reading measured workloads: one token count per line, or one video latent grid per CSV line.
// Errors name the source, the line, the text and the limit, e.g.
//   lengths.txt:17: 'abc' is not a positive integer
//   lengths.txt:18: 0 tokens, must be >= 1

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

namespace detail {

[[nodiscard]] inline std::string_view trim(std::string_view text) noexcept {
  constexpr std::string_view blanks = " \t\r\n\v\f";
  const auto first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(blanks);
  return text.substr(first, last - first + 1);
}

/// `text` with what a terminal would not show written out: control bytes (NUL included, which
/// would end a C string such as what()) as \xNN, and a UTF-8 byte order mark as \ufeff.
[[nodiscard]] inline std::string visible(std::string_view text) {
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (text.substr(i, bom.size()) == bom) {
      out += "\\ufeff";
      i += bom.size() - 1;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += static_cast<char>(byte);
    }
  }
  return out;
}

/// The offending text as it goes into a message: quoted, made visible, and cut at 40
/// characters so that a binary file fed by mistake does not make a megabyte-long exception.
[[nodiscard]] inline std::string quoted(std::string_view text) {
  constexpr std::size_t shown = 40;
  if (text.size() <= shown) return "'" + visible(text) + "'";
  return "'" + visible(text.substr(0, shown)) + "...' (" + std::to_string(text.size()) +
         " characters)";
}

[[nodiscard]] inline std::string location(std::string_view source, std::int64_t line) {
  return std::string(source) + ":" + std::to_string(line) + ": ";
}

/// Lines that carry no record: blank, or a comment starting with '#'.
[[nodiscard]] inline bool is_skipped(std::string_view trimmed) noexcept {
  return trimmed.empty() || trimmed.front() == '#';
}

/// Parses `text` (already trimmed) as a count >= 1 of `what`; on failure throws invalid_sample
/// whose message starts with where(), the "source:line: " prefix (plus a field name where there
/// is one). where() runs only on failure: building it for every line would dominate the cost.
template <class Where>
[[nodiscard]] std::int64_t parse_positive(std::string_view text, const Where& where,
                                          std::string_view what) {
  std::int64_t value = 0;
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  const auto [end, status] = std::from_chars(first, last, value);
  if (status == std::errc{} && end == last && value >= 1) return value;
  if (status == std::errc::result_out_of_range && text.front() != '-') {
    throw invalid_sample(where() + quoted(text) + " exceeds the limit of " +
                         std::to_string(std::numeric_limits<std::int64_t>::max()) + " " +
                         std::string(what));
  }
  if (status != std::errc{} || end != last || text.empty()) {
    throw invalid_sample(where() + quoted(text) + " is not a positive integer");
  }
  throw invalid_sample(where() + std::to_string(value) + " " + std::string(what) +
                       ", must be >= 1");
}

/// Calls on_line(line_number, text) for every line of `input` (1-based, without the '\n'),
/// reading in blocks of `block_bytes` (64 KiB): std::getline costs several times more on
/// million-line files. Linear in the input: after each read only the new bytes are searched for
/// '\n' (searching the whole unfinished line again was quadratic: 300 MB on one line took 41 s),
/// and the bytes of finished lines are dropped once per block.
template <class F>
void for_each_line(std::istream& input, std::string_view source, F&& on_line,
                   std::size_t block_bytes = std::size_t{1} << 16) {
  std::string pending;  // an unfinished line, then the block just read
  std::vector<char> block(std::max<std::size_t>(block_bytes, 1));
  std::int64_t line_number = 0;
  while (true) {
    input.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto got = static_cast<std::size_t>(input.gcount());
    if (got == 0) break;
    std::size_t searched = pending.size();  // bytes before this are known to hold no '\n'
    pending.append(block.data(), got);
    std::size_t start = 0;
    for (auto end = pending.find('\n', searched); end != std::string::npos;
         end = pending.find('\n', searched)) {
      on_line(++line_number, std::string_view(pending).substr(start, end - start));
      start = end + 1;
      searched = start;
    }
    pending.erase(0, start);
  }
  if (input.bad()) {
    throw error(std::string(source) + ":" + std::to_string(line_number) +
                ": read error after this line");
  }
  if (!pending.empty()) on_line(++line_number, std::string_view(pending));
}

/// `path` opened for reading; throws dcp::error naming it where it is a directory or cannot be
/// opened (a directory opens on Linux, then fails on its first read).
[[nodiscard]] inline std::ifstream open_or_throw(const std::filesystem::path& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw error(visible(path.string()) + ": is a directory, not a file");
  std::ifstream file(path);
  if (!file) throw error(visible(path.string()) + ": cannot open the file for reading");
  return file;
}

/// The most samples one file may hold (each costs ~200 bytes while it is planned): beyond it a
/// reader stops with an error naming the file and the line, instead of running out of memory.
inline constexpr std::size_t max_samples_per_file = std::size_t{1} << 26;  // 67,108,864

inline void check_sample_count(std::size_t count, std::string_view source, std::int64_t line) {
  if (count >= max_samples_per_file)
    throw invalid_sample(location(source, line) + "more than " +
                         std::to_string(max_samples_per_file) +
                         " samples, the most dcp reads from one file");
}

}  // namespace detail

/// Text samples from one token count per line; blank lines and lines starting with '#'
/// (after optional blanks) are skipped. Ids are 0..n-1 in file order, attention causal.
/// Throws invalid_sample naming `source_name`, the 1-based line, the text and the limit.
[[nodiscard]] inline std::vector<dcp::sample> read_lengths(std::istream& input,
                                                           std::string_view source_name) {
  std::vector<dcp::sample> samples;
  detail::for_each_line(input, source_name, [&](std::int64_t line_number, std::string_view line) {
    const std::string_view text = detail::trim(line);
    if (detail::is_skipped(text)) return;
    const std::int64_t tokens = detail::parse_positive(
        text, [&] { return detail::location(source_name, line_number); }, "tokens");
    detail::check_sample_count(samples.size(), source_name, line_number);
    samples.push_back(dcp::text_sample(samples.size(), tokens));
  });
  return samples;
}

/// read_lengths on a file; the file name is the source named in errors.
[[nodiscard]] inline std::vector<dcp::sample> read_lengths_file(const std::filesystem::path& path) {
  std::ifstream file = detail::open_or_throw(path);
  return read_lengths(file, path.string());
}

/// Video samples from CSV lines `frames,height,width`, each a count of latent patches (after
/// the VAE and patchification, not pixels). An optional first record `frames,height,width`
/// (any case) is a header and skipped; blank and '#' lines are skipped. Ids are 0..n-1.
/// Throws invalid_sample naming `source_name`, the line, the field, the text and the limit.
[[nodiscard]] inline std::vector<dcp::sample> read_video_csv(
    std::istream& input, std::string_view source_name,
    dcp::attention_kind attention = dcp::attention_kind::factorised) {
  constexpr std::string_view field_names[3] = {"frames", "height", "width"};
  std::vector<dcp::sample> samples;
  bool first_record = true;
  detail::for_each_line(input, source_name, [&](std::int64_t line_number, std::string_view line) {
    const std::string_view text = detail::trim(line);
    if (detail::is_skipped(text)) return;
    const auto where = [&] { return detail::location(source_name, line_number); };

    std::string_view fields[3];
    std::size_t field_count = 0;
    std::string_view rest = text;
    while (true) {
      const auto comma = rest.find(',');
      const std::string_view field = detail::trim(rest.substr(0, comma));
      if (field_count < 3) fields[field_count] = field;
      ++field_count;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (field_count != 3) {
      throw invalid_sample(where() + detail::quoted(text) + " has " + std::to_string(field_count) +
                           " fields, expected 3 (frames,height,width)");
    }
    if (first_record) {
      first_record = false;
      bool header = true;
      for (std::size_t i = 0; i < 3; ++i) {
        header = header && std::equal(fields[i].begin(), fields[i].end(), field_names[i].begin(),
                                      field_names[i].end(), [](char a, char b) {
                                        return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
                                      });
      }
      if (header) return;
    }

    std::int64_t values[3] = {};
    for (std::size_t i = 0; i < 3; ++i) {
      values[i] = detail::parse_positive(
          fields[i], [&] { return where() + std::string(field_names[i]) + " "; }, "patches");
    }
    const dcp::video_shape shape{values[0], values[1], values[2]};
    constexpr std::int64_t max_tokens = std::numeric_limits<std::int64_t>::max();
    if (shape.height > max_tokens / shape.width ||
        shape.frames > max_tokens / (shape.height * shape.width)) {
      throw invalid_sample(where() + detail::quoted(text) + " has more than " +
                           std::to_string(max_tokens) + " tokens (frames x height x width)");
    }
    detail::check_sample_count(samples.size(), source_name, line_number);
    samples.push_back(dcp::video_sample(samples.size(), shape, attention));
  });
  return samples;
}

/// read_video_csv on a file; the file name is the source named in errors.
[[nodiscard]] inline std::vector<dcp::sample> read_video_csv_file(
    const std::filesystem::path& path,
    dcp::attention_kind attention = dcp::attention_kind::factorised) {
  std::ifstream file = detail::open_or_throw(path);
  return read_video_csv(file, path.string(), attention);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
