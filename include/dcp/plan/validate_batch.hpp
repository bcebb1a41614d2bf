#pragma once
// Checks a batch before planning; each error names the sample, the value and the limit.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dcp/detail/checked.hpp"
#include "dcp/detail/plan_workspace.hpp"
#include "dcp/detail/prefetch.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {

/// An id that occurs twice in `batch`, if any. Increasing ids (a loader numbering its samples)
/// need one pass. Otherwise the ids are mixed by splitmix64's finaliser (a bijection: equal
/// mixed values are equal ids), split by their top bits into parts of about 4,096 (a counting
/// sort) and each part is checked with an open-addressing table that stays in the cache: one
/// table for a whole batch of millions missed the cache and the TLB on every sample (33 ns per
/// sample at 10M, 11 ns so). Expected linear time, falling back to sorting the ids should the
/// probes exceed `probes_per_sample` per sample, so no input takes more than O(n log n). The
/// mixed ids' array comes from `workspace` where given.
[[nodiscard]] inline std::optional<std::uint64_t> duplicate_id(
    std::span<const sample> batch, std::size_t probes_per_sample = 8,
    plan_workspace* workspace = nullptr) {
  if (std::adjacent_find(batch.begin(), batch.end(), [](const sample& a, const sample& b) {
        return a.id >= b.id;
      }) == batch.end())
    return std::nullopt;
  const auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  const std::size_t n = batch.size();
  int bits = 1;  // at least two parts: each then has a value no member of it takes (below)
  while (bits < 20 && (n >> bits) > 4096) ++bits;
  const std::size_t parts = std::size_t{1} << bits;
  const int shift = 64 - bits;
  std::vector<std::size_t> first(parts + 1, 0);  // part p: mixed[first[p], first[p + 1])
  for (const auto& s : batch) ++first[(mix(s.id) >> shift) + 1];
  for (std::size_t p = 0; p < parts; ++p) first[p + 1] += first[p];
  kept_buffer<std::uint64_t> mixed_buffer(workspace, n);
  auto& mixed = *mixed_buffer;
  mixed.resize(n);
  {
    std::vector<std::size_t> next(first.begin(), first.end() - 1);
    for (const auto& s : batch) {
      const auto m = mix(s.id);
      mixed[next[m >> shift]++] = m;
    }
  }
  std::size_t largest = 0;
  for (std::size_t p = 0; p < parts; ++p) largest = std::max(largest, first[p + 1] - first[p]);
  const auto table_size = [](std::size_t members) {
    std::size_t size = 16;
    while (size < 2 * members) size *= 2;
    return size;
  };
  const auto id_of = [&](std::uint64_t m) -> std::uint64_t {  // (m is some sample's)
    return std::find_if(batch.begin(), batch.end(), [&](const sample& s) { return mix(s.id) == m; })
        ->id;
  };
  std::vector<std::uint64_t> table(table_size(largest));
  std::size_t probes = 0;
  const std::size_t most = probes_per_sample * n;
  bool overflowed = false;
  for (std::size_t p = 0; p < parts && !overflowed; ++p) {
    // A free slot holds a value whose top bits name another part.
    const std::uint64_t empty = static_cast<std::uint64_t>(p ^ 1) << shift;
    const std::size_t size = table_size(first[p + 1] - first[p]);
    std::fill_n(table.begin(), size, empty);
    for (std::size_t j = first[p]; j < first[p + 1] && !overflowed; ++j) {
      const auto m = mixed[j];
      for (std::size_t at = m & (size - 1);; at = (at + 1) & (size - 1)) {
        if (table[at] == empty) {
          table[at] = m;
          break;
        }
        if (table[at] == m) return id_of(m);
        if (++probes > most) {
          overflowed = true;
          break;
        }
      }
    }
  }
  if (!overflowed) return std::nullopt;
  std::sort(mixed.begin(), mixed.end());
  const auto dup = std::adjacent_find(mixed.begin(), mixed.end());
  if (dup == mixed.end()) return std::nullopt;
  return id_of(*dup);
}

}  // namespace detail

namespace detail {

/// validate_batch, its duplicate-id table taken from `workspace` where given.
inline void check_batch(std::span<const sample> batch, plan_workspace* workspace) {
  // The planner indexes samples with 32 bits (about 200-270 bytes of planner memory per sample, so
  // the limit is over a terabyte away).
  constexpr std::size_t most_samples = std::numeric_limits<std::uint32_t>::max() - 1;
  if (batch.size() > most_samples)
    throw invalid_sample("batch of " + std::to_string(batch.size()) + " samples: at most " +
                         std::to_string(most_samples) + " per plan");
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
    const bool layout_ok = detail::known_attention(s.attention) &&
                           (s.video || s.attention != attention_kind::factorised);
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
      throw invalid_sample(who +
                           ": factorised attention needs a video grid (frames x height x "
                           "width), none given");
    }
    if (!detail::known_attention(s.attention))
      throw invalid_sample(who +
                           ": attention = " + std::to_string(static_cast<unsigned>(s.attention)) +
                           ", must be causal, full or factorised");
    throw invalid_sample(who + ": tokens = " + std::to_string(s.tokens) +
                         ": the batch's total tokens would exceed " +
                         std::to_string(detail::int64_max) + " (" + std::to_string(total_tokens) +
                         " in the samples before it)");
  }
  if (const auto dup = duplicate_id(batch, 8, workspace)) {
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].id == *dup) where.push_back(i);
    throw invalid_sample("duplicate sample id " + std::to_string(*dup) + " at indices " +
                         std::to_string(where[0]) + " and " + std::to_string(where[1]) +
                         "; ids must be unique within a batch");
  }
}

}  // namespace detail

