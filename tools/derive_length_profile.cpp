// derive_length_profile: reads a file of measured sequence lengths (one per line) and prints a
// C++ header holding its quantile table and summary as a dcp::workload::profile_table, ready to
// commit under sim/include/dcp/workload/. Only this derived table goes into the repository, never
// the measured file itself.
//
// Usage:
//   derive_length_profile --name NAME --source TEXT LENGTHS_FILE > HEADER
//   (HEADER: sim/include/dcp/workload/NAME_profile.hpp)
//
//   --name     C++ identifier of the profile; the header defines profiles::NAME_points and
//              profiles::NAME_table
//   --source   where the lengths come from and their licence, printed into the header
//
// The header records the commands that regenerate it.
//
// The table: lower empirical quantiles at probabilities in parts per million, every 0.25% up to
// p99, then about ten times denser per decade of the tail (0.025% to p99.9, 0.0025% to p99.99,
// 0.0002% to p99.999) and every 1e-6 above, so the heavy tail that dominates attention work is
// reproduced. The grid is this tool's choice; it fixes the table, and the embedded header is the
// output of this code alone.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/workload/deterministic_math.hpp"
#include "dcp/workload/loaders.hpp"
#include "dcp/workload/profile_table.hpp"

namespace {

using dcp::workload::table_probability_scale;

/// Probability grid in parts per million: (start, stop, step) segments, stop inclusive.
std::vector<std::int64_t> probability_grid() {
  struct segment {
    std::int64_t start, stop, step;
  };
  constexpr segment segments[] = {
      {0, 990'000, 2'500},      // body: every 0.25% up to p99
      {990'000, 999'000, 250},  // p99..p99.9 every 0.025%
      {999'000, 999'900, 25},   // p99.9..p99.99 every 0.0025%
      {999'900, 999'990, 2},    // p99.99..p99.999 every 0.0002%
      {999'990, 1'000'000, 1},  // the last 1e-5 every 1e-6
  };
  std::vector<std::int64_t> grid;
  for (const auto& s : segments) {
    for (std::int64_t p = s.start; p <= s.stop; p += s.step) {
      if (grid.empty() || p > grid.back()) grid.push_back(p);
    }
  }
  return grid;
}

/// Lower empirical quantile of sorted lengths at probability ppm / 1e6:
/// sorted[ceil(ppm * n / 1e6) - 1], and the minimum at probability 0.
std::int64_t lower_quantile(const std::vector<std::int64_t>& sorted, std::int64_t ppm) {
  const auto n = static_cast<std::int64_t>(sorted.size());
  if (ppm == 0) return sorted.front();
  const std::int64_t rank = (ppm * n + table_probability_scale - 1) / table_probability_scale;
  return sorted[static_cast<std::size_t>(std::clamp<std::int64_t>(rank, 1, n) - 1)];
}

/// Mean of the log-linear interpolation between the points: each segment of probability dp
/// between lengths a <= b contributes dp times the logarithmic mean (b - a) / ln(b / a).
double interpolated_mean(const std::vector<dcp::workload::table_point>& points) {
  double mean = 0;
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    const auto ppm = points[i + 1].probability_ppm - points[i].probability_ppm;
    const double dp = static_cast<double>(ppm) / static_cast<double>(table_probability_scale);
    const auto a = static_cast<double>(points[i].tokens);
    const auto b = static_cast<double>(points[i + 1].tokens);
    const double segment_mean = a == b ? a : (b - a) / (dcp::workload::detail::portable_log(b / a));
    mean += dp * segment_mean;
  }
  return mean;
}

std::string shell_quote(std::string_view arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-./=:+,") == std::string_view::npos) {
    return std::string(arg);
  }
  std::string quoted = "'";
  for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

bool is_identifier(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  return name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos;
}

std::string escape_string_literal(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "derive_length_profile: %s\n"
               "usage: derive_length_profile --name NAME --source TEXT LENGTHS_FILE > HEADER\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name, source, input_path;
  std::string invocation = "./derive_length_profile";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) return false;
      into = argv[++i];
      invocation += " " + std::string(arg) + " " + shell_quote(into);
      return true;
    };
    if (arg == "--name") {
      if (!value(name)) return usage("--name needs a value");
    } else if (arg == "--source") {
      if (!value(source)) return usage("--source needs a value");
    } else if (!arg.empty() && arg.front() == '-') {
      return usage(("unknown option " + std::string(arg)).c_str());
    } else if (input_path.empty()) {
      input_path = arg;
    } else {
      return usage("more than one input file");
    }
  }
  if (name.empty() || source.empty() || input_path.empty()) {
    return usage("--name, --source and an input file are required");
  }
  if (!is_identifier(name)) return usage("--name must be a lower-case C++ identifier");

  std::vector<std::int64_t> lengths;
  try {
    const auto samples = dcp::workload::read_lengths_file(input_path);
    lengths.reserve(samples.size());
    for (const auto& s : samples) lengths.push_back(s.tokens);
  } catch (const dcp::error& e) {
    std::fprintf(stderr, "derive_length_profile: %s\n", e.what());
    return 1;
  }
  if (lengths.empty()) {
    std::fprintf(stderr, "derive_length_profile: %s: no lengths in the file\n", input_path.c_str());
    return 1;
  }
  std::sort(lengths.begin(), lengths.end());

  const auto count = static_cast<std::int64_t>(lengths.size());
  std::int64_t total = 0;
  for (const auto length : lengths) {
    if (length > std::numeric_limits<std::int64_t>::max() - total) {
      std::fprintf(stderr, "derive_length_profile: the token total exceeds %lld\n",
                   static_cast<long long>(std::numeric_limits<std::int64_t>::max()));
      return 1;
    }
    total += length;
  }
  std::vector<dcp::workload::table_point> points;
  for (const auto ppm : probability_grid()) points.push_back({ppm, lower_quantile(lengths, ppm)});
  const std::int64_t median = lengths[static_cast<std::size_t>((count - 1) / 2)];

  auto quantile_text = [&](std::int64_t ppm) {
    return std::to_string(lower_quantile(lengths, ppm));
  };

  std::printf("#pragma once\n");
  std::printf("// GENERATED by tools/derive_length_profile.cpp; do not edit by hand.\n");
  std::printf("// Profile '%s': quantile table and summary of %lld measured lengths.\n",
              name.c_str(), static_cast<long long>(count));
  std::printf("// Source: %s\n", source.c_str());
  std::printf("// Only this derived table is in the repository, not the measured file.\n");
  std::printf("// Regenerate from the repository root:\n");
  std::printf(
      "//   c++ -std=c++20 -O2 -Iinclude tools/derive_length_profile.cpp -o "
      "derive_length_profile\n");
  std::printf("//   (or use the CMake target dcp-derive-profile, the same program)\n");
  std::printf("//   %s %s > sim/include/dcp/workload/%s_profile.hpp\n", invocation.c_str(),
              shell_quote(input_path).c_str(), name.c_str());
  std::printf("//\n");
  std::printf(
      "// Measured: mean %.3f, median %lld, p90 %s, p99 %s, p99.9 %s, p99.99 %s, "
      "p99.999 %s, max %lld.\n",
      static_cast<double>(total) / static_cast<double>(count), static_cast<long long>(median),
      quantile_text(900'000).c_str(), quantile_text(990'000).c_str(),
      quantile_text(999'000).c_str(), quantile_text(999'900).c_str(),
      quantile_text(999'990).c_str(), static_cast<long long>(lengths.back()));
  std::printf("// Mean of the log-linear interpolation between the points below: %.1f.\n",
              interpolated_mean(points));
  std::printf("\n#include \"dcp/workload/profile_table.hpp\"\n\n");
  std::printf("namespace dcp::workload::profiles {\n\n");
  std::printf("/// {probability in millionths, lower empirical quantile in tokens}\n");
  std::printf("inline constexpr table_point %s_points[] = {\n", name.c_str());
  std::string row;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string entry = "{" + std::to_string(points[i].probability_ppm) + ", " +
                              std::to_string(points[i].tokens) + "},";
    if (row.size() + 1 + entry.size() > 96) {
      std::printf("   %s\n", row.c_str());
      row.clear();
    }
    row += " " + entry;
  }
  if (!row.empty()) std::printf("   %s\n", row.c_str());
  std::printf("};\n\n");
  std::printf("inline constexpr profile_table %s_table{\n", name.c_str());
  std::printf("    \"%s\",\n", name.c_str());
  std::printf("    \"%s\",\n", escape_string_literal(source).c_str());
  std::printf("    %lld,  // count\n", static_cast<long long>(count));
  std::printf("    %lld,  // total tokens\n", static_cast<long long>(total));
  std::printf("    %lld,  // min\n", static_cast<long long>(lengths.front()));
  std::printf("    %lld,  // median (lower)\n", static_cast<long long>(median));
  std::printf("    %lld,  // max\n", static_cast<long long>(lengths.back()));
  std::printf("    %s_points,\n", name.c_str());
  std::printf("};\n\n");
  std::printf("}  // namespace dcp::workload::profiles\n");
  return 0;
}
