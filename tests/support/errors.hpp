#pragma once
// Helpers for tests of error messages, and the extreme values bad-input tests feed in.

#include <cstdint>
#include <limits>
#include <string>

#include "dcp/error.hpp"

namespace dcp::test {

inline constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
inline const double nan_value = std::numeric_limits<double>::quiet_NaN();
inline const double inf_value = std::numeric_limits<double>::infinity();

/// The message of the dcp::error that f throws, or a marker that none was thrown.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const dcp::error& e) {
    return e.what();
  }
  return "(no dcp::error thrown)";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace dcp::test
