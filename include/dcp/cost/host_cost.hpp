#pragma once
// The host's (CPU's) time to issue one kernel in an eager framework, by the kind of host. A
// micro-step takes the longer of its device time and kernels x this, so the value decides
// micro-steps of few tokens. Both cost models (analytic_constants, sim::truth_constants) default
// to the x86 host; docs/cost-sources.md §1.5 gives each preset's source.

#include <optional>
#include <string_view>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Named hosts and their seconds per kernel.
struct host_cost_preset {
  std::string_view name;
  double seconds_per_kernel;
  std::string_view source;
};

/// An x86 host (HGX H100/H200 with Xeon or EPYC CPUs): a plain torch Linear forward costs
/// 13.5 us of CPU on an x86 H100 DGX (NVIDIA/TransformerEngine#2053); a tiny eager GEMM 11-18 us
/// (NVIDIA/dgxc-benchmarking, cpu_overhead microbenchmark).
inline constexpr host_cost_preset x86_host{
    "x86", 13.5e-6, "a torch Linear forward on an x86 H100 DGX (TransformerEngine#2053)"};

/// A Grace host (GH200, GB200): fitted to the 4-GPU baseline iteration of Megatron's dynamic-CP
/// benchmark (195.269 ms, nodes of four GPUs; evaluation::fit_host_seconds_per_kernel), and in
/// line with Transformer Engine's Linear at 90.5 us (GH200) and 99.7 us (GB200) of CPU
/// (TransformerEngine#2053).
inline constexpr host_cost_preset grace_host{
    "grace", 91.1e-6,
    "fitted to Megatron's 4-GPU dynamic-CP baseline iteration (nodes of four GPUs)"};

/// CUDA graphs: the host issues a whole graph at once, launches never limit.
inline constexpr host_cost_preset graphs_host{"graphs", 0.0, "CUDA graphs: one launch per graph"};

inline constexpr host_cost_preset host_cost_presets[] = {x86_host, grace_host, graphs_host};

/// The preset called `name` ("x86", "grace", "graphs"), or nothing.
[[nodiscard]] constexpr std::optional<host_cost_preset> host_cost_preset_named(
    std::string_view name) noexcept {
  for (const auto& preset : host_cost_presets)
    if (preset.name == name) return preset;
  return std::nullopt;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
