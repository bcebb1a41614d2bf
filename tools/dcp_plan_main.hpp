#pragma once
// dcp-plan as a function: plan_main(args, in, out, err) is the whole program (tools/dcp_plan.cpp
// calls it with std::cin, std::cout and std::cerr), so that tests run it in-process on any
// stream.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <istream>
#include <map>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/loaders.hpp"

#include "cli_common.hpp"
#include "dcp_plan_cli.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool {

namespace plan_detail {

struct batch_description {
  std::vector<sample> samples;
  std::string source;  ///< "wikipedia profile, seed 1" or the file name
  workload::split_report split{};
  bool was_split = false;
};

/// The batch the options ask for: a FILE's lengths (split only when --context was given), or
/// the default batch drawn from the Wikipedia profile and split at --context.
inline batch_description load_batch(const plan_options& o, attention_kind attention,
                                    std::istream& in) {
  batch_description batch;
  if (o.input) {
    if (*o.input == "-") {
      batch.source = "<stdin>";
      batch.samples = workload::read_lengths(in, batch.source);
    } else {
      batch.source = *o.input;
      batch.samples = workload::read_lengths_file(*o.input);
    }
    if (batch.samples.empty()) throw_no_samples(batch.source);
  } else {
    batch.source = "wikipedia profile, seed " + std::to_string(o.seed);
    batch.samples = workload::draw_batch(workload::wikipedia(), o.tokens, o.seed, 0);
  }
  if (!o.input || o.context_given) {
    check_split_count(batch.samples, o.context);
    auto split = workload::split_to_context(batch.samples, o.context);
    batch.samples = std::move(split.samples);
    batch.split = split.report;
    batch.was_split = true;
  }
  for (auto& s : batch.samples) s.attention = attention;
  return batch;
}

// ---- running the scheduler: runtime choices -> compile-time policies ---------------------

template <class F>
decltype(auto) with_recompute(recompute_choice choice, F&& f) {
  switch (choice) {
    case recompute_choice::none:
      return f(no_recompute{});
    case recompute_choice::full:
      return f(full_recompute{});
    case recompute_choice::selective:
      return f(selective_recompute{});
    case recompute_choice::pyramid:
      return f(pyramid_recompute{});
    case recompute_choice::selective_pyramid:
      break;
  }
  return f(selective_pyramid_recompute{});
}

/// The default placement, asked to report the best static layout even when it is slower, so
/// the summary can give the ratio best-static / ours.
inline balanced_placement exact_balanced() {
  balanced_placement placement;
  if constexpr (requires { placement.exact_best_static; }) placement.exact_best_static = true;
  return placement;
}

template <class F>
decltype(auto) with_placement(const plan_options& o, F&& f) {
  switch (o.placement) {
    case placement_choice::best_static:
      return f(best_static_placement{});
    case placement_choice::static_degree:
      return f(static_placement{o.static_degree});
    case placement_choice::balanced:
      break;
  }
  return f(exact_balanced());
}

struct planned {
  step_plan plan;
  double milliseconds = 0;
  std::string recompute_name;
};

inline planned run_scheduler(const plan_options& o, const analytic_cost_model& cost,
                             const std::vector<sample>& samples) {
  const runtime_bucketing bucketing(o);
  return with_recompute(o.recompute, [&](auto recompute) {
    return with_placement(o, [&](auto placement) {
      const DataCentricScheduler<analytic_cost_model, runtime_bucketing, decltype(recompute),
                                 decltype(placement)>
          scheduler(cost, bucketing, recompute, placement);
      const auto start = std::chrono::steady_clock::now();
      auto plan = scheduler.plan(samples);
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      return planned{std::move(plan), took.count(), std::string(recompute.name())};
    });
  });
}

// ---- human output -----------------------------------------------------------------------

inline std::string grouped(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

inline std::string fixed(double value, int decimals) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << value;
  return os.str();
}

inline std::string seconds_text(double seconds) {
  if (seconds < 1.0) return fixed(seconds * 1e3, 1) + " ms";
  return fixed(seconds, 3) + " s";
}

inline void print_summary(std::ostream& out, const plan_options& o, const analytic_cost_model& cost,
                          const batch_description& batch, const planned& result,
                          const runtime_bucketing& bucketing) {
  const auto& plan = result.plan;
  const auto& cluster = cost.cluster();
  const auto& training = cost.training();
  auto row = [&](std::string_view label) -> std::ostream& {
    return out << std::left << std::setw(17) << label << std::right;
  };

  // Header: model, cluster, batch.
  std::int64_t tokens = 0;
  std::int64_t longest = 0;
  for (const auto& s : batch.samples) {
    tokens += s.tokens;
    longest = std::max(longest, s.tokens);
  }
  row("model") << cost.model().name << ", ZeRO-" << training.zero_stage << ", "
               << to_string(training.sp) << ", headroom "
               << fixed(training.headroom(cluster) / gib, 1) << " GiB\n";
  row("cluster") << cluster.gpus << " x " << cluster.gpu.name << " (" << cluster.nodes() << " node"
                 << (cluster.nodes() == 1 ? "" : "s") << " x " << cluster.gpus_per_node << ")\n";
  row("batch") << grouped(static_cast<std::int64_t>(batch.samples.size())) << " samples, "
               << grouped(tokens) << " tokens, longest " << grouped(longest) << " ("
               << printable(batch.source) << ")\n";
  if (batch.was_split && batch.split.documents_split > 0)
    row("") << grouped(batch.split.documents_split) << " document"
            << (batch.split.documents_split == 1 ? "" : "s") << " over the " << grouped(o.context)
            << "-token context split into " << grouped(batch.split.chunks) << " chunks\n";
  else if (batch.was_split)
    row("") << "no document over the " << grouped(o.context) << "-token context, none split\n";
  row("policies") << "bucketing " << bucketing.label() << ", recompute " << result.recompute_name
                  << ", placement " << plan.policy << '\n';
  out << '\n';

  // Summary.
  row("micro-steps") << plan.micro_steps.size() << '\n';
  row("makespan") << seconds_text(plan.makespan_seconds) << "  (+ "
                  << seconds_text(plan.gradient_sync_seconds) << " gradient sync)\n";
  row("lower bound") << seconds_text(plan.lower_bound_seconds) << "  (gap "
                     << fixed(plan.gap() * 100.0, 2) << " %)\n";
  if (plan.best_static_seconds > 0 && plan.makespan_seconds > 0)
    row("best static") << "degree " << plan.best_static_degree << ": "
                       << seconds_text(plan.best_static_seconds) << "  (best-static / ours = "
                       << fixed(plan.best_static_seconds / plan.makespan_seconds, 3) << "x)\n";
  else
    row("best static") << "none feasible\n";
  row("idle") << fixed(plan.idle_fraction() * 100.0, 1) << " % of GPU time before the makespan\n";
  double peak = 0;
  for (const auto& m : plan.micro_steps) peak = std::max(peak, m.peak_bytes);
  row("peak memory") << fixed(peak / gib, 2) << " GiB of "
                     << fixed(plan.memory_budget_bytes / gib, 2) << " GiB budget per GPU\n";

  struct degree_row {
    std::int64_t steps = 0, samples = 0, tokens = 0;
  };
  std::map<std::int64_t, degree_row> degrees;
  std::map<recompute_setting, std::int64_t> recomputes;
  std::vector<std::int64_t> per_rank(static_cast<std::size_t>(plan.gpus), 0);
  for (const auto& m : plan.micro_steps) {
    auto& d = degrees[m.degree()];
    ++d.steps;
    d.samples += static_cast<std::int64_t>(m.sample_ids.size());
    d.tokens += m.tokens;
    ++recomputes[m.config.recompute];
    for (auto r = m.first_rank; r <= m.last_rank(); ++r) ++per_rank[static_cast<std::size_t>(r)];
  }
  const auto [fewest, most] = std::minmax_element(per_rank.begin(), per_rank.end());
  row("per-rank steps") << "min " << *fewest << ", max " << *most << '\n';
  row("recompute");
  bool first = true;
  for (const auto& [setting, count] : recomputes) {
    out << (first ? "" : ", ") << to_string(setting) << " x" << count;
    first = false;
  }
  out << '\n';
  // Sized to content: at 10^6 samples the counts outgrow any fixed width.
  text_table table({"degree", "micro-steps", "samples", "tokens"}, {});
  for (const auto& [degree, d] : degrees)
    table.add_row(
        {std::to_string(degree), grouped(d.steps), grouped(d.samples), grouped(d.tokens)});
  std::ostringstream rows;
  table.print(rows);
  std::istringstream lines(rows.str());
  bool first_line = true;
  for (std::string line; std::getline(lines, line); first_line = false)
    row(first_line ? "degrees" : "") << line << '\n';
  row("fingerprint") << dcp::detail::fingerprint_hex(plan.fingerprint) << '\n';
  row("planning time") << fixed(result.milliseconds, 1) << " ms\n";
}

inline int run(std::span<const std::string_view> args, std::istream& in, std::ostream& out) {
  const plan_options o = parse_arguments(args);
  if (o.help) {
    out << usage_text();
    finish_output(out);
    return 0;
  }
  const auto model = model_named(o.model);
  const analytic_cost_model cost(model, cluster_of(o), training_of(o));
  // Text lengths: causal for language models, bidirectional for diffusion transformers
  // (a factorised layout needs a video grid, which a list of lengths does not give).
  const auto attention =
      model.family == model_family::decoder_lm ? attention_kind::causal : attention_kind::full;
  const auto batch = load_batch(o, attention, in);
  const auto result = [&] {
    try {
      return run_scheduler(o, cost, batch.samples);
    } catch (const sample_does_not_fit& e) {
      // The usual cause with big models is replicated optimizer state; say what to try.
      if (o.zero_stage == 3) throw;
      throw sample_does_not_fit(std::string(e.what()) + " (ZeRO-" + std::to_string(o.zero_stage) +
                                " keeps model states replicated; try --zero 3)");
    }
  }();
  if (o.json) {
    json_options options;
    options.ranks = o.ranks;
    write_json(out, result.plan, options);
  } else {
    print_summary(out, o, cost, batch, result, runtime_bucketing(o));
  }
  finish_output(out);
  return 0;
}

}  // namespace plan_detail

/// The program: parses `args` (without the program name), reads a lengths FILE or '-' (`in`),
/// writes the summary or JSON to `out` and messages to `err`, and returns the exit status:
/// 0 planned, 1 the library rejected the input or the output could not be written, 2 bad usage.
inline int plan_main(std::span<const std::string_view> args, std::istream& in, std::ostream& out,
                     std::ostream& err) {
  return run_tool("dcp-plan", err, [&] { return plan_detail::run(args, in, out); });
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool
