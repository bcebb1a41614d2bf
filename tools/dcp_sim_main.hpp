#pragma once
// dcp-sim as a function: sim_main(args, out, err) is the whole program (tools/dcp_sim.cpp calls
// it with std::cout and std::cerr), so that tests run it in-process on any stream.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <memory>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "dcp/baselines/baselines.hpp"
#include "dcp/dcp.hpp"
#include "dcp/evaluation/compare.hpp"
#include "dcp/evaluation/delayed.hpp"
#include "dcp/evaluation/svg.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/plan/json_reader.hpp"
#include "dcp/plan/match_batch.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/length_distribution.hpp"
#include "dcp/workload/loaders.hpp"
#include "dcp/workload/video_mix.hpp"

#include "cli_common.hpp"
#include "dcp_sim_cli.hpp"
#include "dcp_sim_fidelity.hpp"
#include "dcp_sim_matrix.hpp"
#include "dcp_sim_pipeline.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool {

namespace sim_detail {

/// `megatron-dcp` as a Megatron user sizes it for the scenario: its cap by the rule Megatron
/// documents (baselines::megatron_dynamic_cp_user_layout), from the workload's longest sample
/// kind and the CP of megatron-static, judged on the simulated hardware (the truth model).
inline baselines::user_layout<baselines::megatron_dynamic_cp> megatron_dcp_as_documented(
    const evaluation::scenario& sc) {
  const sim::truth_model truth(sc.model, sc.cluster, sc.training, sc.truth);
  const auto peak = [&truth](const micro_batch_shape& shape, const execution_config& config) {
    return truth.peak_bytes(shape, config);
  };
  const auto kinds = sc.sample_kinds.empty() ? sc.draw(sc.seed) : sc.sample_kinds;
  return baselines::megatron_dynamic_cp_user_layout(
      sc.model, sc.cluster, sc.training, kinds, sc.tokens_per_step, peak, truth.capacity_bytes());
}

/// The policies every scenario is run with, planning with the analytic cost model.
/// With `skipped`, a user static layout whose rule finds no layout for the scenario is left out
/// and named there with the reason (the matrix runs every cell); without it, that is an error.
inline std::vector<evaluation::policy_entry> make_policies(
    const evaluation::scenario& sc, const std::vector<std::string>& wanted,
    std::vector<std::string>* skipped = nullptr) {
  const auto cost =
      std::make_shared<analytic_cost_model>(sc.model, sc.cluster, sc.training, sc.planner);
  std::vector<evaluation::policy_entry> all;
  using cost_t = analytic_cost_model;
  auto add = [&](std::string name, auto scheduler, std::string note = {}) {
    auto shared = std::make_shared<decltype(scheduler)>(std::move(scheduler));
    all.push_back({std::move(name),
                   [shared](std::span<const sample> batch) { return shared->plan(batch); },
                   {},
                   std::move(note)});
  };
  // A peer's policy configured as given (its own defaults unless `options` changes them).
  // Ours and every policy that takes a recompute strategy use the default scheduler's.
  using recompute_t = DataCentricScheduler<>::recompute_type;
  auto add_peer = [&]<class Policy, class Bucketing>(std::string name, Bucketing, Policy options,
                                                     std::string note = {}) {
    add(std::move(name),
        DataCentricScheduler<cost_t, Bucketing, recompute_t, Policy>(
            *cost, Bucketing{}, recompute_t{}, std::move(options)),
        std::move(note));
  };
  add("dcp", DataCentricScheduler<>(*cost));
  add("static",
      DataCentricScheduler<cost_t, varlen_buckets, recompute_t, best_static_placement>(*cost));
  // The peers as their sources run them (docs/baselines.md says what each keeps and changes).
  // Every peer gets the same recompute strategy as ours where it takes one (VideoSys and the
  // paper baseline choose their own), and the bucketing its algorithm expects.
  add_peer("paper-baseline", video_buckets{}, baselines::paper_baseline{});
  {
    auto documented = megatron_dcp_as_documented(sc);
    add_peer("megatron-dcp", varlen_buckets{}, documented.layout, std::move(documented.reason));
  }
  baselines::videosys_dcp videosys;
  videosys.shuffle = true;  // the benchmark's sampler
  videosys.min_gas = 2;     // train.py's default (DCP-inter)
  add_peer("videosys-dcp", video_buckets{}, videosys,
           "upstream's DCP-inter settings (shuffle, min_gas 2, a barrier per iteration); PAC's "
           "min_gas 15 is "
           "sized for an epoch, and VideoSys plans an epoch: in one step of this run an "
           "iteration's groups wait "
           "at the barrier for its slowest (a long clip), so expect idle time; dcp-sim --fidelity "
           "runs it on "
           "its own benchmark epoch");
  add_peer("flexsp", varlen_buckets{}, baselines::flexsp_like{});
  add_peer("verl", varlen_buckets{}, baselines::verl_balanced_dp{},
           "one Ulysses size per batch, the smallest whose cap holds the longest sample");
  add_peer("wlb-llm", varlen_buckets{}, baselines::wlb_llm{});
  {
    // Ours with online calibration: plans with calibrated<analytic_cost_model>, refitted after
    // every step from what its micro-steps measured on the simulated hardware.
    using calibrating = DataCentricScheduler<calibrated<cost_t>>;
    const auto shared = std::make_shared<calibrating>(calibrated<cost_t>(*cost));
    all.push_back({"dcp-calibrated",
                   [shared](std::span<const sample> batch) { return shared->plan(batch); },
                   [shared](std::span<const observation> measured) {
                     auto model = shared->cost();
                     model.observe(measured);
                     shared->set_cost(std::move(model));
                   }});
  }
  // The static layouts users configure, sized once for the run by trying them on the
  // simulated hardware (the truth model).
  const auto& users = evaluation::user_static_policies();
  const bool any_user =
      wanted.empty() || std::any_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
        return std::find(users.begin(), users.end(), w) != users.end();
      });
  if (any_user) {
    const sim::truth_model truth(sc.model, sc.cluster, sc.training, sc.truth);
    const auto peak = [&truth](const micro_batch_shape& shape, const execution_config& config) {
      return truth.peak_bytes(shape, config);
    };
    const auto kinds = sc.sample_kinds.empty() ? sc.draw(sc.seed) : sc.sample_kinds;
    auto add_user = [&](auto layout) {
      using policy_t = decltype(layout.layout);
      auto shared = std::make_shared<
          DataCentricScheduler<cost_t, varlen_buckets, pyramid_recompute, policy_t>>(
          *cost, varlen_buckets{}, pyramid_recompute{}, layout.layout);
      all.push_back({std::string(layout.layout.name()),
                     [shared](std::span<const sample> batch) { return shared->plan(batch); },
                     {},
                     layout.reason});
    };
    const auto add_or_skip = [&](const char* name, auto make) {
      if (!skipped) return add_user(make());
      try {
        add_user(make());
      } catch (const dcp::error& e) {
        skipped->push_back(std::string(name) + ": " + e.what());
      }
    };
    for (auto granularity :
         {baselines::recompute_granularity::full, baselines::recompute_granularity::selective})
      add_or_skip(granularity == baselines::recompute_granularity::full ? "megatron-static"
                                                                        : "megatron-static-sel",
                  [&] {
                    return baselines::megatron_user_layout(sc.model, sc.cluster, sc.training, kinds,
                                                           granularity, sc.tokens_per_step, peak,
                                                           truth.capacity_bytes());
                  });
    add_or_skip("ulysses-static", [&] {
      return baselines::ulysses_user_layout(sc.model, sc.cluster, sc.training, kinds,
                                            sc.tokens_per_step, peak, truth.capacity_bytes());
    });
  }
  // The peer as its example runs it, on every workload: the 8K-token text example's cap.
  add_peer("megatron-dcp-2048", varlen_buckets{}, baselines::megatron_dynamic_cp{},
           "--max-seqlen-per-dp-cp-rank 2048, the value of Megatron's example "
           "(examples/dynamic_context_parallel: 8,192-token sequences at CP 4) on any workload");
  // Named variants: a peer strengthened by us (docs/baselines.md, "what is ours").
  {
    baselines::megatron_dynamic_cp tuned;
    tuned.max_seqlen_per_dp_cp_rank = 0;
    add_peer("megatron-dcp-tuned", varlen_buckets{}, tuned,
             "ours: the per-rank cap tuned per batch by the cost model (capacity / 2^j, j < 5)");
    baselines::verl_balanced_dp hybrid;
    hybrid.ulysses_degree = 1;
    add_peer("verl-hybrid", varlen_buckets{}, hybrid,
             "ours: data parallel at degree 1, a sample above the cap alone at a larger degree");
    baselines::paper_baseline lpt;
    lpt.dealing = baselines::paper_dealing::longest_first;
    add_peer("paper-baseline-lpt", video_buckets{}, lpt,
             "ours: batches longest first to the least-loaded group, no per-iteration barrier");
  }
  {
    // WLB-LLM with its outlier delay (evaluation/delayed.hpp): long documents held across steps
    // in multi-level queues.
    const auto kinds = sc.sample_kinds.empty() ? sc.draw(sc.seed) : sc.sample_kinds;
    std::int64_t context = 2;
    for (const auto& kind : kinds) context = std::max(context, kind.tokens);
    all.push_back(evaluation::wlb_llm_with_outlier_delay(*cost, context));
    // Ours behind the same delay: what holding the long documents does to ours.
    auto thresholds = baselines::wlb_default_thresholds(context);
    auto note = "ours behind WLB-LLM's " + evaluation::outlier_delay_note(thresholds, 0);
    all.push_back(evaluation::with_outlier_delay(
        DataCentricScheduler<>(*cost), std::move(thresholds), 0, "dcp-delay", std::move(note)));
  }
  if (wanted.empty()) return all;
  // A policy's noise follows from its name (evaluation::noise_seed), so a run of a few policies
  // reproduces their rows of the full run; one named again gets a further draw of its noise.
  std::vector<evaluation::policy_entry> chosen;
  std::vector<std::string> named;
  for (const auto& name : wanted) {
    if (skipped && std::any_of(skipped->begin(), skipped->end(),
                               [&](const std::string& s) { return s.starts_with(name + ": "); }))
      continue;
    const auto draw = static_cast<std::uint64_t>(std::count(named.begin(), named.end(), name));
    named.push_back(name);
    bool found = false;
    for (const auto& entry : all)
      if (entry.name == name) {
        chosen.push_back(entry);
        chosen.back().noise_draw = draw;
        found = true;
      }
    if (!found) throw usage_error("--policies: unknown policy '" + name + "'");
  }
  return chosen;
}

