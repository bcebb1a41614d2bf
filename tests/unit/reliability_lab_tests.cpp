// Findings 08 and 09 in the lab (dcp::sim, dcp::baselines): the truth model's constants and the
// simulator's options are validated field by field (NaN, infinities, negatives, zero where it
// must be positive, efficiencies in (0, 1]) with messages that name the field, the value and the
// limit; verl's workload and token arithmetic cannot overflow int64.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/baselines/megatron_dynamic_cp.hpp"
#include "dcp/baselines/verl_balanced_dp.hpp"
#include "dcp/dcp.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_model.hpp"

#include "../support/errors.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

using dcp::test::inf_value;
using dcp::test::int64_max;
using dcp::test::nan_value;

cluster_spec lab_node() { return hgx_cluster(1, gpus::h200_sxm()); }

std::string truth_message(const sim::truth_constants& constants) {
  return message_of([&] { sim::truth_model(models::llama3_8b(), lab_node(), {}, constants); });
}

/// One field of truth_constants: its name and how to set it.
struct truth_field {
  const char* name;
  std::function<void(sim::truth_constants&, double)> set;
};

std::vector<truth_field> non_negative_truth_fields() {
  return {
      {"gemm_half_tokens", [](sim::truth_constants& k, double v) { k.gemm_half_tokens = v; }},
      {"nccl_base_latency", [](sim::truth_constants& k, double v) { k.nccl_base_latency = v; }},
      {"nccl_nvlink_step_latency",
       [](sim::truth_constants& k, double v) { k.nccl_nvlink_step_latency = v; }},
      {"nccl_network_step_latency",
       [](sim::truth_constants& k, double v) { k.nccl_network_step_latency = v; }},
      {"kernel_launch_seconds",
       [](sim::truth_constants& k, double v) { k.kernel_launch_seconds = v; }},
      {"forward_kernels_per_layer",
       [](sim::truth_constants& k, double v) { k.forward_kernels_per_layer = v; }},
      {"loss_kernels", [](sim::truth_constants& k, double v) { k.loss_kernels = v; }},
      {"framework_seconds", [](sim::truth_constants& k, double v) { k.framework_seconds = v; }},
      {"fragmentation", [](sim::truth_constants& k, double v) { k.fragmentation = v; }},
      {"cuda_context_bytes", [](sim::truth_constants& k, double v) { k.cuda_context_bytes = v; }},
      {"nccl_buffer_bytes", [](sim::truth_constants& k, double v) { k.nccl_buffer_bytes = v; }},
      {"logits_bytes_per_entry",
       [](sim::truth_constants& k, double v) { k.logits_bytes_per_entry = v; }},
      {"gradient_accumulation_bytes_per_weight",
       [](sim::truth_constants& k, double v) { k.gradient_accumulation_bytes_per_weight = v; }},
      {"all_to_all_nvlink_latency",
       [](sim::truth_constants& k, double v) { k.all_to_all_nvlink_latency = v; }},
      {"ulysses_permute_fraction",
       [](sim::truth_constants& k, double v) { k.ulysses_permute_fraction = v; }},
      {"host_seconds_per_kernel",
       [](sim::truth_constants& k, double v) { k.host_seconds_per_kernel = v; }},
  };
}

std::vector<truth_field> positive_truth_fields() {
  return {
      {"fa3_reference_peak_flops",
       [](sim::truth_constants& k, double v) { k.fa3_reference_peak_flops = v; }},
      {"nvls_allreduce_bandwidth",
       [](sim::truth_constants& k, double v) { k.nvls_allreduce_bandwidth = v; }},
      {"fa3_lengths[3]", [](sim::truth_constants& k, double v) { k.fa3_lengths[3] = v; }},
      {"fa3_forward_tflops[0]",
       [](sim::truth_constants& k, double v) { k.fa3_forward_tflops[0] = v; }},
      {"fa3_backward_tflops[5]",
       [](sim::truth_constants& k, double v) { k.fa3_backward_tflops[5] = v; }},
      {"fa3_causal_forward_tflops[2]",
       [](sim::truth_constants& k, double v) { k.fa3_causal_forward_tflops[2] = v; }},
      {"fa3_causal_backward_tflops[1]",
       [](sim::truth_constants& k, double v) { k.fa3_causal_backward_tflops[1] = v; }},
  };
}

std::vector<truth_field> fraction_truth_fields() {
  return {
      {"gemm_efficiency_max", [](sim::truth_constants& k, double v) { k.gemm_efficiency_max = v; }},
      {"hbm_efficiency", [](sim::truth_constants& k, double v) { k.hbm_efficiency = v; }},
      {"all_to_all_bandwidth_fraction",
       [](sim::truth_constants& k, double v) { k.all_to_all_bandwidth_fraction = v; }},
  };
}

/// A plan of `batch` on the lab node by our scheduler, planned on the truth model itself.
step_plan lab_plan(const std::vector<sample>& batch, const sim::truth_model& truth) {
  return DataCentricScheduler<sim::truth_model>(truth).plan(batch);
}

std::vector<sample> text_batch(std::size_t n, std::int64_t tokens) {
  std::vector<sample> batch;
  for (std::size_t i = 0; i < n; ++i)
    batch.push_back(sample{i + 1, tokens + static_cast<std::int64_t>(i) * 37});
  return batch;
}

/// The first rank of the micro-step that holds sample index `index`, or -1.
std::int64_t rank_of(const placement& placed, std::size_t index) {
  for (const auto& m : placed.micro_steps)
    if (std::find(m.samples.begin(), m.samples.end(), index) != m.samples.end())
      return m.first_rank;
  return -1;
}

template <class Policy>
placement place_with(const Policy& policy, const std::vector<sample>& batch) {
  const analytic_cost_model cost(models::llama3_8b(), lab_node());
  const pyramid_recompute recompute;
  const std::vector<std::int32_t> buckets(batch.size(), 0);
  const placement_problem<analytic_cost_model, pyramid_recompute> problem{batch, buckets, cost,
                                                                          recompute};
  return policy.place(placement_input<analytic_cost_model, pyramid_recompute>(problem));
}

placement place_verl(const baselines::verl_balanced_dp& policy, const std::vector<sample>& batch) {
  return place_with(policy, batch);
}

}  // namespace

// ---- Finding 09: every field of the truth model's constants --------------------------------

TEST_CASE("Finding.09_specs.truth_constants_reject_nan_in_every_field") {
  auto fields = non_negative_truth_fields();
  for (auto& f : positive_truth_fields()) fields.push_back(f);
  for (auto& f : fraction_truth_fields()) fields.push_back(f);
  for (const auto& field : fields) {
    CAPTURE(field.name);
    sim::truth_constants k;
    field.set(k, nan_value);
    const auto message = truth_message(k);
    CAPTURE(message);
    CHECK(contains(message, std::string("truth constants: ") + field.name + " = nan"));
  }
}

TEST_CASE("Finding.09_specs.truth_constants_reject_infinities_and_negatives") {
  auto fields = non_negative_truth_fields();
  for (auto& f : positive_truth_fields()) fields.push_back(f);
  for (auto& f : fraction_truth_fields()) fields.push_back(f);
  for (const auto& field : fields) {
    CAPTURE(field.name);
    for (double bad : {inf_value, -inf_value, -1e-9}) {
      CAPTURE(bad);
      sim::truth_constants k;
      field.set(k, bad);
      const auto message = truth_message(k);
      CAPTURE(message);
      CHECK(contains(message, std::string(field.name) + " = " + dcp::detail::number_text(bad)));
    }
  }
}

TEST_CASE("Finding.09_specs.truth_constants_messages_give_value_and_limit") {
  sim::truth_constants k;
  k.fragmentation = -1e-9;  // std::to_string would print -0.000000
  CHECK(truth_message(k) == "truth constants: fragmentation = -1e-09, must be finite and >= 0");
  k = {};
  k.nccl_nvlink_step_latency = -3.4e-6;
  CHECK(truth_message(k) ==
        "truth constants: nccl_nvlink_step_latency = -3.4e-06, must be finite and >= 0");
  k = {};
  k.nvls_allreduce_bandwidth = 0;
  CHECK(truth_message(k) ==
        "truth constants: nvls_allreduce_bandwidth = 0, must be finite and > 0");
  k = {};
  k.fa3_lengths[2] = 0;
  CHECK(truth_message(k) == "truth constants: fa3_lengths[2] = 0, must be finite and > 0");
  k = {};
  k.loss_chunk_tokens = 0;
  CHECK(truth_message(k) == "truth constants: loss_chunk_tokens = 0, must be >= 1");
  k = {};
  k.nics_per_node = -1;
  CHECK(contains(truth_message(k), "truth constants: nics_per_node = -1, must be >= 0"));
  // Zero is a valid amount where the field may be absent: no latency, no fixed cost.
  for (const auto& field : non_negative_truth_fields()) {
    CAPTURE(field.name);
    sim::truth_constants zero;
    field.set(zero, 0);
    CHECK(truth_message(zero) == "(no dcp::error thrown)");
  }
}

TEST_CASE("Finding.09_specs.truth_constants_efficiencies_in_zero_one") {
  for (const auto& field : fraction_truth_fields()) {
    CAPTURE(field.name);
    for (double bad : {0.0, 1.0000001, 1.5}) {
      CAPTURE(bad);
      sim::truth_constants k;
      field.set(k, bad);
      CHECK(truth_message(k) == std::string("truth constants: ") + field.name + " = " +
                                    dcp::detail::number_text(bad) + ", must be in (0, 1]");
    }
    sim::truth_constants one;
    field.set(one, 1.0);
    CHECK(truth_message(one) == "(no dcp::error thrown)");
  }
  // An FA3 table point above the peak it was measured against is not an efficiency.
  sim::truth_constants fast;
  fast.fa3_forward_tflops[4] = 1200;
  const auto message = truth_message(fast);
  CAPTURE(message);
  CHECK(contains(
      message,
      "fa3_forward_tflops[4] = 1200 TFLOP/s, must be at most fa3_reference_peak_flops = 989.4"));
  // Every point below the peak, but the fit extrapolates past it (eta_max = 1.36). The causal
  // table is the one a decoder LM's truth model fits.
  sim::truth_constants steep;
  steep.fa3_causal_backward_tflops = {120, 230, 420, 650, 850, 980};
  const auto fit = truth_message(steep);
  CAPTURE(fit);
  CHECK(
      contains(fit, "fa3_causal_backward_tflops fits eta_max s/(s + s_half) with eta_max = 1.36"));
  CHECK(contains(fit, "must be eta_max in (0, 1]"));
}

// ---- Finding 09: the simulator's options -----------------------------------------------------

TEST_CASE("Finding.09_specs.sim_noise_sigma_message_and_upper_limit") {
  const sim::truth_model truth(models::llama3_8b(), lab_node());
  const auto batch = text_batch(16, 3000);
  const auto plan = lab_plan(batch, truth);
  const auto simulate_with = [&](double sigma) {
    sim::sim_options options;
    options.noise_sigma = sigma;
    return message_of([&] { (void)sim::simulate(plan, batch, truth, options); });
  };
  CHECK(simulate_with(-1e-9) == "simulate: noise_sigma = -1e-09, must be finite and >= 0");
  CHECK(simulate_with(nan_value) == "simulate: noise_sigma = nan, must be finite and >= 0");
  CHECK(simulate_with(inf_value) == "simulate: noise_sigma = inf, must be finite and >= 0");
  // Beyond it almost every multiplier is ~0; the multiplier underflows to 0 by sigma ~ 30.
  CHECK(simulate_with(40) == "simulate: noise_sigma = 40, must be at most 10");
  CHECK(simulate_with(10) == "(no dcp::error thrown)");  // sim_options::max_noise_sigma
  CHECK(simulate_with(0) == "(no dcp::error thrown)");
}

// ---- Finding 09: verl's options -------------------------------------------------------------

TEST_CASE("Finding.09_specs.verl_max_token_len_and_cap_candidates") {
  const auto batch = text_batch(16, 3000);
  baselines::verl_balanced_dp policy;
  policy.max_token_len = -1;  // was silently treated as 0 (tune)
  CHECK(message_of([&] { (void)place_verl(policy, batch); }) ==
        "verl_balanced_dp: max_token_len = -1, must be >= 0 (0 tunes it)");
  for (std::int32_t bad : {0, -3, 65}) {
    CAPTURE(bad);
    baselines::verl_balanced_dp caps;
    caps.cap_candidates = bad;  // 0 was read as 1; 65 shifted the capacity by 64 (undefined)
    CHECK(message_of([&] { (void)place_verl(caps, batch); }) ==
          "verl_balanced_dp: cap_candidates = " + std::to_string(bad) + ", must be in [1, 64]");
  }
}

