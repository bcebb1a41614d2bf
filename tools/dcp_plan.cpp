// dcp-plan: plans one training step for a batch of sample lengths and prints a summary, or the
// plan as JSON (docs/plan-format.md). `dcp-plan --help` lists the options.
//
// Exit status: 0 planned; 1 the library rejected the input (a dcp::error: a malformed lengths
// line, a sample that fits nowhere, an impossible cluster); 2 a bad command line.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iomanip>
#include <iostream>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/plan/json.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/loaders.hpp"

#include "dcp_plan_cli.hpp"

namespace {

using namespace dcp;
using tool::placement_choice;
using tool::plan_options;
using tool::recompute_choice;

/// More samples than this is a mistake (a huge --tokens, or --context 1 on long lengths), not
/// a batch: refuse before allocating them.
constexpr std::int64_t max_samples = 20'000'000;

struct batch_description {
  std::vector<sample> samples;
  std::string source;  ///< "wikipedia profile, seed 1" or the file name
  workload::split_report split{};
  bool was_split = false;
};

/// The batch the options ask for: a FILE's lengths (split only when --context was given), or
/// the default batch drawn from the Wikipedia profile and split at --context.
batch_description load_batch(const plan_options& o, attention_kind attention) {
  batch_description batch;
  if (o.input) {
    if (*o.input == "-") {
      batch.source = "<stdin>";
      batch.samples = workload::read_lengths(std::cin, batch.source);
    } else {
      batch.source = *o.input;
      batch.samples = workload::read_lengths_file(*o.input);
    }
    if (batch.samples.empty())
      throw error(batch.source + ": no sample lengths (expected one positive integer per line)");
  } else {
    batch.source = "wikipedia profile, seed " + std::to_string(o.seed);
    batch.samples = workload::draw_batch(workload::wikipedia(), o.tokens, o.seed, 0);
  }
  if (!o.input || o.context_given) {
    std::int64_t pieces = 0;
    for (const auto& s : batch.samples) {
      pieces += (s.tokens - 1) / o.context + 1;
      if (pieces > max_samples)
        throw tool::usage_error("--context = " + std::to_string(o.context) + " would cut the " +
                                "batch into more than " + std::to_string(max_samples) + " samples");
    }
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
      break;
  }
  return f(pyramid_recompute{});
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

planned run_scheduler(const plan_options& o, const analytic_cost_model& cost,
                      const std::vector<sample>& samples) {
  const tool::runtime_bucketing bucketing(o);
  return with_recompute(o.recompute, [&](auto recompute) {
    return with_placement(o, [&](auto placement) {
      const DataCentricScheduler<analytic_cost_model, tool::runtime_bucketing, decltype(recompute),
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

std::string grouped(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string fixed(double value, int decimals) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << value;
  return os.str();
}

std::string seconds_text(double seconds) {
  if (seconds < 1.0) return fixed(seconds * 1e3, 1) + " ms";
  return fixed(seconds, 3) + " s";
}

void print_summary(std::ostream& out, const plan_options& o, const analytic_cost_model& cost,
                   const batch_description& batch, const planned& result,
                   const tool::runtime_bucketing& bucketing) {
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
               << to_string(training.sp) << ", headroom " << fixed(training.headroom(cluster) / gib, 1)
               << " GiB\n";
  row("cluster") << cluster.gpus << " x " << cluster.gpu.name << " (" << cluster.nodes() << " node"
                 << (cluster.nodes() == 1 ? "" : "s") << " x " << cluster.gpus_per_node << ")\n";
  row("batch") << grouped(static_cast<std::int64_t>(batch.samples.size())) << " samples, "
               << grouped(tokens) << " tokens, longest " << grouped(longest) << " (" << batch.source
               << ")\n";
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
  row("degrees") << std::setw(6) << "degree" << std::setw(13) << "micro-steps" << std::setw(10)
                 << "samples" << std::setw(13) << "tokens" << '\n';
  for (const auto& [degree, d] : degrees)
    row("") << std::setw(6) << degree << std::setw(13) << grouped(d.steps) << std::setw(10)
            << grouped(d.samples) << std::setw(13) << grouped(d.tokens) << '\n';
  row("fingerprint") << detail::fingerprint_hex(plan.fingerprint) << '\n';
  row("planning time") << fixed(result.milliseconds, 1) << " ms\n";
}

int run(int argc, char** argv) {
  const plan_options o = tool::parse_arguments(argc, argv);
  if (o.help) {
    std::cout << tool::usage_text();
    return 0;
  }
  const auto model = tool::model_named(o.model);
  const analytic_cost_model cost(model, tool::cluster_of(o), tool::training_of(o));
  // Text lengths: causal for language models, bidirectional for diffusion transformers
  // (a factorised layout needs a video grid, which a list of lengths does not give).
  const auto attention =
      model.family == model_family::decoder_lm ? attention_kind::causal : attention_kind::full;
  const auto batch = load_batch(o, attention);
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
    write_json(std::cout, result.plan, options);
  } else {
    print_summary(std::cout, o, cost, batch, result, tool::runtime_bucketing(o));
  }
  std::cout.flush();
  if (!std::cout) throw error("cannot write to standard output");
  return 0;
}

/// An error message fit for a terminal: messages quote the offending input, which may be a
/// binary file read by mistake, so control characters become '?'.
std::string printable(std::string_view message) {
  std::string out(message);
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const dcp::tool::usage_error& e) {
    std::cerr << "dcp-plan: " << printable(e.what()) << "\nTry 'dcp-plan --help'.\n";
    return 2;
  } catch (const dcp::error& e) {
    std::cerr << "dcp-plan: " << printable(e.what()) << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "dcp-plan: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dcp-plan: " << printable(e.what()) << '\n';
    return 1;
  }
}
