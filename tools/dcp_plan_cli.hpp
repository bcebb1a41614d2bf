#pragma once
// Command line of dcp-plan: the options, their parser, and the runtime-chosen pieces (model,
// GPU, cluster, training spec, bucketing) they stand for. A header so that
// tests/unit/tool_cli_tests.cpp can test the parser without running the program.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "dcp/bucketing/log2_buckets.hpp"
#include "dcp/bucketing/padding_optimal.hpp"
#include "dcp/bucketing/varlen_buckets.hpp"
#include "dcp/concepts/bucketing_policy.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

#include "cli_common.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool {

enum class recompute_choice : std::uint8_t { none, full, selective, pyramid, selective_pyramid };
enum class bucketing_choice : std::uint8_t { varlen, log2, padding_optimal };
enum class placement_choice : std::uint8_t { balanced, best_static, static_degree };

constexpr std::string_view to_string(recompute_choice r) noexcept {
  switch (r) {
    case recompute_choice::none:
      return "none";
    case recompute_choice::full:
      return "full";
    case recompute_choice::selective:
      return "selective";
    case recompute_choice::pyramid:
      return "pyramid";
    case recompute_choice::selective_pyramid:
      return "selective-pyramid";
  }
  return "unknown";
}

/// Limits that keep a typo from asking for an absurd plan (and its memory).
inline constexpr std::int64_t max_gpus = 65536;
inline constexpr std::int64_t max_default_tokens = 1'000'000'000;

struct plan_options {
  std::string model = "llama3-8b";
  std::string gpu = "h200";
  std::int64_t nodes = 4;
  std::int64_t gpus_per_node = 8;
  std::optional<std::int64_t> gpus{};  ///< --gpus: total, overrides nodes
  int zero_stage = 1;
  lockstep_mode lockstep = lockstep_mode::automatic;
  std::optional<double> headroom_gib{};  ///< unset: the training_spec default
  sequence_parallel sp = sequence_parallel::ulysses;
  recompute_choice recompute = recompute_choice::selective_pyramid;
  bucketing_choice bucketing = bucketing_choice::varlen;
  std::int32_t padding_buckets = 0;  ///< K of padding-optimal:K
  placement_choice placement = placement_choice::balanced;
  std::int64_t static_degree = 0;   ///< D of static:D
  std::int64_t tokens = 1'000'000;  ///< size of the default batch
  std::int64_t context = 65536;
  bool context_given = false;  ///< --context on the command line (splits a FILE's lengths too)
  std::uint64_t seed = 1;
  bool json = false;
  bool ranks = false;  ///< --ranks: add each rank's micro-step list to the JSON
  bool help = false;
  std::optional<std::string> input{};  ///< FILE, or "-" for stdin; unset: the default batch
};

inline std::string usage_text() {
  return R"(Usage: dcp-plan [options] [FILE|-]

Plans one training step with dcp::DataCentricScheduler and prints a summary (or, with --json,
the plan as "dcp.step_plan/1" JSON; see docs/plan-format.md).

Input: FILE (or '-' for stdin) holds sample lengths, one positive integer per line; blank lines
and lines starting with '#' are skipped. Without FILE, a default batch of --tokens tokens is
drawn from the embedded Wikipedia length profile and split into --context-token chunks. The
lengths of a FILE are planned as given unless --context is passed. Samples are causal text for
the language models, bidirectional (full attention) for the diffusion transformers.

Options (defaults in brackets):
  --model NAME           llama3-8b | llama3-70b | qwen2.5-7b | qwen2.5-72b | qwen3-32b |
                         stdit3-xl | wan2.1-14b  [llama3-8b]
  --gpu NAME             h100 | h200  [h200]
  --nodes N              nodes  [4]
  --gpus-per-node G      GPUs per node  [8]
  --gpus N               total GPUs, instead of --nodes (one node of N if N < G)
  --zero S               ZeRO stage 0..3  [1]
  --lockstep MODE        auto, on or off: every rank runs the same number of micro-steps, in
                         rounds padded with empty ones (auto: with ZeRO-3)  [auto]
  --headroom-gib X       memory kept free per GPU, GiB  [10 % of the GPU]
  --sp STYLE             ulysses | ring | hybrid | auto  [ulysses]; auto chooses per micro-batch
  --recompute R          none | full | selective | pyramid | selective-pyramid
                         [selective-pyramid]
  --bucketing B          varlen | log2 | padding-optimal:K (K in 1..4096)  [varlen]
  --placement P          balanced | best-static | static:D  [balanced]
  --tokens N             tokens of the default batch  [1000000]
  --context N            context length: longer samples are split into chunks  [65536]
  --seed S               seed of the default batch  [1]
  --json                 print the plan as JSON (only JSON on stdout)
  --ranks                with --json: add "ranks", each rank's micro-steps in order
  --help                 print this help

Exit status: 0 planned, 1 the library rejected the input (dcp::error), out of memory or output
that could not be written, 2 bad usage.
)";
}

