#pragma once
// dcp-sim --fidelity: the published protocols of evaluation/fidelity.hpp as a table per
// scenario (published vs simulated ratio, relative difference, step times, the ±15 % bar and
// the mechanism behind every miss) or, with --json, as JSON.

#include <cstddef>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/evaluation/fidelity.hpp"
#include "dcp/plan/json.hpp"

#include "cli_common.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail {

[[nodiscard]] inline std::string fidelity_ratio_text(double ratio, bool up_to = false) {
  std::ostringstream os;
  os << (up_to ? "up to " : "") << std::fixed << std::setprecision(up_to ? 2 : 3) << ratio << "x";
  return os.str();
}

/// "195.3 / 151.9 ms" for a (baseline, system) pair of seconds; "-" when not published.
[[nodiscard]] inline std::string fidelity_steps_text(std::optional<double> baseline,
                                                     std::optional<double> system) {
  if (!baseline || !system) return "-";
  std::ostringstream os;
  const bool ms = *baseline < 1.0;
  os << std::fixed << std::setprecision(ms ? 1 : 2) << (ms ? 1e3 : 1.0) * *baseline << " / "
     << (ms ? 1e3 : 1.0) * *system << (ms ? " ms" : " s");
  return os.str();
}

inline void print_fidelity(std::ostream& os, const evaluation::fidelity_report& report) {
  os << "fidelity: published protocols re-enacted on the truth model (docs/fidelity.md); bar: "
        "simulated ratio "
        "within +-"
     << static_cast<int>(evaluation::fidelity_tolerance * 100) << " % of the published one\n\n";
  using align = text_table::align;
  for (const auto& info : report.scenarios) {
    os << "scenario " << printable(info.name) << ": " << printable(info.source) << "\n";
    os << "  metric: " << printable(info.metric) << "\n";
    for (const auto& line : info.assumptions) os << "  assumed: " << printable(line) << "\n";
    text_table table({"setting", "system vs baseline", "published", "simulated", "diff",
                      "published steps", "simulated steps", "dcp", "+-15 %"},
                     {align::left, align::left});
    std::vector<const evaluation::fidelity_row*> misses;
    for (const auto& row : report.rows) {
      if (row.scenario != info.name) continue;
      std::ostringstream diff;
      diff << std::showpos << std::fixed << std::setprecision(1) << 100 * row.relative_difference
           << " %";
      std::string verdict = row.within_15_percent ? "yes" : "MISS";
      if (!row.within_15_percent) {
        misses.push_back(&row);
        verdict += " (" + std::to_string(misses.size()) + ")";
      }
      table.add_row(
          {printable(row.setting), printable(row.system + " vs " + row.baseline),
           fidelity_ratio_text(row.published_ratio, row.published_up_to),
           fidelity_ratio_text(row.simulated_ratio), diff.str(),
           fidelity_steps_text(row.published_baseline_seconds, row.published_system_seconds),
           fidelity_steps_text(row.simulated_baseline_seconds, row.simulated_system_seconds),
           row.ours_ratio > 0 ? fidelity_ratio_text(row.ours_ratio) : "-", verdict});
    }
    table.print(os, "  ");
    os << "  steps: baseline / system; dcp: its simulated ratio over the same baseline (- where "
          "not run)\n";
    for (std::size_t m = 0; m < misses.size(); ++m)
      os << "  (" << m + 1 << ") " << printable(misses[m]->setting) << ": "
         << printable(misses[m]->reason) << "\n";
    os << "\n";
  }
}

inline void write_fidelity_json(std::ostream& os, const evaluation::fidelity_report& report) {
  using dcp::detail::write_json_number;
  using dcp::detail::write_json_string;
  const auto field = [&os](std::string_view name) {
    os << ',';
    write_json_string(os, name);
    os << ':';
  };
  const auto optional_number = [&os](std::optional<double> v) {
    if (v)
      write_json_number(os, *v);
    else
      os << "null";
  };
  os << "{\"fidelity\":{\"tolerance\":";
  write_json_number(os, evaluation::fidelity_tolerance);
  os << ",\"scenarios\":[";
  for (std::size_t i = 0; i < report.scenarios.size(); ++i) {
    const auto& info = report.scenarios[i];
    os << (i ? "," : "") << "\n {\"name\":";
    write_json_string(os, info.name);
    field("source");
    write_json_string(os, info.source);
    field("metric");
    write_json_string(os, info.metric);
    field("assumptions");
    os << '[';
    for (std::size_t a = 0; a < info.assumptions.size(); ++a) {
      if (a) os << ',';
      write_json_string(os, info.assumptions[a]);
    }
    os << "],\"rows\":[";
    bool first = true;
    for (const auto& row : report.rows) {
      if (row.scenario != info.name) continue;
      os << (first ? "" : ",") << "\n  {\"setting\":";
      write_json_string(os, row.setting);
      field("system");
      write_json_string(os, row.system);
      field("baseline");
      write_json_string(os, row.baseline);
      field("published_ratio");
      write_json_number(os, row.published_ratio);
      field("published_up_to");
      os << (row.published_up_to ? "true" : "false");
      field("simulated_ratio");
      write_json_number(os, row.simulated_ratio);
      field("relative_difference");
      write_json_number(os, row.relative_difference);
      field("published_baseline_step_s");
      optional_number(row.published_baseline_seconds);
      field("published_system_step_s");
      optional_number(row.published_system_seconds);
      field("simulated_baseline_step_s");
      write_json_number(os, row.simulated_baseline_seconds);
      field("simulated_system_step_s");
      write_json_number(os, row.simulated_system_seconds);
      field("dcp_ratio");
      if (row.ours_ratio > 0)
        write_json_number(os, row.ours_ratio);
      else
        os << "null";
      field("oom_events");
      write_json_number(os, row.oom_events);
      field("within_15_percent");
      os << (row.within_15_percent ? "true" : "false");
      field("reason");
      write_json_string(os, row.reason);
      os << '}';
      first = false;
    }
    os << "]}";
  }
  os << "\n]}}\n";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail
