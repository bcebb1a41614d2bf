#pragma once
// Checks a batch before planning; each error names the sample, the value and the limit.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Throws invalid_sample for a sample with tokens < 1, a video grid that is not positive, does
/// not hold its tokens or exceeds int64, factorised attention without a grid, an unknown
/// attention kind, a duplicate id, or a batch whose total tokens exceed int64 (plans sum tokens
/// per micro-step and per batch).
inline void validate_batch(std::span<const sample> batch) {
  std::int64_t total_tokens = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& s = batch[i];
    std::int64_t grid_tokens = 0;
    bool grid_fits = true;  // frames x height x width within int64
    if (s.video) {
      const auto t = s.video->checked_tokens();
      grid_fits = t.has_value();
      grid_tokens = t.value_or(0);
    }
    const bool video_ok = !s.video || (s.video->frames > 0 && s.video->height > 0 &&
                                       s.video->width > 0 && grid_fits && grid_tokens == s.tokens);
    const bool layout_ok =
        detail::known_attention(s.attention) && (s.video || s.attention != attention_kind::factorised);
    const auto total = detail::checked_add(total_tokens, s.tokens);
    if (s.tokens > 0 && video_ok && layout_ok && total) {  // the common case builds no message
      total_tokens = *total;
      continue;
    }
    const std::string who = "sample " + std::to_string(s.id) + " (index " + std::to_string(i) + ")";
    if (s.tokens <= 0)
      throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) + ", must be >= 1");
    if (s.video) {
      const auto& v = *s.video;
      const std::string grid =
          std::to_string(v.frames) + "x" + std::to_string(v.height) + "x" + std::to_string(v.width);
      if (v.frames <= 0 || v.height <= 0 || v.width <= 0)
        throw invalid_sample(who + ": video grid " + grid + ", every dimension must be >= 1");
      if (!grid_fits)
        throw invalid_sample(who + ": video grid " + grid +
                             " (frames x height x width) holds more than " +
                             std::to_string(detail::int64_max) + " tokens");
      if (grid_tokens != s.tokens)
        throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) +
                             " but the video grid holds " + std::to_string(grid_tokens));
    } else if (s.attention == attention_kind::factorised) {
      throw invalid_sample(who + ": factorised attention needs a video grid (frames x height x "
                                 "width), none given");
    }
    if (!detail::known_attention(s.attention))
      throw invalid_sample(who + ": attention = " +
                           std::to_string(static_cast<unsigned>(s.attention)) +
                           ", must be causal, full or factorised");
    throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) +
                         ": the batch's total tokens would exceed " +
                         std::to_string(detail::int64_max) + " (" + std::to_string(total_tokens) +
                         " in the samples before it)");
  }
  std::vector<std::uint64_t> ids;
  ids.reserve(batch.size());
  for (const auto& s : batch) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  const auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup != ids.end()) {
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].id == *dup) where.push_back(i);
    throw invalid_sample("duplicate sample id " + std::to_string(*dup) + " at indices " +
                         std::to_string(where[0]) + " and " + std::to_string(where[1]) +
                         "; ids must be unique within a batch");
  }
}

/// The canonical order plans are built in: tokens descending, then id ascending. The plan
/// depends on the input only through this order, so any permutation gives the same plan.
[[nodiscard]] inline std::vector<sample> canonical_order(std::span<const sample> batch) {
  std::vector<sample> sorted(batch.begin(), batch.end());
  std::sort(sorted.begin(), sorted.end(), [](const sample& a, const sample& b) {
    if (a.tokens != b.tokens) return a.tokens > b.tokens;
    return a.id < b.id;
  });
  return sorted;
}

}  // namespace dcp