TEST_CASE("Finding.09_specs.megatron_cap_candidates") {
  // The same tuning knob, through the same shared check (detail::check_cap_candidates).
  const auto batch = text_batch(16, 3000);
  for (std::int32_t bad : {0, -3, 65}) {
    CAPTURE(bad);
    baselines::megatron_dynamic_cp policy;
    policy.cap_candidates = bad;
    CHECK(message_of([&] { (void)place_with(policy, batch); }) ==
          "megatron_dynamic_cp: cap_candidates = " + std::to_string(bad) + ", must be in [1, 64]");
  }
  baselines::megatron_dynamic_cp fine;
  fine.cap_candidates = 64;
  CHECK_FALSE(place_with(fine, batch).micro_steps.empty());
}

// ---- Finding 08: verl's workload and caps ---------------------------------------------------

TEST_CASE("Finding.08_overflow.verl_workload_beyond_int64_squares") {
  // s² leaves int64 above 3.04e9 tokens; the workload keeps growing with s.
  for (std::int64_t tokens : {std::int64_t{3'100'000'000}, std::int64_t{4'000'000'000},
                              std::int64_t{1} << 40, int64_max}) {
    CAPTURE(tokens);
    const auto s = static_cast<double>(tokens);
    const auto workload = static_cast<double>(baselines::verl_workload(tokens));
    CHECK(workload == doctest::Approx(24576.0 * s + s * s));
    CHECK(workload > static_cast<double>(baselines::verl_workload(tokens / 2)));
  }
  // Below 2^26 tokens the workload is the exact integer, so ties are Python's.
  CHECK(static_cast<double>(baselines::verl_workload(65536)) == 24576.0 * 65536 + 65536.0 * 65536);
  CHECK(static_cast<double>(baselines::verl_workload(std::int64_t{1} << 26)) ==
        24576.0 * 67108864.0 + 67108864.0 * 67108864.0);
}

TEST_CASE("Finding.08_overflow.verl_balances_samples_beyond_3e9_tokens") {
  // DP over two Ulysses-4 groups; a 4e9-token sample must be balanced against two of 2e9
  // (workloads 1.6e19 vs 2 x 4e18): it runs alone. Its int64 workload wrapped to a negative
  // number, which put it with one of the others.
  const std::vector<sample> batch{{1, 4'000'000'000}, {2, 2'000'000'000}, {3, 2'000'000'000}};
  baselines::verl_balanced_dp policy;
  policy.ulysses_degree = 4;
  policy.max_token_len = 2'000'000'000;  // a cap of 8e9 tokens per micro-batch holds every sample
  policy.equal_size = false;
  const auto placed = place_verl(policy, batch);
  const auto big = rank_of(placed, 0);
  CHECK(big >= 0);
  CHECK(rank_of(placed, 1) != big);
  CHECK(rank_of(placed, 2) != big);
  CHECK(rank_of(placed, 1) == rank_of(placed, 2));
}

TEST_CASE("Finding.08_overflow.verl_cap_of_int64_max_tokens") {
  // max_token_len = 2^63 - 1 means "no cap". degree x cap overflowed (every sample then looked
  // oversized and ran at degree 1), and ceil(total / cap) as (total + cap - 1) / cap overflowed
  // (one micro-batch per sample).
  const auto batch = text_batch(32, 3000);
  for (std::int64_t degree : {1, 4}) {
    CAPTURE(degree);
    baselines::verl_balanced_dp policy;
    policy.ulysses_degree = degree;
    policy.max_token_len = int64_max;
    const auto placed = place_verl(policy, batch);
    std::size_t placed_samples = 0;
    for (const auto& m : placed.micro_steps) {
      CHECK(m.config.degree == degree);
      placed_samples += m.samples.size();
    }
    CHECK(placed_samples == batch.size());
    // One micro-batch per DP rank: the cap holds all of its samples.
    CHECK(placed.micro_steps.size() == static_cast<std::size_t>(8 / degree));
  }
}
