#pragma once
// Variable-length buckets, the default: text samples all share one label, because
// variable-length attention kernels (FlashAttention varlen) pack sequences of any lengths into
// one micro-batch without padding; video samples share a label only with clips of the same
// latent grid, as they are batched as dense tensors.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dcp/bucketing/video_buckets.hpp"
#include "dcp/concepts/bucketing_policy.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct varlen_buckets {
  [[nodiscard]] std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    auto labels = video_buckets{}.assign(batch);
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (!batch[i].video) labels[i] = 0;
    return labels;
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "varlen"; }
  friend constexpr bool operator==(varlen_buckets, varlen_buckets) noexcept { return true; }
};

static_assert(bucketing_policy<varlen_buckets>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
