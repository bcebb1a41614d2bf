// Bad input: each case throws a dcp::error whose message names the sample or field, the value
// and the limit.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../support/errors.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

const analytic_cost_model& llama8b_on_8_h200() {
  static const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  return cost;
}

}  // namespace

TEST_CASE("BadInput.Sample.zero_tokens_names_sample_and_limit") {
  const DataCentricScheduler<> s(llama8b_on_8_h200());
  const auto msg = message_of([&] {
    (void)s.plan(std::vector<sample>{text_sample(1, 100), text_sample(42, 0)});
  });
  CHECK(contains(msg, "sample 42"));
  CHECK(contains(msg, "tokens = 0"));
  CHECK(contains(msg, ">= 1"));
}

TEST_CASE("BadInput.Sample.negative_tokens_names_sample_and_limit") {
  const DataCentricScheduler<> s(llama8b_on_8_h200());
  const auto msg = message_of([&] { (void)s.plan(std::vector<sample>{text_sample(7, -5)}); });
  CHECK(contains(msg, "sample 7"));
  CHECK(contains(msg, "tokens = -5"));
  CHECK(contains(msg, ">= 1"));
}

TEST_CASE("BadInput.Sample.too_long_for_largest_degree_reports_bytes") {
  const DataCentricScheduler<> s(llama8b_on_8_h200());
  std::vector<sample> batch{text_sample(1, 1000), text_sample(99, 4'000'000)};
  std::string msg;
  try {
    (void)s.plan(batch);
  } catch (const sample_does_not_fit& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "sample 99"));
  CHECK(contains(msg, "4000000 tokens"));
  CHECK(contains(msg, "degree 8 with full recompute"));
  CHECK(contains(msg, "needs"));
  CHECK(contains(msg, "available"));
  CHECK(contains(msg, "bytes"));
}

TEST_CASE("BadInput.Sample.duplicate_ids_name_the_id_and_positions") {
  const DataCentricScheduler<> s(llama8b_on_8_h200());
  const auto msg = message_of([&] {
    (void)s.plan(std::vector<sample>{text_sample(5, 10), text_sample(6, 10), text_sample(5, 20)});
  });
  CHECK(contains(msg, "duplicate sample id 5"));
  CHECK(contains(msg, "indices 0 and 2"));
}

TEST_CASE("BadInput.Sample.duplicate_ids_are_found_by_every_path") {
  // Increasing ids (one pass), shuffled ids (the hash table) and the sort it falls back to
  // (a probe budget of 0) agree with a sorted reference on batches with and without a repeat.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const auto n = static_cast<std::size_t>(1 + rng() % 300);
    std::vector<sample> batch;
    for (std::size_t i = 0; i < n; ++i)
      batch.push_back(
          text_sample(trial % 3 == 0 ? 3 * i : rng() % (trial % 2 == 0 ? 4 * n : ~0ULL), 10));
    std::vector<std::uint64_t> ids;
    for (const auto& s : batch) ids.push_back(s.id);
    std::sort(ids.begin(), ids.end());
    std::set<std::uint64_t> repeated;
    for (std::size_t i = 1; i < ids.size(); ++i)
      if (ids[i] == ids[i - 1]) repeated.insert(ids[i]);
    for (const std::size_t budget : {std::size_t{8}, std::size_t{0}}) {
      const auto found = detail::duplicate_id(batch, budget);
      CHECK(found.has_value() == !repeated.empty());
      if (found) CHECK(repeated.count(*found) == 1);
    }
  }
  // Batches large enough to be split into parts (about 4,096 ids each), a repeat within a part
  // or none.
  for (const std::size_t n : {std::size_t{9000}, std::size_t{70000}}) {
    std::vector<sample> batch;
    for (std::size_t i = 0; i < n; ++i) batch.push_back(text_sample(rng(), 10));
    for (const std::size_t budget : {std::size_t{8}, std::size_t{0}})
      CHECK_FALSE(detail::duplicate_id(batch, budget));
    batch[n / 3].id = batch[2 * n / 3].id;
    for (const std::size_t budget : {std::size_t{8}, std::size_t{0}})
      CHECK(detail::duplicate_id(batch, budget) == std::optional<std::uint64_t>{batch[n / 3].id});
  }
  // Ids chosen so that their mixed values all fall into one part and onto one slot (the mix
  // inverted): the probes overrun the budget and the sort decides, in O(n log n).
  const auto unmix = [](std::uint64_t m) {
    const auto unshift = [](std::uint64_t y, int k) {
      std::uint64_t x = y;
      for (int i = 0; i < 64 / k + 1; ++i) x = y ^ (x >> k);
      return x;
    };
    const auto inverse = [](std::uint64_t a) {  // of an odd a, modulo 2^64 (Newton)
      std::uint64_t x = a;
      for (int i = 0; i < 6; ++i) x *= 2 - a * x;
      return x;
    };
    m = unshift(m, 31) * inverse(0x94d049bb133111ebULL);
    m = unshift(m, 27) * inverse(0xbf58476d1ce4e5b9ULL);
    return unshift(m, 30) - 0x9e3779b97f4a7c15ULL;
  };
  const auto mix = [](std::uint64_t x) {  // splitmix64's finaliser, as duplicate_id mixes
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  std::vector<sample> colliding;
  for (std::uint64_t i = 1; i <= 5000; ++i) {
    colliding.push_back(text_sample(unmix(i << 40), 10));
    REQUIRE(mix(colliding.back().id) == i << 40);
  }
  std::shuffle(colliding.begin(), colliding.end(), rng);
  CHECK_FALSE(detail::duplicate_id(colliding).has_value());
  colliding.push_back(colliding[1234]);
  CHECK(detail::duplicate_id(colliding) == std::optional<std::uint64_t>{colliding[1234].id});
  std::vector<sample> increasing;
  for (std::uint64_t i = 0; i < 1000; ++i) increasing.push_back(text_sample(i, 10));
  CHECK_FALSE(detail::duplicate_id(increasing).has_value());
  increasing.push_back(text_sample(17, 10));  // no longer increasing: the table finds it
  CHECK(detail::duplicate_id(increasing) == std::optional<std::uint64_t>{17});
  CHECK(detail::duplicate_id(increasing, 0) == std::optional<std::uint64_t>{17});
}

