#pragma once
// Helpers for tests of error messages.

#include <string>

#include "dcp/error.hpp"

namespace dcp::test {

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
