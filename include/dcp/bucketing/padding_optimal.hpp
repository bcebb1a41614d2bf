#pragma once
// Padding-optimal buckets: split the sorted lengths into at most k contiguous buckets so that
// padding every sample to its bucket's longest wastes the fewest tokens. Dynamic programming
// over the distinct sorted lengths; the padding cost obeys the quadrangle inequality, so each
// layer is solved by divide and conquer in O(n log n) (k layers: O(k n log n)). The table of
// split points holds k x n entries, so both are bounded: k <= max_buckets, and k x n entries
// <= max_split_entries (else invalid_spec naming k, n and the limit); k >= n needs no table
// (every distinct length its own bucket pads nothing).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/concepts/bucketing_policy.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

class padding_optimal_buckets {
 public:
  /// More buckets than this is a typo: no batch is usefully cut into more.
  static constexpr std::int32_t max_buckets = 4096;
  /// Entries of the split table (k x distinct lengths, 4 bytes each: 256 MiB).
  static constexpr std::int64_t max_split_entries = std::int64_t{1} << 26;

  explicit padding_optimal_buckets(std::int32_t buckets) : buckets_(buckets) {
    if (buckets < 1 || buckets > max_buckets)
      throw invalid_spec("padding_optimal_buckets: buckets (K) = " + std::to_string(buckets) +
                         ", must be in [1, " + std::to_string(max_buckets) + "]");
  }

  /// Upper bounds (inclusive) of the chosen buckets for these lengths, ascending.
  [[nodiscard]] std::vector<std::int64_t> boundaries(std::span<const sample> batch) const {
    std::vector<std::int64_t> lengths;
    lengths.reserve(batch.size());
    for (const auto& s : batch) lengths.push_back(s.tokens);
    std::sort(lengths.begin(), lengths.end());
    // Distinct values with counts; prefix sums of count and count*length.
    std::vector<std::int64_t> value;
    std::vector<double> count_prefix{0.0};
    std::vector<double> tokens_prefix{0.0};
    for (std::size_t i = 0; i < lengths.size();) {
      std::size_t j = i;
      while (j < lengths.size() && lengths[j] == lengths[i]) ++j;
      value.push_back(lengths[i]);
      const auto c = static_cast<double>(j - i);
      count_prefix.push_back(count_prefix.back() + c);
      tokens_prefix.push_back(tokens_prefix.back() + c * static_cast<double>(lengths[i]));
      i = j;
    }
    const auto n = static_cast<std::int64_t>(value.size());
    if (n == 0) return {};
    // As many buckets as distinct lengths: each its own, no padding (what the DP would find).
    if (buckets_ >= n) return value;
    if (static_cast<std::int64_t>(buckets_) * (n + 1) > max_split_entries)
      throw invalid_spec("padding_optimal_buckets: buckets (K) = " + std::to_string(buckets_) +
                         " over " + std::to_string(n) + " distinct lengths needs a table of " +
                         std::to_string(static_cast<std::int64_t>(buckets_) * (n + 1)) +
                         " split points, limit " + std::to_string(max_split_entries) +
                         "; use K <= " + std::to_string(max_split_entries / (n + 1)));
    // cost(a, b): padding of distinct values a..b-1 to value[b-1].
    auto cost = [&](std::int64_t a, std::int64_t b) {
      const double c =
          count_prefix[static_cast<std::size_t>(b)] - count_prefix[static_cast<std::size_t>(a)];
      const double t =
          tokens_prefix[static_cast<std::size_t>(b)] - tokens_prefix[static_cast<std::size_t>(a)];
      return c * static_cast<double>(value[static_cast<std::size_t>(b - 1)]) - t;
    };
    const auto k = std::min<std::int64_t>(buckets_, n);
    constexpr double inf = std::numeric_limits<double>::infinity();
    const auto width = static_cast<std::size_t>(n + 1);
    std::vector<double> previous(width, inf), current(width, inf);
    // int32: n < max_split_entries < 2^31 here.
    std::vector<std::vector<std::int32_t>> split(static_cast<std::size_t>(k),
                                                 std::vector<std::int32_t>(width, 0));
    previous[0] = 0.0;
    for (std::int64_t layer = 0; layer < k; ++layer) {
      std::fill(current.begin(), current.end(), inf);
      auto& layer_split = split[static_cast<std::size_t>(layer)];
      // Divide and conquer: opt(b) is monotone in b.
      auto solve = [&](auto&& self, std::int64_t lo, std::int64_t hi, std::int64_t opt_lo,
                       std::int64_t opt_hi) -> void {
        if (lo > hi) return;
        const std::int64_t mid = lo + (hi - lo) / 2;
        double best = inf;
        std::int64_t best_at = opt_lo;
        for (std::int64_t a = opt_lo; a <= std::min(mid - 1, opt_hi); ++a) {
          const double v = previous[static_cast<std::size_t>(a)] + cost(a, mid);
          if (v < best) {
            best = v;
            best_at = a;
          }
        }
        current[static_cast<std::size_t>(mid)] = best;
        layer_split[static_cast<std::size_t>(mid)] = static_cast<std::int32_t>(best_at);
        self(self, lo, mid - 1, opt_lo, best_at);
        self(self, mid + 1, hi, best_at, opt_hi);
      };
      solve(solve, 1, n, 0, n - 1);
      current[0] = inf;
      std::swap(previous, current);
    }
    // Walk back from the last layer (k buckets is never worse than fewer).
    std::vector<std::int64_t> bounds;
    std::int64_t b = n;
    for (std::int64_t layer = k - 1; layer >= 0 && b > 0; --layer) {
      bounds.push_back(value[static_cast<std::size_t>(b - 1)]);
      b = split[static_cast<std::size_t>(layer)][static_cast<std::size_t>(b)];
    }
    std::reverse(bounds.begin(), bounds.end());
    return bounds;
  }

  [[nodiscard]] std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    const auto bounds = boundaries(batch);
    std::vector<std::int32_t> labels;
    labels.reserve(batch.size());
    for (const auto& s : batch) {
      const auto it = std::lower_bound(bounds.begin(), bounds.end(), s.tokens);
      labels.push_back(static_cast<std::int32_t>(it - bounds.begin()));
    }
    return labels;
  }

  [[nodiscard]] std::int32_t buckets() const noexcept { return buckets_; }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "padding-optimal"; }
  friend bool operator==(const padding_optimal_buckets&, const padding_optimal_buckets&) = default;

 private:
  std::int32_t buckets_;
};

static_assert(bucketing_policy<padding_optimal_buckets>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
