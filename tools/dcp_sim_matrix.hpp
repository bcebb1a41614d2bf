#pragma once
// dcp-sim --matrix: every policy on a grid of scenarios (model x workload x GPUs x GPU type x
// sequence-parallel style), one row per cell: ours against the best other policy, the gap to
// the truth bound and the OOM count (docs/results.md, "Scenario matrix"). Part of
// dcp_sim_main.hpp; the cells are listed by matrix_cells(), each run as the dcp-sim invocation
// it prints.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "dcp/evaluation/compare.hpp"
#include "dcp/plan/json.hpp"

#include "cli_common.hpp"
#include "dcp_sim_cli.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail {

/// JSON text of a string and of a number (every digit a double holds), for dcp-sim's writers.
[[nodiscard]] inline std::string json_string_of(std::string_view text) {
  std::ostringstream s;
  dcp::detail::write_json_string(s, text);
  return s.str();
}
[[nodiscard]] inline std::string json_number_of(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}

/// One cell of the matrix: the dcp-sim options that run it alone.
struct matrix_cell {
  std::string model;
  std::string workload;
  std::int64_t context = 65536;
  std::string gpu;
  std::int64_t gpus = 32;
  sequence_parallel sp = sequence_parallel::ulysses;
  int zero_stage = 1;
  std::int64_t tokens = 0;

  [[nodiscard]] std::string command(std::int64_t steps, std::int64_t gpus_per_node) const {
    std::ostringstream s;
    s << "dcp-sim --model " << model << " --workload " << workload;
    if (workload != "opensora") s << " --context " << context;
    s << " --gpu " << gpu << " --nodes " << gpus / gpus_per_node << " --gpus-per-node "
      << gpus_per_node << " --sp " << to_string(sp) << " --zero " << zero_stage << " --tokens "
      << tokens << " --steps " << steps;
    return s.str();
  }
};

