#pragma once
// When each aligned block of ranks becomes free, for every power-of-two block size at once:
// the question a long-sample-first allotment asks per sample and degree ("which block of d
// ranks frees first, and how much idle time does starting there leave?") in O(gpus / d), and
// an update in O(d · levels) when a sample takes a block.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

class block_loads {
public:
  /// Every rank free at time 0; blocks of 2^l ranks for every 2^l <= gpus (gpus >= 1).
  explicit block_loads(std::int64_t gpus) {
    levels_.reserve(static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(gpus))));
    for (std::int64_t size = 1; size <= gpus; size *= 2) {
      const auto blocks = static_cast<std::size_t>(gpus / size);
      levels_.push_back({std::vector<double>(blocks, 0.0), std::vector<double>(blocks, 0.0)});
      if (size > gpus / 2) break;  // the next size would pass gpus (and could overflow)
    }
  }

  struct slot {
    std::int64_t first_rank = 0;
    double start = 0;  ///< when every rank of the block is free
    double idle = 0;   ///< rank-seconds the block's ranks wait until `start`
  };

  /// The aligned block of `degree` ranks (a power of two with a level here) that frees first;
  /// ties to the lower rank.
  [[nodiscard]] slot earliest(std::int64_t degree) const {
    const auto& level = levels_[level_of(degree)];
    std::size_t best = 0;
    for (std::size_t b = 1; b < level.max.size(); ++b)
      if (level.max[b] < level.max[best]) best = b;
    const double start = level.max[best];
    return {static_cast<std::int64_t>(best) * degree, start,
            std::max(0.0, start * static_cast<double>(degree) - level.sum[best])};
  }

  /// Every rank of the block of `degree` ranks at `first_rank` busy until `end` (>= the block's
  /// start).
  void occupy(std::int64_t first_rank, std::int64_t degree, double end) {
    const std::size_t top = level_of(degree);
    const auto index = static_cast<std::size_t>(first_rank / degree);
    const double added = end * static_cast<double>(degree) - levels_[top].sum[index];
    for (std::size_t l = 0; l <= top; ++l) {
      const std::size_t per = std::size_t{1} << (top - l);  // blocks of level l inside it
      const double size = static_cast<double>(std::int64_t{1} << l);
      for (std::size_t b = index * per; b < (index + 1) * per; ++b) {
        levels_[l].max[b] = end;
        levels_[l].sum[b] = end * size;
      }
    }
    for (std::size_t l = top + 1; l < levels_.size(); ++l) {
      const std::size_t b = index >> (l - top);
      if (b >= levels_[l].max.size()) break;  // the ranks past the last whole block
      levels_[l].max[b] = std::max(levels_[l].max[b], end);
      levels_[l].sum[b] += added;
    }
  }

  /// When rank r is free.
  [[nodiscard]] double free_at(std::int64_t rank) const { return levels_[0].max[static_cast<std::size_t>(rank)]; }

private:
  struct level {
    std::vector<double> max;  // latest free time among the block's ranks
    std::vector<double> sum;  // sum of its ranks' free times
  };

  [[nodiscard]] static std::size_t level_of(std::int64_t degree) noexcept {
    std::size_t l = 0;
    while ((std::int64_t{1} << l) < degree) ++l;
    return l;
  }

  std::vector<level> levels_;
};

}  // namespace dcp::detail