/// Throws invalid_sample for a sample with tokens < 1, a video grid that is not positive, does
/// not hold its tokens or exceeds int64, factorised attention without a grid, an unknown
/// attention kind, a duplicate id, a batch whose total tokens exceed int64 (plans sum tokens
/// per micro-step and per batch), or one of more than 2^32 - 2 samples.
inline void validate_batch(std::span<const sample> batch) { detail::check_batch(batch, nullptr); }

namespace detail {

struct canonical_key {
  std::int64_t tokens;
  std::uint64_t id;
  std::size_t index;
};

/// canonical_order(batch) into `sorted` (cleared first), its sort buffers taken from
/// `workspace` where given.
inline void canonical_order_into(std::span<const sample> batch, std::vector<sample>& sorted,
                                 plan_workspace* workspace = nullptr) {
  // Sorts small keys and gathers once (a sample with its optional video grid is 56 bytes). Ids
  // are unique (validate_batch), so the order is total and the result does not depend on the
  // sort algorithm.
  using key = canonical_key;
  const std::size_t n = batch.size();
  kept_buffer<key> keys_buffer(workspace, n);
  auto& keys = *keys_buffer;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) keys.push_back({batch[i].tokens, batch[i].id, i});
  const auto before = [](const key& a, const key& b) {
    if (a.tokens != b.tokens) return a.tokens > b.tokens;
    return a.id < b.id;
  };
  constexpr std::size_t large = samples_beyond_cache;
  if (!std::is_sorted(keys.begin(), keys.end(), before)) {
    // Where the lengths of a large batch span fewer values than four per sample (text split to
    // a context: at most 64K values for any number of samples), a counting sort by length, then
    // each run of one length by id: linear in the batch, where a comparison sort is n log n and
    // its scattered reads miss the cache on a 10M batch. Otherwise the comparison sort.
    bool counted = false;
    if (n >= large && n < std::numeric_limits<std::uint32_t>::max()) {
      const auto [low, high] = std::minmax_element(
          keys.begin(), keys.end(), [](const key& a, const key& b) { return a.tokens < b.tokens; });
      // (In unsigned arithmetic: exact for any two int64 lengths, unvalidated ones included.)
      const auto top = static_cast<std::uint64_t>(high->tokens);
      const auto spread = top - static_cast<std::uint64_t>(low->tokens);
      if (spread < 4 * static_cast<std::uint64_t>(n)) {
        const auto slot = [&](const key& k) {
          return static_cast<std::size_t>(top - static_cast<std::uint64_t>(k.tokens));
        };
        std::vector<std::uint32_t> at(static_cast<std::size_t>(spread) + 2,
                                      0);  // each length's position
        for (const auto& k : keys) ++at[slot(k) + 1];
        for (std::size_t v = 1; v < at.size(); ++v) at[v] += at[v - 1];
        kept_buffer<key> by_length_buffer(workspace, n);
        auto& by_length = *by_length_buffer;
        by_length.resize(n);
        for (const auto& k : keys) by_length[at[slot(k)]++] = k;
        keys.swap(by_length);
        for (std::size_t b = 0; b < n;) {
          std::size_t e = b + 1;
          while (e < n && keys[e].tokens == keys[b].tokens) ++e;
          const auto run_begin = keys.begin() + static_cast<std::ptrdiff_t>(b);
          const auto run_end = keys.begin() + static_cast<std::ptrdiff_t>(e);
          if (e - b > 1 && !std::is_sorted(run_begin, run_end, before))
            std::sort(run_begin, run_end, before);
          b = e;
        }
        counted = true;
      }
    }
    if (!counted) std::sort(keys.begin(), keys.end(), before);
  }
  sorted.clear();
  sorted.reserve(n);
  constexpr std::size_t ahead = 16;
  for (std::size_t k = 0; k < n; ++k) {
    if (n >= large && k + ahead < n) detail::prefetch(&batch[keys[k + ahead].index]);
    sorted.push_back(batch[keys[k].index]);
  }
}

}  // namespace detail

/// The canonical order plans are built in: tokens descending, then id ascending. The plan
/// depends on the input only through this order, so any permutation gives the same plan.
[[nodiscard]] inline std::vector<sample> canonical_order(std::span<const sample> batch) {
  std::vector<sample> sorted;
  detail::canonical_order_into(batch, sorted);
  return sorted;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
