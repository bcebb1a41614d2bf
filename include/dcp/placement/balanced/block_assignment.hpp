#pragma once
// block_assignment: the long samples of one allotment on aligned blocks, and the single-GPU
// samples left (balanced_placement's block_placer fills it; placement_scratch keeps the one
// schedules place into).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dcp/placement/degree_option.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

struct block_assignment {
  std::vector<double> free;  // per rank, after the multi-GPU samples
  struct block {
    std::size_t first_item;  // its items: members[first_item, first_item + items)
    std::size_t items;
    std::vector<std::size_t> beside{};  // short samples in the same micro-batch (fill_blocks)
    std::size_t k;                      // degree index
    std::int64_t first_rank;
    double start;
    degree_option run;
  };
  std::vector<block> multi;  // in the order they run
  // Indices into the long items, block after block: each block's run together as one
  // micro-batch (one list for all rather than one per block, which would cost an allocation per
  // sample).
  std::vector<std::size_t> members;
  [[nodiscard]] std::span<const std::size_t> items_of(const block& b) const noexcept {
    return {members.data() + b.first_item, b.items};
  }
  bool packed = false;  // some block runs several samples in one micro-batch
  std::vector<std::pair<double, std::size_t>> singles;  // (estimate, sample)
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
