// dcp-sim: every placement policy on the same workloads, judged by the simulator's truth model.
// With no flags it runs the default comparison on 4x8 H200: Llama-3-8B on Wikipedia lengths at
// 64K context, and STDiT3-XL on the OpenSora video mix, 50 steps each (docs/results.md).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dcp/baselines/baselines.hpp"
#include "dcp/dcp.hpp"
#include "dcp/evaluation/compare.hpp"
#include "dcp/evaluation/svg.hpp"
#include "dcp/plan/json_reader.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/length_distribution.hpp"
#include "dcp/workload/loaders.hpp"
#include "dcp/workload/video_mix.hpp"
#include "dcp_sim_cli.hpp"

namespace {

using namespace dcp;
using dcp::tool::sim_options_cli;

/// The policies every scenario is run with, planning with the analytic cost model.
std::vector<evaluation::policy_entry> make_policies(const evaluation::scenario& sc,
                                                    const std::vector<std::string>& wanted) {
  const auto cost = std::make_shared<analytic_cost_model>(sc.model, sc.cluster, sc.training);
  std::vector<evaluation::policy_entry> all;
  auto add = [&](std::string name, auto scheduler) {
    auto shared = std::make_shared<decltype(scheduler)>(std::move(scheduler));
    all.push_back({std::move(name), [shared](std::span<const sample> batch) { return shared->plan(batch); }});
  };
  using cost_t = analytic_cost_model;
  add("dcp", DataCentricScheduler<>(*cost));
  add("static", DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, best_static_placement>(*cost));
  add("paper-baseline",
      DataCentricScheduler<cost_t, video_buckets, pyramid_recompute, baselines::paper_baseline>(*cost));
  // Every peer gets the same recompute strategy as ours where it takes one (VideoSys and the
  // paper baseline choose their own), and the bucketing its algorithm expects.
  add("megatron-dcp",
      DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, baselines::megatron_dynamic_cp>(*cost));
  add("videosys-dcp",
      DataCentricScheduler<cost_t, video_buckets, pyramid_recompute, baselines::videosys_dcp>(*cost));
  add("flexsp", DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, baselines::flexsp_like>(*cost));
  add("verl", DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, baselines::verl_balanced_dp>(*cost));
  add("wlb-llm", DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, baselines::wlb_llm>(*cost));
  {
    // Ours with online calibration: plans with calibrated<analytic_cost_model>, refitted after
    // every step from what its micro-steps measured on the simulated hardware. Last, so that
    // the other policies keep their noise seeds (the seed mixes in the policy's index).
    using calibrating = DataCentricScheduler<calibrated<cost_t>>;
    const auto shared = std::make_shared<calibrating>(calibrated<cost_t>(*cost));
    all.push_back({"dcp-calibrated", [shared](std::span<const sample> batch) { return shared->plan(batch); },
                   [shared](std::span<const observation> measured) {
                     auto model = shared->cost();
                     model.observe(measured);
                     shared->set_cost(std::move(model));
                   }});
  }
  if (wanted.empty()) return all;
  std::vector<evaluation::policy_entry> chosen;
  for (const auto& name : wanted) {
    bool found = false;
    for (const auto& p : all)
      if (p.name == name) {
        chosen.push_back(p);
        found = true;
      }
    if (!found) throw tool::usage_error("--policies: unknown policy '" + name + "'");
  }
  return chosen;
}

/// Draws each step's batch for a workload name (or from a file, the same every step).
std::function<std::vector<sample>(std::uint64_t)> make_draw(const sim_options_cli& o,
                                                            const std::string& workload) {
  const auto tokens = o.tokens;
  const auto context = o.context;
  auto text = [tokens, context](auto distribution) {
    return [distribution, tokens, context](std::uint64_t seed) {
      const auto documents = workload::draw_batch(distribution, tokens, seed);
      return workload::split_to_context(documents, context).samples;
    };
  };
  if (workload == "wikipedia") return text(workload::wikipedia());
  if (workload == "megatron") return text(workload::megatron_mock());
  if (workload == "long-sft") return text(workload::llama3_long_sft());
  if (workload == "long-context") return text(workload::long_context_corpus());
  if (workload == "opensora") {
    const auto mix = workload::opensora_video_mix::videosys_benchmark();
    return [mix, tokens](std::uint64_t seed) { return workload::draw_batch(mix, tokens, seed); };
  }
  throw tool::usage_error("--workload: unknown workload '" + workload + "'");
}

std::vector<evaluation::scenario> make_scenarios(const sim_options_cli& o) {
  std::vector<evaluation::scenario> out;
  auto base = [&](std::string name, model_spec model, std::string workload, std::int64_t tokens) {
    evaluation::scenario sc;
    sc.name = std::move(name);
    sc.model = std::move(model);
    sc.cluster = tool::sim_cluster_of(o);
    sc.training = tool::sim_training_of(o);
    auto copy = o;
    copy.tokens = tokens;
    sc.draw = make_draw(copy, workload);
    sc.steps = o.steps;
    sc.seed = o.seed;
    return sc;
  };
  if (o.file) {
    std::ifstream in(*o.file);
    if (!in) throw dcp::error("cannot open '" + *o.file + "'");
    auto samples = o.video_csv ? workload::read_video_csv(in, *o.file) : workload::read_lengths(in, *o.file);
    if (!o.video_csv && o.context_given) samples = workload::split_to_context(samples, o.context).samples;
    auto sc = base(std::filesystem::path(*o.file).filename().string(), tool::model_named(o.model), "wikipedia", 1);
    sc.draw = [samples](std::uint64_t) { return samples; };
    out.push_back(std::move(sc));
    return out;
  }
  if (o.model_given || o.workload_given) {
    const auto model = tool::model_named(o.model);
    const std::string workload = o.workload_given ? o.workload
                                 : model.family == model_family::diffusion_transformer ? "opensora"
                                                                                       : "wikipedia";
    out.push_back(base(o.model + "/" + workload, model, workload, o.tokens));
    return out;
  }
  out.push_back(base("llama3-8b/wikipedia/64k", models::llama3_8b(), "wikipedia", o.tokens));
  out.push_back(base("stdit3-xl/opensora", models::stdit3_xl(), "opensora", o.video_tokens));
  return out;
}

/// A progress bar on stderr, shown only on a terminal and only once a run passes 2 seconds.
class progress_bar {
public:
  explicit progress_bar(std::string label) : label_(std::move(label)), tty_(isatty(2) != 0) {}
  void operator()(std::int64_t done, std::int64_t total) {
    if (!tty_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 2.0 && done < total) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
    std::fprintf(stderr, "\r%-28s [%s%s] %3d%%  %.0f s", label_.c_str(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), ' ').c_str(),
                 static_cast<int>(100 * done / std::max<std::int64_t>(total, 1)), elapsed);
    shown_ = true;
    if (done == total) std::fprintf(stderr, "\n");
  }

private:
  std::string label_;
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string gib_text(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / gib << " GiB";
  return os.str();
}

void print_table(std::ostream& os, const evaluation::scenario& sc, const evaluation::scenario_result& r) {
  std::int64_t tokens = 0;
  for (const auto& p : r.policies)
    for (const auto& s : p.steps) tokens += s.tokens;
  const auto steps = r.policies.empty() ? 0 : static_cast<std::int64_t>(r.policies[0].steps.size());
  os << "scenario " << r.name << ": " << sc.model.name << " on " << sc.cluster.gpus << " x "
     << sc.cluster.gpu.name << ", " << steps << " steps, ~"
     << (steps > 0 ? tokens / std::max<std::int64_t>(steps * static_cast<std::int64_t>(r.policies.size()), 1) : 0)
     << " tokens per step\n";
  os << std::left << std::setw(16) << "policy" << std::right << std::setw(12) << "median step"
     << std::setw(12) << "tokens/s" << std::setw(11) << "vs static" << std::setw(10) << "vs paper"
     << std::setw(9) << "gap" << std::setw(8) << "idle" << std::setw(12) << "peak mem" << std::setw(6)
     << "OOM" << std::setw(12) << "planning" << '\n';
  for (const auto& p : r.policies) {
    std::ostringstream step, rate, vs_static, vs_paper, gap, idle, planning;
    step << std::fixed << std::setprecision(3) << p.median_step_s << " s";
    rate << std::fixed << std::setprecision(0) << p.tokens_per_s;
    vs_static << std::fixed << std::setprecision(2) << p.speedup_vs_best_static << "x";
    vs_paper << std::fixed << std::setprecision(2) << p.speedup_vs_paper_baseline << "x";
    gap << std::fixed << std::setprecision(1) << 100 * p.gap_to_bound << " %";
    idle << std::fixed << std::setprecision(1) << 100 * p.idle_fraction << " %";
    planning << std::fixed << std::setprecision(1) << p.planning_ms << " ms";
    os << std::left << std::setw(16) << p.name << std::right << std::setw(12) << step.str()
       << std::setw(12) << rate.str() << std::setw(11) << vs_static.str() << std::setw(10)
       << vs_paper.str() << std::setw(9) << gap.str() << std::setw(8) << idle.str() << std::setw(12)
       << gib_text(p.peak_bytes) << std::setw(6) << p.oom_events << std::setw(12) << planning.str() << '\n';
  }
  os << std::fixed << std::setprecision(2) << "truth-model ceiling: no plan beats the paper baseline by more than "
     << r.paper_baseline_ceiling << "x, or the best static layout by more than " << r.best_static_ceiling
     << "x, on these batches\n\n";
  os.unsetf(std::ios::floatfield);
}

void write_json(std::ostream& os, const std::vector<evaluation::scenario>& scenarios,
                const std::vector<evaluation::scenario_result>& results) {
  auto number = [](double v) {
    std::ostringstream s;
    s << std::setprecision(17) << v;
    return s.str();
  };
  os << "{\"scenarios\":[";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    os << (i ? "," : "") << "\n {\"name\":\"" << r.name << "\",\"model\":\"" << scenarios[i].model.name
       << "\",\"gpus\":" << r.gpus << ",\"gpu\":\"" << scenarios[i].cluster.gpu.name
       << "\",\"paper_baseline_ceiling\":" << number(r.paper_baseline_ceiling)
       << ",\"best_static_ceiling\":" << number(r.best_static_ceiling) << ",\"policies\":[";
    for (std::size_t k = 0; k < r.policies.size(); ++k) {
      const auto& p = r.policies[k];
      os << (k ? "," : "") << "\n  {\"name\":\"" << p.name << "\",\"median_step_s\":" << number(p.median_step_s)
         << ",\"tokens_per_s\":" << number(p.tokens_per_s)
         << ",\"speedup_vs_best_static\":" << number(p.speedup_vs_best_static)
         << ",\"speedup_vs_paper_baseline\":" << number(p.speedup_vs_paper_baseline)
         << ",\"gap_to_bound\":" << number(p.gap_to_bound) << ",\"idle_fraction\":" << number(p.idle_fraction)
         << ",\"peak_bytes\":" << number(p.peak_bytes) << ",\"oom_events\":" << p.oom_events
         << ",\"planning_ms\":" << number(p.planning_ms) << ",\"prediction_error\":" << number(p.prediction_error)
         << ",\"steps\":" << p.steps.size() << "}";
    }
    os << "]}";
  }
  os << "\n]}\n";
}

