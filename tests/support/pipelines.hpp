#pragma once
// Batches and cost models the pipeline tests share (tests/unit/pipeline_*_tests.cpp).

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "dcp/pipeline.hpp"

namespace dcp::test {

/// Lengths drawn from a long-tailed mix: lognormal(7, 1.2) documents, one in 40 uniform in
/// [longest / 4, longest), clamped to [16, longest], until the batch holds total_tokens; ids from
/// first_id.
inline std::vector<sample> long_tail_batch(std::uint64_t seed, std::int64_t total_tokens,
                                           std::uint64_t first_id = 0,
                                           std::int64_t longest = 131072) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> body(7.0, 1.2);
  std::vector<sample> batch;
  std::int64_t tokens = 0;
  std::uint64_t id = first_id;
  while (tokens < total_tokens) {
    std::int64_t n = rng() % 40 == 0
                         ? longest / 4 + static_cast<std::int64_t>(
                                             rng() % static_cast<std::uint64_t>(3 * longest / 4))
                         : static_cast<std::int64_t>(body(rng));
    n = std::clamp<std::int64_t>(n, 16, longest);
    n = std::min(n, total_tokens - tokens + 16);
    batch.push_back(text_sample(id++, n));
    tokens += n;
  }
  return batch;
}

/// `model` (Llama-3-70B by default) on `nodes` HGX H100 nodes in the given grid.
inline pipeline_cost_model grid_model(std::int64_t nodes, model_parallel_grid grid,
                                      model_spec model = models::llama3_70b()) {
  return pipeline_cost_model(std::move(model), hgx_cluster(nodes, gpus::h100_sxm()),
                             training_spec{}, grid);
}

}  // namespace dcp::test
