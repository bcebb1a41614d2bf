#pragma once
// option_cache: degree_options and their marginal times per (run of equal shapes, degree index),
// each computed when first asked for, in blocks allocated on first use.

#include <array>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "dcp/placement/degree_option.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// The cache is indexed by run, not by sample (a 1M-sample Wikipedia batch has 18K lengths), and
/// holds blocks of runs allocated when first asked for: runs come longest first, so degrees only
/// the long samples are asked about cost memory for their few blocks.
class option_cache {
 public:
  /// Room for `runs` runs at `degrees` degree indices, no block allocated.
  void reset(std::size_t degrees, std::size_t runs) {
    blocks_.resize(degrees);
    for (auto& column : blocks_)
      column.resize((runs + option_block::size - 1) / option_block::size);
  }

  /// The option stored for `run` at degree index k, or null.
  [[nodiscard]] const degree_option* find(std::size_t run, std::size_t k) const noexcept {
    const auto& block = blocks_[k][run / option_block::size];
    const std::size_t j = run % option_block::size;
    if (block && block->known[j]) return &block->options()[j];  // the usual case, kept small
    return nullptr;
  }

  /// Stores `option` for `run` at degree index k.
  const degree_option& store(std::size_t run, std::size_t k, const degree_option& option) {
    auto& block = blocks_[k][run / option_block::size];
    if (!block) block = std::make_unique_for_overwrite<option_block>();  // options left unbuilt
    const std::size_t j = run % option_block::size;
    std::construct_at(block->options() + j, option);
    block->known[j] = true;
    return block->options()[j];
  }

  /// The marginal time stored for `run` at degree index k, else `compute()` stored; the run's
  /// option must be stored already.
  template <class Compute>
  [[nodiscard]] double marginal(std::size_t run, std::size_t k, Compute&& compute) {
    auto& block = *blocks_[k][run / option_block::size];
    const std::size_t j = run % option_block::size;
    if (!block.marginal_known[j]) {
      block.marginals[j] = compute();
      block.marginal_known[j] = true;
    }
    return block.marginals[j];
  }

 private:
  // 1,024 runs' options and their marginal times, each computed when first asked for (a block
  // is not filled on allocation: a 1,000-sample batch reads one block per degree, often only
  // part of it).
  struct option_block {
    static constexpr std::size_t size = 1024;
    static_assert(std::is_trivially_destructible_v<degree_option>);
    alignas(degree_option) std::byte storage[size * sizeof(degree_option)];
    std::array<bool, size> known{};
    std::array<double, size> marginals;  // read only where marginal_known
    std::array<bool, size> marginal_known{};
    [[nodiscard]] degree_option* options() noexcept {
      return std::launder(reinterpret_cast<degree_option*>(storage));
    }
  };
  std::vector<std::vector<std::unique_ptr<option_block>>> blocks_;  // [degree][block]
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
