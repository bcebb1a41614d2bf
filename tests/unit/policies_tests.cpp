// Bucketing policies and recompute strategies.

#include <algorithm>
#include <set>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../support/batches.hpp"

using namespace dcp;

TEST_CASE("Bucketing.Log2.labels_by_power_of_two") {
  const std::vector<sample> b{text_sample(0, 1),    text_sample(1, 2),    text_sample(2, 3),
                              text_sample(3, 1024), text_sample(4, 2047), text_sample(5, 2048)};
  CHECK(log2_buckets{}.assign(b) == std::vector<std::int32_t>{0, 1, 1, 10, 10, 11});
}

TEST_CASE("Bucketing.Explicit.labels_between_boundaries_and_rejects_unsorted") {
  const explicit_boundaries policy({1024, 8192});
  const std::vector<sample> b{text_sample(0, 10), text_sample(1, 1024), text_sample(2, 9000)};
  CHECK(policy.assign(b) == std::vector<std::int32_t>{0, 1, 2});
  CHECK_THROWS_AS(explicit_boundaries({8192, 1024}), invalid_spec);
  CHECK_THROWS_AS(explicit_boundaries({0}), invalid_spec);
}

TEST_CASE("Bucketing.PaddingOptimal.matches_brute_force_padding") {
  // Brute force over all ways to cut the sorted distinct lengths into at most k groups.
  auto padding = [](std::vector<std::int64_t> lengths, const std::vector<std::int32_t>& labels) {
    std::int64_t waste = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      std::int64_t top = 0;
      for (std::size_t j = 0; j < lengths.size(); ++j)
        if (labels[j] == labels[i]) top = std::max(top, lengths[j]);
      waste += top - lengths[i];
    }
    return waste;
  };
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    CAPTURE(seed);
    dcp::test::rng r(seed);
    std::vector<sample> batch;
    std::vector<std::int64_t> lengths;
    for (std::uint64_t i = 0; i < 9; ++i) {
      lengths.push_back(1 + r.below(200));
      batch.push_back(text_sample(i, lengths.back()));
    }
    for (std::int32_t k = 1; k <= 4; ++k) {
      CAPTURE(k);
      const auto labels = padding_optimal_buckets(k).assign(batch);
      std::set<std::int32_t> distinct(labels.begin(), labels.end());
      CHECK(distinct.size() <= static_cast<std::size_t>(k));
      // Exhaustive: assign each distinct sorted value a cut pattern (bitmask of cut points).
      std::vector<std::int64_t> values(lengths);
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
      std::int64_t best = -1;
      const auto n = values.size();
      for (std::uint64_t mask = 0; mask < (1ull << (n - 1)); ++mask) {
        if (std::popcount(mask) > k - 1) continue;
        std::vector<std::int32_t> group_of_value(n, 0);
        for (std::size_t v = 1; v < n; ++v)
          group_of_value[v] = group_of_value[v - 1] + ((mask >> (v - 1)) & 1 ? 1 : 0);
        std::vector<std::int32_t> l;
        for (auto len : lengths)
          l.push_back(group_of_value[static_cast<std::size_t>(
              std::lower_bound(values.begin(), values.end(), len) - values.begin())]);
        const auto w = padding(lengths, l);
        if (best < 0 || w < best) best = w;
      }
      CHECK(padding(lengths, labels) == best);
    }
  }
}

TEST_CASE("Bucketing.Video.groups_identical_grids_only") {
  const std::vector<sample> b{video_sample(0, {8, 9, 16}), video_sample(1, {8, 16, 9}),
                              video_sample(2, {8, 9, 16}), text_sample(3, 500)};
  const auto labels = video_buckets{}.assign(b);
  CHECK(labels[0] == labels[2]);
  CHECK(labels[0] != labels[1]);
  CHECK(labels[3] != labels[0]);
  const auto varlen = varlen_buckets{}.assign(b);
  CHECK(varlen[0] == varlen[2]);
  CHECK(varlen[0] != varlen[1]);
}

