#pragma once
// The additive summary of a micro-batch that cost models read: adding a sample is O(1), so the
// packer can test "does this sample still fit" without re-reading the micro-batch.

#include <algorithm>
#include <cstdint>
#include <ostream>

#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct micro_batch_shape {
  std::int64_t samples = 0;
  std::int64_t tokens = 0;
  std::int64_t longest = 0;  ///< tokens of the longest sample
  /// Self-attention (query, key) pairs per layer, averaged over the model's layers: causal s²/2,
  /// full s², factorised (T'·S² + S·T'²)/2 for half spatial and half temporal blocks
  /// (perf-model.md §2.1 and §2.3). Packed micro-batches add per sample, never (Σs)².
  double attention_pairs = 0;

  static double pairs_of(const sample& s) noexcept {
    const auto n = static_cast<double>(s.tokens);
    switch (s.attention) {
      case attention_kind::causal: return 0.5 * n * n;
      case attention_kind::full: return n * n;
      case attention_kind::factorised: {
        if (!s.video) return n * n;
        const auto frames = static_cast<double>(s.video->frames);
        const auto per_frame = static_cast<double>(s.video->tokens_per_frame());
        return 0.5 * (frames * per_frame * per_frame + per_frame * frames * frames);
      }
    }
    return n * n;
  }

  static micro_batch_shape of(const sample& s) noexcept {
    return {1, s.tokens, s.tokens, pairs_of(s)};
  }

  micro_batch_shape& operator+=(const micro_batch_shape& other) noexcept {
    samples += other.samples;
    tokens += other.tokens;
    longest = std::max(longest, other.longest);
    attention_pairs += other.attention_pairs;
    return *this;
  }
  friend micro_batch_shape operator+(micro_batch_shape a, const micro_batch_shape& b) noexcept {
    return a += b;
  }
  friend bool operator==(const micro_batch_shape&, const micro_batch_shape&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const micro_batch_shape& s) {
  return os << "shape{samples=" << s.samples << ", tokens=" << s.tokens << ", longest=" << s.longest
            << ", pairs=" << s.attention_pairs << '}';
}

}  // namespace dcp
