#pragma once
// GPUs and clusters. Constants from docs/cost-sources.md §1 (datasheets, nccl-tests).

#include <bit>
#include <cstdint>
#include <ostream>
#include <string>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

inline constexpr double gib = 1024.0 * 1024.0 * 1024.0;

struct gpu_spec {
  std::string name;
  double peak_flops = 0;     ///< dense BF16 tensor-core FLOP/s
  double memory_bytes = 0;   ///< HBM capacity as the driver reports it
  double hbm_bandwidth = 0;  ///< bytes/s
  /// Streaming multiprocessors; the cost models derive GEMM efficiency at small token counts
  /// from it (dcp/cost/gemm_waves.hpp). 0 = unknown: no fixed GEMM cost is charged.
  std::int64_t streaming_multiprocessors = 0;

  friend bool operator==(const gpu_spec&, const gpu_spec&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const gpu_spec& g) {
  return os << "gpu{" << g.name << ", " << g.peak_flops / 1e12 << " TFLOP/s, "
            << g.memory_bytes / gib << " GiB, " << g.hbm_bandwidth / 1e12 << " TB/s, "
            << g.streaming_multiprocessors << " SMs}";
}

namespace gpus {
/// H100 SXM5 80 GB: 989.4 TFLOP/s dense BF16, 3.35 TB/s, 132 SMs (§1.1); the driver reports
/// ~79.6 GiB.
[[nodiscard]] inline gpu_spec h100_sxm() {
  return {"H100-SXM", 989.4e12, 79.6 * gib, 3.35e12, 132};
}
/// H200 SXM 141 GB: same compute (132 SMs) as H100, 4.8 TB/s; the driver reports ~140 GiB.
[[nodiscard]] inline gpu_spec h200_sxm() {
  return {"H200-SXM", 989.4e12, 140.0 * gib, 4.8e12, 132};
}
/// A100 SXM4 40 GB (NVIDIA A100 Tensor Core GPU datasheet): 312 TFLOP/s dense BF16, 40 GB HBM2
/// at 1,555 GB/s, 108 SMs (NVIDIA A100 architecture whitepaper [R]); the driver reports 40,960 MiB
/// = 40 GiB [R]. Its NVLink (600 GB/s bidirectional, 300 per direction) is the cluster's: see
/// a100_nvlink_bandwidth.
[[nodiscard]] inline gpu_spec a100_sxm_40gb() {
  return {"A100-SXM4-40GB", 312e12, 40.0 * gib, 1.555e12, 108};
}
/// All-to-all bus bandwidth of A100's NVLink 3 (12 links, 300 GB/s per direction, datasheet):
/// the H100 ratio of nccl-tests' non-all-reduce busbw to line rate (370 / 450, nccl-tests#212)
/// applied to 300 GB/s [D]. For cluster_spec::nvlink_bandwidth.
inline constexpr double a100_nvlink_bandwidth = 300e9 * 370.0 / 450.0;
}  // namespace gpus

/// `gpus` GPUs in nodes of `gpus_per_node`, with an NVSwitch domain per node and one NIC per GPU.
struct cluster_spec {
  std::int64_t gpus = 0;
  std::int64_t gpus_per_node = 8;
  gpu_spec gpu{};
  double nvlink_bandwidth = 370e9;    ///< per GPU, all-to-all bus bandwidth (nccl-tests#212)
  double nic_bandwidth = 48e9;        ///< per GPU, one CX-7 400G NIC through NCCL (nccl-tests#267)
  double intra_node_latency = 15e-6;  ///< per collective inside a node (NCCL tuning.cc, §1.3)
  double inter_node_latency = 40e-6;  ///< per collective across nodes (§1.3 planning default)

  [[nodiscard]] std::int64_t nodes() const noexcept {
    return gpus_per_node ? gpus / gpus_per_node : 0;
  }
  [[nodiscard]] std::int64_t node_of(std::int64_t rank) const noexcept {
    return rank / gpus_per_node;
  }

  friend bool operator==(const cluster_spec&, const cluster_spec&) = default;

  /// Largest cluster a spec may describe; far beyond any built, and small enough that every
  /// per-rank table and every degree (a power of two up to gpus) stays in range.
  static constexpr std::int64_t max_gpus = std::int64_t{1} << 24;
  /// Largest SM count a GPU may declare (an H100 has 132).
  static constexpr std::int64_t max_streaming_multiprocessors = std::int64_t{1} << 20;

  /// Throws invalid_spec naming the first bad field, its value and the limit: gpus outside
  /// [1, max_gpus] or not a multiple of gpus_per_node >= 1; gpus_per_node not a power of two
  /// on more than one node; GPU peak, capacity, HBM and link
  /// bandwidths not finite and > 0; gpu.streaming_multiprocessors outside [0,
  /// max_streaming_multiprocessors]; latencies not finite and >= 0.
  void validate() const {
    if (gpus < 1) throw invalid_spec("cluster: gpus = " + std::to_string(gpus) + ", must be >= 1");
    if (gpus > max_gpus)
      throw invalid_spec("cluster: gpus = " + std::to_string(gpus) + ", must be in [1, " +
                         std::to_string(max_gpus) + "]");
    if (gpus_per_node < 1)
      throw invalid_spec("cluster: gpus_per_node = " + std::to_string(gpus_per_node) +
                         ", must be >= 1");
    if (gpus % gpus_per_node != 0)
      throw invalid_spec("cluster: gpus = " + std::to_string(gpus) +
                         " is not a multiple of gpus_per_node = " + std::to_string(gpus_per_node));
    // Sequence-parallel groups are aligned blocks of 1, 2, 4, ... ranks, and the cost models count
    // a group as crossing nodes only when it is larger than a node: true only where a node's size
    // is a power of two (or there is one node).
    if (gpus != gpus_per_node && !std::has_single_bit(static_cast<std::uint64_t>(gpus_per_node)))
      throw invalid_spec(
          "cluster: gpus_per_node = " + std::to_string(gpus_per_node) + " with " +
          std::to_string(gpus) + " GPUs in " + std::to_string(gpus / gpus_per_node) +
          " nodes, must be a power of two (1, 2, 4, 8, ...) where there is more "
          "than one node: the aligned groups of 2, 4, ... GPUs would straddle nodes");
    detail::require_finite_positive(gpu.peak_flops, "cluster: ", "gpu.peak_flops");
    detail::require_finite_positive(gpu.memory_bytes, "cluster: ", "gpu.memory_bytes");
    detail::require_finite_positive(gpu.hbm_bandwidth, "cluster: ", "gpu.hbm_bandwidth");
    if (gpu.streaming_multiprocessors < 0 ||
        gpu.streaming_multiprocessors > max_streaming_multiprocessors)
      throw invalid_spec("cluster: gpu.streaming_multiprocessors = " +
                         std::to_string(gpu.streaming_multiprocessors) + ", must be in [0, " +
                         std::to_string(max_streaming_multiprocessors) + "] (0 = unknown)");
    detail::require_finite_positive(nvlink_bandwidth, "cluster: ", "nvlink_bandwidth");
    detail::require_finite_positive(nic_bandwidth, "cluster: ", "nic_bandwidth");
    detail::require_finite_non_negative(intra_node_latency, "cluster: ", "intra_node_latency");
    detail::require_finite_non_negative(inter_node_latency, "cluster: ", "inter_node_latency");
  }
};

/// `nodes` HGX nodes of 8 GPUs each. Throws invalid_spec for more nodes than max_gpus allows
/// (nodes * 8 could overflow); other bad counts are left to cluster_spec::validate.
[[nodiscard]] inline cluster_spec hgx_cluster(std::int64_t nodes, gpu_spec gpu) {
  if (nodes > cluster_spec::max_gpus / 8)
    throw invalid_spec("hgx_cluster: nodes = " + std::to_string(nodes) + ", must be at most " +
                       std::to_string(cluster_spec::max_gpus / 8) + " (" +
                       std::to_string(cluster_spec::max_gpus) + " GPUs)");
  cluster_spec c;
  c.gpus = nodes * 8;
  c.gpus_per_node = 8;
  c.gpu = std::move(gpu);
  return c;
}

inline std::ostream& operator<<(std::ostream& os, const cluster_spec& c) {
  return os << "cluster{" << c.gpus << " x " << c.gpu.name << ", " << c.gpus_per_node
            << " per node, nvlink " << c.nvlink_bandwidth / 1e9 << " GB/s, nic "
            << c.nic_bandwidth / 1e9 << " GB/s}";
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