/// Runs the policies `wanted` (every one when empty) on a scenario: evaluation::run, or with an
/// automatic style evaluation::run_choosing_styles (ours choose per micro-batch, every other
/// policy runs at its best fixed style).
inline evaluation::scenario_result run_policies(
    const evaluation::scenario& sc, const std::vector<std::string>& wanted,
    const std::function<void(std::int64_t, std::int64_t)>& progress = {},
    std::vector<std::string>* skipped = nullptr,
    const std::vector<std::pair<sequence_parallel, const evaluation::scenario_result*>>& known =
        {}) {
  if (sc.training.sp != sequence_parallel::automatic)
    return evaluation::run(sc, make_policies(sc, wanted, skipped), progress);
  std::vector<std::string> unused;
  return evaluation::run_choosing_styles(
      sc, [&](const evaluation::scenario& s) { return make_policies(s, wanted, &unused); },
      progress, skipped, known);
}

/// Draws each step's batch for a workload name (or from a file, the same every step).
inline std::function<std::vector<sample>(std::uint64_t)> make_draw(const sim_options_cli& o,
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
  throw usage_error("--workload: unknown workload '" + workload + "'");
}

/// The kinds of sample a workload draws, longest first in size: what the user static layouts
/// are sized for. Text: a context-length document and one of context / 64 tokens (packed 64 to
/// a window); video: one clip per grid of the mix.
inline std::vector<sample> sample_kinds_of(const std::string& workload, std::int64_t context) {
  if (workload == "opensora") {
    const auto mix = workload::opensora_video_mix::videosys_benchmark();
    std::vector<sample> kinds;
    for (const auto& b : mix.buckets())
      if (b.probability > 0)
        kinds.push_back(video_sample(kinds.size(), b.shape, mix.parameters().attention));
    return kinds;
  }
  return {text_sample(0, context), text_sample(1, std::max<std::int64_t>(context / 64, 1))};
}

/// The same for a fixed batch (--file): its longest sample and one of 1/64 of it for text, one
/// sample per distinct grid for video.
inline std::vector<sample> sample_kinds_of(const std::vector<sample>& samples) {
  std::vector<sample> kinds;
  std::int64_t longest = 0;
  for (const auto& s : samples) {
    if (!s.video) {
      longest = std::max(longest, s.tokens);
      continue;
    }
    const bool seen = std::any_of(kinds.begin(), kinds.end(),
                                  [&](const sample& k) { return k.video == s.video; });
    if (!seen) kinds.push_back(video_sample(kinds.size(), *s.video, s.attention));
  }
  if (longest > 0) {
    kinds.push_back(text_sample(kinds.size(), longest));
    kinds.push_back(text_sample(kinds.size(), std::max<std::int64_t>(longest / 64, 1)));
  }
  return kinds;
}

inline std::vector<evaluation::scenario> make_scenarios(const sim_options_cli& o) {
  std::vector<evaluation::scenario> out;
  auto base = [&](std::string name, model_spec model, std::string workload, std::int64_t tokens) {
    evaluation::scenario sc;
    sc.name = std::move(name);
    sc.model = std::move(model);
    sc.cluster = sim_cluster_of(o);
    sc.training = sim_training_of(o);
    auto copy = o;
    copy.tokens = tokens;
    sc.draw = make_draw(copy, workload);
    sc.steps = o.steps;
    sc.seed = o.seed;
    if (o.host_cost)
      sc.truth.host_seconds_per_kernel = sc.planner.host_seconds_per_kernel = *o.host_cost;
    sc.sample_kinds = sample_kinds_of(workload, o.context);
    sc.tokens_per_step = tokens;
    sc.notes.push_back("batches of ~" + std::to_string(tokens) + " tokens (" +
                       (o.tokens_given
                            ? std::string("--tokens")
                            : "the " + workload + " workload's default; --tokens to change") +
                       ")");
    return sc;
  };
  if (o.file) {
    auto samples =
        o.video_csv ? workload::read_video_csv_file(*o.file) : workload::read_lengths_file(*o.file);
    if (samples.empty()) throw_no_samples(*o.file, o.video_csv);
    validate_batch(samples);  // names the sample at which the tokens sum past int64
    if (!o.video_csv && o.context_given) {
      check_split_count(samples, o.context);
      samples = workload::split_to_context(samples, o.context).samples;
    }
    auto sc = base(std::filesystem::path(*o.file).filename().string(), model_named(o.model),
                   "wikipedia", 1);
    sc.draw = [samples](std::uint64_t) { return samples; };
    sc.sample_kinds = sample_kinds_of(samples);
    sc.tokens_per_step = 0;
    for (const auto& sample : samples) sc.tokens_per_step += sample.tokens;
    sc.notes = {"the same batch every step: the " + std::to_string(samples.size()) +
                " samples of " + *o.file};
    out.push_back(std::move(sc));
    return out;
  }
  check_split_count(std::max(o.tokens, o.video_tokens), o.context);
  if (o.model_given || o.workload_given) {
    const auto model = model_named(o.model);
    const std::string workload = o.workload_given ? o.workload
                                 : model.family == model_family::diffusion_transformer
                                     ? "opensora"
                                     : "wikipedia";
    // The workload's own default batch size (video 4M tokens, text 1M) unless --tokens is given.
    out.push_back(base(o.model + "/" + workload, model, workload,
                       workload == "opensora" ? o.video_tokens : o.tokens));
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
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 2.0 && done < total) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
    std::fprintf(stderr, "\r%-28s [%s%s] %3d%%  %.0f s", label_.c_str(),
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
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

inline std::string gib_text(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / gib << " GiB";
  return os.str();
}

inline void print_table(std::ostream& os, const evaluation::scenario& sc,
                        const evaluation::scenario_result& r) {
  std::int64_t tokens = 0;
  for (const auto& p : r.policies)
    for (const auto& s : p.steps) tokens += s.drawn_tokens;
  const auto steps = r.policies.empty() ? 0 : static_cast<std::int64_t>(r.policies[0].steps.size());
  os << "scenario " << printable(r.name) << ": " << sc.model.name << " on " << sc.cluster.gpus
     << " x " << sc.cluster.gpu.name << ", " << steps << " steps, ~"
     << (steps > 0 ? tokens / std::max<std::int64_t>(
                                  steps * static_cast<std::int64_t>(r.policies.size()), 1)
                   : 0)
     << " tokens per step\n";
  for (const auto& note : sc.notes) os << "  " << printable(note) << "\n";
  using align = text_table::align;
  text_table table({"policy", "median step", "mean step", "tokens/s", "vs static", "vs your static",
                    "vs paper", "gap", "noise", "idle", "peak mem", "OOM", "planning"},
                   {align::left});
  auto ratio_text = [](double r) {
    if (!(r > 0)) return std::string("-");  // the policy compared with did not run
    std::ostringstream s;
    s << std::fixed << std::setprecision(2) << r << "x";
    return s.str();
  };
  for (const auto& p : r.policies) {
    std::ostringstream step, mean, rate, gap, noise, idle, planning;
    step << std::fixed << std::setprecision(3) << p.median_step_s << " s";
    mean << std::fixed << std::setprecision(3) << p.mean_step_s << " s";
    rate << std::fixed << std::setprecision(0) << p.tokens_per_s;
    gap << std::fixed << std::setprecision(1) << 100 * p.gap_to_bound << " %";
    noise << std::fixed << std::setprecision(1) << 100 * p.noise_share << " %";
    idle << std::fixed << std::setprecision(1) << 100 * p.idle_fraction << " %";
    planning << std::fixed << std::setprecision(1) << p.planning_ms << " ms";
    table.add_row({printable(p.name), step.str(), mean.str(), rate.str(),
                   ratio_text(p.speedup_vs_best_static),
                   r.your_static.empty() ? std::string("-") : ratio_text(p.speedup_vs_your_static),
                   ratio_text(p.speedup_vs_paper_baseline), gap.str(), noise.str(), idle.str(),
                   gib_text(p.peak_bytes), std::to_string(p.oom_events), planning.str()});
  }
  table.print(os);
  os << "vs static: over the best static layout a search finds (one degree per batch, our packing "
        "and "
        "recompute); vs your static: over the faster user layout";
  if (!r.your_static.empty()) os << " (" << printable(r.your_static) << ")";
  os << "\ngap: the noise-free simulated makespan over the truth bound, minus 1; noise: what the "
        "simulated noise adds to it\n";
  if (const auto* ours = evaluation::detail::find(r.policies, "dcp"))
    os << "planner's prediction error on the truth model (dcp): " << std::fixed
       << std::setprecision(1) << 100.0 * ours->prediction_error
       << " % (mean |predicted / noise-free simulated makespan - 1|)\n";
  for (const auto& p : r.policies)
    if (!p.note.empty()) os << "  " << printable(p.name) << ": " << printable(p.note) << "\n";
  for (const auto& p : r.policies)
    if (p.admits) {
      std::ostringstream line;
      line << std::fixed << std::setprecision(1) << 100.0 * p.delayed_share
           << " % of drawn tokens trained in a later step (mean " << p.mean_delay_steps
           << " steps per delayed token, " << std::setprecision(2) << p.mean_delay_steps_per_token
           << " per trained token, max " << p.max_delay_steps << "); ";
      if (p.drain_steps > 0)
        line << p.drain_steps << (p.drain_steps == 1 ? " drain step" : " drain steps")
             << " after the last trained what was still queued (in its time and tokens/s)";
      else
        line << "no drain steps";
      if (p.tokens_queued_at_end > 0)
        line << "; " << p.tokens_queued_at_end
             << " tokens still queued at the end: not trained, not in tokens/s";
      os << "  " << printable(p.name) << ": " << line.str() << "\n";
    }
  if (const auto* ours = evaluation::detail::find(r.policies, "dcp");
      ours && !r.your_static.empty()) {
    os << "dcp vs each user layout:";
    for (const auto& name : evaluation::user_static_policies())
      if (const auto* u = evaluation::detail::find(r.policies, name); u && u->tokens_per_s > 0)
        os << " " << name << " " << ratio_text(ours->tokens_per_s / u->tokens_per_s);
    os << "\n";
  }
  os << std::fixed << std::setprecision(2) << "truth-model ceiling: no plan beats ";
  if (r.paper_baseline_ceiling > 0)
    os << "the paper baseline by more than " << r.paper_baseline_ceiling << "x, or ";
  os << "the best static layout by more than " << r.best_static_ceiling
     << "x, on these batches\n\n";
  os.unsetf(std::ios::floatfield);
}

inline void write_results_json(std::ostream& os, const std::vector<evaluation::scenario>& scenarios,
                               const std::vector<evaluation::scenario_result>& results) {
  const auto string = json_string_of;
  const auto number = json_number_of;
  os << "{\"scenarios\":[";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    os << (i ? "," : "") << "\n {\"name\":" << string(r.name)
       << ",\"model\":" << string(scenarios[i].model.name) << ",\"gpus\":" << r.gpus
       << ",\"gpu\":" << string(scenarios[i].cluster.gpu.name)
       << ",\"paper_baseline_ceiling\":" << number(r.paper_baseline_ceiling)
       << ",\"best_static_ceiling\":" << number(r.best_static_ceiling) << ",\"your_static\":"
       << (r.your_static.empty() ? std::string("null") : string(r.your_static)) << ",\"notes\":[";
    for (std::size_t n = 0; n < scenarios[i].notes.size(); ++n)
      os << (n ? "," : "") << string(scenarios[i].notes[n]);
    os << "],\"policies\":[";
    for (std::size_t k = 0; k < r.policies.size(); ++k) {
      const auto& p = r.policies[k];
      os << (k ? "," : "") << "\n  {\"name\":" << string(p.name)
         << ",\"median_step_s\":" << number(p.median_step_s)
         << ",\"mean_step_s\":" << number(p.mean_step_s)
         << ",\"tokens_per_s\":" << number(p.tokens_per_s)
         << ",\"noise_free_tokens_per_s\":" << number(p.noise_free_tokens_per_s)
         << ",\"speedup_vs_best_static\":" << number(p.speedup_vs_best_static)
         << ",\"speedup_vs_your_static\":" << number(p.speedup_vs_your_static)
         << ",\"speedup_vs_megatron_static\":" << number(p.speedup_vs_megatron_static)
         << ",\"speedup_vs_ulysses_static\":" << number(p.speedup_vs_ulysses_static)
         << ",\"speedup_vs_paper_baseline\":" << number(p.speedup_vs_paper_baseline)
         << ",\"gap_to_bound\":" << number(p.gap_to_bound)
         << ",\"noise_share\":" << number(p.noise_share)
         << ",\"idle_fraction\":" << number(p.idle_fraction)
         << ",\"peak_bytes\":" << number(p.peak_bytes) << ",\"oom_events\":" << p.oom_events
         << ",\"planning_ms\":" << number(p.planning_ms)
         << ",\"prediction_error\":" << number(p.prediction_error)
         << ",\"steps\":" << p.steps.size();
      if (p.admits)
        os << ",\"tokens_drawn\":" << p.tokens_drawn << ",\"tokens_trained\":" << p.tokens_trained
           << ",\"tokens_delayed\":" << p.tokens_delayed
           << ",\"delayed_share\":" << number(p.delayed_share)
           << ",\"mean_delay_steps\":" << number(p.mean_delay_steps)
           << ",\"mean_delay_steps_per_token\":" << number(p.mean_delay_steps_per_token)
           << ",\"max_delay_steps\":" << p.max_delay_steps
           << ",\"tokens_queued_at_end\":" << p.tokens_queued_at_end
           << ",\"drain_steps\":" << p.drain_steps;
      if (!p.note.empty()) os << ",\"note\":" << string(p.note);
      os << "}";
    }
    os << "]}";
  }
  os << "\n]}\n";
}

inline void write_figures(const std::filesystem::path& dir, const evaluation::scenario_result& r) {
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
    save("timeline-" + p.name,
         evaluation::timeline_svg(p.first_step, r.name + ": " + p.name + ", step 0"));
  }
  save("throughput",
       evaluation::bar_chart_svg(bars, r.name + ": throughput (truth model)", "k tokens/s"));
  save("utilisation", evaluation::line_chart_svg(utilisation, r.name + ": GPU utilisation per step",
                                                 "busy fraction of GPU time before the makespan"));
}

/// --plan FILE: a plan made elsewhere, simulated on the batch it was made for, next to ours.
/// A plan made for another batch (other tokens for its ids, other ids) is refused, naming what
/// differs: judged on samples it was not planned for, its figures would mean nothing.
inline int evaluate_external_plan(const sim_options_cli& o, std::ostream& out) {
  auto scenarios = make_scenarios(o);
  auto& sc = scenarios.front();
  const auto batch = sc.draw(sc.seed);
  std::ifstream in = workload::detail::open_or_throw(*o.plan);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto external = read_plan_json(text, *o.plan);
  const std::string batch_name =
      o.file ? "'" + *o.file + "'"
             : "the first step's batch (" + sc.name + ", seed " + std::to_string(sc.seed) + ")";
  check_plan_matches_batch(external, read_stated_tokens(text, *o.plan), batch,
                           "plan '" + *o.plan + "' is for another batch than " + batch_name + ":");
  validate_plan(external, batch, sc.cluster.gpus);
  auto policies = make_policies(
      sc, o.policies.empty() ? std::vector<std::string>{"dcp", "static"} : o.policies);
  policies.insert(policies.begin(),
                  {"external", [external](std::span<const sample>) { return external; }});
  sc.steps = 1;
  const auto result = evaluation::run(sc, policies);
  if (o.json)
    write_results_json(out, scenarios, {result});
  else
    print_table(out, sc, result);
  finish_output(out);
  return 0;
}

}  // namespace sim_detail

/// The program: parses `args` (without the program name), writes tables or JSON to `out` and
/// messages to `err`, and returns the exit status: 0 done, 1 bad input or output that could
/// not be written, 2 bad usage.
inline int sim_main(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  using namespace sim_detail;
  return run_tool("dcp-sim", err, [&] {
    const auto o = parse_sim_arguments(args);
    if (o.help) {
      out << sim_usage_text();
      finish_output(out);
      return 0;
    }
    if (o.plan) return evaluate_external_plan(o, out);
    if (o.fidelity) {
      evaluation::fidelity_options options{.steps = o.steps_given ? o.steps : 0, .seed = o.seed};
      if (o.host_cost)
        options.truth.host_seconds_per_kernel = options.planner.host_seconds_per_kernel =
            options.megatron_host_seconds_per_kernel = *o.host_cost;
      const auto report = evaluation::run_fidelity(options);
      if (o.json)
        write_fidelity_json(out, report);
      else
        print_fidelity(out, report);
      finish_output(out);
      return 0;
    }
    if (o.pipeline) {
      const auto steps = o.steps_given ? o.steps : 3;
      const auto results = run_pipeline_scenarios(steps, o.seed);
      if (o.out) write_pipeline_figures(*o.out, results);
      if (o.json)
        write_pipeline_json(out, results, steps);
      else
        print_pipeline_results(out, results, steps);
      finish_output(out);
      return 0;
    }
    if (o.matrix) {
      progress_bar bar("matrix");
      const auto rows = run_matrix(
          o,
          [](const sim_options_cli& cell, std::vector<std::string>& skipped, const auto& known) {
            const auto scenarios = make_scenarios(cell);
            return run_policies(scenarios.front(), cell.policies, {}, &skipped, known);
          },
          [&](std::int64_t d, std::int64_t t) { bar(d, t); });
      const auto steps = o.steps_given ? o.steps : 3;
      if (o.json)
        write_matrix_json(out, rows, steps, o.gpus_per_node);
      else
        print_matrix(out, rows, steps, o.gpus_per_node);
      finish_output(out);
      return 0;
    }
    const auto scenarios = make_scenarios(o);
    std::vector<evaluation::scenario_result> results;
    for (const auto& sc : scenarios) {
      progress_bar bar(sc.name);
      results.push_back(
          run_policies(sc, o.policies, [&](std::int64_t d, std::int64_t t) { bar(d, t); }));
      if (!o.json) print_table(out, sc, results.back());
      if (o.out) write_figures(*o.out, results.back());
    }
    if (o.json) write_results_json(out, scenarios, results);
    finish_output(out);
    return 0;
  });
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool
