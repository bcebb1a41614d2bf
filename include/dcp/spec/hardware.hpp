#pragma once
// GPUs and clusters. Constants from ../shared/research/perf-model.md §1 (datasheets, nccl-tests).

#include <cstdint>
#include <ostream>
#include <string>

#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

inline constexpr double gib = 1024.0 * 1024.0 * 1024.0;

struct gpu_spec {
  std::string name;
  double peak_flops = 0;      ///< dense BF16 tensor-core FLOP/s
  double memory_bytes = 0;    ///< HBM capacity as the driver reports it
  double hbm_bandwidth = 0;   ///< bytes/s

  friend bool operator==(const gpu_spec&, const gpu_spec&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const gpu_spec& g) {
  return os << "gpu{" << g.name << ", " << g.peak_flops / 1e12 << " TFLOP/s, "
            << g.memory_bytes / gib << " GiB, " << g.hbm_bandwidth / 1e12 << " TB/s}";
}

namespace gpus {
/// H100 SXM5 80 GB: 989.4 TFLOP/s dense BF16, 3.35 TB/s; the driver reports ~79.6 GiB.
inline gpu_spec h100_sxm() { return {"H100-SXM", 989.4e12, 79.6 * gib, 3.35e12}; }
/// H200 SXM 141 GB: same compute as H100, 4.8 TB/s; the driver reports ~140 GiB.
inline gpu_spec h200_sxm() { return {"H200-SXM", 989.4e12, 140.0 * gib, 4.8e12}; }
}  // namespace gpus

/// `gpus` GPUs in nodes of `gpus_per_node`, with an NVSwitch domain per node and one NIC per GPU.
struct cluster_spec {
  std::int64_t gpus = 0;
  std::int64_t gpus_per_node = 8;
  gpu_spec gpu{};
  double nvlink_bandwidth = 370e9;     ///< per GPU, all-to-all bus bandwidth (nccl-tests#212)
  double nic_bandwidth = 48e9;         ///< per GPU, one CX-7 400G NIC through NCCL (nccl-tests#267)
  double intra_node_latency = 15e-6;   ///< per collective inside a node (NCCL tuning.cc, §1.3)
  double inter_node_latency = 40e-6;   ///< per collective across nodes (§1.3 planning default)

  std::int64_t nodes() const noexcept { return gpus_per_node ? gpus / gpus_per_node : 0; }
  std::int64_t node_of(std::int64_t rank) const noexcept { return rank / gpus_per_node; }

  friend bool operator==(const cluster_spec&, const cluster_spec&) = default;

  void validate() const {
    if (gpus <= 0)
      throw invalid_spec("cluster: gpus = " + std::to_string(gpus) + ", must be >= 1");
    if (gpus_per_node <= 0)
      throw invalid_spec("cluster: gpus_per_node = " + std::to_string(gpus_per_node) +
                         ", must be >= 1");
    if (gpus % gpus_per_node != 0)
      throw invalid_spec("cluster: gpus = " + std::to_string(gpus) +
                         " is not a multiple of gpus_per_node = " + std::to_string(gpus_per_node));
    if (!(gpu.peak_flops > 0))
      throw invalid_spec("cluster: gpu.peak_flops = " + std::to_string(gpu.peak_flops) +
                         ", must be > 0");
    if (!(gpu.memory_bytes > 0))
      throw invalid_spec("cluster: gpu.memory_bytes = " + std::to_string(gpu.memory_bytes) +
                         ", must be > 0");
    if (!(nvlink_bandwidth > 0) || !(nic_bandwidth > 0))
      throw invalid_spec("cluster: link bandwidths must be > 0 (nvlink " +
                         std::to_string(nvlink_bandwidth) + ", nic " +
                         std::to_string(nic_bandwidth) + ")");
  }
};

/// `nodes` HGX nodes of 8 GPUs each.
inline cluster_spec hgx_cluster(std::int64_t nodes, gpu_spec gpu) {
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

}  // namespace dcp