TEST_CASE("Recompute.Pyramid.is_the_fewest_layers_that_fit") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const execution_config base{1, sequence_parallel::ulysses, {}};
  int partial_seen = 0;
  for (std::int64_t tokens = 1024; tokens <= 131072; tokens += 1024) {
    CAPTURE(tokens);
    const auto s = micro_batch_shape::of(text_sample(0, tokens));
    const auto r = pyramid_recompute{}.choose(cost, s, base);
    if (!r) {
      auto full = base;
      full.recompute = recompute_setting::full(32);
      CHECK(cost.peak_bytes(s, full) > cost.memory_budget());
      continue;
    }
    auto with = base;
    with.recompute = *r;
    CHECK(cost.peak_bytes(s, with) <= cost.memory_budget());
    if (r->layers > 0) {
      auto fewer = base;
      fewer.recompute = recompute_setting::partial(r->layers - 1);
      CHECK(cost.peak_bytes(s, fewer) > cost.memory_budget());  // exact: one fewer does not fit
      if (r->layers < 32) ++partial_seen;
    }
  }
  CHECK(partial_seen > 3);  // the pyramid really is partial, not just none/full
}

TEST_CASE("Recompute.SelectivePyramid.is_the_first_that_fits_along_its_ladder") {
  // none, selective, selective + 1 layer, ..., selective + L - 1 layers, full: the first that
  // fits, exactly; never more than 0.1 % slower than the pyramid's choice for the same
  // micro-batch under the analytic model (0.02 % at worst here), and mostly faster.
  for (const auto& model : {models::llama3_8b(), models::llama3_70b()}) {
    CAPTURE(model.name);
    training_spec training;
    training.zero_stage = model.layers > 32 ? 3 : 1;
    const analytic_cost_model cost(model, hgx_cluster(4, gpus::h100_sxm()), training);
    const execution_config base{1, sequence_parallel::ulysses, {}};
    const auto layers = static_cast<std::int32_t>(model.layers);
    const auto fits = [&](const micro_batch_shape& s, recompute_setting r) {
      auto c = base;
      c.recompute = r;
      return cost.peak_bytes(s, c) <= cost.memory_budget();
    };
    const auto seconds = [&](const micro_batch_shape& s, recompute_setting r) {
      auto c = base;
      c.recompute = r;
      return cost.seconds(s, c);
    };
    int selective_seen = 0;
    int layered_seen = 0;
    int faster = 0;
    for (std::int64_t tokens = 256; tokens <= 131072; tokens = tokens * 9 / 8) {
      CAPTURE(tokens);
      const auto s = micro_batch_shape::of(text_sample(0, tokens));
      const auto r = selective_pyramid_recompute{}.choose(cost, s, base);
      if (!r) {
        CHECK_FALSE(fits(s, recompute_setting::full(layers)));
        continue;
      }
      CHECK(fits(s, *r));
      if (fits(s, recompute_setting::none())) {
        CHECK(*r == recompute_setting::none());
      } else if (fits(s, recompute_setting::selective_only())) {
        CHECK(*r == recompute_setting::selective_only());
        ++selective_seen;
      } else if (*r == recompute_setting::full(layers)) {
        CHECK_FALSE(fits(s, recompute_setting{layers - 1, true}));
      } else {
        CHECK(r->selective);
        REQUIRE(r->layers >= 1);
        CHECK_FALSE(fits(s, recompute_setting{r->layers - 1, true}));  // one fewer does not fit
        ++layered_seen;
      }
      const auto pyramid = pyramid_recompute{}.choose(cost, s, base);
      REQUIRE(pyramid.has_value());  // both end at full recomputation
      CHECK(seconds(s, *r) <= seconds(s, *pyramid) * 1.001);
      if (seconds(s, *r) < seconds(s, *pyramid) * 0.99) ++faster;
    }
    CHECK(faster > 0);
    CHECK(selective_seen > 0);
    CHECK(layered_seen > 0);
  }
}

TEST_CASE("Recompute.Strategies.fixed_settings_or_nothing") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const execution_config base{1, sequence_parallel::ulysses, {}};
  const auto small = micro_batch_shape::of(text_sample(0, 1000));
  const auto huge = micro_batch_shape::of(text_sample(0, 400000));
  CHECK(no_recompute{}.choose(cost, small, base) == recompute_setting::none());
  CHECK(full_recompute{}.choose(cost, small, base) == recompute_setting::full(32));
  CHECK(selective_recompute{}.choose(cost, small, base) == recompute_setting::selective_only());
  CHECK_FALSE(no_recompute{}.choose(cost, huge, base).has_value());
  CHECK_FALSE(full_recompute{}.choose(cost, huge, base).has_value());
}

