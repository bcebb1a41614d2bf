#pragma once
// One step inside a tensor x pipeline grid as a self-contained SVG: a row per device (pipeline
// r at stage s), grouped by stage, a box per op coloured by its micro-batch's context-parallel
// degree, forwards light and backwards dark; the white between boxes is the pipeline's bubbles.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "dcp/evaluation/svg.hpp"
#include "dcp/pipeline/schedule.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

/// The executor's ops of `timeline` (simulate_pipeline of `in`) on a time axis up to the
/// makespan; stage 0's devices on top. Rows are thinned to at most 256 devices.
[[nodiscard]] inline std::string pipeline_timeline_svg(const pipeline_instance& in,
                                                       const pipeline_timeline& timeline,
                                                       std::string_view title) {
  const std::int64_t p = in.stages;
  const std::int64_t d = in.pipelines;
  const auto devices = static_cast<std::size_t>(p * d);
  const std::size_t stride = std::max<std::size_t>(1, (devices + 255) / 256);
  const std::size_t rows = (devices + stride - 1) / stride;
  const double left = 90, top = 40, width = 900;
  const double row =
      std::max(3.0, std::min(14.0, 480.0 / static_cast<double>(std::max<std::size_t>(rows, 1))));
  const double end = std::max(timeline.makespan, 1e-9);
  const double height = top + row * static_cast<double>(rows) + 60;
  const auto row_of = [&](std::int64_t device) {  // stage-major: stage s, then pipeline r
    return static_cast<std::size_t>((device % p) * d + device / p);
  };
  std::string svg = detail::header(left + width + 20, height);
  svg += "<text x=\"" + detail::fixed(left, 0) + "\" y=\"20\" font-weight=\"bold\">" +
         detail::escape_xml(title) + "</text>\n";
  for (std::int64_t s = 0; s < p; ++s) {
    const double y = top + row * static_cast<double>(static_cast<std::size_t>(s * d) / stride);
    svg += "<text x=\"4\" y=\"" + detail::fixed(y + std::min(row, 12.0), 1) + "\">stage " +
           std::to_string(s) + "</text>\n";
    svg += "<line x1=\"" + detail::fixed(left, 0) + "\" x2=\"" + detail::fixed(left + width, 0) +
           "\" y1=\"" + detail::fixed(y, 1) + "\" y2=\"" + detail::fixed(y, 1) +
           "\" stroke=\"#888\" stroke-width=\"0.5\"/>\n";
  }
  for (const auto& op : timeline.ops) {
    const auto r = row_of(op.device);
    if (r % stride != 0) continue;
    const auto& work = in.work[static_cast<std::size_t>(op.work)];
    const double x = left + width * op.start / end;
    const double w = std::max(0.3, width * (op.end - op.start) / end);
    const double y = top + row * static_cast<double>(r / stride);
    svg += "<rect x=\"" + detail::fixed(x) + "\" y=\"" + detail::fixed(y + 0.5) + "\" width=\"" +
           detail::fixed(w) + "\" height=\"" + detail::fixed(std::max(1.0, row - 1.0)) +
           "\" fill=\"" + detail::degree_colour(work.degree) + "\" fill-opacity=\"" +
           (op.backward ? "1" : "0.45") + "\"><title>slot " + std::to_string(work.slot) +
           ", degree " + std::to_string(work.degree) + ", chunk " +
           std::to_string(op.virtual_stage) + (op.backward ? " backward " : " forward ") +
           detail::fixed(op.start, 3) + "-" + detail::fixed(op.end, 3) + " s</title></rect>\n";
  }
  const double axis = top + row * static_cast<double>(rows) + 16;
  svg += "<text x=\"" + detail::fixed(left, 0) + "\" y=\"" + detail::fixed(axis, 0) +
         "\">0 s</text>\n<text x=\"" + detail::fixed(left + width - 80, 0) + "\" y=\"" +
         detail::fixed(axis, 0) + "\">" + detail::fixed(end, 3) + " s</text>\n";
  svg += "<text x=\"" + detail::fixed(left, 0) + "\" y=\"" + detail::fixed(axis + 20, 0) +
         "\">a row per device (pipeline within stage); light: forward, dark: backward; colour: "
         "degree; bubble " +
         detail::fixed(100.0 * timeline.bubble_fraction(), 1) + " %</text>\n";
  return svg + "</svg>\n";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
