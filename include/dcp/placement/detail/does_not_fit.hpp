#pragma once
// The error for a sample that fits nowhere: what it needs, at which degree, against what is
// available.

#include <cstdint>
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

/// The largest power of two at most `gpus` (1 for gpus < 2): the largest degree ring, hybrid
/// and automatic styles allow on a cluster of `gpus`.
[[nodiscard]] constexpr std::int64_t largest_degree(std::int64_t gpus) noexcept {
  std::int64_t d = 1;
  while (d <= gpus / 2) d *= 2;
  return d;
}

/// Where the Ulysses style stopped short of the cluster (its degree must divide the head count),
/// the sentence that says so and names the styles that reach the cluster's largest degree, with
/// what sample i needs there under ring attention with full recompute; empty otherwise.
template <class Input>
[[nodiscard]] std::string ulysses_cap_hint(const Input& input, std::size_t i) {
  if (input.sp() != sequence_parallel::ulysses) return {};
  const auto& cost = input.cost();
  const std::int64_t capped = input.degrees().back();
  const std::int64_t reach = largest_degree(cost.cluster().gpus);
  if (capped >= reach) return {};
  const execution_config ring{reach, sequence_parallel::ring,
                              recompute_setting::full(cost.model().layers)};
  const double need = cost.peak_bytes(input.shape(i), ring);
  return "; degree " + std::to_string(capped) +
         " is the largest Ulysses degree, which must divide heads = " +
         std::to_string(cost.model().heads) + ": sp = ring, hybrid or auto reach degree " +
         std::to_string(reach) + " on these " + std::to_string(cost.cluster().gpus) +
         " GPUs (ring attention there needs " + format_gib(need) + " per GPU with full recompute)";
}

/// Throws sample_does_not_fit for sample i of `input`: names it, the bytes it needs at the
/// largest degree with every layer recomputed, and the bytes available. When full recomputation
/// would fit but the recompute strategy does not choose it (none, selective, a user's), the
/// message names the strategy and gives the bytes without recomputation too. When the Ulysses
/// style's head-count cap, not the cluster, set the largest degree, it says so
/// (ulysses_cap_hint).
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
    throw sample_does_not_fit(head + " under recompute strategy '" +
                              std::string(input.recompute().name()) + "': it needs " + bytes(kept) +
                              at + " without recomputation and " + bytes(need) +
                              " with full recompute, which this strategy does not choose; " +
                              available + ulysses_cap_hint(input, i));
  }
  throw sample_does_not_fit(head + ": it needs " + bytes(need) + at + " with full recompute, " +
                            available + ulysses_cap_hint(input, i));
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
