// The peers' pipeline policies (dcp/baselines/pipeline_peers.hpp): each keeps the properties its
// source defines, every plan covers the grid and runs on the executor, and no plan beats the
// pipeline lower bounds.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/baselines/pipeline_peers.hpp"
#include "dcp/pipeline.hpp"

#include "../support/errors.hpp"
#include "../support/pipelines.hpp"

using namespace dcp;
using dcp::test::grid_model;
using dcp::test::long_tail_batch;

namespace {

std::vector<std::uint64_t> sorted_ids(std::span<const sample> batch) {
  std::vector<std::uint64_t> ids;
  for (const auto& s : batch) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::uint64_t> planned_ids(const baselines::pipeline_peer_plan& plan) {
  std::vector<std::uint64_t> ids;
  for (const auto& mb : plan.micro_batches)
    ids.insert(ids.end(), mb.sample_ids.begin(), mb.sample_ids.end());
  return ids;
}

/// What every peer's plan promises: aligned blocks, one setting per chunk, every (pipeline, slot)
/// once, a timeline, and both lower bounds at or below its makespan. Returns the makespan.
double check_peer_plan(const pipeline_cost_model& cost, const baselines::pipeline_peer_plan& plan,
                       std::span<const sample> batch) {
  CAPTURE(plan.name);
  for (const auto& mb : plan.micro_batches) {
    CHECK(mb.degree >= 1);
    CHECK(mb.first_pipeline % mb.degree == 0);
    CHECK(mb.slot >= 0);
    CHECK(mb.slot < plan.slots);
    CHECK(mb.recompute.size() == static_cast<std::size_t>(cost.grid().chunks()));
  }
  const auto instance = pipeline_instance_of(cost, plan.micro_batches, plan.slots);
  CHECK(instance.cells().size() == static_cast<std::size_t>(cost.pipelines() * plan.slots));
  const auto timeline = simulate_pipeline(instance);
  CHECK(timeline.makespan > 0);
  CHECK(pipeline_lower_bound(instance) <= timeline.makespan * (1 + 1e-12));
  const pipeline_planner planner(cost);
  CHECK(planner.lower_bound(batch) <= timeline.makespan * (1 + 1e-12));
  return timeline.makespan;
}

}  // namespace

TEST_CASE("PipelinePeers.Megatron4D.windows_hold_at_most_S_in_arrival_order") {
  const auto cost = grid_model(16, {8, 4, 1});  // D = 4
  for (const std::uint64_t seed : {1u, 2u}) {
    const auto batch = long_tail_batch(seed, 1 << 20);
    const auto layout = baselines::megatron_4d_sized(cost, batch);
    CAPTURE(seed);
    const auto plan = baselines::megatron_4d(cost, batch, layout);
    // Windows in dealing order (slot-major, then group) read the batch in arrival order.
    auto dealt = plan.micro_batches;
    std::stable_sort(dealt.begin(), dealt.end(), [](const auto& a, const auto& b) {
      return a.slot != b.slot ? a.slot < b.slot : a.first_pipeline < b.first_pipeline;
    });
    std::vector<std::uint64_t> in_order;
    for (const auto& mb : dealt) {
      CHECK(mb.degree == layout.context_parallel);
      CHECK(mb.shape.tokens <= layout.window_tokens);
      for (const auto& r : mb.recompute)
        CHECK(r == recompute_setting::full(cost.layers_per_chunk()));
      in_order.insert(in_order.end(), mb.sample_ids.begin(), mb.sample_ids.end());
    }
    std::vector<std::uint64_t> arrival;
    for (const auto& s : batch) arrival.push_back(s.id);
    CHECK(in_order == arrival);
    // Next-fit: a window closes only when the next document would not fit.
    for (std::size_t k = 0; k + 1 < dealt.size(); ++k)
      if (!dealt[k + 1].sample_ids.empty()) {
        const auto next = std::find_if(batch.begin(), batch.end(), [&](const sample& s) {
          return s.id == dealt[k + 1].sample_ids.front();
        });
        CHECK(dealt[k].shape.tokens + next->tokens > layout.window_tokens);
      }
    check_peer_plan(cost, plan, batch);
  }
}

TEST_CASE("PipelinePeers.Megatron4D.sizes_for_the_longest_and_refuses_longer") {
  const auto cost = grid_model(16, {8, 4, 1});
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 64; ++id) batch.push_back(text_sample(id, 4096));
  batch.push_back(text_sample(99, 131072));
  const auto layout = baselines::megatron_4d_sized(cost, batch);
  CHECK(layout.window_tokens >= 131072);
  CHECK((layout.context_parallel == 1 ||
         layout.context_parallel / 2 *
                 baselines::pipeline_tokens_cap(cost,
                                                recompute_setting::full(cost.layers_per_chunk()),
                                                layout.context_parallel / 2) <
             131072));
  const auto sized = baselines::megatron_4d(cost, batch, layout);
  const auto best = baselines::megatron_4d_best_static(cost, batch);
  CHECK(check_peer_plan(cost, best, batch) <= check_peer_plan(cost, sized, batch) * (1 + 1e-12));
  const auto message = test::message_of([&] {
    (void)baselines::megatron_4d(cost, batch, {layout.context_parallel, 65536});
  });
  CAPTURE(message);
  CHECK(test::contains(message, "sample 99"));
  CHECK(test::contains(message, "131072 tokens"));
  CHECK_THROWS_AS((void)baselines::megatron_4d(cost, batch, {3, 65536}), invalid_spec);
}

