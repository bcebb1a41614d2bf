#pragma once
// log, exp, pow and the normal quantile built only from IEEE-754 operations that every
// platform rounds the same way (+, -, *, /, sqrt, fma, frexp, ldexp, floor), so that the
// workload samplers give bit-identical lengths on every compiler and standard library.
// std::log / std::exp are not correctly rounded and differ by an ulp between libms.
//
// Every multiply-add below is an explicit std::fma: compilers may otherwise fuse a*b+c on
// their own (-ffp-contract, on by default in GCC and Clang where the target has FMA), which
// would change results between x86-64 and AArch64 builds. -ffast-math is not supported.

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload::detail {

static_assert(std::numeric_limits<double>::is_iec559,
              "dcp::workload needs IEEE-754 doubles for reproducible sampling");
static_assert(FLT_EVAL_METHOD == 0,
              "dcp::workload needs double arithmetic evaluated in double (no x87 excess "
              "precision) for reproducible sampling");

// ln 2 split so that k * ln2_hi is exact for |k| < 2^11 (fdlibm e_exp.c / e_log.c constants).
inline constexpr double ln2_hi = 6.93147180369123816490e-01;
inline constexpr double ln2_lo = 1.90821492927058770002e-10;
inline constexpr double inv_ln2 = 1.44269504088896338700e+00;
inline constexpr double sqrt_half = 0.70710678118654752440;

/// Natural logarithm; accurate to a few ulp. log(0) = -inf, log(x < 0) = NaN.
[[nodiscard]] inline double portable_log(double x) noexcept {
  if (std::isnan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (std::isinf(x)) return x;
  int exponent = 0;
  double mantissa = std::frexp(x, &exponent);  // x = mantissa * 2^exponent, mantissa in [1/2, 1)
  if (mantissa < sqrt_half) {                  // move mantissa into [sqrt(1/2), sqrt(2))
    mantissa *= 2;
    --exponent;
  }
  // log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1), |s| <= 0.1716
  // (Abramowitz & Stegun 4.1.27); the terms past s^23 are below 1e-18.
  const double s = (mantissa - 1) / (mantissa + 1);
  const double s2 = s * s;
  double series = 1.0 / 23;
  for (int k = 21; k >= 3; k -= 2) series = std::fma(series, s2, 1.0 / k);
  series = std::fma(series, s2, 1.0);
  const double log_mantissa = (2 * s) * series;
  const double e = exponent;
  return std::fma(e, ln2_hi, std::fma(e, ln2_lo, log_mantissa));
}

/// e^x; accurate to a few ulp. Overflows to +inf above ~709.78 and underflows to 0.
[[nodiscard]] inline double portable_exp(double x) noexcept {
  if (std::isnan(x)) return x;
  if (x > 709.78) return std::numeric_limits<double>::infinity();
  if (x < -745.2) return 0.0;
  // x = k ln2 + r with |r| <= ln2/2, then e^x = 2^k e^r (Cody & Waite range reduction).
  const double k = std::floor(std::fma(x, inv_ln2, 0.5));
  double r = std::fma(-k, ln2_hi, x);
  r = std::fma(-k, ln2_lo, r);
  // Taylor series of e^r to r^13/13!; the remainder is below 5e-18 for |r| <= 0.347.
  constexpr double inverse_factorial[14] = {
      1.0,
      1.0,
      1.0 / 2,
      1.0 / 6,
      1.0 / 24,
      1.0 / 120,
      1.0 / 720,
      1.0 / 5040,
      1.0 / 40320,
      1.0 / 362880,
      1.0 / 3628800,
      1.0 / 39916800,
      1.0 / 479001600,
      1.0 / 6227020800.0,
  };
  double series = inverse_factorial[13];
  for (int i = 12; i >= 0; --i) series = std::fma(series, r, inverse_factorial[i]);
  return std::ldexp(series, static_cast<int>(k));
}

/// base^exponent for base > 0, as exp(exponent * log(base)).
[[nodiscard]] inline double portable_pow(double base, double exponent) noexcept {
  return portable_exp(exponent * portable_log(base));
}

/// Horner evaluation with explicit fma: c[0] x^(n-1) + ... + c[n-1].
template <std::size_t n>
[[nodiscard]] inline double horner(const double (&coefficients)[n], double x) noexcept {
  double result = coefficients[0];
  for (std::size_t i = 1; i < n; ++i) result = std::fma(result, x, coefficients[i]);
  return result;
}

/// Quantile of the standard normal distribution for p in (0, 1): the z with Phi(z) = p.
/// P. J. Acklam's rational approximation (2003), relative error below 1.15e-9 — far below the
/// sampling noise of any test; determinism, not the last digit, is what matters here.
[[nodiscard]] inline double normal_quantile(double p) noexcept {
  constexpr double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                           1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[6] = {-5.447609879822406e+01, 1.615858368580409e+02,  -1.556989798598866e+02,
                           6.680131188771972e+01,  -1.328068155288572e+01, 1.0};
  constexpr double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                           -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[5] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                           3.754408661907416e+00, 1.0};
  constexpr double p_low = 0.02425;  // Acklam's break point between the central and tail forms
  if (!(p > 0 && p < 1)) {
    if (p == 0) return -std::numeric_limits<double>::infinity();
    if (p == 1) return std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (p < p_low) {
    const double q = std::sqrt(-2 * portable_log(p));
    return horner(c, q) / horner(d, q);
  }
  if (p > 1 - p_low) {
    const double q = std::sqrt(-2 * portable_log(1 - p));
    return -(horner(c, q) / horner(d, q));
  }
  const double q = p - 0.5;
  const double r = q * q;
  return q * horner(a, r) / horner(b, r);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload::detail