TEST_CASE("Recompute.Strategies.choose_fitting_is_choose_with_its_peak_bytes") {
  // Placement reads the bytes choose_fitting returns instead of asking the cost model again:
  // they must be the chosen setting's peak, and the setting choose()'s, for every strategy
  // (chosen_recompute forwarding to each), shapes that fit with nothing, with some and with none.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const std::vector<micro_batch_shape> shapes = {
      micro_batch_shape::of(text_sample(0, 1000)), micro_batch_shape::of(text_sample(0, 60000)),
      micro_batch_shape::of(text_sample(0, 150000)), micro_batch_shape::of(text_sample(0, 400000))};
  int fitted = 0, refused = 0;
  for (const char* name : {"selective-pyramid", "pyramid", "selective", "full", "none"}) {
    const auto strategy = chosen_recompute::from_name(name);
    for (const std::int64_t degree : {1, 8}) {
      const execution_config base{degree, sequence_parallel::ulysses, {}};
      for (const auto& s : shapes) {
        CAPTURE(name);
        CAPTURE(s);
        const auto fitting = strategy.choose_fitting(cost, s, base);
        const auto chosen = strategy.choose(cost, s, base);
        REQUIRE(fitting.has_value() == chosen.has_value());
        if (!fitting) {
          ++refused;
          continue;
        }
        ++fitted;
        CHECK(fitting->setting == *chosen);
        auto at = base;
        at.recompute = *chosen;
        CHECK(fitting->peak_bytes == cost.peak_bytes(s, at));
      }
    }
  }
  CHECK(fitted > 0);
  CHECK(refused > 0);
}

TEST_CASE("Recompute.Chosen.behaves_as_the_named_strategy") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const execution_config base{1, sequence_parallel::ulysses, {}};
  const std::vector<micro_batch_shape> shapes = {micro_batch_shape::of(text_sample(0, 1000)),
                                                 micro_batch_shape::of(text_sample(0, 60000)),
                                                 micro_batch_shape::of(text_sample(0, 400000))};
  const auto same_as = [&](const chosen_recompute& chosen, const auto& strategy) {
    CHECK(chosen.name() == strategy.name());
    for (const auto& s : shapes)
      CHECK(chosen.choose(cost, s, base) == strategy.choose(cost, s, base));
  };
  same_as(chosen_recompute{}, selective_pyramid_recompute{});
  same_as(chosen_recompute{}, DataCentricScheduler<>::recompute_type{});
  same_as(chosen_recompute::from_name("selective-pyramid"), selective_pyramid_recompute{});
  same_as(chosen_recompute::from_name("pyramid"), pyramid_recompute{});
  same_as(chosen_recompute::from_name("selective"), selective_recompute{});
  same_as(chosen_recompute::from_name("full"), full_recompute{});
  same_as(chosen_recompute::from_name("none"), no_recompute{});
  CHECK(chosen_recompute::from_name("full") == chosen_recompute(full_recompute{}));
  CHECK_FALSE(chosen_recompute::from_name("full") == chosen_recompute(no_recompute{}));
  CHECK_THROWS_WITH_AS((void)chosen_recompute::from_name("most"),
                       "recompute = 'most': not a recompute strategy (known: selective-pyramid, "
                       "pyramid, selective, full, "
                       "none)",
                       invalid_spec);
  // One scheduler type over every strategy plans as the scheduler over that strategy.
  const auto batch = test::heavy_tailed_batch(11, 300, 120000);
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, chosen_recompute> chosen(
      cost, {}, chosen_recompute::from_name("selective"));
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_recompute> direct(cost);
  CHECK(chosen.plan(batch).fingerprint == direct.plan(batch).fingerprint);
}

TEST_CASE("Recompute.Chosen.names_the_strategy_when_full_recompute_would_fit") {
  // 300K tokens fit on 8 H200 with full recompute but not without recomputation: the error
  // must say that the strategy, not the hardware, is the limit.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, no_recompute> never(cost);
  const std::vector<sample> batch{text_sample(1, 1000), text_sample(7, 300000)};
  const DataCentricScheduler<> pyramid(cost);
  REQUIRE_NOTHROW((void)pyramid.plan(batch));
  std::string message;
  try {
    (void)never.plan(batch);
  } catch (const sample_does_not_fit& e) {
    message = e.what();
  }
  CHECK(message.find("sample 7 (300000 tokens) does not fit under recompute strategy 'none'") !=
        std::string::npos);
  CHECK(message.find("without recomputation and") != std::string::npos);
  CHECK(message.find("with full recompute, which this strategy does not choose") !=
        std::string::npos);
}
