#pragma once
// Video buckets: samples share a bucket only when they have the same latent grid
// (frames x height x width), as video DiTs batch clips of one shape (VideoSys DCP buckets by
// resolution and frames). Samples without a video shape fall back to log2 length buckets.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "dcp/bucketing/log2_buckets.hpp"
#include "dcp/concepts/bucketing_policy.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct video_buckets {
  [[nodiscard]] std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    // Distinct grids ordered by (tokens, frames, height, width), labelled after the text labels.
    std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> grids;
    for (const auto& s : batch)
      if (s.video) grids.emplace_back(s.tokens, s.video->frames, s.video->height, s.video->width);
    std::sort(grids.begin(), grids.end());
    grids.erase(std::unique(grids.begin(), grids.end()), grids.end());
    constexpr std::int32_t first_video_label = 64;  // log2 labels of int64 lengths are < 64
    std::vector<std::int32_t> labels;
    labels.reserve(batch.size());
    for (const auto& s : batch) {
      if (!s.video) {
        labels.push_back(log2_buckets::bucket_of(s.tokens));
        continue;
      }
      const auto key = std::make_tuple(s.tokens, s.video->frames, s.video->height, s.video->width);
      const auto it = std::lower_bound(grids.begin(), grids.end(), key);
      labels.push_back(first_video_label + static_cast<std::int32_t>(it - grids.begin()));
    }
    return labels;
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "video"; }
  friend constexpr bool operator==(video_buckets, video_buckets) noexcept { return true; }
};

static_assert(bucketing_policy<video_buckets>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
