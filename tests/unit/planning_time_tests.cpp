// The planning-time data structures give the results of the plain algorithms they replace
// (speed itself is measured in bench/planning_time.cpp, never asserted here).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/detail/plan_workspace.hpp"
#include "dcp/placement/detail/block_loads.hpp"
#include "dcp/placement/detail/first_fit_index.hpp"
#include "dcp/placement/detail/timeline.hpp"

#include "../support/batches.hpp"

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
        free[bin] =
            r.below(5) == 0 ? -std::numeric_limits<double>::infinity() : r.uniform() * 100.0;
        index.set(bin, free[bin]);
      }
      REQUIRE(index.size() == free.size());
      const auto from =
          static_cast<std::size_t>(r.below(static_cast<std::int64_t>(free.size()) + 1));
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
    const placement_input<analytic_cost_model, pyramid_recompute> ctx(problem);
    // Groups in scattered order, one left empty, a few samples in none.
    std::vector<std::vector<std::size_t>> groups(5);
    dcp::test::rng r(seed);
    for (std::size_t i = ctx.size(); i-- > 0;) {
      const auto g = static_cast<std::size_t>(r.below(6));
      if (g < 4 && ctx.alone(i, 0).feasible) groups[g].push_back(i);
    }
    // Fed a chunk of the packing order at a time: the default (one chunk here), chunks of 7 and
    // 64 samples (many, each group's samples in a chunk fed together), with the sample-to-group
    // table kept from call to call.
    std::vector<std::uint32_t> group_of;
    for (const std::size_t chunk : {std::size_t{0}, std::size_t{7}, std::size_t{64}}) {
      CAPTURE(chunk);
      const auto together = pack_groups_to_budget(ctx, groups, 0, &group_of, chunk);
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
}

TEST_CASE("Batch.CanonicalOrder.is_tokens_descending_then_id_ascending_by_either_sort") {
  // Lengths over a narrow range (on a batch above 64K samples, the counting sort by length,
  // then ids within each length) and over a wide one or on a smaller batch (the comparison
  // sort), with many equal lengths and ids in scattered order;
  // the reference is a comparison sort of the whole samples.
  const auto reference = [](std::vector<sample> batch) {
    std::sort(batch.begin(), batch.end(), [](const sample& a, const sample& b) {
      return a.tokens != b.tokens ? a.tokens > b.tokens : a.id < b.id;
    });
    return batch;
  };
  std::mt19937_64 rng(11);
  for (const std::int64_t range :
       {std::int64_t{1}, std::int64_t{50}, std::int64_t{5000}, std::int64_t{1} << 40}) {
    for (const std::size_t n :
         {std::size_t{1}, std::size_t{2}, std::size_t{300}, std::size_t{70'000}}) {
      CAPTURE(range);
      CAPTURE(n);
      std::vector<sample> batch;
      for (std::size_t i = 0; i < n; ++i) {
        sample s;
        s.id =
            rng() % (1ULL << 62) * 4 + i % 4;  // distinct: i % 4 and distinct draws collide rarely
        s.tokens = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(range));
        batch.push_back(s);
      }
      std::sort(batch.begin(), batch.end(),
                [](const sample& a, const sample& b) { return a.id < b.id; });
      batch.erase(std::unique(batch.begin(), batch.end(),
                              [](const sample& a, const sample& b) { return a.id == b.id; }),
                  batch.end());
      std::shuffle(batch.begin(), batch.end(), rng);
      const auto got = canonical_order(batch);
      const auto want = reference(batch);
      REQUIRE(got.size() == want.size());
      bool same = true;
      for (std::size_t i = 0; i < got.size(); ++i)
        same = same && got[i].id == want[i].id && got[i].tokens == want[i].tokens;
      CHECK(same);
    }
  }
  // Lengths at the ends of int64 (not valid samples, but the order must not overflow), on a
  // batch large enough for the counting sort to be considered.
  std::vector<sample> extreme(70'000);
  for (std::size_t i = 0; i < extreme.size(); ++i) {
    extreme[i].id = extreme.size() - i;  // ids descending
    extreme[i].tokens = 5;
  }
  extreme[10].tokens = std::numeric_limits<std::int64_t>::max();
  extreme[20].tokens = std::numeric_limits<std::int64_t>::min();
  const auto ordered = canonical_order(extreme);
  CHECK(ordered.front().id == extreme[10].id);
  CHECK(ordered.back().id == extreme[20].id);
  CHECK(ordered[1].id == 1);
  CHECK(std::is_sorted(ordered.begin() + 1, ordered.end() - 1,
                       [](const sample& a, const sample& b) { return a.id < b.id; }));
}

TEST_CASE("Placement.Lpt.each_item_goes_to_the_least_loaded_slot_ties_to_the_lower") {
  // The heap raises its top in place; a scan for the least load (ties to the lower slot) is the
  // reference, on a worked case and on random ones with many ties.
  using items_t = std::vector<std::pair<double, std::size_t>>;
  const auto by_scan = [](const items_t& items, std::vector<double> loads) {
    std::vector<std::vector<std::size_t>> assigned(loads.size());
    for (const auto& [estimate, item] : items) {
      std::size_t best = 0;
      for (std::size_t g = 1; g < loads.size(); ++g)
        if (loads[g] < loads[best]) best = g;
      assigned[best].push_back(item);
      loads[best] += estimate;
    }
    return assigned;
  };
  const items_t worked{{5, 0}, {4, 1}, {3, 2}, {3, 3}, {2, 4}};
  CHECK(dcp::detail::lpt_assign_ordered(worked, {0, 0, 1}) ==
        std::vector<std::vector<std::size_t>>{{0}, {1, 3}, {2, 4}});
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    items_t items;
    const auto count = rng() % 200;
    for (std::size_t i = 0; i < count; ++i)
      items.emplace_back(static_cast<double>(1 + rng() % 4), i);
    dcp::detail::lpt_order(items);
    std::vector<double> loads(1 + rng() % 40);
    for (auto& l : loads) l = static_cast<double>(rng() % 3);
    CHECK(dcp::detail::lpt_assign_ordered(items, loads) == by_scan(items, loads));
  }
  // No slot: an error, not items dropped.
  CHECK_THROWS_AS((void)dcp::detail::lpt_assign_ordered(worked, {}), dcp::error);
  CHECK(dcp::detail::lpt_assign_ordered({}, {}).empty());
}

TEST_CASE("Placement.BlockLoads.matches_a_scan_of_rank_free_times") {
  // 24 GPUs: the last 8 ranks lie in no block of 16, so coarser levels skip them.
  for (const std::int64_t gpus : {1, 8, 24, 32}) {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      CAPTURE(gpus);
      CAPTURE(seed);
      dcp::test::rng r(seed);
      detail::block_loads blocks(gpus);
      std::vector<double> free(static_cast<std::size_t>(gpus), 0.0);
      for (int step = 0; step < 200; ++step) {
        std::int64_t degree = 1;
        while (degree * 2 <= gpus && r.below(2) == 0) degree *= 2;
        // The block that frees first (ties to the lower rank), its start and idle by a scan.
        std::int64_t first = 0;
        double start = std::numeric_limits<double>::infinity();
        for (std::int64_t b = 0; b + degree <= gpus; b += degree) {
          double latest = 0;
          for (auto k = b; k < b + degree; ++k)
            latest = std::max(latest, free[static_cast<std::size_t>(k)]);
          if (latest < start) {
            start = latest;
            first = b;
          }
        }
        double idle = 0;
        for (auto k = first; k < first + degree; ++k)
          idle += start - free[static_cast<std::size_t>(k)];
        const auto slot = blocks.earliest(degree);
        REQUIRE(slot.first_rank == first);
        CHECK(slot.start == doctest::Approx(start));
        CHECK(slot.idle == doctest::Approx(idle).epsilon(1e-9).scale(1.0));
        const double end = start + r.uniform() * 10.0;
        blocks.occupy(first, degree, end);
        for (auto k = first; k < first + degree; ++k) free[static_cast<std::size_t>(k)] = end;
        for (std::int64_t k = 0; k < gpus; ++k)
          REQUIRE(blocks.free_at(k) == free[static_cast<std::size_t>(k)]);
      }
    }
  }
}

