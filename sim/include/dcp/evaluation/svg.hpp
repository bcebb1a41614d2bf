#pragma once
// Figures as self-contained SVG: one step's per-GPU timeline, throughput per policy, and GPU
// utilisation over steps. Plain text, no dependencies, deterministic output.

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dcp/sim/simulator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

namespace detail {

[[nodiscard]] inline std::string escape_xml(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A colour per power-of-two degree (1, 2, 4, ... 1024), colour-blind-friendly order.
[[nodiscard]] inline const char* degree_colour(std::int64_t degree) {
  static const char* palette[] = {"#4477aa", "#66ccee", "#228833", "#ccbb44", "#ee6677", "#aa3377",
                                  "#bbbbbb", "#332288", "#117733", "#882255", "#44aa99"};
  std::size_t k = 0;
  while ((std::int64_t{1} << k) < degree && k + 1 < std::size(palette)) ++k;
  return palette[k];
}

[[nodiscard]] inline std::string fixed(double v, int digits = 2) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

[[nodiscard]] inline std::string header(double width, double height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(width, 0) + "\" height=\"" +
         fixed(height, 0) + "\" viewBox=\"0 0 " + fixed(width, 0) + " " + fixed(height, 0) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
}

}  // namespace detail

/// One step's per-GPU timeline: a row per rank, a box per micro-step coloured by its degree;
/// micro-steps with recomputation are hatched. Rows are thinned to at most 256 for large runs.
[[nodiscard]] inline std::string timeline_svg(const sim::step_result& step,
                                              std::string_view title) {
  const auto ranks = step.timelines.size();
  const std::size_t stride = std::max<std::size_t>(1, (ranks + 255) / 256);
  const std::size_t rows = (ranks + stride - 1) / stride;
  const double left = 60, top = 40, width = 900,
               row = std::max(
                   3.0,
                   std::min(14.0, 480.0 / static_cast<double>(std::max<std::size_t>(rows, 1))));
  const double end = std::max(step.makespan_seconds, 1e-9);
  const double height = top + row * static_cast<double>(rows) + 60;
  std::string svg = detail::header(left + width + 20, height);
  svg +=
      "<defs><pattern id=\"recompute\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"6\" fill=\"black\" "
      "fill-opacity=\"0.35\"/></pattern></defs>\n";
  svg += "<text x=\"" + detail::fixed(left) + "\" y=\"20\" font-size=\"14\">" +
         detail::escape_xml(title) + "</text>\n";
  std::vector<std::int64_t> degrees_seen;
  for (std::size_t r = 0; r < ranks; r += stride) {
    const double y = top + row * static_cast<double>(r / stride);
    for (const auto& interval : step.timelines[r]) {
      const double x = left + width * interval.start / end;
      const double w = std::max(0.5, width * (interval.end - interval.start) / end);
      const std::string geometry = "x=\"" + detail::fixed(x) + "\" y=\"" + detail::fixed(y) +
                                   "\" width=\"" + detail::fixed(w) + "\" height=\"" +
                                   detail::fixed(row * 0.85) + "\"";
      svg += "<rect " + geometry + " fill=\"" + detail::degree_colour(interval.degree) + "\"/>\n";
      if (!interval.recompute.is_none())
        svg += "<rect " + geometry + " fill=\"url(#recompute)\"/>\n";
      if (std::find(degrees_seen.begin(), degrees_seen.end(), interval.degree) ==
          degrees_seen.end())
        degrees_seen.push_back(interval.degree);
    }
    if (r % (stride * std::max<std::size_t>(1, rows / 8)) == 0)
      svg += "<text x=\"" + detail::fixed(left - 6) + "\" y=\"" + detail::fixed(y + row * 0.8) +
             "\" text-anchor=\"end\" font-size=\"10\">" + std::to_string(r) + "</text>\n";
  }
  const double axis = top + row * static_cast<double>(rows) + 14;
  for (int tick = 0; tick <= 4; ++tick) {
    const double x = left + width * tick / 4.0;
    svg += "<text x=\"" + detail::fixed(x) + "\" y=\"" + detail::fixed(axis) +
           "\" text-anchor=\"middle\" font-size=\"10\">" + detail::fixed(end * tick / 4.0) +
           " s</text>\n";
  }
  std::sort(degrees_seen.begin(), degrees_seen.end());
  double x = left;
  for (const auto d : degrees_seen) {
    svg += "<rect x=\"" + detail::fixed(x) + "\" y=\"" + detail::fixed(axis + 12) +
           "\" width=\"12\" height=\"12\" fill=\"" + detail::degree_colour(d) + "\"/><text x=\"" +
           detail::fixed(x + 16) + "\" y=\"" + detail::fixed(axis + 22) + "\">degree " +
           std::to_string(d) + "</text>\n";
    x += 90;
  }
  svg += "<rect x=\"" + detail::fixed(x) + "\" y=\"" + detail::fixed(axis + 12) +
         "\" width=\"12\" height=\"12\" fill=\"url(#recompute)\" stroke=\"black\"/><text x=\"" +
         detail::fixed(x + 16) + "\" y=\"" + detail::fixed(axis + 22) + "\">recomputation</text>\n";
  return svg + "</svg>\n";
}

/// Horizontal bars, one per (label, value), with the value printed.
[[nodiscard]] inline std::string bar_chart_svg(
    const std::vector<std::pair<std::string, double>>& bars, std::string_view title,
    std::string_view unit) {
  const double left = 150, top = 40, width = 600, bar = 22;
  double top_value = 0;
  for (const auto& [label, v] : bars) top_value = std::max(top_value, v);
  top_value = std::max(top_value, 1e-12);
  std::string svg =
      detail::header(left + width + 140, top + bar * 1.4 * static_cast<double>(bars.size()) + 30);
  svg += "<text x=\"" + detail::fixed(left) + "\" y=\"20\" font-size=\"14\">" +
         detail::escape_xml(title) + "</text>\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double y = top + bar * 1.4 * static_cast<double>(i);
    const double w = width * bars[i].second / top_value;
    svg += "<text x=\"" + detail::fixed(left - 8) + "\" y=\"" + detail::fixed(y + bar * 0.7) +
           "\" text-anchor=\"end\">" + detail::escape_xml(bars[i].first) + "</text>\n";
    svg += "<rect x=\"" + detail::fixed(left) + "\" y=\"" + detail::fixed(y) + "\" width=\"" +
           detail::fixed(w) + "\" height=\"" + detail::fixed(bar) + "\" fill=\"" +
           (i == 0 ? "#ee6677" : "#4477aa") + "\"/>\n";
    svg += "<text x=\"" + detail::fixed(left + w + 6) + "\" y=\"" + detail::fixed(y + bar * 0.7) +
           "\">" + detail::fixed(bars[i].second, 3) + " " + detail::escape_xml(unit) + "</text>\n";
  }
  return svg + "</svg>\n";
}

