#pragma once
// First fit without rescanning every bin: a max segment tree over the bins' free bytes, so "the
// first bin at or after `from` with at least `need` free" costs O(log bins). Bins are appended
// in creation order; a closed bin is set to -infinity and never found again.

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "dcp/version.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

class first_fit_index {
 public:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Appends a bin with `free` bytes.
  void push(double free) {
    if (size_ == leaves_) grow();
    ++size_;
    set(size_ - 1, free);
  }

  /// Sets the free bytes of bin `bin` (< size()).
  void set(std::size_t bin, double free) noexcept {
    std::size_t node = leaves_ + bin;
    tree_[node] = free;
    for (node /= 2; node >= 1; node /= 2) {
      const double top =
          tree_[2 * node] > tree_[2 * node + 1] ? tree_[2 * node] : tree_[2 * node + 1];
      if (tree_[node] == top) break;  // ancestors hold the same maximum already
      tree_[node] = top;
    }
  }

  /// The first bin b >= from with free bytes >= need, or `none`.
  [[nodiscard]] std::size_t first_at_least(std::size_t from, double need) const noexcept {
    if (from >= size_ || !(tree_[1] >= need)) return none;
    // From the leaf `from`, climb to the first left child whose right sibling holds a fit, then
    // descend to that sibling's leftmost fitting leaf.
    std::size_t node = leaves_ + from;
    if (tree_[node] >= need) return from;
    // Climb until a right sibling holds a fit.
    while (node > 1 && ((node & 1) == 1 || !(tree_[node + 1] >= need))) node /= 2;
    if (node <= 1) return none;
    node += 1;
    while (node < leaves_) node = tree_[2 * node] >= need ? 2 * node : 2 * node + 1;
    return node - leaves_ < size_ ? node - leaves_ : none;
  }

 private:
  void grow() {
    const std::size_t leaves = leaves_ == 0 ? 8 : 2 * leaves_;
    std::vector<double> tree(2 * leaves, -std::numeric_limits<double>::infinity());
    for (std::size_t b = 0; b < size_; ++b) tree[leaves + b] = tree_[leaves_ + b];
    for (std::size_t node = leaves - 1; node >= 1; --node)
      tree[node] = tree[2 * node] > tree[2 * node + 1] ? tree[2 * node] : tree[2 * node + 1];
    tree_ = std::move(tree);
    leaves_ = leaves;
  }

  std::size_t size_ = 0;
  std::size_t leaves_ = 0;
  std::vector<double> tree_;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
