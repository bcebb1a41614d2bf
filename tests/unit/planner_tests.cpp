// What the planner's search finds, against the policies it must not lose to (under its own
// cost model; the truth-model comparisons are dcp-sim's and bound_tests.cpp's).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/baselines/flexsp_like.hpp"
#include "dcp/baselines/megatron_dynamic_cp.hpp"
#include "dcp/baselines/verl_balanced_dp.hpp"
#include "dcp/dcp.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/presets.hpp"
#include "dcp/workload/video_mix.hpp"

using namespace dcp;

namespace {

// One step's batch: documents drawn to `tokens` from `distribution`, split at `context`.
template <class Distribution>
std::vector<sample> split_batch(const Distribution& distribution, std::int64_t tokens,
                                std::int64_t context, std::uint64_t seed) {
  return workload::split_to_context(workload::draw_batch(distribution, tokens, seed), context)
      .samples;
}

// The scheduler with another placement policy (a peer's) over the same cost model.
template <class Policy>
auto scheduler_with(const analytic_cost_model& cost, Policy policy = {}) {
  return DataCentricScheduler<analytic_cost_model, varlen_buckets,
                              DataCentricScheduler<>::recompute_type, Policy>(cost, {}, {},
                                                                              std::move(policy));
}

// The verl variant (verl-hybrid) over a cost model.
auto verl_hybrid(const analytic_cost_model& cost) {
  baselines::verl_balanced_dp hybrid;
  hybrid.ulysses_degree = 1;
  return DataCentricScheduler<analytic_cost_model, varlen_buckets, pyramid_recompute,
                              baselines::verl_balanced_dp>(cost, {}, {}, hybrid);
}

}  // namespace

TEST_CASE("Planner.LongContext.ahead_of_the_verl_variant_behind_a_world_sized_sample") {
  // Llama-3-8B on H100 with ring attention, 2M context, 8M tokens per step (issue 10's bar):
  // the longest document needs all 256 GPUs, and every other long one runs after it. A degree
  // chosen as if each sample started at time 0 leaves the in-node groups recomputing past
  // the step the verl variant (one sample above the cap per larger group) finishes in.
  for (const std::int64_t nodes : {32, 128}) {
    training_spec training;
    training.sp = sequence_parallel::ring;
    const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(nodes, gpus::h100_sxm()),
                                   training);
    const DataCentricScheduler<> ours(cost);
    const auto verl = verl_hybrid(cost);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      CAPTURE(nodes);
      CAPTURE(seed);
      const auto batch = split_batch(workload::long_context_corpus(), 8'000'000, 2'097'152, seed);
      const auto plan = ours.plan(batch);
      CHECK(plan.makespan_seconds <= verl.plan(batch).makespan_seconds);
      CHECK(plan.makespan_seconds >= plan.lower_bound_seconds);
    }
  }
}

namespace {
// The analytic model without optional member 8: the same numbers, the bound without fixed costs.
struct without_fixed_share : analytic_cost_model {
  using analytic_cost_model::analytic_cost_model;
  static constexpr bool memory_by_tokens = false;
};
}  // namespace

TEST_CASE("Planner.Bound.counts_each_samples_share_of_the_fixed_micro_step_cost") {
  // Llama-3-70B under ZeRO-3, where the fixed cost per micro-step is largest: the bound with
  // each token's share of the empty micro-step's time is higher than without it, and still no
  // higher than what the planner or the best static layout achieves.
  training_spec training;
  training.zero_stage = 3;
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const analytic_cost_model cost(models::llama3_70b(), cluster, training);
  const without_fixed_share plain(models::llama3_70b(), cluster, training);
  static_assert(!dcp::detail::memory_by_tokens<without_fixed_share>);
  const DataCentricScheduler<> ours(cost);
  const DataCentricScheduler<without_fixed_share> ours_plain(plain);
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, pyramid_recompute,
                             best_static_placement>
      fixed(cost);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    const auto batch = split_batch(workload::wikipedia(), 1'000'000, 65'536, seed);
    const auto plan = ours.plan(batch);
    const auto plain_plan = ours_plain.plan(batch);
    CHECK(plain_plan.makespan_seconds == plan.makespan_seconds);  // same model, same plan
    CHECK(plan.lower_bound_seconds > plain_plan.lower_bound_seconds);
    CHECK(plan.lower_bound_seconds <= plan.makespan_seconds);
    CHECK(plan.lower_bound_seconds <= fixed.plan(batch).makespan_seconds);
  }
}

