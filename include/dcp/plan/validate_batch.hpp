#pragma once
// Checks a batch before planning; each error names the sample, the value and the limit.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

inline void validate_batch(std::span<const sample> batch) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& s = batch[i];
    const bool video_ok = !s.video || (s.video->frames > 0 && s.video->height > 0 &&
                                       s.video->width > 0 && s.video->tokens() == s.tokens);
    const bool layout_ok = s.video || s.attention != attention_kind::factorised;
    if (s.tokens > 0 && video_ok && layout_ok) continue;  // the common case builds no message
    const std::string who = "sample " + std::to_string(s.id) + " (index " + std::to_string(i) + ")";
    if (s.tokens <= 0)
      throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) + ", must be >= 1");
    if (s.video) {
      const auto& v = *s.video;
      if (v.frames <= 0 || v.height <= 0 || v.width <= 0)
        throw invalid_sample(who + ": video grid " + std::to_string(v.frames) + "x" +
                             std::to_string(v.height) + "x" + std::to_string(v.width) +
                             ", every dimension must be >= 1");
      if (v.tokens() != s.tokens)
        throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) +
                             " but the video grid holds " + std::to_string(v.tokens()));
    } else if (s.attention == attention_kind::factorised) {
      throw invalid_sample(who + ": factorised attention needs a video grid (frames x height x "
                                 "width), none given");
    }
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
inline std::vector<sample> canonical_order(std::span<const sample> batch) {
  std::vector<sample> sorted(batch.begin(), batch.end());
  std::sort(sorted.begin(), sorted.end(), [](const sample& a, const sample& b) {
    if (a.tokens != b.tokens) return a.tokens > b.tokens;
    return a.id < b.id;
  });
  return sorted;
}

}  // namespace dcp