/// Parses the arguments after the program name. Throws usage_error naming the flag and value.
inline plan_options parse_arguments(std::span<const std::string_view> args) {
  plan_options o;
  bool nodes_given = false;
  bool only_operands = false;
  for (std::size_t n = 0; n < args.size(); ++n) {
    std::string_view arg = args[n];
    if (only_operands || arg == "-" || !arg.starts_with("-")) {
      if (o.input)
        throw usage_error("more than one input file ('" + *o.input + "' and '" + std::string(arg) +
                          "')");
      o.input = std::string(arg);
      continue;
    }
    if (arg == "--") {
      only_operands = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg == "--ranks") {
      o.ranks = true;
      continue;
    }
    // Flags with a value: --flag VALUE or --flag=VALUE.
    std::string_view flag = arg;
    std::string_view value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      const bool known = flag == "--model" || flag == "--gpu" || flag == "--nodes" ||
                         flag == "--gpus-per-node" || flag == "--gpus" || flag == "--zero" ||
                         flag == "--lockstep" || flag == "--headroom-gib" || flag == "--sp" ||
                         flag == "--recompute" || flag == "--bucketing" || flag == "--placement" ||
                         flag == "--tokens" || flag == "--context" || flag == "--seed";
      if (!known) throw usage_error("unknown option '" + std::string(arg) + "'");
      if (n + 1 >= args.size()) throw usage_error(std::string(flag) + " needs a value");
      value = args[++n];
    }

    if (flag == "--model") {
      if (value != "llama3-8b" && value != "llama3-70b" && value != "qwen2.5-7b" &&
          value != "qwen2.5-72b" && value != "qwen3-32b" && value != "stdit3-xl" &&
          value != "wan2.1-14b")
        detail::bad_choice(flag, value,
                           "llama3-8b, llama3-70b, qwen2.5-7b, qwen2.5-72b, qwen3-32b, stdit3-xl "
                           "or wan2.1-14b");
      o.model = std::string(value);
    } else if (flag == "--gpu") {
      if (value != "h100" && value != "h200") detail::bad_choice(flag, value, "h100 or h200");
      o.gpu = std::string(value);
    } else if (flag == "--nodes") {
      o.nodes = detail::parse_integer<std::int64_t>(flag, value, 1, max_gpus);
      nodes_given = true;
    } else if (flag == "--gpus-per-node") {
      o.gpus_per_node = detail::parse_integer<std::int64_t>(flag, value, 1, max_gpus);
    } else if (flag == "--gpus") {
      o.gpus = detail::parse_integer<std::int64_t>(flag, value, 1, max_gpus);
    } else if (flag == "--zero") {
      o.zero_stage = detail::parse_integer<int>(flag, value, 0, 3);
    } else if (flag == "--lockstep") {
      if (const auto mode = parse_lockstep_mode(value))
        o.lockstep = *mode;
      else
        detail::bad_choice(flag, value, "auto, on or off");
    } else if (flag == "--headroom-gib") {
      o.headroom_gib = detail::parse_non_negative(flag, value);
    } else if (flag == "--sp") {
      if (const auto style = parse_sequence_parallel(value))
        o.sp = *style;
      else
        detail::bad_choice(flag, value, "ulysses, ring, hybrid or auto");
    } else if (flag == "--recompute") {
      if (value == "none")
        o.recompute = recompute_choice::none;
      else if (value == "full")
        o.recompute = recompute_choice::full;
      else if (value == "selective")
        o.recompute = recompute_choice::selective;
      else if (value == "pyramid")
        o.recompute = recompute_choice::pyramid;
      else if (value == "selective-pyramid")
        o.recompute = recompute_choice::selective_pyramid;
      else
        detail::bad_choice(flag, value, "none, full, selective, pyramid or selective-pyramid");
    } else if (flag == "--bucketing") {
      constexpr std::string_view padding = "padding-optimal:";
      if (value == "varlen")
        o.bucketing = bucketing_choice::varlen;
      else if (value == "log2")
        o.bucketing = bucketing_choice::log2;
      else if (value.starts_with(padding)) {
        o.bucketing = bucketing_choice::padding_optimal;
        o.padding_buckets = detail::parse_integer<std::int32_t>(
            "--bucketing padding-optimal:K", value.substr(padding.size()), 1,
            padding_optimal_buckets::max_buckets);
      } else {
        detail::bad_choice(flag, value, "varlen, log2 or padding-optimal:K");
      }
    } else if (flag == "--placement") {
      constexpr std::string_view fixed = "static:";
      if (value == "balanced")
        o.placement = placement_choice::balanced;
      else if (value == "best-static")
        o.placement = placement_choice::best_static;
      else if (value.starts_with(fixed)) {
        o.placement = placement_choice::static_degree;
        o.static_degree = detail::parse_integer<std::int64_t>("--placement static:D",
                                                              value.substr(fixed.size()), 1);
        if ((o.static_degree & (o.static_degree - 1)) != 0)
          throw usage_error("--placement static:" + std::to_string(o.static_degree) +
                            ": the degree must be a power of two");
      } else {
        detail::bad_choice(flag, value, "balanced, best-static or static:D");
      }
    } else if (flag == "--tokens") {
      o.tokens = detail::parse_integer<std::int64_t>(flag, value, 1, max_default_tokens);
    } else if (flag == "--context") {
      o.context = detail::parse_integer<std::int64_t>(flag, value, 1);
      o.context_given = true;
    } else if (flag == "--seed") {
      o.seed = detail::parse_integer<std::uint64_t>(flag, value, 0);
    } else {
      throw usage_error("unknown option '" + std::string(flag) + "'");
    }
  }
  if (o.ranks && !o.json) throw usage_error("--ranks applies to --json output only");
  if (o.gpus && nodes_given) throw usage_error("--gpus and --nodes both given; use one of them");
  if (!o.gpus && o.nodes * o.gpus_per_node > max_gpus)
    throw usage_error("--nodes x --gpus-per-node = " + std::to_string(o.nodes * o.gpus_per_node) +
                      " GPUs, must be <= " + std::to_string(max_gpus));
  return o;
}

