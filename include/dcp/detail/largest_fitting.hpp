#pragma once
// The largest count a monotone predicate accepts: doubling, then bisection.

#include <cstdint>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// The largest n in [1, most] with fits(n), for a predicate that holds up to some n and not
/// beyond (memory never decreases with tokens or copies); 0 when fits(1) is false, `most` when
/// fits(most) holds. O(log n) calls; never forms a value above `most`.
template <class Fits>
[[nodiscard]] std::int64_t largest_fitting(Fits&& fits, std::int64_t most) {
  if (most < 1 || !fits(std::int64_t{1})) return 0;
  std::int64_t low = 1;   // fits
  std::int64_t high = 0;  // does not fit
  for (;;) {
    const std::int64_t next = low > most / 2 ? most : 2 * low;
    if (next == low) return low;
    if (!fits(next)) {
      high = next;
      break;
    }
    low = next;
  }
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    (fits(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
