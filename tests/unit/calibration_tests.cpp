// Online calibration: calibrated<M> against the simulator's truth model set 30 % or more away
// from the analytic model, its out-of-memory tightening, and run_calibrated_step re-planning
// after an out-of-memory report on 8 in-process ranks.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/cost/calibrated.hpp"
#include "dcp/dcp.hpp"
#include "dcp/evaluation/compare.hpp"
#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/in_process.hpp"
#include "dcp/runtime/profiler.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"

#include "../support/errors.hpp"
#include "../support/promises.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

cluster_spec one_node() { return hgx_cluster(1, gpus::h200_sxm()); }

/// The simulator's truth model with slower GEMMs and attention kernels and more framework time
/// than the analytic model assumes: 30 % or more away on average (checked below).
sim::truth_model slow_truth(training_spec training = {}) {
  sim::truth_constants k;
  k.gemm_efficiency_max = 0.45;
  for (auto& v : k.fa3_forward_tflops) v *= 0.8;
  for (auto& v : k.fa3_backward_tflops) v *= 0.8;
  k.framework_seconds = 4e-3;
  return sim::truth_model(models::llama3_8b(), one_node(), training, k);
}

struct micro_batch {
  micro_batch_shape shape;
  execution_config config;
};

/// Micro-batches of 1-24 Wikipedia-length samples at degrees 1-8 with every kind of recompute
/// setting, kept only where they fit in the truth's memory (as on a real GPU).
std::vector<micro_batch> draw_micro_batches(const sim::truth_model& truth, std::uint64_t seed,
                                            std::size_t n) {
  workload::rng random(seed);
  const auto drawn = workload::draw_samples(workload::wikipedia(), 4000, seed);
  const auto pool = workload::split_to_context(drawn, 131'072).samples;
  const auto layers = truth.model().layers;
  std::vector<micro_batch> out;
  while (out.size() < n) {
    execution_config c;
    c.degree = std::int64_t{1} << (random() % 4);
    switch (random() % 4) {
      case 0:
        c.recompute = recompute_setting::none();
        break;
      case 1:
        c.recompute = recompute_setting::full(layers);
        break;
      case 2:
        c.recompute = recompute_setting::partial(
            1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(layers)));
        break;
      default:
        c.recompute = recompute_setting::selective_only();
        break;
    }
    micro_batch_shape s;
    const auto count = 1 + random() % 24;
    for (std::uint64_t i = 0; i < count; ++i)
      s += micro_batch_shape::of(pool[random() % pool.size()]);
    if (truth.peak_bytes(s, c) > truth.capacity_bytes()) continue;
    out.push_back({s, c});
  }
  return out;
}

/// What a framework would report: the truth's time with +-2 % measurement noise, every 17th a
/// straggler 1.8x slower, and the truth's peak.
std::vector<observation> measure(const sim::truth_model& truth,
                                 const std::vector<micro_batch>& runs, std::uint64_t seed) {
  workload::rng noise(seed);
  std::vector<observation> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [s, c] = runs[i];
    double seconds = truth.seconds(s, c) * (1.0 + 0.02 * (2.0 * noise.uniform() - 1.0));
    if (i % 17 == 5) seconds *= 1.8;
    out.push_back({s, c, {seconds, truth.peak_bytes(s, c), false}});
  }
  return out;
}

template <class M>
std::vector<double> relative_errors(const M& model, const sim::truth_model& truth,
                                    const std::vector<micro_batch>& runs) {
  std::vector<double> out;
  for (const auto& [s, c] : runs)
    out.push_back(std::abs(model.seconds(s, c) / truth.seconds(s, c) - 1.0));
  return out;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}
double largest(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("Calibration.analytic_terms_add_up_to_the_model") {
  const analytic_cost_model model(models::llama3_8b(), hgx_cluster(2, gpus::h200_sxm()));
  const auto runs = draw_micro_batches(slow_truth(), 5, 100);
  for (const auto sp :
       {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    for (const auto& run : runs) {
      const auto& s = run.shape;
      auto c = run.config;
      c.sp = sp;
      CAPTURE(s);
      CAPTURE(c);
      const auto t = model.time_terms(s, c);
      const auto m = model.marginal_time_terms(s, c);
      double seconds = 0, marginal = 0;
      for (std::size_t k = 0; k < t.size(); ++k) {
        seconds += analytic_cost_model::time_term_priors[k] * t[k];
        marginal += analytic_cost_model::time_term_priors[k] * m[k];
      }
      CHECK(seconds == doctest::Approx(model.device_seconds(s, c)).epsilon(1e-12));
      CHECK(std::max(seconds, model.host_seconds(c)) ==
            doctest::Approx(model.seconds(s, c)).epsilon(1e-12));
      CHECK(std::max(0.0, marginal) ==
            doctest::Approx(model.marginal_seconds(s, c)).epsilon(1e-12));
      const auto bytes = model.memory_terms(s, c);
      CHECK(bytes[0] + bytes[1] == model.peak_bytes(s, c));
    }
  }
}

TEST_CASE("Calibration.without_observations_it_is_the_base_model") {
  const analytic_cost_model base(models::llama3_8b(), one_node());
  const calibrated<analytic_cost_model> model(base);
  for (const auto& [s, c] : draw_micro_batches(slow_truth(), 9, 50)) {
    CHECK(model.seconds(s, c) == doctest::Approx(base.seconds(s, c)).epsilon(1e-12));
    CHECK(model.marginal_seconds(s, c) ==
          doctest::Approx(base.marginal_seconds(s, c)).epsilon(1e-12));
    CHECK(model.peak_bytes(s, c) == base.peak_bytes(s, c));
  }
  CHECK(model.memory_budget() == base.memory_budget());
  // The same plan, bit for bit.
  const auto batch = workload::draw_batch(workload::wikipedia(), 200'000, 3);
  const auto a = DataCentricScheduler<>(base).plan(batch);
  const auto b = DataCentricScheduler<calibrated<analytic_cost_model>>(model).plan(batch);
  CHECK(a.fingerprint == b.fingerprint);
}

TEST_CASE("Calibration.fifty_observations_bring_a_truth_30_percent_away_within_5_percent") {
  const auto truth = slow_truth();
  const analytic_cost_model base(models::llama3_8b(), one_node());
  const auto held_out = draw_micro_batches(truth, 7, 400);
  const auto before = relative_errors(base, truth, held_out);
  MESSAGE("analytic vs truth before calibration: mean ", mean(before), ", max ", largest(before));
  REQUIRE(mean(before) >= 0.30);  // the premise: a truth 30 % away

  calibrated<analytic_cost_model> model(base);
  const auto runs = draw_micro_batches(truth, 11, 50);
  model.observe(measure(truth, runs, 3));  // 50 observations, 3 of them stragglers
  const auto after = relative_errors(model, truth, held_out);
  const auto report = model.report();
  MESSAGE("after 50 observations: mean ", mean(after), ", max ", largest(after), "; fit rms ",
          report.time_rms_error, ", worst row ", report.time_max_error);
  CHECK(largest(after) <= 0.05);
  CHECK(mean(after) <= 0.01);
  CHECK(report.observations == 50);
  CHECK(report.time_max_error >= 0.4);  // the stragglers are not fitted: they were down-weighted

  // Memory: every held-out true peak is covered, and by no more than a few per cent.
  for (const auto& [s, c] : held_out) {
    CHECK(model.peak_bytes(s, c) >= truth.peak_bytes(s, c));
    CHECK(model.peak_bytes(s, c) <= 1.05 * truth.peak_bytes(s, c));
  }
}

TEST_CASE("Calibration.plans_made_afterwards_are_faster_under_the_truth") {
  const auto truth = slow_truth();
  const analytic_cost_model base(models::llama3_8b(), one_node());
  calibrated<analytic_cost_model> model(base);
  model.observe(measure(truth, draw_micro_batches(truth, 11, 50), 3));

  const DataCentricScheduler<> before(base);
  const DataCentricScheduler<calibrated<analytic_cost_model>> after(model);
  sim::sim_options options;
  options.noise_sigma = 0;
  options.record_timelines = false;
  double total_before = 0, total_after = 0;
  int better = 0;
  const int batches = 8;
  for (int b = 0; b < batches; ++b) {
    const auto drawn =
        workload::draw_batch(workload::wikipedia(), 250'000, 100 + static_cast<std::uint64_t>(b));
    const auto batch = workload::split_to_context(drawn, 131'072).samples;
    const auto plan_before = before.plan(batch);
    const auto plan_after = after.plan(batch);
    dcp::test::check_promises(plan_after, batch, model, 0.0);
    const auto t_before = sim::simulate(plan_before, batch, truth, options);
    const auto t_after = sim::simulate(plan_after, batch, truth, options);
    CHECK(t_after.oom_events == 0);
    total_before += t_before.makespan_seconds;
    total_after += t_after.makespan_seconds;
    better += t_after.makespan_seconds < t_before.makespan_seconds ? 1 : 0;
    // The calibrated plan's own prediction is close to what the truth says; the analytic one's
    // is not.
    CHECK(plan_after.makespan_seconds == doctest::Approx(t_after.makespan_seconds).epsilon(0.05));
  }
  MESSAGE("makespan under the truth, ", batches, " batches: analytic plans ", total_before,
          " s, calibrated plans ", total_after, " s (", total_before / total_after,
          "x); better on ", better, " of ", batches);
  CHECK(total_after < total_before);
  CHECK(better >= batches - 1);
}

TEST_CASE("Calibration.measured_peaks_replace_the_fragmentation_headroom") {
  const auto truth = slow_truth();
  const analytic_cost_model base(models::llama3_8b(), one_node());
  const double capacity = static_cast<double>(one_node().gpu.memory_bytes);
  calibrated<analytic_cost_model> model(base);
  auto observations = measure(truth, draw_micro_batches(truth, 11, 20), 3);
  for (auto& o : observations) o.report.peak_bytes = 0;  // time only: the budget stays
  model.observe(observations);
  CHECK(model.memory_budget() == base.memory_budget());
  observations = measure(truth, draw_micro_batches(truth, 11, 20), 3);
  model.observe(observations);
  CHECK(model.memory_budget() == doctest::Approx(0.95 * capacity));
  // The training spec's absolute headroom still applies.
  training_spec big;
  big.headroom_bytes = 20.0 * gib;
  calibrated<analytic_cost_model> kept(analytic_cost_model(models::llama3_8b(), one_node(), big));
  kept.observe(observations);
  CHECK(kept.memory_budget() == doctest::Approx(capacity - 20.0 * gib));
}

TEST_CASE("Calibration.out_of_memory_tightens_that_configuration") {
  const auto truth = slow_truth();
  const analytic_cost_model base(models::llama3_8b(), one_node());
  calibrated<analytic_cost_model> model(base);
  const execution_config at2{2, sequence_parallel::ulysses, recompute_setting::none()};
  const execution_config at4{4, sequence_parallel::ulysses, recompute_setting::none()};
  // The longest sample the model thinks fits on 2 GPUs without recompute.
  std::int64_t tokens = 1024;
  while (model.peak_bytes(micro_batch_shape::of(text_sample(1, tokens + 1024)), at2) <=
         model.memory_budget())
    tokens += 1024;
  const micro_batch_shape failed = micro_batch_shape::of(text_sample(1, tokens));
  const double before4 = model.peak_bytes(failed, at4);

  model.observe(observation{failed, at2, {0.0, 0.0, true}});
  CHECK(model.report().out_of_memory == 1);
  CHECK(model.peak_bytes(failed, at2) >=
        1.05 * static_cast<double>(one_node().gpu.memory_bytes) * 0.999);
  CHECK(model.tightening_of(at2) > 1.0);
  CHECK(model.peak_bytes(failed, at4) == before4);  // other degrees keep their memory
  // More recomputation still never needs more memory at the tightened degree.
  execution_config full = at2;
  full.recompute = recompute_setting::full(base.model().layers);
  CHECK(model.peak_bytes(failed, full) <= model.peak_bytes(failed, at2));
  CHECK(model.seconds(failed, at2) ==
        doctest::Approx(base.seconds(failed, at2)).epsilon(1e-12));  // no time measured

  // A plan made afterwards never runs that sample on 2 GPUs without recompute.
  const std::vector<sample> batch{text_sample(1, tokens), text_sample(2, 1'000),
                                  text_sample(3, 2'000)};
  const auto plan = DataCentricScheduler<calibrated<analytic_cost_model>>(model).plan(batch);
  for (const auto& m : plan.micro_steps) {
    if (std::find(m.sample_ids.begin(), m.sample_ids.end(), 1u) == m.sample_ids.end()) continue;
    CHECK_FALSE((m.degree() == 2 && m.config.recompute.is_none()));
  }
}

TEST_CASE("Calibration.bad_observations_name_the_field_and_value") {
  calibrated<analytic_cost_model> model(analytic_cost_model(models::llama3_8b(), one_node()));
  const auto shape = micro_batch_shape::of(text_sample(1, 4096));
  const execution_config ok{2, sequence_parallel::ulysses, {}};
  CHECK(contains(message_of([&] {
                   model.observe(observation{shape, ok, {-1.0, 0.0, false}});
                 }),
                 "observation 0: report.seconds = -1"));
  CHECK(contains(message_of([&] {
                   model.observe(observation{shape, ok, {std::nan(""), 0.0, false}});
                 }),
                 "report.seconds = nan"));
  CHECK(contains(message_of([&] {
                   model.observe(observation{shape, ok, {1.0, -5.0, false}});
                 }),
                 "report.peak_bytes = -5"));
  CHECK(contains(
      message_of([&] {
        model.observe(observation{shape, {3, sequence_parallel::ulysses, {}}, {1.0, 0.0, false}});
      }),
      "degree = 3, must be a power of two"));
  CHECK(contains(
      message_of([&] {
        model.observe(observation{shape, {16, sequence_parallel::ulysses, {}}, {1.0, 0.0, false}});
      }),
      "degree = 16 exceeds the cluster's 8 GPUs"));
  CHECK(contains(message_of([&] {
                   micro_batch_shape tokens_without_samples;
                   tokens_without_samples.tokens = 5;
                   model.observe(observation{tokens_without_samples, ok, {1.0, 0.0, false}});
                 }),
                 "shape has samples = 0, tokens = 5"));
  CHECK(contains(message_of([&] { calibrated<analytic_cost_model>(model.base(), {.window = 0}); }),
                 "window = 0"));
  // Nothing of a rejected batch of observations was kept.
  const std::vector<observation> mixed{{shape, ok, {1.0, 0.0, false}},
                                       {shape, ok, {-1.0, 0.0, false}}};
  CHECK(contains(message_of([&] { model.observe(mixed); }), "observation 1: report.seconds = -1"));
  CHECK(model.report().observations == 0);
}

namespace {

/// A framework whose micro-batches take the truth's time and memory, and run out of memory when
/// the true peak exceeds the GPU.
struct truth_executor {
  const sim::truth_model* truth;
  const std::vector<sample>* batch;
  int discarded = 0;
  execution_report run(const micro_step& m, in_process_communicator& group, recompute_setting r,
                       double) {
    micro_batch_shape s;
    for (const auto id : m.sample_ids)
      for (const auto& x : *batch)
        if (x.id == id) s += micro_batch_shape::of(x);
    const execution_config c{m.degree(), truth->training().sp, r};
    // A collective over the group, as a real sequence-parallel micro-batch would run.
    const std::int64_t mine = group.rank();
    (void)group.all_gather(std::span<const std::int64_t>(&mine, 1));
    const double peak = truth->peak_bytes(s, c);
    return {truth->seconds(s, c), peak, peak > truth->capacity_bytes()};
  }
  void discard_gradients() { ++discarded; }
};

/// A planner whose memory model leaves no headroom on a truth that adds fragmentation: its
/// first plan of `batch` runs out of memory on some micro-steps.
struct no_headroom_scenario {
  static training_spec spec() {
    training_spec t;
    t.headroom_fraction = 0;
    return t;
  }
  sim::truth_model truth = slow_truth(spec());
  analytic_cost_model base{models::llama3_8b(), one_node(), spec()};
  std::vector<sample> batch =
      workload::split_to_context(workload::draw_batch(workload::wikipedia(), 600'000, 21), 131'072)
          .samples;

  DataCentricScheduler<calibrated<analytic_cost_model>> scheduler() const {
    return DataCentricScheduler<calibrated<analytic_cost_model>>{
        calibrated<analytic_cost_model>(base)};
  }
};

}  // namespace

TEST_CASE("Calibration.run_calibrated_step_replans_after_out_of_memory") {
  const no_headroom_scenario scenario;
  const auto& truth = scenario.truth;
  const auto& base = scenario.base;
  const auto& batch = scenario.batch;
  REQUIRE(sim::simulate(DataCentricScheduler<>(base).plan(batch), batch, truth).oom_events > 0);

  std::mutex mutex;
  std::vector<calibrated_step_result> results(8);
  std::vector<std::array<double, analytic_cost_model::time_term_count>> weights(8);
  std::vector<int> discarded(8);
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    auto scheduler = scenario.scheduler();
    truth_executor executor{&truth, &batch};
    auto result = run_calibrated_step(comm, cache, scheduler, batch, executor);
    // A second step re-plans nothing: the model already knows.
    auto next = run_calibrated_step(comm, cache, scheduler, batch, executor);
    const std::lock_guard lock(mutex);
    const auto r = static_cast<std::size_t>(comm.rank());
    CHECK(next.attempts == 1);
    results[r] = std::move(result);
    weights[r] = scheduler.cost().time_weights();
    discarded[r] = executor.discarded;
  });
  const auto& first = results[0];
  MESSAGE("attempts ", first.attempts, ", out-of-memory micro-steps ", first.out_of_memory);
  CHECK(first.attempts >= 2);
  CHECK(first.out_of_memory > 0);
  CHECK(sim::simulate(first.plan, batch, truth).oom_events == 0);
  dcp::test::check_every_sample_once(first.plan, batch);
  for (std::size_t r = 0; r < 8; ++r) {
    CHECK(results[r].plan.fingerprint == first.plan.fingerprint);  // every rank agrees
    CHECK(weights[r] == weights[0]);                               // on the same model
    CHECK(discarded[r] == first.attempts - 1);
    CHECK(results[r].observations == first.observations);
  }
}

TEST_CASE("Calibration.run_calibrated_step_gives_up_with_a_clear_error") {
  const no_headroom_scenario scenario;
  const auto msg = message_of([&] {
    run_ranks(8, [&](in_process_communicator& comm) {
      group_cache<in_process_communicator> cache(comm);
      auto scheduler = scenario.scheduler();
      truth_executor executor{&scenario.truth, &scenario.batch};
      run_calibrated_step(comm, cache, scheduler, scenario.batch, executor, {.max_attempts = 1});
    });
  });
  CHECK(contains(msg, "run_calibrated_step: attempt 1 of 1: "));
  CHECK(contains(msg, "ran out of memory, first "));
}

TEST_CASE("Calibration.profiling_a_grid_builds_a_model_within_5_percent_of_the_truth") {
  const auto truth = slow_truth();
  const analytic_cost_model base(models::llama3_8b(), one_node());
  profile_grid grid;
  grid.lengths = {512, 2048, 8192, 32768, 131072};
  grid.recompute = {recompute_setting::none(), recompute_setting::full(base.model().layers)};
  const auto points = profile_points(base, grid);
  std::vector<sample> all;
  for (const auto& p : points) all.insert(all.end(), p.samples.begin(), p.samples.end());

  std::mutex mutex;
  std::vector<std::vector<observation>> seen(8);
  std::optional<calibrated<analytic_cost_model>> profiled;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    truth_executor executor{&truth, &all};
    auto result = profile(comm, cache, base, grid, executor);
    const std::lock_guard lock(mutex);
    seen[static_cast<std::size_t>(comm.rank())] = result.observations;
    if (comm.rank() == 0) profiled.emplace(std::move(result.model));
  });
  REQUIRE(profiled.has_value());
  // 5 lengths x 2 recompute settings x (8 + 4 + 2 + 1 groups), minus what ran out of memory.
  std::size_t ran = 0, oom = 0;
  for (const auto& o : seen[0]) (o.report.out_of_memory ? oom : ran) += 1;
  CHECK(ran + oom == 5 * 2 * 15);
  for (const auto& s : seen) CHECK(s == seen[0]);

  // Packed micro-batches it never ran: within 5 % of the truth.
  const auto held_out = draw_micro_batches(truth, 7, 400);
  const auto before = relative_errors(base, truth, held_out);
  const auto after = relative_errors(*profiled, truth, held_out);
  MESSAGE("profiled on ", ran, " micro-steps (", oom, " out of memory): mean error ", mean(after),
          ", max ", largest(after), " (analytic: mean ", mean(before), ", max ", largest(before),
          ")");
  CHECK(largest(after) <= 0.05);
  for (const auto& [s, c] : held_out) CHECK(profiled->peak_bytes(s, c) >= truth.peak_bytes(s, c));
}

TEST_CASE("Calibration.profile_grid_errors_name_the_field") {
  const analytic_cost_model base(models::llama3_8b(), one_node());
  profile_grid grid;
  grid.lengths = {1024, 0};
  CHECK(contains(message_of([&] { (void)profile_points(base, grid); }),
                 "profile_grid: length = 0, must be >= 1"));
  grid.lengths = {1024};
  grid.repetitions = 0;
  CHECK(contains(message_of([&] { (void)profile_points(base, grid); }),
                 "repetitions = 0 (must be >= 1)"));
  grid.repetitions = 1;
  grid.degrees = {3, 16};  // neither runs on 8 GPUs: no points
  CHECK(profile_points(base, grid).empty());
}

TEST_CASE("Calibration.online_in_the_simulator_predicts_what_the_hardware_does") {
  // The simulator's policy hook: a calibrating policy sees every micro-step it planned, as run,
  // after each step, and its predictions of the makespan come true.
  evaluation::scenario sc;
  sc.name = "wikipedia-8";
  sc.model = models::llama3_8b();
  sc.cluster = one_node();
  sc.draw = [](std::uint64_t seed) {
    return workload::split_to_context(workload::draw_batch(workload::wikipedia(), 250'000, seed),
                                      65'536)
        .samples;
  };
  // 36 steps: over 12, the first of which calibration cannot have learned from, the mean error
  // is a coin flip at the noise floor (with the batches drawn 200 seeds on, calibration read
  // 0.0316 against 0.0267 even before the planner's micro-batch swap); over 36 it is below on
  // both draws tried, before and after.
  sc.steps = 36;
  const analytic_cost_model cost(sc.model, sc.cluster, sc.training);
  const auto plain = std::make_shared<DataCentricScheduler<>>(cost);
  const auto learning = std::make_shared<DataCentricScheduler<calibrated<analytic_cost_model>>>(
      calibrated<analytic_cost_model>(cost));
  std::size_t observed = 0, planned = 0;
  const std::vector<evaluation::policy_entry> policies{
      {"dcp", [plain](std::span<const sample> b) { return plain->plan(b); }},
      {"dcp-calibrated",
       [&, learning](std::span<const sample> b) {
         auto plan = learning->plan(b);
         planned += plan.micro_steps.size();
         return plan;
       },
       [&, learning](std::span<const observation> measured) {
         observed += measured.size();
         auto model = learning->cost();
         model.observe(measured);
         learning->set_cost(std::move(model));
       }}};
  const auto result = evaluation::run(sc, policies);
  CHECK(observed == planned);
  CHECK(learning->cost().report().observations > 0);
  const auto& before = result.policies[0];
  const auto& after = result.policies[1];
  MESSAGE("mean makespan prediction error: analytic ", before.prediction_error,
          ", calibrated online ", after.prediction_error, "; tokens/s ", before.tokens_per_s,
          " -> ", after.tokens_per_s);
  // The analytic model already predicts this scenario within a few per cent (its fixed GEMM
  // cost comes from the SMs), close to the floor the simulator's noise (sigma 3 % per
  // micro-step) sets, so calibration must improve on it and stay near that floor.
  CHECK(after.prediction_error < before.prediction_error);
  CHECK(after.prediction_error < 0.04);
  CHECK(after.oom_events == 0);
}

namespace {
/// truth_executor without discard_gradients: it cannot undo a step that ran out of memory.
struct executor_without_discard {
  truth_executor inner;
  execution_report run(const micro_step& m, in_process_communicator& group, recompute_setting r,
                       double s) {
    return inner.run(m, group, r, s);
  }
};
}  // namespace

TEST_CASE("Calibration.out_of_memory_without_discard_gradients_is_a_clear_error") {
  const no_headroom_scenario scenario;
  const auto msg = message_of([&] {
    run_ranks(8, [&](in_process_communicator& comm) {
      group_cache<in_process_communicator> cache(comm);
      auto scheduler = scenario.scheduler();
      executor_without_discard executor{{&scenario.truth, &scenario.batch}};
      run_calibrated_step(comm, cache, scheduler, scenario.batch, executor);
    });
  });
  CHECK(contains(msg, "ran out of memory, first "));
  CHECK(contains(msg, "the executor has no discard_gradients() to undo the partial step"));
}

TEST_CASE("Calibration.share_observations_rejects_reports_that_do_not_match_the_plan") {
  const no_headroom_scenario scenario;
  const auto plan = DataCentricScheduler<>(scenario.base).plan(scenario.batch);
  const auto msg = message_of([&] {
    run_ranks(8, [&](in_process_communicator& comm) {
      const std::vector<execution_report> none;  // every rank has micro-steps, none reported
      (void)share_observations(comm, plan, scenario.batch, none);
    });
  });
  CHECK(contains(msg, "share_observations: rank "));
  CHECK(contains(msg, " has 0 reports for its "));
}

TEST_CASE("Calibration.a_model_without_terms_gets_one_weight") {
  // sim::truth_model does not split its time: calibrated<> refits it as one term. Hardware 30 %
  // slower than it says, uniformly, is learned exactly.
  const auto truth = slow_truth();
  calibrated<sim::truth_model> model(truth);
  static_assert(calibrated<sim::truth_model>::time_term_count == 1);
  CHECK(calibrated<sim::truth_model>::time_term_names()[0] == "seconds");
  auto observations = measure(truth, draw_micro_batches(truth, 11, 30), 3);
  for (auto& o : observations) {
    o.report.seconds = 1.3 * truth.seconds(o.shape, o.config);
    o.report.peak_bytes = 0;
  }
  model.observe(observations);
  CHECK(model.time_weights()[0] == doctest::Approx(1.3).epsilon(1e-3));
  for (const auto& [s, c] : draw_micro_batches(truth, 7, 50)) {
    CHECK(model.seconds(s, c) == doctest::Approx(1.3 * truth.seconds(s, c)).epsilon(1e-3));
    CHECK(model.marginal_seconds(s, c) ==
          doctest::Approx(1.3 * truth.marginal_seconds(s, c)).epsilon(1e-3));
    CHECK(model.peak_bytes(s, c) == truth.peak_bytes(s, c));  // no peak was measured
  }
}

TEST_CASE("Calibration.a_step_larger_than_the_window_is_sampled_evenly") {
  // A step of a large cluster measures more micro-batches than the window holds: the window
  // keeps every k-th of them, not the last ones (which start last and are not typical).
  const auto truth = slow_truth();
  calibrated<analytic_cost_model> model(analytic_cost_model(models::llama3_8b(), one_node()),
                                        {.window = 10});
  auto step = measure(truth, draw_micro_batches(truth, 11, 100), 3);
  for (std::size_t i = 0; i < step.size(); ++i)
    step[i].report.seconds = 1.0 + static_cast<double>(i);
  model.observe(step);
  REQUIRE(model.observations().size() == 10);
  for (std::size_t k = 0; k < 10; ++k)
    CHECK(model.observations()[k].report.seconds == 1.0 + 10.0 * static_cast<double>(k));
  // Later calls push the oldest out.
  model.observe(step[99]);
  CHECK(model.observations().size() == 10);
  CHECK(model.observations().front().report.seconds == 11.0);
  CHECK(model.observations().back().report.seconds == 100.0);
}

TEST_CASE("Calibration.host_weight_is_fitted_on_the_micro_steps_the_host_decides") {
  // A truth whose host issues kernels 3.3 x slower than the analytic model assumes: the
  // micro-steps that are host-bound there fit the host's weight, the others the device terms.
  sim::truth_constants k;
  k.host_seconds_per_kernel = 300e-6;
  const sim::truth_model truth(models::llama3_8b(), one_node(), {}, k);
  const analytic_cost_model base(models::llama3_8b(), one_node());
  calibrated<analytic_cost_model> model(base);
  CHECK(model.host_weight() == 1.0);
  const auto runs = draw_micro_batches(truth, 21, 200);
  model.observe(measure(truth, runs, 0));
  // The truth's host time over the model's, for a micro-step at degree 1 without recomputation.
  const execution_config c{1, sequence_parallel::ulysses, recompute_setting::none()};
  const double expected =
      truth.micro_step_parts(micro_batch_shape{}, c).host_seconds / base.host_seconds(c);
  MESSAGE("host weight ", model.host_weight(), ", truth / model host time ", expected);
  CHECK(model.host_weight() == doctest::Approx(expected).epsilon(0.15));
  // Host-bound micro-steps are now predicted near the truth.
  for (const auto& [s, cfg] : runs) {
    const auto p = truth.micro_step_parts(s, cfg);
    if (p.host_seconds > 1.5 * p.device_seconds_at(p.nic_bandwidth) && cfg.degree == 1 &&
        cfg.recompute.is_none())
      CHECK(model.seconds(s, cfg) == doctest::Approx(truth.seconds(s, cfg)).epsilon(0.15));
  }
}