TEST_CASE("BadInput.Sample.video_grid_must_match_tokens") {
  const DataCentricScheduler<> s(llama8b_on_8_h200());
  sample v = video_sample(3, {4, 10, 10});
  v.tokens = 401;
  const auto msg = message_of([&] { (void)s.plan(std::vector<sample>{v}); });
  CHECK(contains(msg, "sample 3"));
  CHECK(contains(msg, "401"));
  CHECK(contains(msg, "400"));
}

TEST_CASE("BadInput.Cluster.zero_gpus") {
  auto cluster = hgx_cluster(1, gpus::h100_sxm());
  cluster.gpus = 0;
  const auto msg = message_of([&] { analytic_cost_model(models::llama3_8b(), cluster); });
  CHECK(contains(msg, "gpus = 0"));
  CHECK(contains(msg, ">= 1"));
}

TEST_CASE("BadInput.Cluster.gpus_not_a_multiple_of_gpus_per_node") {
  auto cluster = hgx_cluster(2, gpus::h100_sxm());
  cluster.gpus = 12;
  const auto msg = message_of([&] { analytic_cost_model(models::llama3_8b(), cluster); });
  CHECK(contains(msg, "gpus = 12"));
  CHECK(contains(msg, "gpus_per_node = 8"));
}

TEST_CASE("BadInput.Config.ulysses_degree_must_divide_heads") {
  // STDiT3-XL has 16 heads; a Ulysses degree of 32 cannot split them.
  const analytic_cost_model cost(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  const DataCentricScheduler<analytic_cost_model, video_buckets, pyramid_recompute,
                             static_placement>
      s(cost, {}, {}, static_placement{32});
  const auto msg = message_of([&] {
    (void)s.plan(std::vector<sample>{video_sample(1, {8, 16, 16})});
  });
  CHECK(contains(msg, "Ulysses degree = 32"));
  CHECK(contains(msg, "16 attention heads"));
  const auto direct = message_of([&] {
    validate(execution_config{3, sequence_parallel::ring, {}}, models::llama3_8b(),
             hgx_cluster(1, gpus::h100_sxm()));
  });
  CHECK(contains(direct, "degree = 3"));
  CHECK(contains(direct, "power of two"));
}

TEST_CASE("BadInput.Training.headroom_at_or_above_capacity") {
  training_spec t;
  t.headroom_bytes = 80.0 * gib;
  const auto msg = message_of(
      [&] { analytic_cost_model(models::llama3_8b(), hgx_cluster(1, gpus::h100_sxm()), t); });
  CHECK(contains(msg, "headroom_bytes"));
  CHECK(contains(msg, "capacity"));
  t.headroom_bytes = 79.6 * gib;  // exactly the capacity
  CHECK_THROWS_AS(analytic_cost_model(models::llama3_8b(), hgx_cluster(1, gpus::h100_sxm()), t),
                  invalid_spec);
}

TEST_CASE("BadInput.Training.zero_stage_out_of_range") {
  training_spec t;
  t.zero_stage = 4;
  const auto msg = message_of(
      [&] { analytic_cost_model(models::llama3_8b(), hgx_cluster(1, gpus::h100_sxm()), t); });
  CHECK(contains(msg, "zero_stage = 4"));
  CHECK(contains(msg, "[0, 3]"));
}

TEST_CASE("BadInput.Model.heads_must_divide_hidden") {
  auto m = models::llama3_8b();
  m.heads = 30;
  const auto msg = message_of([&] { analytic_cost_model(m, hgx_cluster(1, gpus::h100_sxm())); });
  CHECK(contains(msg, "hidden = 4096"));
  CHECK(contains(msg, "heads = 30"));
}
