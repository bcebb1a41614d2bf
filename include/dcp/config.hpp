#pragma once
// Included by every dcp header: the version (and its inline namespace) and the compiler
// settings dcp refuses.

#include "dcp/version.hpp"

// Plans are a promise of determinism: every rank computes the same plan bit for bit from the
// same lengths, and a fingerprint proves it. -ffast-math (and -ffinite-math-only, which it
// implies) lets the compiler reassociate and drop NaN/infinity checks, so ranks built with
// different flags or compilers plan differently (27 of 30 fingerprints changed in a test) and
// the validation of specs cannot see a NaN. Build the translation units that include dcp
// without it.
#if defined(__FAST_MATH__)
#error "dcp: -ffast-math changes plans (they must be identical on every rank); compile the files that include dcp without -ffast-math"
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "dcp: -ffinite-math-only removes the NaN and infinity checks dcp's validation relies on; compile the files that include dcp without it"
#endif