TEST_CASE("Placement.Context.alone_is_each_samples_own_evaluation_whatever_its_run") {
  // The alone cache is kept per run of equal shapes, in blocks of runs: over 1,024 runs here
  // (several blocks), runs of one to dozens of samples, read in a scattered order of samples and
  // degrees. Every read is the sample's own evaluation and marginal, and first_alike is the
  // first sample of its shape.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(2, gpus::h200_sxm()));
  std::vector<sample> raw;
  dcp::test::rng r(7);
  for (std::uint64_t id = 0; id < 6000; ++id) {
    const bool repeated = r.below(2) == 0;  // half from a few lengths, half spread wide
    const auto tokens = repeated ? 64 * (1 + r.below(40)) : 1 + r.below(131072);
    raw.push_back(text_sample(id, tokens));
  }
  const auto batch = canonical_order(raw);
  const auto labels = varlen_buckets{}.assign(batch);
  const pyramid_recompute recompute;
  const placement_problem<analytic_cost_model, pyramid_recompute> problem{batch, labels, cost,
                                                                          recompute};
  const placement_input<analytic_cost_model, pyramid_recompute> ctx(problem);
  std::size_t runs = 0;
  for (std::size_t i = 0; i < ctx.size(); ++i) {
    const bool first = i == 0 || !(ctx.shape(i) == ctx.shape(i - 1));
    runs += first ? 1 : 0;
    CHECK(ctx.first_alike(i) == (first ? i : ctx.first_alike(i - 1)));
  }
  REQUIRE(runs > 2 * 1024);
  REQUIRE(runs < ctx.size() - 1000);
  for (int read = 0; read < 20000; ++read) {
    const auto i = static_cast<std::size_t>(r.below(static_cast<std::int64_t>(ctx.size())));
    const auto k =
        static_cast<std::size_t>(r.below(static_cast<std::int64_t>(ctx.degrees().size())));
    const auto own = ctx.evaluate(ctx.shape(i), k);
    const auto& cached = ctx.alone(i, k);
    CAPTURE(i);
    CAPTURE(k);
    REQUIRE(cached.feasible == own.feasible);
    if (!own.feasible) continue;
    CHECK(cached.recompute == own.recompute);
    CHECK(cached.seconds == own.seconds);
    CHECK(cached.peak_bytes == own.peak_bytes);
    CHECK(cached.sp == own.sp);
    CHECK(ctx.alone_marginal(i, k) == ctx.marginal_seconds(i, own, k));
  }
}

TEST_CASE("Placement.PackedEstimate.counts_a_sample_by_its_device_time_not_the_host_time") {
  // The host's issue time decides a short sample alone, but a micro-batch filled to the budget
  // hides it: the estimate that balances samples over groups is the device's increment plus a
  // share of the device's fixed cost, so short samples weigh by their tokens, not all alike.
  // On a Grace host, where the host decides a short sample alone.
  analytic_constants grace;
  grace.host_seconds_per_kernel = grace_host.seconds_per_kernel;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()), {}, grace);
  const std::vector<sample> batch = canonical_order(std::vector<sample>{
      text_sample(0, 200), text_sample(1, 400), text_sample(2, 800), text_sample(3, 60000)});
  const auto labels = varlen_buckets{}.assign(batch);
  const pyramid_recompute recompute;
  const placement_problem<analytic_cost_model, pyramid_recompute> problem{batch, labels, cost,
                                                                          recompute};
  const placement_input<analytic_cost_model, pyramid_recompute> ctx(problem);
  const auto c = ctx.config(0);
  double previous = 0;
  for (std::size_t i = ctx.size(); i-- > 0;) {  // shortest first
    const auto& alone = ctx.alone(i, 0);
    REQUIRE(alone.feasible);
    const double estimate = ctx.packed_estimate(i, 0, alone);
    const double device = cost.device_seconds(ctx.shape(i), ctx.config(0, alone.recompute));
    CAPTURE(ctx.shape(i).tokens);
    CHECK(estimate > previous);  // grows with the tokens
    CHECK(estimate <= device);
    if (ctx.shape(i).tokens <= 400) {
      CHECK(alone.seconds == doctest::Approx(cost.host_seconds(c)));  // host-bound alone
      CHECK(estimate < 0.5 * alone.seconds);
    }
    previous = estimate;
  }
}

TEST_CASE(
    "Planner.Workspace.keeps_buffers_from_its_threshold_and_hands_out_the_smallest_that_holds") {
  detail::plan_workspace workspace(1000);
  CHECK(workspace.take<double>(10).capacity() == 0);  // nothing kept yet
  std::vector<double> small(100);                     // 800 bytes: below the threshold
  workspace.give(std::move(small));
  CHECK(workspace.kept_bytes() == 0);
  std::vector<double> a(200);
  std::vector<double> b(500);
  std::vector<double> c(300);
  a[0] = 7;
  workspace.give(std::move(a));
  workspace.give(std::move(b));
  workspace.give(std::move(c));
  CHECK(workspace.kept_bytes() == 1000 * sizeof(double));
  CHECK(workspace.take<std::uint32_t>(1).capacity() == 0);  // another element type
  // The smallest that holds what is asked for: 250 elements get the 300, not the 500.
  auto fits = workspace.take<double>(250);
  CHECK(fits.empty());
  CHECK(fits.capacity() >= 300);
  CHECK(fits.capacity() < 500);
  // None holds 10,000: the largest, to be grown.
  auto largest = workspace.take<double>(10000);
  CHECK(largest.capacity() >= 500);
  auto next = workspace.take<double>(0);
  CHECK(next.empty());  // cleared: no element of an earlier plan survives
  CHECK(next.capacity() >= 200);
  CHECK(next.capacity() < 300);
  CHECK(workspace.take<double>(0).capacity() == 0);
  CHECK(workspace.kept_bytes() == 0);
  // Sizes that would overflow the byte count get the largest.
  workspace.give(std::move(fits));
  workspace.give(std::move(largest));
  CHECK(workspace.take<double>(std::numeric_limits<std::size_t>::max()).capacity() >= 500);
  workspace.release();
  // At most a few per type: the smallest go.
  for (std::size_t n = 1; n <= 12; ++n) workspace.give(std::vector<double>(1000 * n));
  CHECK(workspace.kept_bytes() == (5 + 6 + 7 + 8 + 9 + 10 + 11 + 12) * 1000 * sizeof(double));
  workspace.release();
  CHECK(workspace.kept_bytes() == 0);
}

TEST_CASE("Planner.Workspace.a_plan_from_kept_buffers_is_the_plan_from_fresh_ones") {
  // The placement's scratch and the canonical order take their batch-sized arrays from the
  // workspace (here keeping every buffer, so the second and third plans reuse the first's, a
  // larger batch's among them) and must plan exactly as with fresh arrays.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  detail::plan_workspace workspace(0);
  const auto place = [&](const std::vector<sample>& batch, detail::plan_workspace* kept) {
    detail::check_batch(batch, kept);  // its duplicate-id table kept too
    std::vector<sample> samples;
    detail::canonical_order_into(batch, samples, kept);
    CHECK(samples == canonical_order(batch));
    const auto labels = varlen_buckets{}.assign(samples);
    const placement_problem<analytic_cost_model, selective_pyramid_recompute> problem{
        samples, labels, cost, {}};
    placement_scratch scratch;
    if (kept != nullptr) scratch.take(*kept, samples.size());
    const placement_input<analytic_cost_model, selective_pyramid_recompute> input(problem, scratch);
    auto placed = balanced_placement{}.place(input);
    if (kept != nullptr) scratch.give(*kept);
    return placed;
  };
  const auto same = [](const placement& a, const placement& b) {
    REQUIRE(a.micro_steps.size() == b.micro_steps.size());
    CHECK(a.makespan_seconds == b.makespan_seconds);
    bool all = true;
    for (std::size_t m = 0; m < a.micro_steps.size(); ++m) {
      const auto& x = a.micro_steps[m];
      const auto& y = b.micro_steps[m];
      all = all && x.first_rank == y.first_rank && x.config == y.config && x.samples == y.samples &&
            x.start_seconds == y.start_seconds && x.seconds == y.seconds;
    }
    CHECK(all);
  };
  for (const std::uint64_t seed : {std::uint64_t{3}, std::uint64_t{4}}) {
    CAPTURE(seed);
    const auto large = dcp::test::heavy_tailed_batch(seed, 3000, 65536);
    const auto small = dcp::test::heavy_tailed_batch(seed + 10, 700, 65536);
    const auto fresh_large = place(large, nullptr);
    const auto fresh_small = place(small, nullptr);
    same(place(large, &workspace), fresh_large);
    CHECK(workspace.kept_bytes() > 0);
    same(place(small, &workspace), fresh_small);  // into the large batch's buffers
    same(place(large, &workspace), fresh_large);
    // A kept duplicate-id table starts empty: a duplicate is found, and none is invented.
    auto twice = small;
    twice.back().id = twice.front().id;
    CHECK_THROWS_AS(detail::check_batch(twice, &workspace), invalid_sample);
    CHECK_NOTHROW(detail::check_batch(small, &workspace));
  }
}
