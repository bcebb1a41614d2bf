#pragma once
// prefetch(p): asks for the cache line holding *p ahead of a read, where the compiler offers a
// way to (GCC, Clang); elsewhere nothing. For loops whose reads are scattered over an array
// larger than the cache (a 10M-sample batch is 560 MB of samples), which would otherwise wait
// for memory once per read.

#include <cstddef>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// Batches of this many samples or more no longer fit the cache (56 bytes a sample): loops over
/// them in a scattered order prefetch, and the canonical order may count instead of compare.
inline constexpr std::size_t samples_beyond_cache = std::size_t{1} << 16;

inline void prefetch([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#endif
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