/// The matrix of issue 10: Llama-3-8B and 70B and Qwen2.5-72B on Wikipedia (64K), long SFT
/// (128K) and the long-context corpus at 128K, 512K and 2M; STDiT3-XL and Wan2.1-14B on the
/// OpenSora mix; 32, 256 and 1,024 GPUs; H100 and H200; Ulysses, ring and the per-micro-batch
/// choice (auto: ours choose per micro-batch among Ulysses, ring and hybrid; every other policy at
/// its best fixed style, the Ulysses and ring cells' runs reused). ZeRO-1 below 10B
/// parameters, ZeRO-3 from there (where ZeRO-1's replicated weights and gradients would not
/// leave room on an 80 GB GPU). Tokens per step scale with the cluster: 31,250 per GPU for text
/// (1M at 32 GPUs, 8M at 256), 125,000 for video (4M at 32). Each axis the options fix (--model,
/// --workload, --context, --gpu, --nodes, --sp) keeps only that value.
inline std::vector<matrix_cell> matrix_cells(const sim_options_cli& o) {
  struct text_workload {
    const char* name;
    std::int64_t context;
  };
  const std::vector<text_workload> text{{"wikipedia", 65536},
                                        {"long-sft", 131072},
                                        {"long-context", 131072},
                                        {"long-context", 524288},
                                        {"long-context", 2097152}};
  const std::vector<std::string> text_models{"llama3-8b", "llama3-70b", "qwen2.5-72b"};
  const std::vector<std::string> video_models{"stdit3-xl", "wan2.1-14b"};
  std::vector<std::int64_t> sizes{32, 256, 1024};
  if (o.nodes_given) sizes = {o.nodes * o.gpus_per_node};
  std::vector<std::string> gpus{"h100", "h200"};
  if (o.gpu_given) gpus = {o.gpu};
  std::vector<sequence_parallel> styles{sequence_parallel::ulysses, sequence_parallel::ring,
                                        sequence_parallel::automatic};
  if (o.sp_given) styles = {o.sp};
  std::vector<matrix_cell> cells;
  const auto add = [&](const std::string& model, const std::string& workload, std::int64_t context,
                       std::int64_t tokens_per_gpu) {
    if (o.model_given && model != o.model) return;
    if (o.workload_given && workload != o.workload) return;
    if (o.context_given && workload != "opensora" && context != o.context) return;
    const int zero = model_named(model).total_params() < 10'000'000'000 ? 1 : 3;
    for (auto n : sizes)
      for (const auto& gpu : gpus)
        for (auto sp : styles)
          cells.push_back({model, workload, context, gpu, n, sp, zero, tokens_per_gpu * n});
  };
  for (const auto& model : text_models)
    for (const auto& w : text) add(model, w.name, w.context, 31'250);
  for (const auto& model : video_models) add(model, "opensora", 0, 125'000);
  return cells;
}

/// One cell's outcome.
struct matrix_row {
  matrix_cell cell;
  std::string error{};       ///< when the cell could not run (a sample fits nowhere, ...)
  double ours = 0;           ///< dcp, tokens/s
  std::string best_other{};  ///< the fastest other policy (peers, variants, static layouts)
  double best_other_rate = 0;
  // The same without noise (the plans simulated noise free): the fastest other may differ.
  double ours_noise_free = 0;
  /// auto cells: ours at its best single style for the run (dcp-fixed-style), noise free
  double ours_fixed_style_noise_free = 0;
  std::string best_other_noise_free{};
  double best_other_noise_free_rate = 0;
  double vs_best_static = 0;
  double gap = 0;  ///< dcp's mean gap to the truth bound (noise free)
  double noise = 0;
  std::int64_t oom = 0;  ///< every policy's OOM events together
  std::int64_t ours_oom = 0;
  std::vector<std::string> skipped{};  ///< user static layouts whose rule finds none, with why
  [[nodiscard]] double ratio() const { return best_other_rate > 0 ? ours / best_other_rate : 0.0; }
  [[nodiscard]] double noise_free_ratio() const {
    return best_other_noise_free_rate > 0 ? ours_noise_free / best_other_noise_free_rate : 0.0;
  }
};

/// Runs every cell: `run_cell(options, skipped, known)` gives the scenario result of those
/// options (dcp-sim's own path), naming in `skipped` the policies it could not build for the
/// cell; `known` holds the results of the same scenario's cells under fixed styles run just
/// before (for an auto cell to reuse). `progress(done, total)` after each cell.
template <class RunCell>
std::vector<matrix_row> run_matrix(
    const sim_options_cli& o, RunCell&& run_cell,
    const std::function<void(std::int64_t, std::int64_t)>& progress = {}) {
  const auto cells = matrix_cells(o);
  std::vector<matrix_row> rows;
  std::int64_t done = 0;
  // The fixed-style results of the scenario the cells are at (sp is the innermost axis).
  std::vector<std::pair<sequence_parallel, evaluation::scenario_result>> same_scenario;
  const matrix_cell* previous = nullptr;
  for (const auto& cell : cells) {
    matrix_row row{cell};
    if (!previous || previous->model != cell.model || previous->workload != cell.workload ||
        previous->context != cell.context || previous->gpu != cell.gpu ||
        previous->gpus != cell.gpus)
      same_scenario.clear();
    previous = &cell;
    auto copy = o;
    copy.model = cell.model;
    copy.model_given = true;
    copy.workload = cell.workload;
    copy.workload_given = true;
    copy.context = cell.workload == "opensora" ? o.context : cell.context;
    copy.gpu = cell.gpu;
    copy.nodes = cell.gpus / o.gpus_per_node;
    copy.sp = cell.sp;
    copy.zero_stage = cell.zero_stage;
    copy.tokens = copy.video_tokens = cell.tokens;
    copy.tokens_given = true;
    copy.steps = o.steps_given ? o.steps : 3;
    try {
      std::vector<std::pair<sequence_parallel, const evaluation::scenario_result*>> known;
      if (cell.sp == sequence_parallel::automatic)
        for (const auto& [style, result] : same_scenario) known.emplace_back(style, &result);
      const evaluation::scenario_result r = run_cell(copy, row.skipped, known);
      if (cell.sp != sequence_parallel::automatic) same_scenario.emplace_back(cell.sp, r);
      for (const auto& p : r.policies) {
        row.oom += p.oom_events;
        if (p.name == "dcp") {
          row.ours = p.tokens_per_s;
          row.ours_noise_free = p.noise_free_tokens_per_s;
          row.vs_best_static = p.speedup_vs_best_static;
          row.gap = p.gap_to_bound;
          row.noise = p.noise_share;
          row.ours_oom = p.oom_events;
        } else if (p.name == "dcp-fixed-style") {
          row.ours_fixed_style_noise_free = p.noise_free_tokens_per_s;
        } else if (p.name != "dcp-calibrated" && p.name != "dcp-delay") {
          // dcp-calibrated, dcp-delay and dcp-fixed-style are ours too. wlb-llm-delay counts: it
          // drains its queues before the run ends, so it trains the tokens every policy trains.
          if (p.tokens_per_s > row.best_other_rate) {
            row.best_other = p.name;
            row.best_other_rate = p.tokens_per_s;
          }
          if (p.noise_free_tokens_per_s > row.best_other_noise_free_rate) {
            row.best_other_noise_free = p.name;
            row.best_other_noise_free_rate = p.noise_free_tokens_per_s;
          }
        }
      }
    } catch (const dcp::error& e) {
      row.error = e.what();
    }
    rows.push_back(std::move(row));
    if (progress) progress(++done, static_cast<std::int64_t>(cells.size()));
  }
  return rows;
}

inline void print_matrix(std::ostream& os, const std::vector<matrix_row>& rows, std::int64_t steps,
                         std::int64_t gpus_per_node) {
  using align = text_table::align;
  text_table table(
      {"model", "workload", "context", "GPUs", "gpu", "sp", "ZeRO", "dcp tokens/s", "best other",
       "dcp / best other", "noise free", "vs static", "gap", "noise", "OOM (all)"},
      {align::left, align::left});
  auto fixed = [](double v, int digits, const char* suffix = "") {
    std::ostringstream s;
    s << std::fixed << std::setprecision(digits) << v << suffix;
    return s.str();
  };
  std::int64_t ran = 0, ahead = 0, ahead_noise_free = 0, oom_cells = 0;
  double gap_sum = 0, gap_max = 0;
  for (const auto& r : rows) {
    const auto& c = r.cell;
    const std::string sp(to_string(c.sp));
    const std::string context = c.workload == "opensora" ? "-" : std::to_string(c.context);
    if (!r.error.empty()) {
      table.add_row({c.model, c.workload, context, std::to_string(c.gpus), c.gpu, sp,
                     std::to_string(c.zero_stage), "-", "does not run", "-", "-", "-", "-", "-",
                     "-"});
      continue;
    }
    ++ran;
    if (r.ratio() >= 0.995) ++ahead;
    if (r.noise_free_ratio() >= 0.995) ++ahead_noise_free;
    if (r.oom > 0) ++oom_cells;
    gap_sum += r.gap;
    gap_max = std::max(gap_max, r.gap);
    table.add_row({c.model, c.workload, context, std::to_string(c.gpus), c.gpu, sp,
                   std::to_string(c.zero_stage), fixed(r.ours, 0), printable(r.best_other),
                   fixed(r.ratio(), 3, "x"),
                   fixed(r.noise_free_ratio(), 3, "x") +
                       (r.best_other_noise_free == r.best_other
                            ? ""
                            : " (" + printable(r.best_other_noise_free) + ")"),
                   fixed(r.vs_best_static, 3, "x"), fixed(100 * r.gap, 1, " %"),
                   fixed(100 * r.noise, 1, " %"), std::to_string(r.oom)});
  }
  table.print(os);
  os << ran << " of " << rows.size() << " cells ran (" << steps
     << " steps each); dcp >= 0.995 x the best other policy in " << ahead << " ("
     << ahead_noise_free << " without noise); mean gap to the truth bound "
     << fixed(ran > 0 ? 100 * gap_sum / static_cast<double>(ran) : 0.0, 1, " %") << ", largest "
     << fixed(100 * gap_max, 1, " %") << "; cells with an OOM event (any policy): " << oom_cells
     << "\n";
  for (const auto& r : rows) {
    if (!r.error.empty())
      os << "  does not run: " << r.cell.command(steps, gpus_per_node) << ": " << printable(r.error)
         << "\n";
    for (const auto& s : r.skipped)
      os << "  left out of " << r.cell.command(steps, gpus_per_node) << ": " << printable(s)
         << "\n";
  }
  os << "best other: the fastest policy but dcp, dcp-calibrated, dcp-delay and dcp-fixed-style "
        "(ours), every policy having trained the drawn tokens (an admitting one drains its "
        "queues); noise free: the same plans simulated without noise, "
        "against the fastest "
        "other policy then (named where it differs); every cell is one dcp-sim run: dcp-sim "
        "--model M --workload W --context C "
        "--gpu G --nodes N --sp S --zero Z --tokens T --steps S; in an auto cell every other "
        "policy runs at its best fixed "
        "style (ulysses, ring or hybrid) for the run\n";
}

inline void write_matrix_json(std::ostream& os, const std::vector<matrix_row>& rows,
                              std::int64_t steps, std::int64_t gpus_per_node) {
  const auto string = json_string_of;
  const auto number = json_number_of;
  os << "{\"matrix\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& c = r.cell;
    os << (i ? "," : "") << "\n {\"model\":" << string(c.model)
       << ",\"workload\":" << string(c.workload) << ",\"context\":"
       << (c.workload == "opensora" ? std::string("null") : std::to_string(c.context))
       << ",\"gpus\":" << c.gpus << ",\"gpu\":" << string(c.gpu)
       << ",\"sp\":" << string(std::string(to_string(c.sp))) << ",\"zero\":" << c.zero_stage
       << ",\"tokens\":" << c.tokens << ",\"command\":" << string(c.command(steps, gpus_per_node));
    if (!r.error.empty()) {
      os << ",\"error\":" << string(r.error) << "}";
      continue;
    }
    os << ",\"dcp_tokens_per_s\":" << number(r.ours) << ",\"best_other\":" << string(r.best_other)
       << ",\"best_other_tokens_per_s\":" << number(r.best_other_rate)
       << ",\"dcp_over_best_other\":" << number(r.ratio())
       << ",\"dcp_noise_free_tokens_per_s\":" << number(r.ours_noise_free);
    if (c.sp == sequence_parallel::automatic)
      os << ",\"dcp_fixed_style_noise_free_tokens_per_s\":"
         << number(r.ours_fixed_style_noise_free);
    os << ",\"best_other_noise_free\":" << string(r.best_other_noise_free)
       << ",\"best_other_noise_free_tokens_per_s\":" << number(r.best_other_noise_free_rate)
       << ",\"dcp_over_best_other_noise_free\":" << number(r.noise_free_ratio())
       << ",\"speedup_vs_best_static\":" << number(r.vs_best_static)
       << ",\"gap_to_bound\":" << number(r.gap) << ",\"noise_share\":" << number(r.noise)
       << ",\"oom_events\":" << r.oom << ",\"dcp_oom_events\":" << r.ours_oom << ",\"left_out\":[";
    for (std::size_t k = 0; k < r.skipped.size(); ++k) os << (k ? "," : "") << string(r.skipped[k]);
    os << "]}";
  }
  os << "\n]}\n";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail
