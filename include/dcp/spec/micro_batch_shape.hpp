#pragma once
// The additive summary of a micro-batch that cost models read: adding a sample is O(1), so the
// packer can test "does this sample still fit" without re-reading the micro-batch.

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct micro_batch_shape {
  std::int64_t samples = 0;
  std::int64_t tokens = 0;
  std::int64_t longest = 0;  ///< tokens of the longest sample
  /// Self-attention (query, key) pairs per layer, averaged over the model's layers: causal s²/2,
  /// full s², factorised (T'·S² + S·T'²)/2 for half spatial and half temporal blocks
  /// (docs/cost-sources.md §2.1 and §2.3). Packed micro-batches add per sample, never (Σs)².
  double attention_pairs = 0;

  [[nodiscard]] static double pairs_of(const sample& s) noexcept {
    const auto n = static_cast<double>(s.tokens);
    switch (s.attention) {
      case attention_kind::causal:
        return 0.5 * n * n;
      case attention_kind::full:
        return n * n;
      case attention_kind::factorised: {
        if (!s.video) return n * n;
        const auto frames = static_cast<double>(s.video->frames);
        // In double: a grid beyond int64 is rejected by validate_batch, not here.
        const auto per_frame =
            static_cast<double>(s.video->height) * static_cast<double>(s.video->width);
        return 0.5 * (frames * per_frame * per_frame + per_frame * frames * frames);
      }
    }
    return n * n;
  }

  [[nodiscard]] static micro_batch_shape of(const sample& s) noexcept {
    return {1, s.tokens, s.tokens, pairs_of(s)};
  }

  /// Adds `other`; throws invalid_sample, leaving this shape unchanged, where the samples or
  /// tokens exceed int64.
  micro_batch_shape& operator+=(const micro_batch_shape& other) {
    const auto sum_samples = detail::checked_add(samples, other.samples);
    const auto sum_tokens = detail::checked_add(tokens, other.tokens);
    if (!sum_samples || !sum_tokens) throw_overflow(other, sum_samples ? "tokens" : "samples");
    samples = *sum_samples;
    tokens = *sum_tokens;
    longest = std::max(longest, other.longest);
    attention_pairs += other.attention_pairs;
    return *this;
  }
  [[nodiscard]] friend micro_batch_shape operator+(micro_batch_shape a,
                                                   const micro_batch_shape& b) {
    return a += b;
  }
  friend bool operator==(const micro_batch_shape&, const micro_batch_shape&) = default;

 private:
  [[noreturn]] void throw_overflow(const micro_batch_shape& other, const char* field) const {
    const bool by_tokens = std::string(field) == "tokens";
    throw invalid_sample("micro-batch shape: " + std::string(field) + " = " +
                         std::to_string(by_tokens ? tokens : samples) + " + " +
                         std::to_string(by_tokens ? other.tokens : other.samples) + " exceeds " +
                         std::to_string(detail::int64_max));
  }
};

inline std::ostream& operator<<(std::ostream& os, const micro_batch_shape& s) {
  return os << "shape{samples=" << s.samples << ", tokens=" << s.tokens << ", longest=" << s.longest
            << ", pairs=" << s.attention_pairs << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
