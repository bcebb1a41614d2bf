#pragma once
// A length distribution given by its quantile table: inverse-CDF sampling with log-linear
// interpolation between the points, so a table a few hundred points long reproduces a tail
// that spans four decades. The shipped preset is the Wikipedia profile.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/deterministic_math.hpp"
#include "dcp/workload/distribution.hpp"
#include "dcp/workload/profile_table.hpp"
#include "dcp/workload/random.hpp"
#include "dcp/workload/wikipedia_profile.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// A point of a quantile table: the length at cumulative probability `probability`.
struct quantile_point {
  double probability = 0;
  double tokens = 1;

  friend constexpr bool operator==(const quantile_point&, const quantile_point&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const quantile_point& q) {
  return os << "{p=" << q.probability << ", tokens=" << q.tokens << '}';
}

/// Inverse-CDF sampler over a quantile table. Between two points the length is interpolated
/// linearly in log(length) against probability (a log-uniform segment), then rounded to the
/// nearest integer. Points: first at probability 0, last at 1, probabilities strictly
/// increasing, tokens >= 1 and non-decreasing.
class empirical_profile {
 public:
  explicit empirical_profile(std::vector<quantile_point> points) : points_(std::move(points)) {
    validate();
    log_tokens_.reserve(points_.size());
    for (const auto& p : points_) log_tokens_.push_back(detail::portable_log(p.tokens));
  }

  /// The sampler for a table derived by tools/derive_length_profile.cpp.
  [[nodiscard]] static empirical_profile from_table(const profile_table& table) {
    std::vector<quantile_point> points;
    points.reserve(table.points.size());
    for (const auto& p : table.points) {
      points.push_back(
          {static_cast<double>(p.probability_ppm) / static_cast<double>(table_probability_scale),
           static_cast<double>(p.tokens)});
    }
    return empirical_profile(std::move(points));
  }

  /// English Wikipedia document lengths (FlexSP evaluation data, 1M documents, mean 1,014,
  /// median 347, p99 ~10.9K, max 1.82M); table in wikipedia_profile.hpp.
  [[nodiscard]] static empirical_profile wikipedia() {
    return from_table(profiles::wikipedia_table);
  }

  [[nodiscard]] const std::vector<quantile_point>& points() const noexcept { return points_; }

  /// The interpolated inverse CDF at `probability` in [0, 1], before rounding.
  [[nodiscard]] double quantile(double probability) const {
    if (!(probability >= 0 && probability <= 1)) {
      throw invalid_spec("empirical_profile::quantile: probability = " +
                         std::to_string(probability) + ", must be in [0, 1]");
    }
    const std::size_t i = segment_of(probability);
    return interpolate(i, probability);
  }

  [[nodiscard]] std::int64_t draw_tokens(rng& random) const {
    const double u = random.uniform();
    const std::size_t i = segment_of(u);
    const double x = interpolate(i, u);
    // Round to the nearest length and keep it inside the segment's own bounds, so that an ulp
    // of interpolation error can never leave the table's range.
    const double lo = points_[i].tokens;
    const double hi = points_[i + 1].tokens;
    return std::max<std::int64_t>(1, std::llround(std::clamp(x, lo, hi)));
  }

  [[nodiscard]] dcp::sample draw(rng& random, std::uint64_t id) const {
    return dcp::text_sample(id, draw_tokens(random));
  }

  /// Mean length of the interpolated distribution (before rounding): each segment of
  /// probability dp between lengths a <= b adds dp times (b - a) / ln(b / a).
  [[nodiscard]] double mean_tokens() const noexcept {
    double mean = 0;
    for (std::size_t i = 0; i + 1 < points_.size(); ++i) {
      const double dp = points_[i + 1].probability - points_[i].probability;
      const double a = points_[i].tokens;
      const double b = points_[i + 1].tokens;
      const double segment_mean = a == b ? a : (b - a) / (log_tokens_[i + 1] - log_tokens_[i]);
      mean = std::fma(dp, segment_mean, mean);
    }
    return mean;
  }

  friend bool operator==(const empirical_profile& a, const empirical_profile& b) noexcept {
    return a.points_ == b.points_;
  }

 private:
  /// Index i of the segment [p_i, p_{i+1}) holding `probability`; the last segment holds 1.
  [[nodiscard]] std::size_t segment_of(double probability) const noexcept {
    const auto after = std::upper_bound(
        points_.begin(), points_.end(), probability,
        [](double p, const quantile_point& point) { return p < point.probability; });
    const auto index = static_cast<std::size_t>(after - points_.begin());
    return std::min(index == 0 ? 0 : index - 1, points_.size() - 2);
  }

  [[nodiscard]] double interpolate(std::size_t i, double probability) const noexcept {
    const quantile_point& a = points_[i];
    const quantile_point& b = points_[i + 1];
    if (a.tokens == b.tokens || probability <= a.probability) return a.tokens;
    if (probability >= b.probability) return b.tokens;
    const double t = (probability - a.probability) / (b.probability - a.probability);
    return detail::portable_exp(std::fma(t, log_tokens_[i + 1] - log_tokens_[i], log_tokens_[i]));
  }

  void validate() const {
    const auto fail = [](const std::string& what) {
      throw invalid_spec("empirical_profile: " + what);
    };
    if (points_.size() < 2) {
      fail("has " + std::to_string(points_.size()) + " points, needs at least 2");
    }
    if (points_.front().probability != 0) {
      fail("point 0 has probability " + std::to_string(points_.front().probability) +
           ", must be 0");
    }
    if (points_.back().probability != 1) {
      fail("point " + std::to_string(points_.size() - 1) + " has probability " +
           std::to_string(points_.back().probability) + ", must be 1");
    }
    for (std::size_t i = 0; i < points_.size(); ++i) {
      const auto& p = points_[i];
      if (!(p.tokens >= 1 && p.tokens <= static_cast<double>(max_sample_tokens))) {
        fail("point " + std::to_string(i) + " has tokens " + std::to_string(p.tokens) +
             ", must be in [1, 2^53]");
      }
      if (i == 0) continue;
      const auto& previous = points_[i - 1];
      if (!(p.probability > previous.probability)) {
        fail("point " + std::to_string(i) + " has probability " + std::to_string(p.probability) +
             ", must exceed the previous point's " + std::to_string(previous.probability));
      }
      if (p.tokens < previous.tokens) {
        fail("point " + std::to_string(i) + " has tokens " + std::to_string(p.tokens) +
             ", must be >= the previous point's " + std::to_string(previous.tokens));
      }
    }
  }

  std::vector<quantile_point> points_;
  std::vector<double> log_tokens_;
};

static_assert(length_distribution<empirical_profile>);

inline std::ostream& operator<<(std::ostream& os, const empirical_profile& profile) {
  return os << "empirical_profile{points=" << profile.points().size()
            << ", median=" << profile.quantile(0.5) << ", mean=" << profile.mean_tokens() << '}';
}

/// The Wikipedia preset; see empirical_profile::wikipedia().
[[nodiscard]] inline empirical_profile wikipedia() { return empirical_profile::wikipedia(); }

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
