#pragma once
// The quantile table that tools/derive_length_profile.cpp derives from a file of measured
// lengths. Points are integers (probability in millionths, tokens), so the embedded table reads
// the same on every compiler; empirical_profile turns it into a sampler.

#include <cstdint>
#include <span>
#include <string_view>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// Probabilities in a profile_table are integers over this scale (parts per million).
inline constexpr std::int64_t table_probability_scale = 1'000'000;

/// One point of a derived table: at probability `probability_ppm / 1e6`, the lower empirical
/// quantile, i.e. the smallest measured length L such that a share >= that probability of the
/// lengths is <= L (at probability 0: the smallest length).
struct table_point {
  std::int64_t probability_ppm = 0;
  std::int64_t tokens = 0;

  friend constexpr bool operator==(const table_point&, const table_point&) = default;
};

/// A measured length distribution in summary: exact count and token total, a few order
/// statistics, and the quantile table (first point at probability 0, last at 1).
struct profile_table {
  std::string_view name;
  std::string_view source;  ///< where the measured lengths come from, and their licence
  std::int64_t count = 0;
  std::int64_t total_tokens = 0;
  std::int64_t min_tokens = 0;
  std::int64_t median_tokens = 0;  ///< lower median: the length at sorted index (count - 1) / 2
  std::int64_t max_tokens = 0;
  std::span<const table_point> points;

  [[nodiscard]] constexpr double mean_tokens() const noexcept {
    return count > 0 ? static_cast<double>(total_tokens) / static_cast<double>(count) : 0.0;
  }
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
