#pragma once
// Closed-form length distributions: a bounded lognormal and a truncated Pareto. They are the
// pieces of the peers' mock workloads (Megatron's lognormal mock) and of the mixtures in
// presets.hpp. Lengths are continuous draws truncated toward zero to whole tokens, as numpy's
// astype(int) does in Megatron's mock.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/deterministic_math.hpp"
#include "dcp/workload/distribution.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// What a bounded sampler does with a draw outside [min_tokens, max_tokens].
enum class bound_policy : std::uint8_t {
  clip,      ///< move it to the nearer bound (Megatron's np.clip: mass piles up at the bounds)
  resample,  ///< draw again (the distribution conditioned on the range)
};

[[nodiscard]] constexpr std::string_view to_string(bound_policy policy) noexcept {
  switch (policy) {
    case bound_policy::clip:
      return "clip";
    case bound_policy::resample:
      return "resample";
  }
  return "unknown";
}

inline std::ostream& operator<<(std::ostream& os, bound_policy policy) {
  return os << to_string(policy);
}

namespace detail {

[[noreturn]] inline void bad_parameter(std::string_view sampler, std::string_view field,
                                       const std::string& value, std::string_view limit) {
  throw invalid_spec(std::string(sampler) + ": " + std::string(field) + " = " + value + ", " +
                     std::string(limit));
}

inline void check_bounds(std::string_view sampler, std::int64_t min_tokens,
                         std::int64_t max_tokens) {
  if (min_tokens < 1) {
    bad_parameter(sampler, "min_tokens", std::to_string(min_tokens), "must be >= 1");
  }
  if (max_tokens < min_tokens) {
    bad_parameter(sampler, "max_tokens", std::to_string(max_tokens),
                  "must be >= min_tokens = " + std::to_string(min_tokens));
  }
  if (max_tokens > max_sample_tokens) {
    bad_parameter(sampler, "max_tokens", std::to_string(max_tokens),
                  "must be <= 2^53 = " + std::to_string(max_sample_tokens));
  }
}

}  // namespace detail

/// Lognormal lengths: ln(length) ~ Normal(mu, log_sigma^2) with mu = ln(mean_tokens) -
/// log_sigma^2 / 2, so `mean_tokens` is the mean of the unbounded lognormal (the convention of
/// Megatron's MockVarlenLowLevelDataset). Bounded to [min_tokens, max_tokens] by `bounds`; the
/// bounded mean is therefore not mean_tokens.
class lognormal_lengths {
 public:
  struct params {
    double mean_tokens = 1024;
    double log_sigma = 1.0;
    std::int64_t min_tokens = 1;
    std::int64_t max_tokens = max_sample_tokens;
    bound_policy bounds = bound_policy::resample;

    friend constexpr bool operator==(const params&, const params&) = default;
  };

  /// Draws in the resample policy give up after this many misses: a range that holds so little
  /// probability is a mistake in the parameters, not bad luck.
  static constexpr int max_attempts = 1000;

  explicit lognormal_lengths(const params& p) : params_(p) {
    constexpr std::string_view name = "lognormal_lengths";
    if (!(std::isfinite(p.mean_tokens) && p.mean_tokens > 0)) {
      detail::bad_parameter(name, "mean_tokens", std::to_string(p.mean_tokens),
                            "must be finite and > 0");
    }
    if (!(std::isfinite(p.log_sigma) && p.log_sigma >= 0 && p.log_sigma <= 10)) {
      detail::bad_parameter(name, "log_sigma", std::to_string(p.log_sigma), "must be in [0, 10]");
    }
    detail::check_bounds(name, p.min_tokens, p.max_tokens);
    // mu = ln(mean) - sigma^2 / 2 (lognormal mean e^(mu + sigma^2/2); Megatron mock_varlen).
    log_mean_ = std::fma(-0.5 * p.log_sigma, p.log_sigma, detail::portable_log(p.mean_tokens));
  }

  [[nodiscard]] const params& parameters() const noexcept { return params_; }
  /// mu, the mean of ln(length) before bounding.
  [[nodiscard]] double log_mean() const noexcept { return log_mean_; }

