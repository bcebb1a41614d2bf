#pragma once
// `count` samples of Wikipedia-profile lengths (the embedded profile), split into 64K chunks:
// the batches the planner benchmarks time.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dcp/spec/sample.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

namespace dcp::bench {

inline std::vector<sample> wikipedia_samples(std::size_t count, std::uint64_t seed) {
  auto drawn =
      workload::draw_samples(workload::wikipedia(), static_cast<std::int64_t>(count), seed);
  auto split = workload::split_to_context(drawn, 65536).samples;
  split.resize(std::min(split.size(), count));
  return split;
}

}  // namespace dcp::bench
