#pragma once
// dcp-sim's command line: options, parser and usage text (testable apart from the program).

#include <cctype>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/cost/host_cost.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/training.hpp"

#include "cli_common.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool {

struct sim_options_cli {
  std::string model = "llama3-8b";
  bool model_given = false;
  std::string gpu = "h200";
  bool gpu_given = false;
  std::int64_t nodes = 4;
  bool nodes_given = false;
  std::int64_t gpus_per_node = 8;
  int zero_stage = 1;
  bool zero_given = false;
  lockstep_mode lockstep = lockstep_mode::automatic;
  sequence_parallel sp = sequence_parallel::ulysses;
  bool sp_given = false;
  std::string workload = "wikipedia";
  bool workload_given = false;
  std::optional<std::string> file{};  ///< lengths (or, with --video-csv, frames,height,width)
  bool video_csv = false;
  std::int64_t tokens = 1'000'000;  ///< global batch tokens (text scenarios)
  bool tokens_given = false;
  std::int64_t video_tokens = 4'000'000;  ///< global batch tokens of the default video scenario
  std::int64_t context = 65536;
  bool context_given = false;
  std::int64_t steps = 50;
  bool steps_given = false;
  std::uint64_t seed = 1;
  std::vector<std::string> policies{};  ///< empty: all
  bool json = false;
  std::optional<std::string> out{};
  std::optional<std::string> plan{};
  /// Host seconds per kernel for the truth model and the planner's analytic model; unset: their
  /// defaults (the x86 host, dcp/cost/host_cost.hpp).
  std::optional<double> host_cost{};
  bool fidelity = false;  ///< re-enact the published protocols (docs/fidelity.md)
  bool matrix = false;    ///< every policy on the scenario matrix (tools/dcp_sim_matrix.hpp)
  bool pipeline = false;  ///< the tensor x pipeline scenarios (tools/dcp_sim_pipeline.hpp)
  bool help = false;
};