inline plan_options parse_arguments(int argc, const char* const* argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_arguments(std::span<const std::string_view>(args.data(), args.size()));
}

/// The cluster the options describe: --gpus N (nodes of --gpus-per-node, or one node of N when
/// N is smaller), else --nodes x --gpus-per-node. Not validated here: the cost model does that.
inline cluster_spec cluster_of(const plan_options& o) {
  cluster_spec c;
  c.gpu = gpu_named(o.gpu);
  c.gpus_per_node = o.gpus ? std::min(o.gpus_per_node, *o.gpus) : o.gpus_per_node;
  c.gpus = o.gpus ? *o.gpus : o.nodes * o.gpus_per_node;
  return c;
}

inline training_spec training_of(const plan_options& o) {
  training_spec t;
  t.zero_stage = o.zero_stage;
  t.lockstep = o.lockstep;
  if (o.headroom_gib) {
    t.headroom_bytes = *o.headroom_gib * gib;
    t.headroom_fraction = 0;
  }
  t.sp = o.sp;
  return t;
}

/// A bucketing policy chosen at run time: dcp-plan compiles one scheduler for every bucketing.
class runtime_bucketing {
 public:
  runtime_bucketing() = default;
  explicit runtime_bucketing(const plan_options& o) {
    switch (o.bucketing) {
      case bucketing_choice::varlen:
        policy_ = varlen_buckets{};
        break;
      case bucketing_choice::log2:
        policy_ = log2_buckets{};
        break;
      case bucketing_choice::padding_optimal:
        policy_ = padding_optimal_buckets(o.padding_buckets);
        break;
    }
  }

  std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    return std::visit([&](const auto& policy) { return policy.assign(batch); }, policy_);
  }
  std::string_view name() const noexcept {
    return std::visit([](const auto& policy) { return std::string_view(policy.name()); }, policy_);
  }
  /// The name with its parameter, e.g. "padding-optimal:4".
  std::string label() const {
    if (const auto* p = std::get_if<padding_optimal_buckets>(&policy_))
      return std::string(p->name()) + ":" + std::to_string(p->buckets());
    return std::string(name());
  }

 private:
  std::variant<varlen_buckets, log2_buckets, padding_optimal_buckets> policy_{};
};

static_assert(bucketing_policy<runtime_bucketing>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool
