#pragma once
// The dense packing setting of a degree: the recompute setting short samples' micro-batches are
// filled to, where fuller micro-steps save more fixed cost than the recomputation costs.

#include <cstdint>
#include <optional>
#include <type_traits>

#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/detail/largest_fitting.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// What short samples are packed with at one degree: the recompute strategy's lightest setting
/// (an empty micro-batch's) and the setting micro-batches of them are filled to
/// (placement_input::packing_setting).
struct packing_settings {
  recompute_setting lightest{};
  recompute_setting dense{};
};

namespace detail {

/// `copies` samples shaped like `one`; nullopt where the totals pass int64.
[[nodiscard]] inline std::optional<micro_batch_shape> copies_of(const micro_batch_shape& one,
                                                                std::int64_t copies) noexcept {
  const auto samples = detail::checked_mul(one.samples, copies);
  const auto tokens = detail::checked_mul(one.tokens, copies);
  if (!samples || !tokens) return std::nullopt;
  return micro_batch_shape{*samples, *tokens, one.longest,
                           one.attention_pairs * static_cast<double>(copies)};
}

/// The most copies of `one` (up to 2^20) that fit the budget at degree index k with `setting`
/// in the default style.
template <class Input>
[[nodiscard]] std::int64_t copies_fitting(const Input& input, const micro_batch_shape& one,
                                          std::size_t k, recompute_setting setting) {
  const auto c = input.config(k, setting);
  return detail::largest_fitting(
      [&](std::int64_t n) {
        const auto shape = copies_of(one, n);
        return shape && static_cast<double>(input.cost().peak_bytes(*shape, c)) <= input.budget();
      },
      std::int64_t{1} << 20);
}

/// The packing settings of degree index k (placement_input::packing_setting explains the
/// choice): O(log L + log n) cost-model calls.
template <class Input>
[[nodiscard]] packing_settings choose_packing(const Input& input, std::size_t k) {
  const auto lightest = input.evaluate(micro_batch_shape{}, k).recompute;
  packing_settings out{lightest, lightest};
  using recompute_type = std::remove_cvref_t<decltype(input.recompute())>;
  if constexpr (fit_decides_v<recompute_type>) {
    const std::size_t size = input.size();
    if (size == 0) return out;
    // The median sample in canonical order (longest first), or a shorter one that fits.
    std::size_t i = size / 2;
    std::int64_t n0 = copies_fitting(input, input.shape(i), k, lightest);
    while (n0 == 0 && i + 1 < size) {
      i += (size - i) / 2;  // halfway to the shortest, at least one step
      n0 = copies_fitting(input, input.shape(i), k, lightest);
    }
    if (n0 == 0) return out;
    const auto& one = input.shape(i);
    const auto per_copy = [&](std::int64_t n, recompute_setting r) {
      return input.cost().seconds(*copies_of(one, n), input.config(k, r)) / static_cast<double>(n);
    };
    double best = per_copy(n0, lightest);
    for (const double factor : {1.25, 1.5, 2.0, 3.0, 4.0, 8.0}) {
      const auto more =
          copies_of(one, static_cast<std::int64_t>(factor * static_cast<double>(n0)) + 1);
      if (!more) break;
      const auto r = input.recompute().choose(input.cost(), *more, input.config(k));
      if (!r || *r == lightest) continue;
      const auto n = copies_fitting(input, one, k, *r);
      if (n <= n0) continue;
      const double t = per_copy(n, *r);
      if (t < 0.99 * best) {  // kept only if at least 1 % faster per token
        best = t;
        out.dense = *r;
      }
    }
  }
  return out;
}

}  // namespace detail
}  // namespace dcp::inline DCP_ABI_NAMESPACE
