#pragma once
// What the command-line tools (dcp-plan, dcp-sim) share: usage errors, number parsing that
// names the flag, and the model and GPU presets by name.

#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"

namespace dcp::tool {

/// A bad command line: the tool prints the message and exits with status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// `text` as an integer in [minimum, maximum]; usage_error naming the flag otherwise.
template <class Integer>
Integer parse_integer(std::string_view flag, std::string_view text, Integer minimum,
                      Integer maximum = std::numeric_limits<Integer>::max()) {
  Integer value{};
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || status == std::errc::invalid_argument || end != text.data() + text.size())
    throw usage_error(std::string(flag) + ": '" + std::string(text) + "' is not an integer");
  if (status == std::errc::result_out_of_range || value < minimum || value > maximum) {
    const std::string limit =
        maximum == std::numeric_limits<Integer>::max()
            ? ">= " + std::to_string(minimum)
            : "in [" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]";
    throw usage_error(std::string(flag) + " = " + std::string(text) + ", must be " + limit);
  }
  return value;
}

inline double parse_non_negative(std::string_view flag, std::string_view text) {
  double value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || status != std::errc{} || end != text.data() + text.size() || !(value >= 0) ||
      value > 1e9)
    throw usage_error(std::string(flag) + ": '" + std::string(text) +
                      "' is not a non-negative number");
  return value;
}

[[noreturn]] inline void bad_choice(std::string_view flag, std::string_view text,
                                    std::string_view choices) {
  throw usage_error(std::string(flag) + ": unknown value '" + std::string(text) + "', expected " +
                    std::string(choices));
}

}  // namespace detail

inline model_spec model_named(std::string_view name) {
  if (name == "llama3-8b") return models::llama3_8b();
  if (name == "llama3-70b") return models::llama3_70b();
  if (name == "qwen2.5-7b") return models::qwen25_7b();
  if (name == "qwen2.5-72b") return models::qwen25_72b();
  if (name == "stdit3-xl") return models::stdit3_xl();
  if (name == "wan2.1-14b") return models::wan21_14b();
  throw usage_error("unknown model '" + std::string(name) + "'");
}

inline gpu_spec gpu_named(std::string_view name) {
  if (name == "h100") return gpus::h100_sxm();
  if (name == "h200") return gpus::h200_sxm();
  throw usage_error("unknown GPU '" + std::string(name) + "'");
}

}  // namespace dcp::tool