void write_figures(const std::filesystem::path& dir, const evaluation::scenario_result& r) {
  std::filesystem::create_directories(dir);
  std::string stem = r.name;
  for (auto& c : stem)
    if (c == '/') c = '_';
  auto save = [&](const std::string& name, const std::string& svg) {
    std::ofstream out(dir / (stem + "-" + name + ".svg"));
    out << svg;
    if (!out) throw dcp::error("cannot write " + (dir / (stem + "-" + name + ".svg")).string());
  };
  std::vector<std::pair<std::string, double>> bars;
  std::vector<std::pair<std::string, std::vector<double>>> utilisation;
  for (const auto& p : r.policies) {
    bars.emplace_back(p.name, p.tokens_per_s / 1e3);
    std::vector<double> u;
    for (const auto& s : p.steps) u.push_back(1.0 - s.idle_fraction);
    utilisation.emplace_back(p.name, std::move(u));
    if (p.name == "dcp" || p.name == "static" || p.name == "paper-baseline")
      save("timeline-" + p.name, evaluation::timeline_svg(p.first_step, r.name + ": " + p.name + ", step 0"));
  }
  save("throughput", evaluation::bar_chart_svg(bars, r.name + ": throughput (truth model)", "k tokens/s"));
  save("utilisation", evaluation::line_chart_svg(utilisation, r.name + ": GPU utilisation per step",
                                                 "busy fraction of GPU time before the makespan"));
}

/// --plan FILE: a plan made elsewhere, simulated on the batch it was made for, next to ours.
int evaluate_external_plan(const sim_options_cli& o) {
  auto scenarios = make_scenarios(o);
  auto& sc = scenarios.front();
  const auto batch = sc.draw(sc.seed);
  std::ifstream in(*o.plan);
  if (!in) throw dcp::error("cannot open plan '" + *o.plan + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto external = read_plan_json(text, *o.plan);
  validate_plan(external, batch, sc.cluster.gpus);
  auto policies = make_policies(sc, o.policies.empty() ? std::vector<std::string>{"dcp", "static"} : o.policies);
  policies.insert(policies.begin(), {"external", [external](std::span<const sample>) { return external; }});
  sc.steps = 1;
  const auto result = evaluation::run(sc, policies);
  if (o.json) write_json(std::cout, scenarios, {result});
  else print_table(std::cout, sc, result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = dcp::tool::parse_sim_arguments(argc, argv);
    if (o.help) {
      std::cout << dcp::tool::sim_usage_text();
      return 0;
    }
    if (o.plan) return evaluate_external_plan(o);
    const auto scenarios = make_scenarios(o);
    std::vector<dcp::evaluation::scenario_result> results;
    for (const auto& sc : scenarios) {
      const auto policies = make_policies(sc, o.policies);
      progress_bar bar(sc.name);
      results.push_back(dcp::evaluation::run(sc, policies, [&](std::int64_t d, std::int64_t t) { bar(d, t); }));
      if (!o.json) print_table(std::cout, sc, results.back());
      if (o.out) write_figures(*o.out, results.back());
    }
    if (o.json) write_json(std::cout, scenarios, results);
    return 0;
  } catch (const dcp::tool::usage_error& e) {
    std::cerr << "dcp-sim: " << e.what() << "\nTry 'dcp-sim --help'.\n";
    return 2;
  } catch (const dcp::error& e) {
    std::cerr << "dcp-sim: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dcp-sim: " << e.what() << '\n';
    return 1;
  }
}