  [[nodiscard]] std::int64_t draw_tokens(rng& random) const {
    const auto lo = static_cast<double>(params_.min_tokens);
    const auto hi = static_cast<double>(params_.max_tokens);
    for (int attempt = 0; attempt < max_attempts; ++attempt) {
      const double z = standard_normal(random);
      const double x = detail::portable_exp(std::fma(params_.log_sigma, z, log_mean_));
      if (params_.bounds == bound_policy::clip) {
        return static_cast<std::int64_t>(std::floor(std::clamp(x, lo, hi)));
      }
      if (x >= lo && x < hi + 1) return static_cast<std::int64_t>(std::floor(x));
    }
    throw error("lognormal_lengths: no draw in [" + std::to_string(params_.min_tokens) + ", " +
                std::to_string(params_.max_tokens) + "] after " + std::to_string(max_attempts) +
                " attempts; the range holds almost none of the distribution (mean_tokens = " +
                std::to_string(params_.mean_tokens) +
                ", log_sigma = " + std::to_string(params_.log_sigma) + ")");
  }

  [[nodiscard]] dcp::sample draw(rng& random, std::uint64_t id) const {
    return dcp::text_sample(id, draw_tokens(random));
  }

  friend bool operator==(const lognormal_lengths& a, const lognormal_lengths& b) noexcept {
    return a.params_ == b.params_;
  }

 private:
  params params_;
  double log_mean_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const lognormal_lengths& d) {
  const auto& p = d.parameters();
  return os << "lognormal_lengths{mean_tokens=" << p.mean_tokens << ", log_sigma=" << p.log_sigma
            << ", min_tokens=" << p.min_tokens << ", max_tokens=" << p.max_tokens
            << ", bounds=" << p.bounds << '}';
}

/// Truncated Pareto lengths: density proportional to x^-(alpha+1) on [min_tokens,
/// max_tokens + 1), drawn by inverting its CDF, then truncated to whole tokens, so every length
/// lies in [min_tokens, max_tokens]. alpha near 0 is log-uniform; alpha below 2 is the
/// infinite-variance tail that web and code corpora show (Hill alpha 1.5-1.9).
class pareto_lengths {
 public:
  struct params {
    double alpha = 1.0;
    std::int64_t min_tokens = 1;
    std::int64_t max_tokens = 1;

    friend constexpr bool operator==(const params&, const params&) = default;
  };

  explicit pareto_lengths(const params& p) : params_(p) {
    constexpr std::string_view name = "pareto_lengths";
    if (!(std::isfinite(p.alpha) && p.alpha > 0 && p.alpha <= 100)) {
      detail::bad_parameter(name, "alpha", std::to_string(p.alpha), "must be in (0, 100]");
    }
    detail::check_bounds(name, p.min_tokens, p.max_tokens);
    // F(x) = (1 - (m/x)^alpha) / (1 - (m/C)^alpha) on [m, C), C = max_tokens + 1.
    const auto m = static_cast<double>(p.min_tokens);
    const double c = static_cast<double>(p.max_tokens) + 1;
    mass_ = 1 - detail::portable_pow(m / c, p.alpha);
    inverse_alpha_ = -1 / p.alpha;
  }

  [[nodiscard]] const params& parameters() const noexcept { return params_; }

  [[nodiscard]] std::int64_t draw_tokens(rng& random) const {
    // x = m (1 - u (1 - (m/C)^alpha))^(-1/alpha), the inverse of F above.
    const double u = random.uniform();
    const double base = std::fma(-u, mass_, 1.0);
    const double x =
        static_cast<double>(params_.min_tokens) * detail::portable_pow(base, inverse_alpha_);
    const double length = std::floor(std::clamp(x, static_cast<double>(params_.min_tokens),
                                                static_cast<double>(params_.max_tokens)));
    return static_cast<std::int64_t>(length);
  }

  [[nodiscard]] dcp::sample draw(rng& random, std::uint64_t id) const {
    return dcp::text_sample(id, draw_tokens(random));
  }

  friend bool operator==(const pareto_lengths& a, const pareto_lengths& b) noexcept {
    return a.params_ == b.params_;
  }

 private:
  params params_;
  double mass_ = 1;
  double inverse_alpha_ = -1;
};

inline std::ostream& operator<<(std::ostream& os, const pareto_lengths& d) {
  const auto& p = d.parameters();
  return os << "pareto_lengths{alpha=" << p.alpha << ", min_tokens=" << p.min_tokens
            << ", max_tokens=" << p.max_tokens << '}';
}

static_assert(length_distribution<lognormal_lengths>);
static_assert(length_distribution<pareto_lengths>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
