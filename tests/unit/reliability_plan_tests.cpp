// Finding 08 for the plan's own vocabulary: a micro-step read from elsewhere may hold any values
// until validate_plan has checked it, so its helpers must not overflow on them.

#include <cstdint>
#include <limits>

#include <doctest/doctest.h>

#include "dcp/plan/step_plan.hpp"

TEST_CASE("Finding.08_overflow.micro_step_near_int64_max_neither_wraps_nor_includes_small_ranks") {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  dcp::micro_step m;
  m.first_rank = max - 1;  // the example: 9223372036854775806 with degree 2 on 4 GPUs
  m.config.degree = 2;
  CHECK(m.last_rank() == max);
  for (std::int64_t rank = 0; rank < 4; ++rank) CHECK_FALSE(m.includes(rank));
  CHECK(m.includes(max - 1));
  CHECK(m.includes(max));

  m.config.degree = 4;  // first_rank + degree - 1 would be past the limit: saturated, not wrapped
  CHECK(m.last_rank() == max);
  CHECK_FALSE(m.includes(0));

  m.first_rank = std::numeric_limits<std::int64_t>::min();  // and far below zero
  m.config.degree = max;
  CHECK_FALSE(m.includes(0));
  CHECK(m.includes(std::numeric_limits<std::int64_t>::min()));

  m.first_rank = 0;
  m.config.degree = 0;  // no ranks at all
  CHECK_FALSE(m.includes(0));
}
