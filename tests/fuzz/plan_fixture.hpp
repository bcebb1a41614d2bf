#pragma once
// The fixed batch and clusters the plan fuzzer (fuzz_plan_json.cpp) checks plans against, shared
// with the program that wrote its seed corpus (make_plan_seeds.cpp).

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/sim/truth_model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::fuzz {

/// Sixteen samples, ids 0..15: fourteen text lengths from 512 to 65,536 tokens and two videos.
inline std::vector<sample> plan_batch() {
  std::vector<sample> batch;
  const std::int64_t lengths[] = {512,   1024,  2048,  3000,  4096,  6000,  8192,
                                  12000, 16384, 20000, 24576, 32768, 40000, 65536};
  for (const auto tokens : lengths) batch.push_back(text_sample(batch.size(), tokens));
  batch.push_back(video_sample(batch.size(), {16, 32, 32}));
  batch.push_back(video_sample(batch.size(), {30, 45, 80}, attention_kind::full));
  return batch;
}

/// The clusters a plan may be for: 1, 2, 4 or 8 GPUs on one node, or 16 GPUs on two nodes of 8.
inline cluster_spec plan_cluster(std::int64_t gpus) {
  cluster_spec cluster;
  cluster.gpus = gpus;
  cluster.gpus_per_node = gpus < 8 ? gpus : 8;
  cluster.gpu = gpus::h200_sxm();
  return cluster;
}

inline constexpr std::array<std::int64_t, 5> plan_cluster_sizes = {1, 2, 4, 8, 16};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::fuzz