namespace {

// The exact optimum makespan of a small batch over every plan with aligned groups: each sample
// goes to one aligned block of some degree, each block's samples are split into micro-batches
// (any partition whose micro-batches fit the budget, each with the default recompute
// strategy's setting for the union: a heavier one that also fits is never faster), in any order.
// Blocks of a power-of-two cluster form a tree, so a schedule can never beat, and
// largest-block-first achieves, the busiest root-to-rank chain: the makespan of an assignment is
// max over ranks of the summed micro-batch times of the blocks holding it.
double exhaustive_optimum(const analytic_cost_model& cost, const std::vector<sample>& batch) {
  const auto n = batch.size();
  const auto gpus = cost.cluster().gpus;
  const auto degrees = allowed_degrees(cost.model(), cost.cluster(), cost.training().sp);
  const std::size_t subsets = std::size_t{1} << n;
  constexpr double none = std::numeric_limits<double>::infinity();
  // best[k][mask]: the least total time of micro-batches at degree index k covering mask.
  std::vector<std::vector<double>> best(degrees.size(), std::vector<double>(subsets, none));
  for (std::size_t k = 0; k < degrees.size(); ++k) {
    std::vector<double> run(subsets, none);
    for (std::size_t mask = 1; mask < subsets; ++mask) {
      micro_batch_shape shape;
      for (std::size_t i = 0; i < n; ++i)
        if (mask >> i & 1) shape += micro_batch_shape::of(batch[i]);
      execution_config c{degrees[k], cost.training().sp, {}};
      if (const auto r = DataCentricScheduler<>::recompute_type{}.choose(cost, shape, c)) {
        c.recompute = *r;
        if (cost.peak_bytes(shape, c) <= cost.memory_budget()) run[mask] = cost.seconds(shape, c);
      }
    }
    best[k][0] = 0;
    for (std::size_t mask = 1; mask < subsets; ++mask) {
      const std::size_t low = mask & (~mask + 1);
      // Every micro-batch holding the lowest sample, and the best split of the rest.
      for (std::size_t part = mask; part != 0; part = (part - 1) & mask)
        if (part & low) best[k][mask] = std::min(best[k][mask], run[part] + best[k][mask ^ part]);
    }
  }
  struct block {
    std::size_t k;
    std::int64_t first;
  };
  std::vector<block> blocks;
  for (std::size_t k = 0; k < degrees.size(); ++k)
    for (std::int64_t first = 0; first + degrees[k] <= gpus; first += degrees[k])
      blocks.push_back({k, first});
  std::vector<std::size_t> members(blocks.size(), 0);
  double optimum = none;
  const std::function<void(std::size_t)> assign = [&](std::size_t i) {
    if (i == n) {
      std::vector<double> chain(static_cast<std::size_t>(gpus), 0.0);
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        if (members[b] == 0) continue;
        const double t = best[blocks[b].k][members[b]];
        if (t == none) return;
        for (auto r = blocks[b].first; r < blocks[b].first + degrees[blocks[b].k]; ++r)
          chain[static_cast<std::size_t>(r)] += t;
      }
      optimum = std::min(optimum, *std::max_element(chain.begin(), chain.end()));
      return;
    }
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      members[b] |= std::size_t{1} << i;
      assign(i + 1);
      members[b] &= ~(std::size_t{1} << i);
    }
  };
  assign(0);
  return optimum;
}

}  // namespace

TEST_CASE("Planner.Optimum.within_2_percent_of_an_exhaustive_search_on_small_instances") {
  // Issue 10's bar: on small instances ours is within 2 % of the exact optimum on average. Four
  // H200s in one node (degrees 1, 2, 4), six samples: a heavy-tailed mix up to 64K tokens,
  // where the long ones need a degree above 1 or recomputation and the short ones can share.
  cluster_spec cluster = hgx_cluster(1, gpus::h200_sxm());
  cluster.gpus = 4;
  cluster.gpus_per_node = 4;
  const analytic_cost_model cost(models::llama3_8b(), cluster);
  const DataCentricScheduler<> ours(cost);
  double excess = 0;
  int instances = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    CAPTURE(seed);
    std::uint64_t state = seed * 0x9E3779B97F4A7C15ull;
    std::vector<sample> batch;
    for (std::uint64_t i = 0; i < 6; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double u = static_cast<double>(state >> 11) * 0x1.0p-53;
      // Pareto-like: most a few thousand tokens, some tens of thousands, a few at 64K.
      const auto tokens =
          static_cast<std::int64_t>(std::min(65536.0, 2000.0 / std::pow(1.0 - 0.999 * u, 1.1)));
      batch.push_back(text_sample(i, tokens));
    }
    const double optimum = exhaustive_optimum(cost, batch);
    REQUIRE(optimum < std::numeric_limits<double>::infinity());
    const auto plan = ours.plan(batch);
    CHECK(plan.makespan_seconds >= optimum * (1 - 1e-9));  // a plan, so never below the optimum
    CHECK(plan.lower_bound_seconds <= optimum * (1 + 1e-9));
    excess += plan.makespan_seconds / optimum - 1.0;
    ++instances;
  }
  const double mean = excess / instances;
  MESSAGE("mean excess over the exhaustive optimum: " << 100 * mean << " %");
  CHECK(mean <= 0.02);
}

TEST_CASE("Planner.LongContext.crosses_nodes_together_only_when_that_is_faster") {
  // Llama-3-8B on 1,024 H200 with ring attention, 512K context, 32M tokens per step (the
  // matrix's worst cell before): each 100K-250K sample runs in a node within the step, but
  // together those long in-node runs fill the ranks too coarsely; crossing nodes at the degree
  // of a per-GPU token cap (the verl variant's allotment) is faster. The plan may do so only
  // because it is faster than the best plan whose crossing groups are each needed alone.
  training_spec training;
  training.sp = sequence_parallel::ring;
  analytic_constants grace;  // the host cost the scenario was found under
  grace.host_seconds_per_kernel = grace_host.seconds_per_kernel;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(128, gpus::h200_sxm()), training,
                                 grace);
  const DataCentricScheduler<> ours(cost);
  balanced_placement strict_options;
  strict_options.cross_nodes_when_faster = false;
  const DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_pyramid_recompute,
                             balanced_placement>
      strict(cost, {}, {}, strict_options);
  const auto verl = verl_hybrid(cost);
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    CAPTURE(seed);
    const auto batch = split_batch(workload::long_context_corpus(), 32'000'000, 524'288, seed);
    const auto plan = ours.plan(batch);
    const auto strict_plan = strict.plan(batch);
    CHECK(plan.makespan_seconds < strict_plan.makespan_seconds);
    CHECK(plan.makespan_seconds <= verl.plan(batch).makespan_seconds);
  }
}

TEST_CASE("Planner.Packing.fills_short_samples_at_selective_recomputation_where_that_is_faster") {
  // Llama-3-70B under ZeRO-3 on 4 x 8 H100: an empty micro-step costs ~0.22 s and fewer than
  // 2,000 tokens fit one GPU without recomputation, so micro-batches of short samples are filled
  // at selective recomputation (~45 % more tokens for a memory-bound re-run): fuller
  // micro-steps, and a faster plan than the pyramid's, which can only fill them at fully
  // recomputed layers. Llama-3-8B on H200 at degree 1: the fixed cost is a smaller share, the
  // lightest setting stays.
  training_spec z3;
  z3.zero_stage = 3;
  const analytic_cost_model big(models::llama3_70b(), hgx_cluster(4, gpus::h100_sxm()), z3);
  std::vector<sample> batch;
  for (std::uint64_t i = 0; i < 2000; ++i)
    batch.push_back(text_sample(i, 300 + static_cast<std::int64_t>((i * 7919) % 1200)));
  const auto samples = canonical_order(batch);
  const std::vector<std::int32_t> labels(samples.size(), 0);
  const placement_problem<analytic_cost_model, selective_pyramid_recompute> problem{
      samples, labels, big, {}};
  const placement_input<analytic_cost_model, selective_pyramid_recompute> context(problem);
  CHECK(context.packing_setting(0).lightest == recompute_setting::none());
  CHECK(context.packing_setting(0).dense == recompute_setting::selective_only());
  const auto dense = DataCentricScheduler<>(big).plan(batch);
  const auto plain =
      DataCentricScheduler<analytic_cost_model, varlen_buckets, pyramid_recompute>(big).plan(batch);
  CHECK(dense.makespan_seconds < plain.makespan_seconds);
  // Every micro-batch run at selective recomputation needs it: it does not fit without.
  int selective = 0;
  for (const auto& m : dense.micro_steps) {
    if (m.config.recompute != recompute_setting::selective_only()) continue;
    ++selective;
    micro_batch_shape shape;
    for (const auto id : m.sample_ids)
      shape += micro_batch_shape::of(batch[static_cast<std::size_t>(id)]);
    auto none = m.config;
    none.recompute = recompute_setting::none();
    CHECK(big.peak_bytes(shape, none) > big.memory_budget());
  }
  CHECK(selective > 0);

  const analytic_cost_model small(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  const placement_problem<analytic_cost_model, selective_pyramid_recompute> small_problem{
      samples, labels, small, {}};
  const placement_input<analytic_cost_model, selective_pyramid_recompute> small_context(
      small_problem);
  CHECK(small_context.packing_setting(0).dense == recompute_setting::none());
}

TEST_CASE(
    "Planner.Sharing.long_and_short_samples_share_multi_gpu_micro_batches_where_that_is_faster") {
  // Llama-3-8B on Wikipedia lengths, 32 x 8 H100, 8M tokens per step: long documents that get
  // one degree share their block's micro-batches, and short ones fill the room those leave,
  // so fewer micro-steps pay the fixed cost. Sharing only adds plans to choose from: never
  // slower than the planner without it, faster on the first batch (2.625 s against 2.646 s
  // planned), and ahead of FlexSP-like, which packs long and short documents into shared
  // groups by its own rule.
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(32, gpus::h100_sxm()));
  balanced_placement apart_options;
  apart_options.share_micro_batches = false;
  const DataCentricScheduler<> ours(cost);
  const DataCentricScheduler<analytic_cost_model, varlen_buckets,
                             DataCentricScheduler<>::recompute_type, balanced_placement>
      apart(cost, {}, {}, apart_options);
  const DataCentricScheduler<analytic_cost_model, varlen_buckets,
                             DataCentricScheduler<>::recompute_type, baselines::flexsp_like>
      flexsp(cost);
  const auto shared = [](const step_plan& p) {
    return std::count_if(p.micro_steps.begin(), p.micro_steps.end(), [](const micro_step& m) {
      return m.degree() > 1 && m.sample_ids.size() > 1;
    });
  };
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    const auto batch = split_batch(workload::wikipedia(), 8'000'000, 65'536, seed);
    const auto plan = ours.plan(batch);
    const auto apart_plan = apart.plan(batch);
    CHECK(plan.makespan_seconds <= apart_plan.makespan_seconds);
    CHECK(plan.makespan_seconds <= flexsp.plan(batch).makespan_seconds);
    if (apart_plan.policy == "balanced")
      CHECK(shared(apart_plan) == 0);  // a static fallback shares
    if (seed == 1) {
      CHECK(plan.makespan_seconds < apart_plan.makespan_seconds);
      CHECK(shared(plan) > 0);
    }
  }
}

TEST_CASE("Planner.Sharing.a_very_long_sample_keeps_its_degree_while_the_others_share_fewer_gpus") {
  // Llama-3-8B at 512K with ring on 32 H200, 1M tokens per step; the second batch holds a
  // 524,288-token document that needs all 32 GPUs and a tail of 10K-150K ones. The fastest plan
  // the planner's model knows runs the long one at 32 and packs the others into two shared
  // groups of 16, as FlexSP's groups do: with every long sample at one shared degree the long
  // one would run at 16 under recomputation, and with one micro-step each the tail fills the
  // ranks coarsely (18.996 s planned before the shared degree around the best allotment,
  // FlexSP-like 18.373 s, ours 18.433 s: level within 0.5 %, not ahead). Since the ring's
  // transfers hide behind the whole micro-step's attention (2026-12-03), a few short documents
  // ride in the long one's micro-step, their transfers hidden behind its attention (18.451 s).
  training_spec training;
  training.sp = sequence_parallel::ring;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()), training);
  const DataCentricScheduler<> ours(cost);
  const auto flexsp = scheduler_with<baselines::flexsp_like>(cost);
  const auto batch = split_batch(workload::long_context_corpus(), 1'000'000, 524'288, 2);
  REQUIRE(
      std::any_of(batch.begin(), batch.end(), [](const sample& s) { return s.tokens == 524'288; }));
  const auto plan = ours.plan(batch);
  CHECK(plan.makespan_seconds <= 1.005 * flexsp.plan(batch).makespan_seconds);
  // The long document at 32; some group of 16 runs several samples in one micro-step.
  const auto long_id = std::find_if(batch.begin(), batch.end(), [](const sample& s) {
                         return s.tokens == 524'288;
                       })->id;
  const auto long_at_32 =
      std::any_of(plan.micro_steps.begin(), plan.micro_steps.end(), [&](const micro_step& m) {
        return m.degree() == 32 &&
               std::find(m.sample_ids.begin(), m.sample_ids.end(), long_id) != m.sample_ids.end();
      });
  const auto shared_at_16 = std::count_if(
      plan.micro_steps.begin(), plan.micro_steps.end(),
      [](const micro_step& m) { return m.degree() == 16 && m.sample_ids.size() > 1; });
  CHECK(long_at_32);
  CHECK(shared_at_16 >= 2);
  balanced_placement without_crossings;
  without_crossings.cross_nodes_when_faster = false;  // the groups of 16 cross nodes
  const auto strict = scheduler_with(cost, without_crossings);
  CHECK(plan.makespan_seconds < strict.plan(batch).makespan_seconds);
}

TEST_CASE(
    "Planner.Sharing.short_samples_fill_multi_gpu_micro_batches_past_longer_ones_that_do_not_fit") {
  // Qwen2.5-72B under ZeRO-3 on 32 H100, long SFT at 128K: a degree-2 micro-batch of a
  // 3,210-token document has room for some 1,000 tokens more, but the longest single-GPU
  // samples (about 2,000 tokens) do not fit beside it. The fill searches on past such misses to
  // the first shorter sample that fits (kept: it saves GPU-seconds here, each short sample would
  // pay a micro-step of its own), so the micro-batches fill up as Megatron's dynamic CP fills its
  // 2,048-token-per-rank cap, and fewer micro-steps pay ZeRO-3's parameter gathers. Both plans
  // are in lockstep (ZeRO-3), where Megatron's equal-cap micro-batches make even rounds and ours,
  // balanced per rank, are dealt into rounds afterwards: 25.43 s against 24.90 s on this batch
  // (docs/planner.md, "Lockstep"). Guarded here so that the gap does not grow.
  training_spec training;
  training.zero_stage = 3;
  training.sp = sequence_parallel::hybrid;
  const analytic_cost_model cost(models::qwen25_72b(), hgx_cluster(4, gpus::h100_sxm()), training);
  const DataCentricScheduler<> ours(cost);
  const auto megatron = scheduler_with<baselines::megatron_dynamic_cp>(cost);
  const auto batch = split_batch(workload::llama3_long_sft(), 1'000'000, 131'072, 2);
  const auto plan = ours.plan(batch);
  CHECK(plan.makespan_seconds <= 1.025 * megatron.plan(batch).makespan_seconds);
  // Degree-2 micro-batches whose longest document is joined by a short (single-GPU) one.
  const auto filled =
      std::count_if(plan.micro_steps.begin(), plan.micro_steps.end(), [&](const micro_step& m) {
        if (m.degree() != 2 || m.sample_ids.size() < 2) return false;
        return std::any_of(m.sample_ids.begin(), m.sample_ids.end(), [&](std::uint64_t id) {
          return batch[static_cast<std::size_t>(id)].tokens <= 2'048;
        });
      });
  CHECK(filled >= 8);
}

namespace {
// A millisecond per token at any degree (a larger one only spends more GPUs), no fixed cost,
// and room for one sample per micro-batch (60 bytes a sample plus 0.005 a token, 100 in all):
// every sample runs alone on one GPU, so a plan is a partition of the lengths and the best one
// is known.
struct one_sample_per_gpu_cost {
  analytic_cost_model inner;
  double seconds(const micro_batch_shape& s, const execution_config&) const {
    return 1e-3 * static_cast<double>(s.tokens);
  }
  double peak_bytes(const micro_batch_shape& s, const execution_config&) const {
    return 60.0 * static_cast<double>(s.samples) + 0.005 * static_cast<double>(s.tokens);
  }
  double memory_budget() const { return 100.0; }
  const model_spec& model() const { return inner.model(); }
  const cluster_spec& cluster() const { return inner.cluster(); }
  const training_spec& training() const { return inner.training(); }
};
static_assert(cost_model<one_sample_per_gpu_cost>);

cluster_spec gpus_in_one_node(std::int64_t gpus) {
  cluster_spec cluster = hgx_cluster(1, gpus::h200_sxm());
  cluster.gpus = gpus;
  cluster.gpus_per_node = gpus;
  return cluster;
}
}  // namespace

TEST_CASE("Planner.LocalSearch.trades_a_long_sample_for_a_shorter_one_where_no_single_move_helps") {
  // Both first assignments (longest first; by bucket up to the average) end with a rank that
  // holds only samples longer than its lead over the earliest rank, so no sample can move;
  // trading one for a shorter sample of an earlier rank reaches the best partition.
  // - 2 GPUs, 4 4 5 5 5 7 (thousand tokens): ranks {7 5 4} and {5 5 4} end at 16 and 14 s;
  //   trading a 5 for a 4 gives 15 and 15.
  // - 3 GPUs, 4 4 4 6 7 7 8: longest first gives {8 4} {7 6} {7 4 4}, ending at 12, 13 and
  //   15 s; no trade with the earliest rank helps, so it is made with the second earliest (a 7
  //   for its 6: 14 s everywhere).
  struct instance {
    std::int64_t gpus;
    std::vector<std::int64_t> thousands;
    double best_seconds;
  };
  for (const auto& [gpus, thousands, best_seconds] :
       {instance{2, {4, 4, 5, 5, 5, 7}, 15.0}, instance{3, {4, 4, 4, 6, 7, 7, 8}, 14.0}}) {
    const auto shown_gpus = gpus;  // a lambda cannot capture a structured binding before Clang 16
    CAPTURE(shown_gpus);
    const DataCentricScheduler<one_sample_per_gpu_cost> ours(
        one_sample_per_gpu_cost{analytic_cost_model(models::llama3_8b(), gpus_in_one_node(gpus))});
    std::vector<sample> batch;
    for (const auto k : thousands) batch.push_back(text_sample(batch.size(), 1000 * k));
    const auto plan = ours.plan(batch);
    CHECK(plan.micro_steps.size() == batch.size());
    CHECK(plan.makespan_seconds == doctest::Approx(best_seconds).epsilon(1e-12));
  }
}

TEST_CASE("Planner.StaticSearch.the_group_floor_never_skips_a_layout_that_beats_the_bound") {
  // The static search skips a layout once a floor reaches the makespan to beat: the work spread
  // over its groups plus one micro-step's fixed part (static_may_beat), then, assigned, a
  // group's samples' marginal times plus that fixed part. A floor must stay below what the
  // layout takes: each degree's layout, built in full, still passes both when the bound to beat
  // is its own makespan (plus a hair). Text under ZeRO-1 and ZeRO-3, and video.
  training_spec z3;
  z3.zero_stage = 3;
  const std::vector<std::pair<analytic_cost_model, std::vector<sample>>> cases{
      {analytic_cost_model(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm())),
       split_batch(workload::wikipedia(), 1'000'000, 65'536, 3)},
      {analytic_cost_model(models::llama3_70b(), hgx_cluster(4, gpus::h100_sxm()), z3),
       split_batch(workload::wikipedia(), 1'000'000, 65'536, 4)},
      {analytic_cost_model(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm())),
       workload::draw_batch(workload::opensora_video_mix::videosys_benchmark(), 4'000'000, 5)}};
  int built = 0;
  for (const auto& [cost, batch] : cases) {
    const auto model_name =
        cost.model().name;  // a lambda cannot capture a structured binding before Clang 16
    CAPTURE(model_name);
    const auto samples = canonical_order(batch);
    const auto labels = varlen_buckets{}.assign(samples);
    const placement_problem<analytic_cost_model, selective_pyramid_recompute> problem{
        samples, labels, cost, {}};
    const placement_input<analytic_cost_model, selective_pyramid_recompute> ctx(problem);
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      CAPTURE(ctx.degree(k));
      const auto full = dcp::detail::static_layout(ctx, k);
      if (!full) continue;
      ++built;
      const double beat = full->makespan_seconds * (1 + 1e-12);
      CHECK(dcp::detail::static_may_beat(ctx, k, beat));
      CHECK(dcp::detail::static_layout(ctx, k, beat).has_value());
    }
  }
  CHECK(built >= 12);
}