TEST_CASE("PipelinePeers.Megatron4D.pads_the_last_round_and_interleaving_to_whole_groups") {
  // 5 windows on 4 CP groups: 2 slots, the second round with 3 empty micro-batches; with v = 2
  // Megatron needs m to be a multiple of p = 4.
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 5; ++id) batch.push_back(text_sample(id, 8000));
  const auto plain = grid_model(16, {8, 4, 1});
  const auto plan = baselines::megatron_4d(plain, batch, {1, 10000});
  CHECK(plan.slots == 2);
  CHECK(std::count_if(plan.micro_batches.begin(), plan.micro_batches.end(),
                      [](const auto& mb) { return mb.sample_ids.empty(); }) == 3);
  check_peer_plan(plain, plan, batch);
  const auto interleaved = grid_model(16, {8, 4, 2});
  const auto padded = baselines::megatron_4d(interleaved, batch, {1, 10000});
  CHECK(padded.slots == 4);
  check_peer_plan(interleaved, padded, batch);
}

TEST_CASE("PipelinePeers.MegatronPacking.group_count_is_a_multiple_of_dp") {
  const auto batch = long_tail_batch(3, 1 << 20);
  for (const model_parallel_grid grid : {model_parallel_grid{8, 4, 1}, {8, 4, 2}}) {
    const auto cost = grid_model(16, grid);
    const std::int64_t d = cost.pipelines();
    for (const std::int64_t cp : {1, 2}) {
      const baselines::megatron_packing_scheduler scheduler{cp, 0};
      const auto plan = scheduler.plan(cost, batch);
      CAPTURE(grid);
      CAPTURE(cp);
      const std::int64_t dp = d / cp;
      const auto groups = static_cast<std::int64_t>(plan.micro_batches.size());
      CHECK(groups % dp == 0);
      CHECK(plan.slots == groups / dp);
      if (grid.virtual_stages > 1) CHECK(plan.slots % grid.pipeline == 0);
      auto ids = planned_ids(plan);
      std::sort(ids.begin(), ids.end());
      CHECK(ids == sorted_ids(batch));
      // Megatron's rule: max_seqlen_per_dp_cp_rank = --seq-length (the longest) / CP.
      std::int64_t longest = 0;
      for (const auto& s : batch) longest = std::max(longest, s.tokens);
      for (const auto& mb : plan.micro_batches) {
        CHECK(mb.degree == cp);
        CHECK(mb.shape.tokens <= (longest + cp - 1) / cp * cp);
      }
      check_peer_plan(cost, plan, batch);
    }
  }
}

TEST_CASE("PipelinePeers.MegatronPacking.split_moves_tail_samples_as_upstream") {
  // Groups {0,1,2} {3} {4,5}: to reach 6 groups, 5 then 4 leave the last group, which is then
  // single, so 2 leaves the first... which upstream refuses: it never splits the first group.
  std::vector<std::vector<std::size_t>> groups{{0, 1, 2}, {3}, {4, 5}};
  auto four = groups;
  baselines::megatron_packing_scheduler::split_to_multiple(four, 4);
  CHECK(four == std::vector<std::vector<std::size_t>>{{0, 1, 2}, {3}, {4}, {5}});
  auto six = groups;
  CHECK_THROWS_AS(baselines::megatron_packing_scheduler::split_to_multiple(six, 6), invalid_spec);
}

TEST_CASE("PipelinePeers.WlbLlm.delays_outliers_and_trains_every_sample_once") {
  const auto cost = grid_model(16, {8, 4, 1});
  baselines::wlb_llm_pipeline wlb(cost, {131072});
  std::vector<std::uint64_t> drawn;
  std::map<std::uint64_t, std::int64_t> tokens_of;
  std::map<std::uint64_t, int> step_drawn;
  std::map<std::uint64_t, int> step_trained;
  int step = 0;
  bool delayed = false;
  // The bounds hold for what a step trains: its own documents less those it delays, plus the
  // ones it releases or carries in.
  const auto record = [&](const baselines::pipeline_peer_plan& plan) {
    std::vector<sample> trained_now;
    for (const auto& mb : plan.micro_batches) {
      CHECK(mb.shape.tokens <= wlb.max_tokens());
      CHECK(mb.degree == wlb.degree());
      for (const auto id : mb.sample_ids) {
        CHECK(step_trained.count(id) == 0);
        step_trained[id] = step;
        trained_now.push_back(text_sample(id, tokens_of[id]));
      }
    }
    CHECK(static_cast<std::int64_t>(plan.micro_batches.size()) == wlb.micro_batches());
    check_peer_plan(cost, plan, trained_now);
  };
  for (; step < 8; ++step) {
    const auto batch = long_tail_batch(100 + static_cast<std::uint64_t>(step), 1 << 20,
                                       static_cast<std::uint64_t>(step) * 100000);
    for (const auto& s : batch) {
      drawn.push_back(s.id);
      tokens_of[s.id] = s.tokens;
      step_drawn[s.id] = step;
    }
    const auto out = wlb.plan_step(batch);
    record(out.plan);
    delayed = delayed || !out.waiting.empty();
    for (const auto id : out.waiting) CHECK(step_trained.count(id) == 0);
  }
  CHECK(wlb.max_tokens() <= 2 * wlb.context_tokens());
  CHECK(wlb.thresholds() == baselines::wlb_default_thresholds(131072));
  CHECK(delayed);
  const auto drains = wlb.flush();
  CHECK(!drains.empty());
  for (const auto& plan : drains) {
    record(plan);
    ++step;
  }
  CHECK(wlb.flush().empty());
  // Every drawn sample trained exactly once (record refuses a second time), and only outliers
  // (or documents carried over) wait: some outlier trained after its step, none trained early.
  std::vector<std::uint64_t> trained;
  for (const auto& [id, at] : step_trained) trained.push_back(id);
  std::sort(drawn.begin(), drawn.end());
  CHECK(trained == drawn);
  int outliers_delayed = 0;
  for (const auto& [id, at] : step_trained) {
    CHECK(at >= step_drawn[id]);
    if (at > step_drawn[id] && tokens_of[id] >= wlb.thresholds().front()) ++outliers_delayed;
  }
  CHECK(outliers_delayed > 0);
}

TEST_CASE("PipelinePeers.WlbLlm.a_full_level_releases_one_outlier_per_micro_batch") {
  // N = 4 micro-batches (one round of 4 groups); 4 outliers of 100K tokens with short documents:
  // held over the first steps, released together, one into each micro-batch.
  const auto cost = grid_model(16, {8, 4, 1});
  baselines::wlb_llm_pipeline wlb(cost, {131072, 0, 0, 4});
  std::vector<int> released_in;
  for (std::uint64_t step = 0; step < 4; ++step) {
    std::vector<sample> batch;
    for (std::uint64_t k = 0; k < 32; ++k) batch.push_back(text_sample(step * 1000 + k, 2048));
    batch.push_back(text_sample(step * 1000 + 999, 100000));
    const auto out = wlb.plan_step(batch);
    int outliers = 0;
    for (const auto& mb : out.plan.micro_batches) {
      int here = 0;
      for (const auto id : mb.sample_ids) here += id % 1000 == 999 ? 1 : 0;
      CHECK(here <= 1);
      outliers += here;
    }
    released_in.push_back(outliers);
  }
  CHECK(released_in == std::vector<int>{0, 0, 0, 4});
}

TEST_CASE("PipelinePeers.DynaPipe.micro_batches_are_consecutive_ranges_within_memory") {
  const auto cost = grid_model(16, {8, 4, 1});
  const baselines::dynapipe_pipeline dynapipe;
  for (const std::uint64_t seed : {1u, 4u}) {
    const auto batch = long_tail_batch(seed, 1 << 20);
    const auto plan = dynapipe.plan(cost, batch);
    CAPTURE(seed);
    const auto order = baselines::dynapipe_pipeline::sorted_order(batch);
    std::map<std::uint64_t, std::size_t> position;
    for (std::size_t k = 0; k < order.size(); ++k) position[batch[order[k]].id] = k;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const auto& mb : plan.micro_batches) {
      CHECK(mb.degree == 1);
      if (mb.sample_ids.empty()) continue;
      // The samples of a micro-batch are a consecutive range of the longest-first order, padded.
      std::vector<std::size_t> at;
      for (const auto id : mb.sample_ids) at.push_back(position.at(id));
      std::sort(at.begin(), at.end());
      CHECK(at.back() - at.front() + 1 == at.size());
      ranges.emplace_back(at.front(), at.back() + 1);
      const auto padded =
          baselines::dynapipe_pipeline::padded_shape(batch, order, {at.front(), at.back() + 1});
      CHECK(mb.shape == padded);
      CHECK(mb.shape.tokens % 8 == 0);
    }
    // The ranges tile the order: every sample exactly once.
    std::sort(ranges.begin(), ranges.end());
    std::size_t next = 0;
    for (const auto& [begin, end] : ranges) {
      CHECK(begin == next);
      next = end;
    }
    CHECK(next == batch.size());
    const auto timeline = baselines::simulate_peer(cost, plan);
    for (const double peak : timeline.peak_bytes) CHECK(peak <= cost.memory_budget());
    check_peer_plan(cost, plan, batch);
  }
  CHECK_THROWS_AS((void)dynapipe.plan(grid_model(16, {8, 4, 2}), long_tail_batch(1, 1 << 18)),
                  invalid_spec);
}

TEST_CASE("PipelinePeers.DynaPipe.recomputes_only_when_nothing_lighter_fits") {
  // Short samples fit without recomputation; a 128K one on one pipeline needs some.
  const auto cost = grid_model(16, {8, 4, 1});
  const baselines::dynapipe_pipeline dynapipe;
  std::vector<sample> short_batch;
  for (std::uint64_t id = 0; id < 64; ++id) short_batch.push_back(text_sample(id, 1024));
  const auto light = dynapipe.plan(cost, short_batch);
  for (const auto& mb : light.micro_batches) CHECK(mb.recompute.front().is_none());
  auto long_batch = short_batch;
  long_batch.push_back(text_sample(64, 131072));
  const auto heavy = dynapipe.plan(cost, long_batch);
  for (const auto& mb : heavy.micro_batches) CHECK(!mb.recompute.front().is_none());
  check_peer_plan(cost, light, short_batch);
  check_peer_plan(cost, heavy, long_batch);
}

TEST_CASE("PipelinePeers.Dcp.not_slower_than_megatron_4d_static_on_a_long_tailed_batch") {
  // Llama-3-70B, TP 8, PP 4 on 128 H100 (D = 4 pipelines), a 1M-token long-tailed batch.
  const auto cost = grid_model(16, {8, 4, 1});
  const pipeline_planner planner(cost);
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const auto batch = long_tail_batch(seed, 1 << 20);
    const double ours = planner.plan(batch).makespan();
    const auto sized =
        baselines::megatron_4d(cost, batch, baselines::megatron_4d_sized(cost, batch));
    CAPTURE(seed);
    CHECK(ours <= baselines::simulate_peer(cost, sized).makespan);
  }
}
