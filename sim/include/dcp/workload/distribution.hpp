#pragma once
// What a workload is: something that turns random bits into samples, the same samples for the
// same bits on every platform.

#include <concepts>
#include <cstdint>

#include "dcp/spec/sample.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// The largest length a sampler returns: 2^53, the last integer a double holds exactly, so
/// conversions between a continuous draw and a token count are exact.
inline constexpr std::int64_t max_sample_tokens = std::int64_t{1} << 53;

/// A source of samples. Requires `d.draw(random, id) -> dcp::sample`, const, consuming bits
/// only from `random`, so that a seed fixes the sequence of samples.
template <class D>
concept sample_distribution = requires(const D& d, rng& random, std::uint64_t id) {
  { d.draw(random, id) } -> std::same_as<dcp::sample>;
};

/// A source of text lengths: a sample_distribution that also offers
/// `d.draw_tokens(random) -> std::int64_t` (>= 1), with `draw(random, id)` the causal text sample
/// of that length.
template <class D>
concept length_distribution = sample_distribution<D> && requires(const D& d, rng& random) {
  { d.draw_tokens(random) } -> std::same_as<std::int64_t>;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
