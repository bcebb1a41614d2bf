#pragma once
// The error for a sample that fits nowhere: what it needs, at which degree, against what is
// available.

#include <limits>
#include <sstream>
#include <string>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

[[nodiscard]] inline std::string format_gib(double bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << bytes / gib << " GiB";
  return os.str();
}

/// Throws sample_does_not_fit for sample i of `input`: names it, the bytes it needs at the
/// largest degree with every layer recomputed, and the bytes available. When full recomputation
/// would fit but the recompute strategy does not choose it (none, selective, a user's), the
/// message names the strategy and gives the bytes without recomputation too.
template <class Input>
[[noreturn]] void throw_does_not_fit(const Input& input, std::size_t i) {
  const auto& s = input.sample(i);
  const auto& cost = input.cost();
  const std::size_t k = input.degrees().size() - 1;
  const auto full = recompute_setting::full(cost.model().layers);
  double need = std::numeric_limits<double>::infinity();
  sequence_parallel tightest = input.style(k, 0);
  for (std::size_t j = 0; j < input.style_count(k); ++j) {
    const double b = cost.peak_bytes(input.shape(i), input.config(k, full, input.style(k, j)));
    if (b < need) {
      need = b;
      tightest = input.style(k, j);
    }
  }
  const std::string head =
      "sample " + std::to_string(s.id) + " (" + std::to_string(s.tokens) + " tokens) does not fit";
  const std::string at =
      " per GPU at degree " + std::to_string(input.degree(k)) +
      (input.style_count(k) > 1 ? " (" + std::string(to_string(tightest)) + ")" : "");
  const auto bytes = [](double b) { return format_gib(b) + " (" + bytes_text(b) + " bytes)"; };
  const std::string available = bytes(input.budget()) + " available";
  if (need <= input.budget()) {
    const double kept =
        cost.peak_bytes(input.shape(i), input.config(k, recompute_setting::none(), tightest));
    throw sample_does_not_fit(
        head + " under recompute strategy '" + std::string(input.recompute().name()) +
        "': it needs " + bytes(kept) + at + " without recomputation and " + bytes(need) +
        " with full recompute, which this strategy does not choose; " + available);
  }
  throw sample_does_not_fit(head + ": it needs " + bytes(need) + at + " with full recompute, " +
                            available);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