/// One line per series over the step index, y in [0, 1] (utilisation).
[[nodiscard]] inline std::string line_chart_svg(
    const std::vector<std::pair<std::string, std::vector<double>>>& series, std::string_view title,
    std::string_view y_label) {
  const double left = 60, top = 40, width = 700, height = 300;
  std::size_t points = 0;
  for (const auto& s : series) points = std::max(points, s.second.size());
  std::string svg = detail::header(left + width + 200, top + height + 50);
  svg += "<text x=\"" + detail::fixed(left) + "\" y=\"20\" font-size=\"14\">" +
         detail::escape_xml(title) + "</text>\n";
  svg += "<rect x=\"" + detail::fixed(left) + "\" y=\"" + detail::fixed(top) + "\" width=\"" +
         detail::fixed(width) + "\" height=\"" + detail::fixed(height) +
         "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = top + height * (1.0 - tick / 4.0);
    svg += "<text x=\"" + detail::fixed(left - 6) + "\" y=\"" + detail::fixed(y + 4) +
           "\" text-anchor=\"end\" font-size=\"10\">" + detail::fixed(tick / 4.0) + "</text>\n";
  }
  svg += "<text x=\"" + detail::fixed(left) + "\" y=\"" + detail::fixed(top + height + 30) +
         "\">step (0.." + std::to_string(points > 0 ? points - 1 : 0) +
         "); y: " + detail::escape_xml(y_label) + "</text>\n";
  static const char* colours[] = {"#ee6677", "#4477aa", "#228833", "#ccbb44",
                                  "#66ccee", "#aa3377", "#bbbbbb", "#332288"};
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& values = series[k].second;
    std::string path;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x =
          left +
          width * (points > 1 ? static_cast<double>(i) / static_cast<double>(points - 1) : 0.0);
      const double y = top + height * (1.0 - std::clamp(values[i], 0.0, 1.0));
      path += (i == 0 ? "M" : " L") + detail::fixed(x) + " " + detail::fixed(y);
    }
    const char* colour = colours[k % std::size(colours)];
    svg +=
        "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\"/>\n";
    const double ly = top + 14.0 * static_cast<double>(k) + 10;
    svg += "<rect x=\"" + detail::fixed(left + width + 12) + "\" y=\"" + detail::fixed(ly - 9) +
           "\" width=\"10\" height=\"10\" fill=\"" + colour + "\"/><text x=\"" +
           detail::fixed(left + width + 26) + "\" y=\"" + detail::fixed(ly) + "\">" +
           detail::escape_xml(series[k].first) + "</text>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
