#pragma once
// When each aligned block of ranks becomes free, for every power-of-two block size at once:
// the question a long-sample-first allotment asks per sample and degree ("which block of d
// ranks frees first, and how much idle time does starting there leave?") in O(gpus / d), and
// an update in O(d · levels) when a sample takes a block.

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

class block_loads {
 public:
  /// Every rank free at time 0; blocks of 2^l ranks for every 2^l <= gpus (gpus >= 1).
  explicit block_loads(std::int64_t gpus) {
    std::size_t total = 0;
    for (std::int64_t size = 1; size <= gpus; size *= 2) {
      begin_[levels_++] = total;
      total += static_cast<std::size_t>(gpus / size);
      if (size > gpus / 2) break;  // the next size would pass gpus (and could overflow)
    }
    begin_[levels_] = total;
    blocks_.assign(total, block{});
  }

  struct slot {
    std::int64_t first_rank = 0;
    double start = 0;  ///< when every rank of the block is free
    double idle = 0;   ///< rank-seconds the block's ranks wait until `start`
  };

  /// The aligned block of `degree` ranks (a power of two with a level here) that frees first;
  /// ties to the lower rank.
  [[nodiscard]] slot earliest(std::int64_t degree) const {
    const std::size_t l = level_of(degree);
    const block* level = blocks_.data() + begin_[l];
    const std::size_t count = begin_[l + 1] - begin_[l];
    std::size_t best = 0;
    for (std::size_t b = 1; b < count; ++b)
      if (level[b].max < level[best].max) best = b;
    const double start = level[best].max;
    return {static_cast<std::int64_t>(best) * degree, start,
            std::max(0.0, start * static_cast<double>(degree) - level[best].sum)};
  }

  /// Every rank of the block of `degree` ranks at `first_rank` busy until `end` (>= the block's
  /// start).
  void occupy(std::int64_t first_rank, std::int64_t degree, double end) {
    const std::size_t top = level_of(degree);
    const auto index = static_cast<std::size_t>(first_rank / degree);
    const double added = end * static_cast<double>(degree) - at(top, index).sum;
    for (std::size_t l = 0; l <= top; ++l) {
      const std::size_t per = std::size_t{1} << (top - l);  // blocks of level l inside it
      const double size = static_cast<double>(std::int64_t{1} << l);
      for (std::size_t b = index * per; b < (index + 1) * per; ++b) at(l, b) = {end, end * size};
    }
    for (std::size_t l = top + 1; l < levels_; ++l) {
      const std::size_t b = index >> (l - top);
      if (b >= begin_[l + 1] - begin_[l]) break;  // the ranks past the last whole block
      at(l, b).max = std::max(at(l, b).max, end);
      at(l, b).sum += added;
    }
  }

  /// When rank r is free.
  [[nodiscard]] double free_at(std::int64_t rank) const {
    return blocks_[static_cast<std::size_t>(rank)].max;
  }

 private:
  struct block {
    double max = 0;  // latest free time among the block's ranks
    double sum = 0;  // sum of its ranks' free times
  };

  [[nodiscard]] block& at(std::size_t level, std::size_t b) noexcept {
    return blocks_[begin_[level] + b];
  }

  [[nodiscard]] static std::size_t level_of(std::int64_t degree) noexcept {
    std::size_t l = 0;
    while ((std::int64_t{1} << l) < degree) ++l;
    return l;
  }

  // Every level's blocks in one array (one allocation: the planner builds one of these per
  // allotment it tries), level l from begin_[l] to begin_[l + 1].
  std::vector<block> blocks_;
  std::array<std::size_t, 65> begin_{};
  std::size_t levels_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