inline std::string sim_usage_text() {
  return R"(Usage: dcp-sim [options]

Plans the same batches with every policy (the planner's analytic cost model) and judges every
plan with the simulator's truth model of the hardware; prints a table per scenario (or JSON).
With no options: Llama-3-8B on Wikipedia lengths at 64K context and STDiT3-XL on the OpenSora
video mix, 4 x 8 H200, 50 steps each.

Options (defaults in brackets):
  --model NAME        llama3-8b | llama3-70b | qwen2.5-7b | qwen2.5-72b | qwen3-32b | stdit3-xl |
                      wan2.1-14b
  --gpu NAME          h100 | h200  [h200]
  --nodes N           nodes of --gpus-per-node GPUs  [4]
  --gpus-per-node G   [8]
  --zero S            ZeRO stage 0..3  [1]
  --lockstep MODE     auto, on or off: every rank runs the same number of micro-steps, in
                      rounds (auto: with ZeRO-3; off is refused with ZeRO-3)  [auto]
  --sp STYLE          ulysses | ring | hybrid | auto  [ulysses]; hybrid: Ulysses inside a node,
                      ring across; auto: ours choose per micro-batch, every other policy runs
                      at its best fixed style (docs/planner.md, docs/baselines.md)
  --workload W        wikipedia | megatron | long-sft | long-context | opensora
  --file PATH         sample lengths, one per line (the same batch every step)
  --video-csv         with --file: lines are frames,height,width in latent patches
  --tokens N          global batch tokens per step  [1000000; video default 4000000, also
                      with --model/--workload; the table says which it used]
  --context N         split longer documents into N-token chunks  [65536]
  --steps N           steps per policy  [50]
  --seed S            seed of the first step's batch, 0..2^64-1  [1]
  --policies LIST     comma-separated: dcp,static,paper-baseline,megatron-dcp,videosys-dcp,
                      flexsp,verl,wlb-llm,dcp-calibrated,megatron-static,
                      megatron-static-sel,ulysses-static,megatron-dcp-2048,
                      megatron-dcp-tuned,verl-hybrid,paper-baseline-lpt,wlb-llm-delay,
                      dcp-delay  [all]
  --host-cost S|HOST  the framework's host (CPU) seconds to issue one kernel, for the
                      simulated hardware and the planner's model alike, or a named host:
                      x86 (13.5e-6, a torch Linear on an x86 H100 DGX), grace (91.1e-6, fitted
                      to Megatron's 4-GPU benchmark: docs/fidelity.md "The host cost"),
                      graphs (0: CUDA graphs, launches never limit)  [x86]
  --json              print JSON instead of tables
  --out DIR           write SVG figures (a timeline per policy, throughput, utilisation) into DIR
  --plan FILE         evaluate a plan made elsewhere (dcp.step_plan/1 JSON, docs/plan-format.md)
                      on the batch it was made for (--file, or the first step's batch);
                      refused, naming what differs, when its ids or tokens are another batch's
  --matrix            every policy on the scenario matrix: Llama-3-8B / 70B and Qwen2.5-72B on
                      wikipedia, long-sft and long-context at 128K / 512K / 2M, STDiT3-XL and
                      Wan2.1-14B on opensora; 32, 256 and 1,024 GPUs; H100 and H200; Ulysses,
                      ring and auto (ZeRO-3 from 10B parameters; 31,250 tokens per GPU per step for
                      text, 125,000 for video); one row per cell. --model, --workload,
                      --context, --gpu, --nodes and --sp keep one value of their axis;
                      --steps [3]; docs/results.md "Scenario matrix"
  --pipeline          inside a tensor x pipeline grid: Llama-3-70B (TP 8, PP 4) on 128 and 256
                      H100 on long-context and long-sft at 128K, Llama-3-8B (TP 8, PP 4) on 64
                      H100 (WLB-LLM's shape); every pipeline policy on the same steps, judged
                      stage by stage on the truth model, noise free; takes only --json,
                      --steps [3], --seed and --out (a stage timeline per policy and
                      scenario, its first step); docs/pipeline.md
  --fidelity          re-enact published benchmarks (Megatron-Core dynamic CP, FlexSP) on the
                      truth model: published vs simulated speedup, step times, and whether
                      each is within 15 %, else the mechanism that explains the miss
                      (docs/fidelity.md); takes only --json, --steps (shortens every protocol
                      to N steps), --seed and --host-cost
  --help

All times are from a model of the hardware (docs/simulator.md), not from GPUs.
Exit status: 0 done, 1 bad input (dcp::error), out of memory or output that could not be
written, 2 bad usage.
)";
}

inline sim_options_cli parse_sim_arguments(std::span<const std::string_view> args) {
  sim_options_cli o;
  for (std::size_t n = 0; n < args.size(); ++n) {
    std::string_view flag = args[n];
    std::string_view value;
    bool has_value = false;
    if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string_view::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string_view {
      if (has_value) return value;
      if (n + 1 >= args.size()) throw usage_error(std::string(flag) + " needs a value");
      return args[++n];
    };
    if (flag == "--help" || flag == "-h")
      o.help = true;
    else if (flag == "--json")
      o.json = true;
    else if (flag == "--video-csv")
      o.video_csv = true;
    else if (flag == "--model") {
      o.model = std::string(next());
      (void)model_named(o.model);
      o.model_given = true;
    } else if (flag == "--gpu") {
      o.gpu = std::string(next());
      (void)gpu_named(o.gpu);
      o.gpu_given = true;
    } else if (flag == "--nodes") {
      o.nodes = detail::parse_integer<std::int64_t>(flag, next(), 1, 8192);
      o.nodes_given = true;
    } else if (flag == "--gpus-per-node")
      o.gpus_per_node = detail::parse_integer<std::int64_t>(flag, next(), 1, 64);
    else if (flag == "--zero") {
      o.zero_stage = detail::parse_integer<int>(flag, next(), 0, 3);
      o.zero_given = true;
    } else if (flag == "--lockstep") {
      const auto v = next();
      if (const auto mode = parse_lockstep_mode(v))
        o.lockstep = *mode;
      else
        detail::bad_choice(flag, v, "auto, on or off");
    } else if (flag == "--sp") {
      const auto v = next();
      if (const auto style = parse_sequence_parallel(v))
        o.sp = *style;
      else
        detail::bad_choice(flag, v, "ulysses, ring, hybrid or auto");
      o.sp_given = true;
    } else if (flag == "--workload") {
      const auto v = next();
      if (v != "wikipedia" && v != "megatron" && v != "long-sft" && v != "long-context" &&
          v != "opensora")
        detail::bad_choice(flag, v, "wikipedia, megatron, long-sft, long-context or opensora");
      o.workload = std::string(v);
      o.workload_given = true;
    } else if (flag == "--file")
      o.file = std::string(next());
    else if (flag == "--tokens") {
      o.tokens = detail::parse_integer<std::int64_t>(flag, next(), 1, 1'000'000'000);
      o.video_tokens = o.tokens;
      o.tokens_given = true;
    } else if (flag == "--context") {
      o.context = detail::parse_integer<std::int64_t>(flag, next(), 1);
      o.context_given = true;
    } else if (flag == "--steps") {
      o.steps = detail::parse_integer<std::int64_t>(flag, next(), 1, 100000);
      o.steps_given = true;
    } else if (flag == "--fidelity")
      o.fidelity = true;
    else if (flag == "--matrix")
      o.matrix = true;
    else if (flag == "--pipeline")
      o.pipeline = true;
    else if (flag == "--seed")
      o.seed = detail::parse_integer<std::uint64_t>(flag, next(), 0);
    else if (flag == "--host-cost") {
      const std::string_view text = next();
      if (const auto preset = host_cost_preset_named(text)) {
        o.host_cost = preset->seconds_per_kernel;
      } else {
        const bool numeric = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) ||
                                               text[0] == '.' || text[0] == '-' || text[0] == '+');
        if (!numeric)
          throw usage_error("--host-cost = '" + std::string(text) +
                            "', must be seconds per kernel or a named host: x86, grace, graphs");
        o.host_cost = detail::parse_non_negative(flag, text);
        if (*o.host_cost > 0.01)
          throw usage_error("--host-cost = " + std::string(text) +
                            " seconds per kernel, must be at most 0.01");
      }
    } else if (flag == "--policies") {
      std::string_view list = next();
      if (list.empty())
        throw usage_error(
            "--policies: empty list; name at least one policy, or leave --policies out for all");
      while (!list.empty()) {
        const auto comma = list.find(',');
        const auto name = list.substr(0, comma);
        if (name.empty()) throw usage_error("--policies: empty policy name in the list");
        o.policies.emplace_back(name);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    } else if (flag == "--out")
      o.out = std::string(next());
    else if (flag == "--plan")
      o.plan = std::string(next());
    else
      throw usage_error("unknown option '" + std::string(args[n]) + "'");
  }
  if (o.video_csv && !o.file) throw usage_error("--video-csv needs --file");
  if (o.video_csv && model_named(o.model).family != model_family::diffusion_transformer)
    throw usage_error("--video-csv reads video latent grids, but --model " + o.model +
                      (o.model_given ? "" : " (the default)") +
                      " is a text model: name a video model, e.g. --model stdit3-xl");
  if (o.fidelity && (o.model_given || o.workload_given || o.file || o.plan || o.out ||
                     !o.policies.empty() || o.tokens_given || o.context_given))
    throw usage_error(
        "--fidelity re-enacts fixed published protocols; it takes only --json, --steps, --seed and "
        "--host-cost");
  if (o.pipeline && (o.matrix || o.fidelity || o.model_given || o.workload_given || o.file ||
                     o.plan || !o.policies.empty() || o.tokens_given || o.context_given ||
                     o.zero_given || o.nodes_given || o.gpu_given || o.sp_given || o.host_cost))
    throw usage_error(
        "--pipeline runs fixed tensor x pipeline scenarios; it takes only --json, --steps, --seed "
        "and --out");
  if (o.matrix && (o.fidelity || o.file || o.plan || o.out || o.tokens_given || o.zero_given))
    throw usage_error(
        "--matrix sizes each cell itself; with it --model, --workload, --context, --gpu, --nodes "
        "and "
        "--sp keep one value of that axis, and --policies, --steps, --seed and --json apply; not "
        "--fidelity, --file, --plan, --out, --tokens or --zero");
  return o;
}

inline sim_options_cli parse_sim_arguments(int argc, const char* const* argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_sim_arguments(std::span<const std::string_view>(args.data(), args.size()));
}

inline cluster_spec sim_cluster_of(const sim_options_cli& o) {
  cluster_spec c;
  c.gpu = gpu_named(o.gpu);
  c.gpus_per_node = o.gpus_per_node;
  c.gpus = o.nodes * o.gpus_per_node;
  return c;
}

inline training_spec sim_training_of(const sim_options_cli& o) {
  training_spec t;
  t.zero_stage = o.zero_stage;
  t.lockstep = o.lockstep;
  t.sp = o.sp;
  return t;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool
