#pragma once
// dcp-sim --pipeline: every pipeline policy on the same steps inside a tensor x pipeline grid,
// each plan timed stage by stage on the truth model, noise free (docs/pipeline.md,
// docs/results.md "Inside a tensor x pipeline grid"). Part of dcp_sim_main.hpp.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <string>
#include <vector>

#include "dcp/evaluation/pipeline_compare.hpp"
#include "dcp/evaluation/pipeline_svg.hpp"
#include "dcp/pipeline.hpp"
#include "dcp/sim/pipeline_truth.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/presets.hpp"

#include "dcp_sim_matrix.hpp"
#include "dcp_sim_pipeline_policies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail {

/// One scenario of issue 33's list: a model on H100 nodes in a (t, p, v) grid, a text workload
/// cut to a context window, tokens per step.
struct pipeline_scenario {
  std::string name;
  model_spec model;
  std::int64_t nodes = 16;
  model_parallel_grid grid;
  std::string workload;
  std::int64_t context = 131072;
  std::int64_t tokens = 0;
  /// The CP size of the static layouts and of WLB-LLM as the source ran them; 0: the smallest
  /// that holds the context (static) and the fastest (WLB-LLM).
  std::int64_t peer_context_parallel = 0;
  /// WLB-LLM's published speedup over Plain-4D in this shape; 0: none published.
  double published_wlb_speedup = 0;
};

/// Llama-3-70B (TP 8, PP 4) on 128 and 256 H100 at 128K on the long-context corpus and long
/// SFT, 31,250 tokens per GPU per step (the scenario matrix's rate); Llama-3-8B as WLB-LLM runs
/// it at 128K, (TP 8, CP 2, PP 4, DP 1) on 64 H100 with interleaved 1F1B (v = 2), a global
/// batch of PP x DP = 4 windows (WLB-LLM's rule) — dcp plans over the same 2 pipelines.
inline std::vector<pipeline_scenario> pipeline_scenarios() {
  std::vector<pipeline_scenario> out;
  for (const std::int64_t nodes : {16, 32})
    for (const char* workload : {"long-context", "long-sft"})
      out.push_back({"Llama-3-70B, " + std::string(workload) + " 128K, " +
                         std::to_string(nodes * 8) + " H100, TP 8 PP 4",
                     models::llama3_70b(),
                     nodes,
                     {8, 4, 1},
                     workload,
                     131072,
                     31'250 * nodes * 8});
  out.push_back(
      {"Llama-3-8B, long-context 128K, 64 H100, TP 8 PP 4 v 2, peers at CP 2 (WLB-LLM's "
       "shape)",
       models::llama3_8b(),
       8,
       {8, 4, 2},
       "long-context",
       131072,
       4 * 131072,
       2,
       1.33});
  return out;
}

/// The scenario's steps: documents drawn to the step's tokens, cut to the context window, ids
/// numbered through the run (a policy may move a sample to a later step).
inline std::vector<std::vector<sample>> pipeline_steps(const pipeline_scenario& sc,
                                                       std::int64_t steps, std::uint64_t seed) {
  std::vector<std::vector<sample>> out;
  std::uint64_t next_id = 0;
  for (std::int64_t k = 0; k < steps; ++k) {
    const auto step_seed = seed + static_cast<std::uint64_t>(k);
    const auto documents =
        sc.workload == "long-sft"
            ? workload::draw_batch(workload::llama3_long_sft(), sc.tokens, step_seed)
            : workload::draw_batch(workload::long_context_corpus(), sc.tokens, step_seed);
    out.push_back(workload::split_to_context(documents, sc.context).samples);
    for (auto& s : out.back()) s.id = next_id++;
  }
  return out;
}

struct pipeline_scenario_result {
  pipeline_scenario scenario;
  std::vector<evaluation::pipeline_policy_result> rows;
};

inline std::vector<pipeline_scenario_result> run_pipeline_scenarios(std::int64_t steps,
                                                                    std::uint64_t seed) {
  std::vector<pipeline_scenario_result> out;
  for (const auto& sc : pipeline_scenarios()) {
    const auto cluster = hgx_cluster(sc.nodes, gpus::h100_sxm());
    const pipeline_cost_model cost(sc.model, cluster, training_spec{}, sc.grid);
    const sim::pipeline_truth_model truth(sc.model, cluster, training_spec{}, sc.grid);
    const auto batches = pipeline_steps(sc, steps, seed);
    out.push_back(
        {sc, evaluation::compare_pipeline_policies(
                 truth, batches, pipeline_policies(cost, sc.context, sc.peer_context_parallel))});
  }
  return out;
}

inline void print_pipeline_results(std::ostream& out,
                                   const std::vector<pipeline_scenario_result>& results,
                                   std::int64_t steps) {
  out << "Inside a tensor x pipeline grid: each policy plans with the planner's model; every "
         "plan is timed stage by stage on the truth model, noise free, "
      << steps << " steps.\n";
  for (const auto& r : results) {
    out << "\n" << r.scenario.name << "\n";
    const double ours = r.rows.front().seconds;
    out << std::left << std::setw(42) << "policy" << std::right << std::setw(10) << "step s"
        << std::setw(12) << "dcp speedup" << std::setw(10) << "gap" << std::setw(10) << "bubble"
        << std::setw(6) << "OOM" << std::setw(10) << "plan ms"
        << "\n";
    for (const auto& row : r.rows) {
      if (!row.refused.empty()) {
        out << std::left << std::setw(42) << row.name << " refused: " << row.refused << "\n";
        continue;
      }
      out << std::left << std::setw(42) << row.name << std::right << std::fixed
          << std::setprecision(3) << std::setw(10)
          << row.seconds / static_cast<double>(std::max<std::int64_t>(1, steps)) << std::setw(11)
          << std::setprecision(2) << row.seconds / ours << "x" << std::setw(9)
          << std::setprecision(1) << 100.0 * row.gap() << "%" << std::setw(9) << 100.0 * row.bubble
          << "%" << std::setw(6) << row.oom_steps << std::setw(10) << std::setprecision(1)
          << row.planning_ms << "\n";
      out.unsetf(std::ios::fixed);
    }
    if (r.scenario.published_wlb_speedup > 0) {
      const auto plain = std::find_if(r.rows.begin(), r.rows.end(), [](const auto& row) {
        return row.name.starts_with("megatron-4d (");
      });
      const auto wlb = std::find_if(r.rows.begin(), r.rows.end(), [](const auto& row) {
        return row.name.starts_with("wlb-llm");
      });
      if (plain != r.rows.end() && wlb != r.rows.end() && wlb->seconds > 0)
        out << "WLB-LLM over Plain-4D: simulated " << std::fixed << std::setprecision(2)
            << plain->seconds / wlb->seconds << "x, published " << r.scenario.published_wlb_speedup
            << "x (Wang et al., OSDI'25, 7B at 128K)\n";
      out.unsetf(std::ios::fixed);
    }
  }
}

/// --out DIR: each policy's first step per scenario as a stage timeline,
/// pipeline-<scenario number>-<policy>.svg.
inline void write_pipeline_figures(const std::filesystem::path& dir,
                                   const std::vector<pipeline_scenario_result>& results) {
  std::filesystem::create_directories(dir);
  for (std::size_t k = 0; k < results.size(); ++k)
    for (const auto& row : results[k].rows) {
      if (!row.refused.empty()) continue;
      std::string stem;  // the name's letters and digits, other runs as one '-'
      for (const char c : row.name) {
        const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.';
        if (keep)
          stem += c;
        else if (!stem.empty() && stem.back() != '-')
          stem += '-';
      }
      while (!stem.empty() && stem.back() == '-') stem.pop_back();
      const auto path = dir / ("pipeline-" + std::to_string(k) + "-" + stem + ".svg");
      std::ofstream out(path);
      out << evaluation::pipeline_timeline_svg(
          row.first_instance, row.first_timeline,
          results[k].scenario.name + ": " + row.name + ", step 0 (truth model)");
      if (!out) throw dcp::error("cannot write " + path.string());
    }
}

inline void write_pipeline_json(std::ostream& out,
                                const std::vector<pipeline_scenario_result>& results,
                                std::int64_t steps) {
  out << "{\"format\": \"dcp.sim_pipeline/1\", \"steps\": " << steps << ", \"scenarios\": [";
  for (std::size_t k = 0; k < results.size(); ++k) {
    const auto& r = results[k];
    out << (k ? ", " : "") << "{\"name\": " << json_string_of(r.scenario.name)
        << ", \"policies\": [";
    for (std::size_t j = 0; j < r.rows.size(); ++j) {
      const auto& row = r.rows[j];
      out << (j ? ", " : "") << "{\"name\": " << json_string_of(row.name)
          << ", \"seconds\": " << json_number_of(row.seconds)
          << ", \"bound_seconds\": " << json_number_of(row.bound_seconds)
          << ", \"bubble\": " << json_number_of(row.bubble) << ", \"stage_idle\": [";
      for (std::size_t stage = 0; stage < row.stage_idle.size(); ++stage)
        out << (stage ? ", " : "") << json_number_of(row.stage_idle[stage]);
      out << "]"
          << ", \"peak_bytes\": " << json_number_of(row.peak_bytes)
          << ", \"oom_steps\": " << row.oom_steps << ", \"steps\": " << row.steps
          << ", \"tokens\": " << row.tokens
          << ", \"planning_ms\": " << json_number_of(row.planning_ms)
          << ", \"refused\": " << json_string_of(row.refused) << "}";
    }
    out << "]}";
  }
  out << "]}\n";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail
