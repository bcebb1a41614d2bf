// Findings 08 and 09: arithmetic on user values never overflows silently (it throws a dcp::error
// naming the field, the value and the limit), and every field of every spec is validated.

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/in_process.hpp"

#include "../support/errors.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

using dcp::test::inf_value;
using dcp::test::int64_max;
using dcp::test::nan_value;

cluster_spec one_node() { return hgx_cluster(1, gpus::h200_sxm()); }

std::string analytic_message(const model_spec& model, const cluster_spec& cluster,
                             const training_spec& training = {},
                             const analytic_constants& constants = {}) {
  return message_of([&] { analytic_cost_model(model, cluster, training, constants); });
}

/// Runs every micro-step it is handed on one rank; counts them.
struct counting_executor {
  std::int64_t runs = 0;
  execution_report run(const micro_step&, in_process_communicator&, recompute_setting, double) {
    ++runs;
    return {};
  }
};

/// A cost model that is not the analytic one: wraps it, and lets a test break one spec or the
/// budget.
struct custom_cost {
  analytic_cost_model inner{models::llama3_8b(), one_node()};
  model_spec model_override = inner.model();
  cluster_spec cluster_override = inner.cluster();
  training_spec training_override = inner.training();
  double budget = inner.memory_budget();

  double seconds(const micro_batch_shape& s, const execution_config& c) const {
    return inner.seconds(s, c);
  }
  double peak_bytes(const micro_batch_shape& s, const execution_config& c) const {
    return inner.peak_bytes(s, c);
  }
  double memory_budget() const { return budget; }
  const model_spec& model() const { return model_override; }
  const cluster_spec& cluster() const { return cluster_override; }
  const training_spec& training() const { return training_override; }
};
static_assert(cost_model<custom_cost>);

std::string scheduler_message(const custom_cost& cost) {
  return message_of([&] { const DataCentricScheduler<custom_cost> scheduler(cost); });
}

}  // namespace

// ---- finding 08: overflow on the paths that decide who runs what -------------------------------

TEST_CASE("Finding.08_overflow.group_cache_first_rank_near_int64_max_lies_outside_the_world") {
  const in_process_world world(4);
  auto comm = world.communicator(0);
  group_cache<in_process_communicator> cache(comm);
  const auto msg = message_of([&] { cache.group(int64_max - 1, 2); });
  CHECK(contains(msg, "first_rank = 9223372036854775806"));
  CHECK(contains(msg, "degree = 2"));
  CHECK(contains(msg, "outside the world of 4 ranks"));
  CHECK(cache.entries() == 0);
}

TEST_CASE("Finding.08_overflow.run_step_throws_for_a_micro_step_outside_the_world") {
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  cluster_spec four = cost.cluster();
  four.gpus = 4;
  four.gpus_per_node = 4;
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), four));
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 16; ++id)
    batch.push_back(text_sample(id, 2000 + 100 * static_cast<std::int64_t>(id)));
  step_plan plan = scheduler.plan(batch);
  REQUIRE(plan.micro_steps.size() >= 2);
  auto& bad = plan.micro_steps[1];
  bad.first_rank = int64_max - 1;
  bad.config.degree = 2;
  const auto sequence = bad.sequence;
  plan.fingerprint = compute_fingerprint(plan);

  std::int64_t runs = 0;
  const auto msg = message_of([&] {
    run_ranks(4, [&](in_process_communicator& comm) {
      group_cache<in_process_communicator> cache(comm);
      counting_executor executor;
      run_step(comm, cache, plan, executor);
      if (comm.rank() == 0) runs = executor.runs;
    });
  });
  CAPTURE(runs);
  CHECK(contains(msg, "micro-step " + std::to_string(sequence)));
  CHECK(contains(msg, "first_rank = 9223372036854775806"));
  CHECK(contains(msg, "degree = 2"));
  CHECK(contains(msg, "world of 4 ranks"));
}

TEST_CASE("Finding.08_overflow.video_sample_grid_beyond_int64_names_sample_and_fields") {
  // 268436480 x 68719214593 x 1 = 2^64 + 1024: wrapped, it would plan as 1024 tokens.
  const video_shape grid{268436480, 68719214593, 1};
  const auto msg = message_of([&] { (void)video_sample(5, grid); });
  CHECK(contains(msg, "sample 5"));
  CHECK(contains(msg, "frames = 268436480"));
  CHECK(contains(msg, "height = 68719214593"));
  CHECK(contains(msg, "width = 1"));
  CHECK(contains(msg, "9223372036854775807"));
  CHECK(contains(message_of([&] { (void)grid.tokens(); }), "9223372036854775807"));
}

TEST_CASE("Finding.08_overflow.plan_rejects_a_hand_made_video_grid_beyond_int64") {
  const analytic_cost_model cost(models::stdit3_xl(), one_node());
  const DataCentricScheduler<analytic_cost_model, video_buckets> scheduler(cost);
  sample s{9, 1024, attention_kind::factorised, video_shape{268436480, 68719214593, 1}};
  const auto msg = message_of([&] { (void)scheduler.plan(std::vector<sample>{s}); });
  CHECK(contains(msg, "sample 9"));
  CHECK(contains(msg, "268436480x68719214593x1"));
  CHECK(contains(msg, "9223372036854775807"));
}

TEST_CASE("Finding.08_overflow.does_not_fit_message_prints_bytes_beyond_2_63") {
  const analytic_cost_model cost(models::llama3_8b(), one_node());
  const DataCentricScheduler<> scheduler(cost);
  const std::int64_t tokens = 4'000'000'000'000'000'000;
  std::string msg;
  try {
    (void)scheduler.plan(std::vector<sample>{text_sample(3, tokens)});
  } catch (const sample_does_not_fit& e) {
    msg = e.what();
  }
  const double need = cost.peak_bytes(micro_batch_shape::of(text_sample(3, tokens)),
                                      {8, sequence_parallel::ulysses, recompute_setting::full(32)});
  REQUIRE(need > 9.3e18);
  std::ostringstream digits;
  digits.setf(std::ios::fixed);
  digits.precision(0);
  digits << need;
  CAPTURE(msg);
  CHECK(contains(msg, "sample 3"));
  CHECK(contains(msg, "(" + digits.str() + " bytes)"));
  CHECK_FALSE(contains(msg, "-9223372036854775808"));
}

TEST_CASE("Finding.08_overflow.micro_batch_shape_token_sum_beyond_int64_throws") {
  const micro_batch_shape a{1, int64_max - 10, int64_max - 10, 0};
  const micro_batch_shape b{1, 100, 100, 0};
  const auto msg = message_of([&] { (void)(a + b); });
  CHECK(contains(msg, "tokens"));
  CHECK(contains(msg, "9223372036854775797"));
  CHECK(contains(msg, "9223372036854775807"));
}

TEST_CASE("Finding.08_overflow.batch_token_total_beyond_int64_names_sample_and_limit") {
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), one_node()));
  const std::vector<sample> batch{text_sample(1, 5'000'000'000'000'000'000),
                                  text_sample(2, 5'000'000'000'000'000'000)};
  std::string msg;
  try {
    (void)scheduler.plan(batch);
  } catch (const invalid_sample& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "sample 2"));
  CHECK(contains(msg, "tokens"));
  CHECK(contains(msg, "9223372036854775807"));
}

TEST_CASE("Finding.08_overflow.model_parameter_count_beyond_int64_names_fields") {
  auto model = models::llama3_8b();
  model.layers = std::int64_t{1} << 30;
  model.hidden = std::int64_t{1} << 30;
  model.heads = 1024;
  model.kv_heads = 1024;
  model.ffn = std::int64_t{1} << 30;
  const auto msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "model 'Llama-3-8B'"));
  CHECK(contains(msg, "params"));
  CHECK(contains(msg, "layers = 1073741824"));
  CHECK(contains(msg, "hidden = 1073741824"));
  CHECK(contains(msg, "ffn = 1073741824"));
  CHECK(contains(msg, "9223372036854775807"));
  CHECK(contains(analytic_message(model, one_node()), "params"));
}

TEST_CASE("Finding.08_overflow.model_layers_beyond_the_recompute_setting_range") {
  // recompute_setting counts layers in int32: a model with more layers could not be recomputed.
  auto model = models::llama3_8b();
  model.layers = std::int64_t{1} << 31;
  const auto msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "layers = 2147483648"));
  CHECK(contains(msg, "2147483647"));
}

TEST_CASE("Finding.08_overflow.cluster_gpus_near_int64_max_is_rejected") {
  auto cluster = one_node();
  cluster.gpus = int64_max - 7;  // a multiple of 8
  cluster.gpus_per_node = 8;
  const auto msg = message_of([&] { cluster.validate(); });
  CHECK(contains(msg, "gpus = 9223372036854775800"));
  CHECK(contains(msg, "must be in [1, "));
}

// ---- finding 09: every spec validated ----------------------------------------------------------

TEST_CASE("Finding.09_specs.analytic_constants_negative_or_nan_efficiency") {
  analytic_constants k;
  k.dense_efficiency = -0.7;
  auto msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "dense_efficiency = -0.7"));
  CHECK(contains(msg, "(0, 1]"));

  k = {};
  k.attention_forward_efficiency = nan_value;
  msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "attention_forward_efficiency = nan"));
  CHECK(contains(msg, "(0, 1]"));

  k = {};
  k.attention_backward_efficiency = 0;
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), {}, k),
                 "attention_backward_efficiency = 0"));

  k = {};
  k.hbm_efficiency = 1.5;
  msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "hbm_efficiency = 1.5"));
  CHECK(contains(msg, "(0, 1]"));
}

TEST_CASE("Finding.09_specs.analytic_constants_fixed_costs_and_loss_chunk") {
  analytic_constants k;
  k.kernel_launch_seconds = -5e-6;
  auto msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "kernel_launch_seconds = -5e-06"));
  CHECK(contains(msg, ">= 0"));

  k = {};
  k.kernels_per_layer = inf_value;
  msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "kernels_per_layer = inf"));
  CHECK(contains(msg, "finite"));

  k = {};
  k.step_overhead_seconds = nan_value;
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), {}, k),
                 "step_overhead_seconds = nan"));

  k = {};
  k.logits_bytes_per_entry = -6;
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), {}, k),
                 "logits_bytes_per_entry = -6"));

  k = {};
  k.loss_chunk_tokens = 0;
  msg = analytic_message(models::llama3_8b(), one_node(), {}, k);
  CHECK(contains(msg, "loss_chunk_tokens = 0"));
  CHECK(contains(msg, ">= 1"));
}

TEST_CASE("Finding.09_specs.cluster_latencies_nan_or_negative") {
  auto cluster = one_node();
  cluster.intra_node_latency = nan_value;
  auto msg = analytic_message(models::llama3_8b(), cluster);
  CHECK(contains(msg, "intra_node_latency = nan"));
  CHECK(contains(msg, ">= 0"));

  cluster = one_node();
  cluster.inter_node_latency = -40e-6;
  msg = analytic_message(models::llama3_8b(), cluster);
  CHECK(contains(msg, "inter_node_latency = -4e-05"));
  CHECK(contains(msg, ">= 0"));
}

TEST_CASE("Finding.09_specs.cluster_bandwidths_and_gpu_nan_inf_or_zero") {
  auto cluster = one_node();
  cluster.nvlink_bandwidth = inf_value;
  auto msg = analytic_message(models::llama3_8b(), cluster);
  CHECK(contains(msg, "nvlink_bandwidth = inf"));
  CHECK(contains(msg, "finite"));

  cluster = one_node();
  cluster.nic_bandwidth = nan_value;
  CHECK(contains(analytic_message(models::llama3_8b(), cluster), "nic_bandwidth = nan"));

  cluster = one_node();
  cluster.gpu.hbm_bandwidth = 0;
  msg = analytic_message(models::llama3_8b(), cluster);
  CHECK(contains(msg, "gpu.hbm_bandwidth = 0"));
  CHECK(contains(msg, "> 0"));

  cluster = one_node();
  cluster.gpu.streaming_multiprocessors = -1;
  msg = analytic_message(models::llama3_8b(), cluster);
  CHECK(contains(msg, "gpu.streaming_multiprocessors = -1"));
  CHECK(contains(msg, "0 = unknown"));

  cluster = one_node();
  cluster.gpu.peak_flops = inf_value;
  CHECK(contains(analytic_message(models::llama3_8b(), cluster), "gpu.peak_flops = inf"));

  cluster = one_node();
  cluster.gpu.memory_bytes = inf_value;
  CHECK(contains(analytic_message(models::llama3_8b(), cluster), "gpu.memory_bytes = inf"));
}

TEST_CASE("Finding.09_specs.training_nan_headroom_and_negative_runtime_reserve") {
  training_spec t;
  t.headroom_bytes = nan_value;
  auto msg = analytic_message(models::llama3_8b(), one_node(), t);
  CHECK(contains(msg, "headroom_bytes = nan"));
  CHECK(contains(msg, ">= 0"));

  t = {};
  t.headroom_fraction = nan_value;
  msg = analytic_message(models::llama3_8b(), one_node(), t);
  CHECK(contains(msg, "headroom_fraction = nan"));
  CHECK(contains(msg, "[0, 1)"));

  t = {};
  t.runtime_reserve_bytes = -1.0 * gib;
  msg = analytic_message(models::llama3_8b(), one_node(), t);
  CHECK(contains(msg, "runtime_reserve_bytes = -1073741824"));
  CHECK(contains(msg, ">= 0"));

  t = {};
  t.runtime_reserve_bytes = nan_value;
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), t),
                 "runtime_reserve_bytes = nan"));

  t = {};
  t.runtime_reserve_bytes = 200.0 * gib;  // more than the whole budget of an H200
  msg = analytic_message(models::llama3_8b(), one_node(), t);
  CHECK(contains(msg, "runtime_reserve_bytes = 214748364800"));
  CHECK(contains(msg, "memory budget"));
}

TEST_CASE("Finding.09_specs.training_enumerations_out_of_range") {
  training_spec t;
  t.sp = static_cast<sequence_parallel>(7);
  auto msg = analytic_message(models::llama3_8b(), one_node(), t);
  CHECK(contains(msg, "sp = 7"));

  t = {};
  t.normalise_by = static_cast<loss_normalisation>(9);
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), t), "normalise_by = 9"));

  t = {};
  t.mixed_precision = static_cast<precision>(3);
  CHECK(contains(analytic_message(models::llama3_8b(), one_node(), t), "mixed_precision = 3"));
}

TEST_CASE("Finding.09_specs.model_fields_negative_or_absurd") {
  auto model = models::stdit3_xl();
  model.vocab = -5;
  auto msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "vocab = -5"));
  CHECK(contains(msg, ">= 0"));

  model = models::stdit3_xl();
  model.text_tokens = -300;
  CHECK(contains(message_of([&] { model.validate(); }), "text_tokens = -300"));

  model = models::stdit3_xl();
  model.text_embed_dim = 0;  // cross-attention to 300 text tokens of width 0
  msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "text_embed_dim = 0"));
  CHECK(contains(msg, "text_tokens = 300"));

  model = models::llama3_8b();
  model.vocab = std::int64_t{1} << 40;
  msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "vocab = 1099511627776"));
  CHECK(contains(msg, "2147483647"));

  model = models::llama3_8b();
  model.mlp = static_cast<mlp_kind>(5);
  CHECK(contains(message_of([&] { model.validate(); }), "mlp = 5"));

  model = models::llama3_8b();
  model.family = static_cast<model_family>(4);
  CHECK(contains(message_of([&] { model.validate(); }), "family = 4"));

  model = models::llama3_8b();
  model.attention = static_cast<attention_kind>(6);
  CHECK(contains(message_of([&] { model.validate(); }), "attention = 6"));
}

TEST_CASE("Finding.09_specs.custom_cost_model_specs_are_validated_by_the_scheduler") {
  custom_cost cost;
  cost.model_override.hidden = 0;
  auto msg = scheduler_message(cost);
  CHECK(contains(msg, "hidden = 0"));
  CHECK(contains(msg, ">= 1"));

  cost = {};
  cost.cluster_override.intra_node_latency = nan_value;
  CHECK(contains(scheduler_message(cost), "intra_node_latency = nan"));

  cost = {};
  cost.training_override.runtime_reserve_bytes = -1;
  CHECK(contains(scheduler_message(cost), "runtime_reserve_bytes = -1"));

  cost = {};
  CHECK(scheduler_message(cost) == "(no dcp::error thrown)");
}

TEST_CASE("Finding.09_specs.custom_cost_model_memory_budget_finite_and_positive") {
  custom_cost cost;
  cost.budget = nan_value;
  auto msg = scheduler_message(cost);
  CHECK(contains(msg, "memory_budget() = nan"));
  CHECK(contains(msg, "> 0"));

  cost.budget = 0;
  CHECK(contains(scheduler_message(cost), "memory_budget() = 0"));

  cost.budget = -inf_value;
  CHECK(contains(scheduler_message(cost), "memory_budget() = -inf"));

  cost.budget = inf_value;
  msg = scheduler_message(cost);
  CHECK(contains(msg, "memory_budget() = inf"));
  CHECK(contains(msg, "finite"));

  // set_cost validates too.
  DataCentricScheduler<custom_cost> scheduler(custom_cost{});
  custom_cost broken;
  broken.budget = nan_value;
  CHECK(contains(message_of([&] { scheduler.set_cost(broken); }), "memory_budget() = nan"));
}
