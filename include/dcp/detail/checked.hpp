#pragma once
// Checked int64 arithmetic for sums and products of user values (token counts, grid shapes,
// parameter counts), number text for error messages that never converts out of range, and the
// checks of floating-point spec fields that reject NaN, infinities and values below their limit.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <version>

#include "dcp/config.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

inline constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

/// a + b, or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_add(std::int64_t a,
                                                                std::int64_t b) noexcept {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// a * b, or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_mul(std::int64_t a,
                                                                std::int64_t b) noexcept {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// An int64 that remembers whether any step of the formula that made it overflowed, so one
/// formula serves both the fast path (std::int64_t) and validation (checked_int64).
struct checked_int64 {
  std::int64_t value = 0;
  bool overflow = false;

  constexpr checked_int64(std::int64_t v = 0) noexcept : value(v) {}  // NOLINT: implicit on purpose

  [[nodiscard]] friend constexpr checked_int64 operator+(checked_int64 a,
                                                         checked_int64 b) noexcept {
    checked_int64 out;
    out.overflow = a.overflow || b.overflow || __builtin_add_overflow(a.value, b.value, &out.value);
    return out;
  }
  [[nodiscard]] friend constexpr checked_int64 operator-(checked_int64 a,
                                                         checked_int64 b) noexcept {
    checked_int64 out;
    out.overflow = a.overflow || b.overflow || __builtin_sub_overflow(a.value, b.value, &out.value);
    return out;
  }
  [[nodiscard]] friend constexpr checked_int64 operator*(checked_int64 a,
                                                         checked_int64 b) noexcept {
    checked_int64 out;
    out.overflow = a.overflow || b.overflow || __builtin_mul_overflow(a.value, b.value, &out.value);
    return out;
  }
  constexpr checked_int64& operator+=(checked_int64 b) noexcept { return *this = *this + b; }
  constexpr checked_int64& operator-=(checked_int64 b) noexcept { return *this = *this - b; }
};

/// A double as message text: the shortest form that reads back as the same value ("0.7",
/// "-1e-06", "nan", "inf"); std::to_string would print 1e-9 as "0.000000".
[[nodiscard]] inline std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  if (result.ec == std::errc{}) return std::string(text, result.ptr);
#endif
  std::ostringstream os;
  os.precision(std::numeric_limits<double>::max_digits10);
  os << value;
  return os.str();
}

/// A byte count as whole bytes for any double: truncated to an integer where int64 holds it
/// (the cast of a value >= 2^63 to long long is undefined), every digit of the double beyond.
[[nodiscard]] inline std::string bytes_text(double bytes) {
  if (!std::isfinite(bytes)) return number_text(bytes);
  constexpr double two_63 = 9223372036854775808.0;
  if (bytes > -two_63 && bytes < two_63) return std::to_string(static_cast<long long>(bytes));
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(0);
  os << bytes;
  return os.str();
}

// ---- spec fields: "<where><field> = <value>, must be <limit>" --------------------------------

/// Throws invalid_spec unless 0 < value < infinity.
inline void require_finite_positive(double value, std::string_view where, std::string_view field) {
  if (!(value > 0) || !std::isfinite(value))
    throw invalid_spec(std::string(where) + std::string(field) + " = " + number_text(value) +
                       ", must be finite and > 0");
}

/// Throws invalid_spec unless 0 <= value < infinity.
inline void require_finite_non_negative(double value, std::string_view where,
                                        std::string_view field) {
  if (!(value >= 0) || !std::isfinite(value))
    throw invalid_spec(std::string(where) + std::string(field) + " = " + number_text(value) +
                       ", must be finite and >= 0");
}

/// Throws invalid_spec unless value is in (0, 1]: an achieved fraction of a peak.
inline void require_fraction(double value, std::string_view where, std::string_view field) {
  if (!(value > 0 && value <= 1))
    throw invalid_spec(std::string(where) + std::string(field) + " = " + number_text(value) +
                       ", must be in (0, 1]");
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
