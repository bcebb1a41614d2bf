// The planning-time data structures give the results of the plain algorithms they replace
// (speed itself is measured in bench/planning_time.cpp, never asserted here).

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "../support/batches.hpp"
#include "dcp/dcp.hpp"
#include "dcp/placement/detail/first_fit_index.hpp"

using namespace dcp;

TEST_CASE("Placement.FirstFitIndex.matches_a_linear_scan") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    dcp::test::rng r(seed);
    detail::first_fit_index index;
    std::vector<double> free;
    for (int step = 0; step < 400; ++step) {
      if (free.empty() || r.below(3) == 0) {
        free.push_back(r.uniform() * 100.0);
        index.push(free.back());
      } else {
        const auto bin = static_cast<std::size_t>(r.below(static_cast<std::int64_t>(free.size())));
        free[bin] = r.below(5) == 0 ? -std::numeric_limits<double>::infinity() : r.uniform() * 100.0;
        index.set(bin, free[bin]);
      }
      REQUIRE(index.size() == free.size());
      const auto from = static_cast<std::size_t>(r.below(static_cast<std::int64_t>(free.size()) + 1));
      const double need = r.uniform() * 100.0;
      std::size_t expected = detail::first_fit_index::none;
      for (std::size_t b = from; b < free.size(); ++b)
        if (free[b] >= need) {
          expected = b;
          break;
        }
      CHECK(index.first_at_least(from, need) == expected);
    }
  }
}

TEST_CASE("Placement.PackGroups.same_as_packing_each_group_alone") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    CAPTURE(seed);
    const auto batch = canonical_order(dcp::test::heavy_tailed_batch(seed, 600, 16384));
    const auto labels = varlen_buckets{}.assign(batch);
    const pyramid_recompute recompute;
    const placement_problem<analytic_cost_model, pyramid_recompute> problem{batch, labels, cost,
                                                                            recompute};
    const placement_context<analytic_cost_model, pyramid_recompute> ctx(problem);
    // Groups in scattered order, one left empty, a few samples in none.
    std::vector<std::vector<std::size_t>> groups(5);
    dcp::test::rng r(seed);
    for (std::size_t i = ctx.size(); i-- > 0;) {
      const auto g = static_cast<std::size_t>(r.below(6));
      if (g < 4 && ctx.alone(i, 0).feasible) groups[g].push_back(i);
    }
    const auto together = pack_groups_to_budget(ctx, groups, 0);
    REQUIRE(together.size() == groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto alone = pack_to_budget(ctx, groups[g], 0);
      REQUIRE(together[g].size() == alone.size());
      for (std::size_t b = 0; b < alone.size(); ++b) {
        CHECK(together[g][b].samples == alone[b].samples);
        CHECK(together[g][b].run.seconds == alone[b].run.seconds);
        CHECK(together[g][b].run.peak_bytes == alone[b].run.peak_bytes);
      }
    }
  }
}
