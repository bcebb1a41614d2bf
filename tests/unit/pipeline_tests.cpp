// Planning inside a tensor x pipeline grid (dcp/pipeline/): Megatron-LM's rank layout and stage
// orders, the executor's timings and memory against hand-worked pipelines, the pipeline lower
// bound against every order of random micro-batches, and the planner's promises.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/pipeline.hpp"

#include "../support/errors.hpp"
#include "../support/pipelines.hpp"

using namespace dcp;
using dcp::test::grid_model;
using dcp::test::long_tail_batch;

namespace {

/// A micro-batch on pipelines [first, first + degree) at `slot`, each chunk taking f forward
/// and b backward and keeping `stored` bytes.
pipeline_work uniform_work(std::int64_t chunks, std::int64_t slot, double f, double b,
                           double stored = 0, std::int64_t first = 0, std::int64_t degree = 1) {
  pipeline_work w;
  w.first_pipeline = first;
  w.degree = degree;
  w.slot = slot;
  const auto n = static_cast<std::size_t>(chunks);
  w.forward.assign(n, f);
  w.backward.assign(n, b);
  w.stored_bytes.assign(n, stored);
  w.working_bytes.assign(n, 0.0);
  return w;
}

pipeline_instance empty_instance(std::int64_t stages, std::int64_t virtual_stages,
                                 std::int64_t pipelines, std::int64_t slots) {
  pipeline_instance in;
  in.stages = stages;
  in.virtual_stages = virtual_stages;
  in.pipelines = pipelines;
  in.slots = slots;
  in.state_bytes.assign(static_cast<std::size_t>(stages), 0.0);
  in.sync_seconds.assign(static_cast<std::size_t>(stages), 0.0);
  return in;
}

/// f throws E whose message contains every one of `parts`.
template <class E, class F>
void throws_naming(F&& f, std::initializer_list<std::string> parts) {
  std::string message = "(nothing thrown)";
  try {
    f();
  } catch (const E& e) {
    message = e.what();
  }
  for (const auto& part : parts) {
    CAPTURE(message);
    CHECK(test::contains(message, part));
  }
}

std::string order_text(const std::vector<pipeline_op>& ops) {
  std::string text;
  for (const auto& op : ops) {
    if (!text.empty()) text += ' ';
    text += (op.backward ? 'B' : 'F') + std::to_string(op.slot);
    if (op.chunk > 0) text += "." + std::to_string(op.chunk);
  }
  return text;
}

}  // namespace

TEST_CASE("Pipeline.Grid.megatron_rank_order_tp_fastest_then_pipelines_then_stages") {
  const auto cluster = hgx_cluster(8, gpus::h100_sxm());  // 64 GPUs
  const model_parallel_grid grid{8, 4, 1};
  REQUIRE(grid.pipelines(cluster) == 2);
  CHECK(grid.rank_of({3, 0, 0}, cluster) == 3);
  CHECK(grid.rank_of({0, 1, 0}, cluster) == 8);
  CHECK(grid.rank_of({0, 0, 1}, cluster) == 16);
  CHECK(grid.rank_of({7, 1, 3}, cluster) == 63);
  for (std::int64_t rank = 0; rank < cluster.gpus; ++rank)
    CHECK(grid.rank_of(grid.coordinates_of(rank, cluster), cluster) == rank);
}

TEST_CASE("Pipeline.Grid.validation_names_the_field_value_and_limit") {
  const auto cluster = hgx_cluster(4, gpus::h100_sxm());
  const auto model = models::llama3_70b();  // 80 layers, 64 heads, 8 KV heads
  CHECK_NOTHROW(model_parallel_grid{8, 4, 2}.validate(model, cluster));
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{16, 1, 1}.validate(model, cluster);
      },
      {"tensor = 16", "kv_heads = 8"});
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{3, 1, 1}.validate(model, cluster);
      },
      {"tensor = 3", "heads = 64"});
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{8, 3, 1}.validate(model, cluster);
      },
      {"pipeline x virtual_stages = 3 x 1", "layers = 80"});
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{8, 1, 2}.validate(model, cluster);
      },
      {"virtual_stages = 2", "pipeline >= 2"});
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{8, 0, 1}.validate(model, cluster);
      },
      {"pipeline = 0", ">= 1"});
  auto small = hgx_cluster(1, gpus::h100_sxm());
  throws_naming<invalid_spec>(
      [&] {
        model_parallel_grid{8, 16, 1}.validate(model, small);
      },
      {"tensor x pipeline = 128", "GPUs = 8"});
}

TEST_CASE("Pipeline.Schedule.one_f_one_b_order_is_megatrons") {
  // p = 4, m = 6: stage s runs p - s - 1 warm-up forwards.
  CHECK(order_text(stage_order(4, 1, 6, 0)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  CHECK(order_text(stage_order(4, 1, 6, 3)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: the warm-up is capped at m.
  CHECK(order_text(stage_order(4, 1, 2, 0)) == "F0 F1 B0 B1");
}

TEST_CASE("Pipeline.Schedule.interleaved_order_is_megatrons") {
  // p = 2, v = 2, m = 4, G = p = 2: forwards in groups of two micro-batches, chunk 0 then 1;
  // stage 0 warms up 2 (p - 1) + (v - 1) G = 4 chunk-forwards, stage 1 two.
  CHECK(order_text(stage_order(2, 2, 4, 0)) ==
        "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  CHECK(order_text(stage_order(2, 2, 4, 1)) ==
        "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
  throws_naming<invalid_spec>([] { (void)stage_order(4, 2, 6, 0); },
                              {"micro-batches = 6", "multiple of the stages = 4"});
}

TEST_CASE("Pipeline.Executor.uniform_one_f_one_b_takes_m_plus_p_minus_1_slots") {
  for (const std::int64_t p : {1, 2, 4}) {
    for (const std::int64_t m : {1, 3, 8}) {
      auto in = empty_instance(p, 1, 1, m);
      for (std::int64_t j = 0; j < m; ++j) in.work.push_back(uniform_work(p, j, 1.0, 2.0, 10.0));
      const auto t = simulate_pipeline(in);
      CAPTURE(p);
      CAPTURE(m);
      CHECK(t.makespan == doctest::Approx(static_cast<double>(m + p - 1) * 3.0));
      CHECK(pipeline_lower_bound(in) == doctest::Approx(t.makespan));  // tight when uniform
      // 1F1B keeps min(p - s, m) micro-batches at stage s.
      for (std::int64_t s = 0; s < p; ++s)
        CHECK(t.peak_bytes[static_cast<std::size_t>(s)] ==
              doctest::Approx(10.0 * static_cast<double>(std::min(p - s, m))));
      CHECK(t.bubble_fraction() ==
            doctest::Approx(static_cast<double>(p - 1) / static_cast<double>(m + p - 1)));
    }
  }
}

TEST_CASE("Pipeline.Executor.interleaving_shrinks_the_bubble_by_v") {
  // Equal micro-batches, the same model cut into p v chunks: the bubble is (p - 1)/(v m) of
  // the ideal time, as in Narayanan et al. (SC'21) §2.2.
  const std::int64_t p = 4;
  const std::int64_t m = 8;
  for (const std::int64_t v : {1, 2, 4}) {
    auto in = empty_instance(p, v, 1, m);
    const double chunk = 1.0 / static_cast<double>(v);
    for (std::int64_t j = 0; j < m; ++j)
      in.work.push_back(uniform_work(p * v, j, chunk, 2.0 * chunk));
    const auto t = simulate_pipeline(in);
    const double ideal = static_cast<double>(m) * 3.0;
    CAPTURE(v);
    CHECK(t.makespan - ideal ==
          doctest::Approx(static_cast<double>(p - 1) * 3.0 / static_cast<double>(v)));
    CHECK(pipeline_lower_bound(in) <= t.makespan + 1e-12);
  }
}

TEST_CASE("Pipeline.Executor.window_peak_is_the_largest_consecutive_sum") {
  // Stage 0 of 3 holds 3 consecutive micro-batches: with stored bytes 1, 5, 1, 1, 5, 5 the peak
  // window is 1 + 5 + 5 = 11, not 3 x 5.
  auto in = empty_instance(3, 1, 1, 6);
  const double bytes[] = {1, 5, 1, 1, 5, 5};
  for (std::int64_t j = 0; j < 6; ++j)
    in.work.push_back(uniform_work(3, j, 1.0, 1.0, bytes[static_cast<std::size_t>(j)]));
  const auto t = simulate_pipeline(in);
  CHECK(t.peak_bytes[0] == doctest::Approx(11.0));
  CHECK(t.peak_bytes[1] == doctest::Approx(10.0));  // two consecutive: 5 + 5
  CHECK(t.peak_bytes[2] == doctest::Approx(5.0));
}

TEST_CASE("Pipeline.Executor.a_micro_batch_spanning_pipelines_waits_for_both") {
  // Two pipelines of two stages; slot 0 spans both, slot 1 runs alone on each. Pipeline 1's
  // slot-1 micro-batch cannot start stage 0 before the shared one's forward ends there.
  auto in = empty_instance(2, 1, 2, 2);
  in.work.push_back(uniform_work(2, 0, 2.0, 2.0, 0.0, 0, 2));
  in.work.push_back(uniform_work(2, 1, 1.0, 1.0, 0.0, 0, 1));
  in.work.push_back(uniform_work(2, 1, 3.0, 3.0, 0.0, 1, 1));
  in.sync_seconds = {0.5, 0.25};
  const auto t = simulate_pipeline(in);
  // Pipeline 1: F0 [0,2] F1 [2,5] at stage 0; stage 1: F0 [2,4] B0 [4,6] F1 [6,9] B1 [9,12];
  // stage 0: B0 [6,8], B1 [12,15]; stage 0 syncs until 15.5.
  CHECK(t.pipeline_seconds == doctest::Approx(15.0));
  CHECK(t.makespan == doctest::Approx(15.5));
  CHECK(pipeline_lower_bound(in) <= t.makespan + 1e-12);
}

TEST_CASE("Pipeline.Bound.never_exceeds_the_makespan_of_any_order") {
  std::mt19937_64 rng(20261206);
  std::uniform_real_distribution<double> seconds(0.05, 3.0);
  int instances = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t p = 1 + static_cast<std::int64_t>(rng() % 4);
    const std::int64_t v = p > 1 && rng() % 2 == 0 ? 2 : 1;
    const std::int64_t d = 1 + static_cast<std::int64_t>(rng() % 2);
    const std::int64_t m = v > 1 ? p * (1 + static_cast<std::int64_t>(rng() % 3))
                                 : 1 + static_cast<std::int64_t>(rng() % 7);
    auto in = empty_instance(p, v, d, m);
    for (std::int64_t s = 0; s < p; ++s)
      in.sync_seconds[static_cast<std::size_t>(s)] = seconds(rng);
    for (std::int64_t j = 0; j < m; ++j) {
      const bool spanning = d == 2 && rng() % 3 == 0;
      for (std::int64_t r = 0; r < (spanning ? 1 : d); ++r) {
        auto w = uniform_work(p * v, j, 0, 0, 0, r, spanning ? 2 : 1);
        for (auto& f : w.forward) f = seconds(rng);
        for (auto& b : w.backward) b = seconds(rng);
        w.p2p_seconds = 0.1 * seconds(rng);
        in.work.push_back(w);
      }
    }
    const double bound = pipeline_lower_bound(in);
    // Every permutation of the slots (up to 5! orders; a random sample of larger ones).
    std::vector<std::int64_t> perm(static_cast<std::size_t>(m));
    std::iota(perm.begin(), perm.end(), 0);
    for (int k = 0; k < 120; ++k) {
      auto shuffled = in;
      for (auto& w : shuffled.work) w.slot = perm[static_cast<std::size_t>(w.slot)];
      const double makespan = simulate_pipeline(shuffled).makespan;
      CAPTURE(trial);
      REQUIRE(bound <= makespan * (1 + 1e-12));
      if (m <= 5) {
        if (!std::next_permutation(perm.begin(), perm.end())) break;
      } else {
        std::shuffle(perm.begin(), perm.end(), rng);
      }
    }
    ++instances;
  }
  CHECK(instances == 300);
}

TEST_CASE("Pipeline.Instance.bad_coverage_names_the_cell") {
  auto in = empty_instance(2, 1, 2, 1);
  in.work.push_back(uniform_work(2, 0, 1.0, 1.0));
  throws_naming<invalid_plan>([&] { (void)simulate_pipeline(in); },
                              {"pipeline 1 slot 0", "no work"});
  in.work.push_back(uniform_work(2, 0, 1.0, 1.0, 0.0, 0, 2));
  throws_naming<invalid_plan>([&] { (void)pipeline_lower_bound(in); },
                              {"pipeline 0 slot 0", "work 0 and 1"});
}

namespace {

/// Every promise a pipeline plan makes about `batch`.
void check_plan_promises(const pipeline_plan& plan, std::span<const sample> batch,
                         const pipeline_planner& planner) {
  // Every sample exactly once.
  std::vector<std::uint64_t> ids;
  for (const auto& mb : plan.micro_batches)
    ids.insert(ids.end(), mb.sample_ids.begin(), mb.sample_ids.end());
  std::sort(ids.begin(), ids.end());
  std::vector<std::uint64_t> expected;
  for (const auto& s : batch) expected.push_back(s.id);
  std::sort(expected.begin(), expected.end());
  CHECK(ids == expected);
  // One micro-batch count for every pipeline; aligned blocks; shapes agree with the samples.
  CHECK(plan.instance.cells().size() == static_cast<std::size_t>(plan.pipelines * plan.slots));
  REQUIRE(plan.micro_batches.size() == plan.instance.work.size());
  for (std::size_t k = 0; k < plan.micro_batches.size(); ++k) {
    const auto& mb = plan.micro_batches[k];
    CHECK(mb.first_pipeline % mb.degree == 0);
    CHECK(mb.slot == plan.instance.work[k].slot);
    CHECK(static_cast<double>(mb.shape.tokens) / static_cast<double>(mb.degree) <=
          planner.tokens_cap());
  }
  // Memory safe in the executor's walk of the chosen order.
  for (const double peak : plan.timeline.peak_bytes) CHECK(peak <= plan.memory_budget);
  // The bounds are bounds.
  CHECK(plan.lower_bound > 0);
  CHECK(plan.lower_bound <= plan.makespan() * (1 + 1e-12));
  CHECK(plan.order_bound <= plan.makespan() * (1 + 1e-12));
  CHECK(plan.bubble_fraction() >= 0);
  CHECK(plan.bubble_fraction() < 1);
}

}  // namespace

TEST_CASE("Pipeline.Planner.keeps_its_promises_on_long_tailed_batches") {
  struct shape {
    std::int64_t nodes;
    model_parallel_grid grid;
    model_spec model;
  };
  const auto big = models::llama3_70b();
  const auto small = models::llama3_8b();
  for (const auto& job :
       {shape{16, {8, 4, 1}, big}, shape{32, {8, 4, 1}, big}, shape{16, {8, 4, 2}, big},
        shape{4, {4, 2, 1}, small}, shape{2, {8, 2, 1}, small}, shape{8, {8, 4, 1}, small}}) {
    const auto nodes = job.nodes;
    const auto grid = job.grid;
    const pipeline_planner planner(grid_model(nodes, grid, job.model));
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      const auto batch = long_tail_batch(seed, 1 << 20);
      const auto plan = planner.plan(batch);
      CAPTURE(nodes);
      CAPTURE(grid);
      CAPTURE(seed);
      check_plan_promises(plan, batch, planner);
      if (grid.virtual_stages > 1) CHECK(plan.slots % grid.pipeline == 0);
    }
  }
}

TEST_CASE("Pipeline.Planner.spreads_a_sample_whose_path_would_set_the_step") {
  // 128 GPUs = 4 pipelines of (TP 8, PP 4); one 128K document among short ones: alone on one
  // pipeline its path through the stages outlasts everything else, so it runs over several.
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 400; ++id) batch.push_back(text_sample(id, 1024));
  batch.push_back(text_sample(400, 131072));
  const pipeline_planner planner(grid_model(16, {8, 4, 1}));
  const auto plan = planner.plan(batch);
  check_plan_promises(plan, batch, planner);
  for (const auto& mb : plan.micro_batches)
    if (std::find(mb.sample_ids.begin(), mb.sample_ids.end(), 400u) != mb.sample_ids.end())
      CHECK(mb.degree > 1);
}

TEST_CASE("Pipeline.Planner.recomputes_less_on_later_stages") {
  // Stage 0 keeps p micro-batches in flight, the last stage one: with micro-batches that need
  // recomputation at stage 0, the last stage recomputes no more, and strictly less somewhere.
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 64; ++id) batch.push_back(text_sample(id, 65536));
  const pipeline_planner planner(grid_model(8, {8, 4, 1}));
  const auto plan = planner.plan(batch);
  check_plan_promises(plan, batch, planner);
  bool less_somewhere = false;
  for (const auto& mb : plan.micro_batches) {
    const auto& first = mb.recompute.front();
    const auto& last = mb.recompute.back();
    CHECK(last.layers <= first.layers);
    less_somewhere = less_somewhere || last.layers < first.layers ||
                     (first.selective && !last.selective && last.layers == first.layers);
  }
  CHECK(less_somewhere);
}

TEST_CASE("Pipeline.Planner.a_sample_too_long_for_every_pipeline_is_named") {
  const pipeline_planner planner(grid_model(4, {8, 4, 1}));  // one pipeline
  std::vector<sample> batch{text_sample(7, 1024), text_sample(9, 8 << 20)};
  throws_naming<sample_does_not_fit>([&] { (void)planner.plan(batch); },
                                     {"sample 9", "8388608 tokens", "1 pipelines"});
}

TEST_CASE("Pipeline.Planner.one_stage_one_pipeline_matches_the_serial_sum") {
  // p = 1, D = 1: no bubbles; the makespan is the micro-batches' forward and backward summed.
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 20; ++id)
    batch.push_back(text_sample(id, 2048 + 100 * static_cast<std::int64_t>(id)));
  const pipeline_planner planner(grid_model(1, {8, 1, 1}, models::llama3_8b()));
  const auto plan = planner.plan(batch);
  check_plan_promises(plan, batch, planner);
  double sum = 0;
  for (const auto& w : plan.instance.work) sum += w.forward[0] + w.backward[0];
  CHECK(plan.makespan() == doctest::Approx(sum));
  CHECK(plan.bubble_fraction() == doctest::Approx(0.0));
}

TEST_CASE("Pipeline.Plan.each_rank_learns_its_stage_order_and_micro_batches") {
  const pipeline_planner planner(grid_model(16, {8, 4, 1}));  // D = 4
  const auto batch = long_tail_batch(5, 1 << 19);
  const auto plan = planner.plan(batch);
  const auto cluster = planner.cost().cluster();
  for (std::int64_t rank = 0; rank < cluster.gpus; ++rank) {
    const auto mine = plan.schedule_of(rank);
    CHECK(mine.at == plan.grid.coordinates_of(rank, cluster));
    CHECK(mine.ops == stage_order(4, 1, plan.slots, mine.at.stage));
    for (std::int64_t slot = 0; slot < plan.slots; ++slot) {
      const auto& mb = plan.micro_batches[mine.micro_batch_at_slot[static_cast<std::size_t>(slot)]];
      CHECK(mb.slot == slot);
      CHECK(mine.at.pipeline >= mb.first_pipeline);
      CHECK(mine.at.pipeline < mb.first_pipeline + mb.degree);
    }
  }
  throws_naming<invalid_plan>([&] { (void)plan.schedule_of(cluster.gpus); },
                              {"rank 128", "128 GPUs"});
}
