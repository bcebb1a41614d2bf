#pragma once
// The workloads' random source: xoshiro256** seeded through splitmix64, with uniform and
// normal variates written out here. The standard <random> distributions are
// implementation-defined (libstdc++, libc++ and MSVC draw different numbers from the same
// engine), and every rank must draw the same batch from the same seed.

#include <cstdint>
#include <limits>
#include <random>

#include "dcp/workload/deterministic_math.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

namespace detail {

/// One step of splitmix64 (Steele, Lea & Flood 2014; constants from Vigna's splitmix64.c).
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

[[nodiscard]] constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
  return (x << k) | (x >> (64 - k));
}

}  // namespace detail

/// Deterministic 64-bit generator: xoshiro256** 1.0 (Blackman & Vigna 2018), its 256-bit state
/// filled from the seed by splitmix64 as the authors recommend. Satisfies
/// std::uniform_random_bit_generator, but draw variates with the members below, not <random>.
class rng {
 public:
  using result_type = std::uint64_t;

  explicit constexpr rng(std::uint64_t seed) noexcept {
    std::uint64_t sm = seed;
    for (auto& word : state_) word = detail::splitmix64(sm);
  }

  [[nodiscard]] static constexpr result_type min() noexcept { return 0; }
  [[nodiscard]] static constexpr result_type max() noexcept {
    return std::numeric_limits<result_type>::max();
  }

  /// Next 64 random bits (xoshiro256** next()).
  [[nodiscard]] constexpr result_type operator()() noexcept {
    const std::uint64_t result = detail::rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = detail::rotl(state_[3], 45);
    return result;
  }

  /// Uniform on [0, 1): the top 53 bits times 2^-53, so every value is exact (Vigna's recipe).
  [[nodiscard]] constexpr double uniform() noexcept {
    return static_cast<double>((*this)() >> 11) * 0x1.0p-53;
  }

  /// Uniform on (0, 1): the top 52 bits plus one half, times 2^-52; never 0 or 1, so it can be
  /// fed to a logarithm or a quantile function.
  [[nodiscard]] constexpr double uniform_open() noexcept {
    return (static_cast<double>((*this)() >> 12) + 0.5) * 0x1.0p-52;
  }

  friend constexpr bool operator==(const rng&, const rng&) = default;

 private:
  std::uint64_t state_[4] = {};
};

static_assert(std::uniform_random_bit_generator<rng>);

/// A standard normal variate by inversion of one open uniform (Acklam's quantile), so each
/// normal consumes exactly one 64-bit draw and carries no cached state.
[[nodiscard]] inline double standard_normal(rng& random) noexcept {
  return detail::normal_quantile(random.uniform_open());
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
