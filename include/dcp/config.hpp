#pragma once
// Included by every dcp header: the version (and its inline namespace) and the compiler
// settings dcp refuses: -ffast-math and -ffinite-math-only at compile time, floating-point
// contraction (fused multiply-adds) when a scheduler is built (detail::contracts_multiply_add).

#include "dcp/version.hpp"

// Plans are a promise of determinism: every rank computes the same plan bit for bit from the
// same lengths, and a fingerprint proves it. -ffast-math (and -ffinite-math-only, which it
// implies) lets the compiler reassociate and drop NaN/infinity checks, so ranks built with
// different flags or compilers plan differently (27 of 30 fingerprints changed in a test) and
// the validation of specs cannot see a NaN. Build the translation units that include dcp
// without it.
#if defined(__FAST_MATH__)
#error \
    "dcp: -ffast-math changes plans (they must be identical on every rank); compile the files that include dcp without -ffast-math"
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error \
    "dcp: -ffinite-math-only removes the NaN and infinity checks dcp's validation relies on; compile the files that include dcp without it"
#endif

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// True where this translation unit's code contracts a * b + c into one fused multiply-add: on
/// a target with FMA under GCC's default -ffp-contract=fast (C++ with GNU extensions) or Clang's
/// -ffp-contract=on. The fused result skips a rounding, so a plan computed so can differ in its
/// last bits, and then in its choices, from one computed by a rank built without it: the
/// scheduler refuses to be built (dcp::dcp's CMake target compiles with -ffp-contract=off).
/// (1 + 2^-30)^2 = 1 + 2^-29 + 2^-60 rounds to 1 + 2^-29 unless fused.
[[nodiscard]] inline bool contracts_multiply_add() noexcept {
  volatile double a = 1.0 + 0x1p-30;
  volatile double c = -(1.0 + 0x1p-29);
  const double x = a;
  const double z = c;
  return x * x + z != 0.0;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
