// The simulator's truth model (sourced curves, a cost model of its own, floors for the bound)
// and the discrete-event simulator (ordering, waiting, NIC sharing, OOM, deadlock, noise).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_bound.hpp"
#include "dcp/sim/truth_model.hpp"

#include "../support/batches.hpp"
#include "../support/errors.hpp"

using namespace dcp;
using dcp::test::contains;
using dcp::test::message_of;

namespace {

sim::truth_model llama_truth(std::int64_t nodes = 4, training_spec training = {},
                             sim::truth_constants constants = {}) {
  return sim::truth_model(models::llama3_8b(), hgx_cluster(nodes, gpus::h200_sxm()), training,
                          constants);
}

execution_config at(std::int64_t d, sequence_parallel sp = sequence_parallel::ulysses,
                    recompute_setting r = {}) {
  return {d, sp, r};
}

micro_batch_shape text(std::int64_t tokens) {
  return micro_batch_shape::of(text_sample(0, tokens));
}

/// A hand-built micro-step.
micro_step step(std::int64_t sequence, std::int64_t first_rank, std::int64_t degree,
                std::vector<std::uint64_t> ids, recompute_setting r = {}) {
  micro_step m;
  m.sequence = sequence;
  m.first_rank = first_rank;
  m.config = {degree, sequence_parallel::ulysses, r};
  m.sample_ids = std::move(ids);
  return m;
}

step_plan plan_of(std::int64_t gpus, std::vector<micro_step> steps) {
  step_plan p;
  p.gpus = gpus;
  p.gpus_per_node = 8;
  p.micro_steps = std::move(steps);
  return p;
}

const sim::sim_options exact{0, 0.0};

}  // namespace

// ---- the truth model ---------------------------------------------------------------------------

TEST_CASE("Sim.Truth.models_the_cost_model_concept") {
  static_assert(cost_model<sim::truth_model>);
  static_assert(recompute_strategy<pyramid_recompute, sim::truth_model>);
  const auto truth = llama_truth();
  CHECK(truth.capacity_bytes() == gpus::h200_sxm().memory_bytes);
  CHECK(truth.memory_budget() ==
        truth.capacity_bytes() - training_spec{}.headroom(truth.cluster()));
  // The planner can plan with it too.
  const DataCentricScheduler<sim::truth_model> scheduler(truth);
  const auto batch = test::heavy_tailed_batch(3, 60, 32768);
  const auto plan = scheduler.plan(batch);
  CHECK(plan.lower_bound_seconds <= plan.makespan_seconds);
}

TEST_CASE("Sim.Truth.attention_efficiency_rises_with_length") {
  const auto truth = llama_truth();
  const auto& c = truth.constants();
  double forward = 0, backward = 0;
  for (double s = 16; s <= 4e6; s *= 2) {
    CAPTURE(s);
    CHECK(truth.attention_forward_efficiency(s) > forward);
    CHECK(truth.attention_backward_efficiency(s) > backward);
    CHECK(truth.attention_backward_efficiency(s) < truth.attention_forward_efficiency(s));
    forward = truth.attention_forward_efficiency(s);
    backward = truth.attention_backward_efficiency(s);
  }
  // A causal model (Llama) runs the causal kernels: the fitted curves reproduce every point of
  // the causal FA3 table (docs/cost-sources.md §1.4) within 5.1 %; a diffusion transformer
  // (full attention) the non-causal table within 3.5 %.
  const sim::truth_model dit(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  for (std::size_t k = 0; k < c.fa3_lengths.size(); ++k) {
    CAPTURE(c.fa3_lengths[k]);
    const auto fraction = [&](double tflops) { return tflops * 1e12 / c.fa3_reference_peak_flops; };
    CHECK(truth.attention_forward_efficiency(c.fa3_lengths[k]) ==
          doctest::Approx(fraction(c.fa3_causal_forward_tflops[k])).epsilon(0.051));
    CHECK(truth.attention_backward_efficiency(c.fa3_lengths[k]) ==
          doctest::Approx(fraction(c.fa3_causal_backward_tflops[k])).epsilon(0.051));
    CHECK(dit.attention_forward_efficiency(c.fa3_lengths[k]) ==
          doctest::Approx(fraction(c.fa3_forward_tflops[k])).epsilon(0.035));
    CHECK(dit.attention_backward_efficiency(c.fa3_lengths[k]) ==
          doctest::Approx(fraction(c.fa3_backward_tflops[k])).epsilon(0.035));
  }
  // Attention time per (query, key) pair falls with the length of the sequences.
  double per_pair = 1e300;
  for (std::int64_t s : {256, 1024, 4096, 16384, 65536}) {
    const auto shape = text(s);
    const double t = truth.micro_step_parts(shape, at(1)).attention_seconds / shape.attention_pairs;
    CHECK(t < per_pair);
    per_pair = t;
  }
}

TEST_CASE("Sim.Truth.packed_attention_is_the_sum_over_sequences") {
  // The saturating fit makes the attention time of a packed micro-batch exactly the sum of its
  // sequences' times, each at its own length's efficiency.
  const auto truth = llama_truth();
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    for (std::int64_t d : {1, 4, 16}) {
      const auto a = text(300), b = text(20000);
      const double apart = truth.micro_step_parts(a, at(d, sp)).attention_seconds +
                           truth.micro_step_parts(b, at(d, sp)).attention_seconds;
      CHECK(truth.micro_step_parts(a + b, at(d, sp)).attention_seconds ==
            doctest::Approx(apart).epsilon(1e-12));
    }
  }
  // Ring attention runs (s/d)-long tiles: slower per GPU-second than Ulysses at the same degree.
  const auto s = text(8192);
  CHECK(truth.micro_step_parts(s, at(8, sequence_parallel::ring)).attention_seconds >
        1.05 * truth.micro_step_parts(s, at(8)).attention_seconds);
}

TEST_CASE("Sim.Truth.gemm_efficiency_saturates") {
  const auto truth = llama_truth();
  const auto& c = truth.constants();
  CHECK(truth.gemm_efficiency(c.gemm_half_tokens) == doctest::Approx(c.gemm_efficiency_max / 2));
  CHECK(truth.gemm_efficiency(1e8) == doctest::Approx(c.gemm_efficiency_max).epsilon(1e-4));
  double previous = 0;
  double per_token = 1e300;
  for (std::int64_t n = 16; n <= (1 << 20); n *= 4) {
    CAPTURE(n);
    CHECK(truth.gemm_efficiency(static_cast<double>(n)) > previous);
    previous = truth.gemm_efficiency(static_cast<double>(n));
    const double t = truth.micro_step_parts(text(n), at(1)).gemm_seconds / static_cast<double>(n);
    CHECK(t < per_token);
    per_token = t;
  }
  // At large n the GEMM time is the 6 N FLOPs per token at eta_max.
  const double n = 1e6;
  const double flops = 6.0 * static_cast<double>(models::llama3_8b().per_token_params()) * n;
  CHECK(truth.micro_step_parts(text(1'000'000), at(1)).gemm_seconds ==
        doctest::Approx(flops / (truth.gemm_efficiency(n) * gpus::h200_sxm().peak_flops))
            .epsilon(1e-12));
}

TEST_CASE("Sim.Truth.collective_bandwidth_saturates_with_size") {
  const auto truth = llama_truth();
  // The plateau is the measured all-to-all bus bandwidth (335 of NCCL's 370 GB/s).
  const double peak = truth.all_to_all_bandwidth();
  CHECK(peak == doctest::Approx(335.0 / 370.0 * truth.cluster().nvlink_bandwidth));
  double previous = 0;
  for (double bytes = 1e3; bytes <= 1e11; bytes *= 10) {
    CAPTURE(bytes);
    const double busbw = truth.all_to_all_bus_bandwidth(bytes, 8);
    CHECK(busbw > previous);
    CHECK(busbw < peak);
    previous = busbw;
  }
  CHECK(truth.all_to_all_bus_bandwidth(1e11, 8) > 0.999 * peak);
  // Half the plateau at S_half = latency x B_max / k (alpha-beta, nccl-tests' shape), with the
  // measured small-message latency of an NVLink node.
  const double latency = truth.all_to_all_latency(0);
  CHECK(latency == doctest::Approx(10.6e-6));
  CHECK(truth.all_to_all_latency(2) > latency);
  const double half = latency * peak / (7.0 / 8.0);
  CHECK(truth.all_to_all_bus_bandwidth(half, 8) == doctest::Approx(peak / 2));
  // NCCL tuning.cc: more ranks, more steps; network steps cost more than NVLink steps.
  CHECK(truth.collective_latency(8, 0) > truth.collective_latency(2, 0));
  CHECK(truth.collective_latency(8, 8) > truth.collective_latency(16, 0));
}

TEST_CASE("Sim.Truth.disagrees_with_the_planner_where_published_measurements_do") {
  // The truth model takes published measurements (docs/cost-sources.md §1.4), the planner keeps
  // its planning values: at the shapes the sources measured, the two differ as the sources say.
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const analytic_cost_model planner(models::llama3_8b(), cluster);
  const auto truth = llama_truth();
  const auto& k = truth.constants();
  const auto& a = planner.constants();
  const double peak = k.fa3_reference_peak_flops;
  // Causal attention at 512 tokens: FA3 runs 292 TFLOP/s; the planner's non-causal fit says 476.
  const double planner_512 =
      a.attention_forward_efficiency * 512 / (512 + a.attention_forward_half_rows);
  CHECK(truth.attention_forward_efficiency(512) * peak == doctest::Approx(292e12).epsilon(0.05));
  CHECK(planner_512 > 1.5 * truth.attention_forward_efficiency(512));
  // A 64-token GEMM: torch reaches 0.185 of peak on H100; the planner's curve less than half.
  const double planner_64 = a.dense_efficiency * 64 / (64 + planner.gemm_half_tokens());
  CHECK(truth.gemm_efficiency(64) == doctest::Approx(0.185).epsilon(0.2));
  CHECK(truth.gemm_efficiency(64) > 2.0 * planner_64);
  // A 128-byte all-to-all in a node: ~10.6 us measured; the planner charges 15 us.
  CHECK(truth.all_to_all_seconds(128, 8) == doctest::Approx(10.6e-6).epsilon(0.01));
  CHECK(cluster.intra_node_latency > 1.4 * truth.all_to_all_seconds(128, 8));
  // Large all-to-alls: 335 GB/s measured against the planner's 370.
  CHECK(truth.all_to_all_bandwidth() < 0.91 * cluster.nvlink_bandwidth);
}

TEST_CASE("Sim.Truth.gemm_curve_is_the_fit_to_the_published_gemms") {
  // n_half is the least-squares fit (relative time error, eta_max = 0.80 held) to the skinny
  // H100 GEMMs: 0.185 / 0.356 / 0.550 of peak at 64 / 128 / 256 tokens.
  const auto truth = llama_truth();
  const double eta_max = truth.constants().gemm_efficiency_max;
  CHECK(eta_max == 0.80);
  const std::vector<std::pair<double, double>> published{{64, 0.185}, {128, 0.356}, {256, 0.550}};
  const auto error = [&](double half) {
    double sum = 0;
    for (const auto& [n, eta] : published) {
      const double model = eta_max * n / (n + half);
      sum += (eta / model - 1.0) * (eta / model - 1.0);
    }
    return sum;
  };
  double best = 0, least = 1e300;
  for (double half = 50; half < 400; half += 0.1)
    if (error(half) < least) least = error(half), best = half;
  CHECK(truth.constants().gemm_half_tokens == doctest::Approx(best).epsilon(1e-3));
  for (const auto& point : published) {
    const auto [n, eta] = point;
    CAPTURE(point.first);
    CHECK(truth.gemm_efficiency(n) == doctest::Approx(eta).epsilon(0.2));
  }
}

TEST_CASE("Sim.Truth.host_cost_defaults_to_the_x86_host_in_both_models") {
  CHECK(sim::truth_constants{}.host_seconds_per_kernel == x86_host.seconds_per_kernel);
  CHECK(analytic_constants{}.host_seconds_per_kernel == x86_host.seconds_per_kernel);
  CHECK(x86_host.seconds_per_kernel == 13.5e-6);
  CHECK(grace_host.seconds_per_kernel == 91.1e-6);
  CHECK(graphs_host.seconds_per_kernel == 0.0);
  for (const auto& preset : host_cost_presets) {
    REQUIRE(host_cost_preset_named(preset.name).has_value());
    CHECK(host_cost_preset_named(preset.name)->seconds_per_kernel == preset.seconds_per_kernel);
  }
  CHECK_FALSE(host_cost_preset_named("arm").has_value());
}

TEST_CASE("Sim.Truth.charges_gradient_accumulation_per_micro_step") {
  // Every micro-step adds its weight gradients into FP32 main gradients: 8 bytes of HBM per
  // weight, a fixed cost per micro-step; under ZeRO-3 each GPU accumulates its shard.
  const double params = static_cast<double>(models::llama3_8b().total_params());
  const double hbm = 0.90 * gpus::h200_sxm().hbm_bandwidth;
  sim::truth_constants none;
  none.gradient_accumulation_bytes_per_weight = 0;
  for (int zero : {1, 3}) {
    CAPTURE(zero);
    training_spec t;
    t.zero_stage = zero;
    const auto with = llama_truth(4, t);
    const auto without = llama_truth(4, t, none);
    const double share = zero == 3 ? 32.0 : 1.0;
    for (std::int64_t tokens : {0, 4096}) {
      CHECK(with.micro_step_parts(text(tokens), at(1)).memory_bound_seconds -
                without.micro_step_parts(text(tokens), at(1)).memory_bound_seconds ==
            doctest::Approx(8.0 * params / share / hbm).epsilon(1e-9));
    }
  }
}

TEST_CASE("Sim.Truth.charges_the_ulysses_permute_copies") {
  // Ulysses permutes its inputs and outputs around each all-to-all: 38 % of the all-to-all's
  // time at its bandwidth, charged as memory-bound work; ring attention has no all-to-all.
  sim::truth_constants none;
  none.ulysses_permute_fraction = 0;
  const auto truth = llama_truth();
  const auto without = llama_truth(4, {}, none);
  const auto s = text(65536);
  const auto extra = [&](const execution_config& c) {
    return truth.micro_step_parts(s, c).memory_bound_seconds -
           without.micro_step_parts(s, c).memory_bound_seconds;
  };
  const auto u = at(8);
  const auto p = truth.micro_step_parts(s, u);
  CHECK(extra(u) == doctest::Approx(0.38 * p.intra_node_seconds).epsilon(1e-9));
  CHECK(extra(at(8, sequence_parallel::ring)) == 0.0);
  CHECK(extra(at(1)) == 0.0);
}

TEST_CASE("Sim.Truth.published_constants_are_validated") {
  const auto error_with = [](auto set) {
    sim::truth_constants k;
    set(k);
    return message_of([&] { (void)llama_truth(4, {}, k); });
  };
  CHECK(contains(error_with([](auto& k) { k.fa3_causal_forward_tflops[0] = 2000; }),
                 "fa3_causal_forward_tflops[0] = 2000"));
  CHECK(contains(error_with([](auto& k) { k.all_to_all_bandwidth_fraction = 1.5; }),
                 "all_to_all_bandwidth_fraction"));
  CHECK(contains(error_with([](auto& k) { k.gradient_accumulation_bytes_per_weight = -1; }),
                 "gradient_accumulation_bytes_per_weight"));
  CHECK(contains(error_with([](auto& k) { k.ulysses_permute_fraction = std::nan(""); }),
                 "ulysses_permute_fraction"));
  CHECK(contains(error_with([](auto& k) { k.all_to_all_nvlink_latency = -1; }),
                 "all_to_all_nvlink_latency"));
}

TEST_CASE("Sim.Truth.fragmentation_inflates_dynamic_memory") {
  sim::truth_constants none;
  none.fragmentation = 0;
  const auto truth = llama_truth();
  const auto exact_memory = llama_truth(4, {}, none);
  const auto s = text(16384);
  for (std::int64_t d : {1, 2, 8}) {
    const auto c = at(d);
    CHECK(exact_memory.peak_bytes(s, c) ==
          doctest::Approx(exact_memory.allocated_peak_bytes(s, c)));
    CHECK(truth.peak_bytes(s, c) ==
          doctest::Approx(truth.static_bytes() + 1.075 * truth.dynamic_bytes(s, c)));
    CHECK(truth.peak_bytes(s, c) > truth.allocated_peak_bytes(s, c));
  }
  // Static bytes: ZeRO-1 states (4 + 12/P bytes per parameter) + CUDA context + NCCL buffers.
  const double psi = static_cast<double>(models::llama3_8b().total_params());
  CHECK(truth.static_bytes() == doctest::Approx(4.0 * psi + 12.0 * psi / 32.0 + 2.5e9));
  // More recomputation never raises the peak; more samples never lower it.
  double previous = 1e300;
  for (std::int32_t layers = 0; layers <= 32; layers += 4) {
    const double peak =
        truth.peak_bytes(s, at(1, sequence_parallel::ulysses, recompute_setting::partial(layers)));
    CHECK(peak <= previous);
    previous = peak;
  }
  CHECK(truth.peak_bytes(s + text(100), at(1)) >= truth.peak_bytes(s, at(1)));
}

TEST_CASE("Sim.Truth.differs_from_the_analytic_model") {
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const analytic_cost_model planner(models::llama3_8b(), cluster);
  const sim::truth_model truth(models::llama3_8b(), cluster);
  const auto device = [&](std::int64_t tokens, std::int64_t d) {
    const auto p = truth.micro_step_parts(text(tokens), at(d));
    return p.device_seconds_at(p.nic_bandwidth);
  };
  // A short micro-batch on one GPU: the published skinny GEMMs run ~2x the planner's curve, so
  // the truth model finds it cheaper than the planner does.
  CHECK(device(300, 1) < 0.95 * planner.device_seconds(text(300), at(1)));
  // Split 16 ways across two nodes: per-GPU GEMMs of 19 tokens, network latencies and the
  // Ulysses permute copies make it dearer.
  CHECK(device(300, 16) > 1.1 * planner.device_seconds(text(300), at(16)));
  // Long sequences: causal attention saturates near the same rate in both (the causal curve
  // reaches 616 TFLOP/s at 16K, the planner's non-causal fit 653), so a 200K-token sequence
  // alone on a GPU, attention-bound, agrees within 2 %.
  CHECK(truth.seconds(text(200000), at(1)) ==
        doctest::Approx(planner.seconds(text(200000), at(1))).epsilon(0.02));
  // Not one model under two names: the short or split shapes differ by more than 1 % in time,
  // and every shape in memory (fragmentation, a different runtime reserve).
  int differ = 0;
  for (std::int64_t tokens : {300, 4096, 32768, 65536, 200000}) {
    for (std::int64_t d : {1, 8, 16}) {
      const double a = planner.seconds(text(tokens), at(d));
      const double b = truth.seconds(text(tokens), at(d));
      if (std::abs(b / a - 1.0) > 0.01) ++differ;
      CHECK(truth.peak_bytes(text(tokens), at(d)) !=
            doctest::Approx(planner.peak_bytes(text(tokens), at(d))));
    }
  }
  CAPTURE(differ);
  CHECK(differ >= 6);
}

TEST_CASE("Sim.Truth.marginal_time_is_a_floor_for_packing") {
  // cost_model requirement 5: seconds(a + b) >= fixed_seconds + marginal(a) + marginal(b), both SP
  // styles, inside and across nodes, with and without recomputation; fixed_seconds is the empty
  // micro-step's device time, at most its time (which may be the host's).
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    training_spec t;
    t.sp = sp;
    const auto m = llama_truth(4, t);
    for (std::int64_t d : {1, 2, 8, 16, 32}) {
      for (std::int64_t a : {100, 3000, 40000}) {
        for (std::int64_t b : {50, 5000, 60000}) {
          for (auto r : {recompute_setting::none(), recompute_setting::partial(7),
                         recompute_setting::selective_only()}) {
            CAPTURE(d);
            CAPTURE(a);
            CAPTURE(b);
            const execution_config c{d, sp, r};
            const auto sa = micro_batch_shape::of(text_sample(0, a));
            const auto sb = micro_batch_shape::of(text_sample(1, b));
            const double empty = m.fixed_seconds(c);
            CHECK(empty <= m.seconds(micro_batch_shape{}, c));
            CHECK(m.seconds(sa + sb, c) >=
                  empty + m.marginal_seconds(sa, c) + m.marginal_seconds(sb, c) - 1e-12);
            CHECK(m.marginal_seconds(sb, c) >= 0.0);
            CHECK(m.marginal_seconds(sb, c) <= m.seconds(sb, c));
            CHECK(m.seconds(sa + sb, c) >= m.seconds(sa, c));
          }
        }
      }
    }
  }
}

TEST_CASE("Sim.Truth.degree_times_marginal_never_falls") {
  // For ring from degree 2 on: at degree 1 there is no ring, while from 2 on a sequence's
  // attention may hide other sequences' transfers, so its floor leaves that attention out (as
  // the analytic model's does).
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    training_spec t;
    t.sp = sp;
    const auto m = llama_truth(4, t);
    for (std::int64_t tokens : {200, 8192, 65536}) {
      for (auto r : {recompute_setting::none(), recompute_setting::partial(16)}) {
        double previous = 0;
        for (std::int64_t d = sp == sequence_parallel::ring ? 2 : 1; d <= 32; d *= 2) {
          CAPTURE(tokens);
          CAPTURE(d);
          const double work = static_cast<double>(d) * m.marginal_seconds(text(tokens), {d, sp, r});
          CHECK(work >= previous * (1 - 1e-12));
          previous = work;
        }
      }
    }
  }
}

TEST_CASE("Sim.Truth.cross_node_groups_go_through_the_nic") {
  const auto truth = llama_truth();
  const auto s = text(65536);
  const auto inside = truth.micro_step_parts(s, at(8));
  CHECK_FALSE(inside.crosses_nodes);
  CHECK(inside.inter_node_bytes == 0);
  const auto across = truth.micro_step_parts(s, at(16));
  CHECK(across.crosses_nodes);
  CHECK(across.inter_node_bytes > 0);
  CHECK(across.seconds() == doctest::Approx(truth.seconds(s, at(16))));
  CHECK(across.seconds_at(across.nic_bandwidth / 2) > across.seconds());
  // An unaligned group of 8 starting at rank 4 spans two nodes.
  const auto unaligned = truth.micro_step_parts_at(s, at(8), 4);
  CHECK(unaligned.crosses_nodes);
  CHECK(unaligned.seconds() > inside.seconds());
  // The node-level NICs: one per GPU on HGX, capped at one NIC per GPU.
  CHECK(truth.node_nic_bandwidth() == doctest::Approx(8 * truth.cluster().nic_bandwidth));
  CHECK(truth.gpu_nic_cap() == truth.cluster().nic_bandwidth);
}

TEST_CASE("Sim.Truth.gradient_sync_by_zero_stage") {
  auto with_stage = [](int stage, std::int64_t nodes) {
    training_spec t;
    t.zero_stage = stage;
    return llama_truth(nodes, t);
  };
  const double psi2 = 2.0 * static_cast<double>(models::llama3_8b().total_params());
  for (std::int64_t nodes : {1, 4}) {
    CAPTURE(nodes);
    const double z1 = with_stage(1, nodes).gradient_sync_seconds();
    CHECK(with_stage(2, nodes).gradient_sync_seconds() == doctest::Approx(z1));
    // ZeRO-3: nothing at the end of the step; three passes in every micro-step.
    CHECK(with_stage(3, nodes).gradient_sync_seconds() == 0.0);
    CHECK(with_stage(3, nodes).parameter_gather_seconds() == doctest::Approx(1.5 * z1));
    CHECK(with_stage(1, nodes).gradient_sync_seconds(1) == 0.0);
  }
  // Inside one node the all-reduce rides NVLink SHARP (475 GB/s bus) and beats RS + AG.
  CHECK(with_stage(0, 1).gradient_sync_seconds() < with_stage(1, 1).gradient_sync_seconds());
  // Across 4 nodes: 2 (n-1)/n G over 8 NICs x 48 GB/s, plus ring latency.
  const auto t = with_stage(0, 4);
  const double bandwidth_part = 2.0 * 31.0 / 32.0 * psi2 / (8 * 48e9);
  CHECK(t.gradient_sync_seconds() > bandwidth_part);
  CHECK(t.gradient_sync_seconds() < bandwidth_part * 1.05);
}

TEST_CASE("Sim.Truth.lower_bound_counts_all_work_over_all_gpus") {
  // 64 short samples on one node: the bound is their marginal work over 8 GPUs plus their
  // share of the fixed micro-step cost; ~8K tokens per GPU fit one micro-step without
  // recomputation, so that share is less than one empty micro-step per GPU, and more than none.
  const auto truth = llama_truth(1);
  std::vector<sample> batch;
  double work = 0;
  for (std::uint64_t i = 0; i < 64; ++i) {
    batch.push_back(text_sample(i, 1000 + static_cast<std::int64_t>(i)));
    work += truth.marginal_seconds(micro_batch_shape::of(batch.back()), at(1));
  }
  const double bound = sim::truth_lower_bound_seconds(batch, truth);
  CHECK(bound > work / 8);
  CHECK(bound < work / 8 + truth.seconds(micro_batch_shape{}, at(1)));
  CHECK(sim::truth_lower_bound_seconds(std::vector<sample>{}, truth) == 0.0);
}

TEST_CASE("Sim.Truth.caption_gemms_run_whole_on_every_gpu_of_the_group") {
  // STDiT3-XL: each GPU of a group embeds every sample's 300 caption tokens and projects them to
  // K and V in all 56 blocks (VideoSys attentions.py ~157 shards only the video tokens): GEMMs
  // of samples x 300 rows, not divided by the degree, saturating with those rows.
  const sim::truth_model truth(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  const double h = 1152, text = 300;
  const auto flops_per_text_token = [&](double recomputed) {
    return 6.0 * 56 * 2.0 * h * h + 2.0 * recomputed * 2.0 * h * h + 4.0 * 4096 * h + 6.0 * h * h;
  };
  const double rate = truth.constants().gemm_efficiency_max * truth.cluster().gpu.peak_flops;
  const double half = truth.constants().gemm_half_tokens;
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    for (std::int64_t k : {1, 3}) {
      micro_batch_shape s;
      for (std::int64_t i = 0; i < k; ++i)
        s += micro_batch_shape::of(video_sample(static_cast<std::uint64_t>(i), {4, 30, 53}));
      auto no_samples = s;  // the caption's rows removed, every other term unchanged
      no_samples.samples = 0;
      for (std::int64_t d : {1, 2, 8, 16}) {
        for (std::int32_t r : {0, 56}) {
          CAPTURE(k);
          CAPTURE(d);
          CAPTURE(r);
          const execution_config c{d, sp,
                                   r == 0 ? recompute_setting::none() : recompute_setting::full(r)};
          const double rows = static_cast<double>(k) * text;
          CHECK(truth.caption_seconds(s, c) ==
                doctest::Approx(flops_per_text_token(r) * (rows + half) / rate).epsilon(1e-12));
          // What the samples add is whole at every degree, in the GEMMs, the micro-step and
          // the floor of the bound; dropping it, or dividing it by the degree, fails these.
          const double per_rows = flops_per_text_token(r) * rows / rate;
          CHECK(truth.micro_step_parts(s, c).gemm_seconds -
                    truth.micro_step_parts(no_samples, c).gemm_seconds ==
                doctest::Approx(per_rows).epsilon(1e-9));
          const auto device = [&](const micro_batch_shape& shape) {
            const auto p = truth.micro_step_parts(shape, c);
            return p.device_seconds_at(p.nic_bandwidth);
          };
          CHECK(device(s) - device(no_samples) == doctest::Approx(per_rows).epsilon(1e-9));
          CHECK(truth.marginal_seconds(s, c) - truth.marginal_seconds(no_samples, c) ==
                doctest::Approx(per_rows).epsilon(1e-9));
        }
      }
    }
  }
}

TEST_CASE("Sim.Truth.dit_marginal_time_is_a_floor_for_packing") {
  // cost_model requirement 5 with the caption's per-sample work: seconds(a + b) >= fixed_seconds +
  // marginal(a) + marginal(b), and degree x marginal never falls, for STDiT3-XL clips.
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    training_spec t;
    t.sp = sp;
    const sim::truth_model m(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()), t);
    for (auto r : {recompute_setting::none(), recompute_setting::partial(20)}) {
      const auto sa = micro_batch_shape::of(video_sample(0, {1, 15, 27}));
      const auto sb = micro_batch_shape::of(video_sample(1, {8, 30, 53}));
      double previous = 0;
      for (std::int64_t d : {1, 2, 4, 8, 16, 32}) {
        CAPTURE(d);
        const execution_config c{d, sp, r};
        const double empty = m.fixed_seconds(c);
        CHECK(empty <= m.seconds(micro_batch_shape{}, c));
        CHECK(m.seconds(sa + sb, c) >=
              empty + m.marginal_seconds(sa, c) + m.marginal_seconds(sb, c) - 1e-12);
        CHECK(m.marginal_seconds(sa, c) <= m.seconds(sa, c));
        if (sp == sequence_parallel::ring && d == 1)
          continue;  // see degree_times_marginal_never_falls
        const double work = static_cast<double>(d) * m.marginal_seconds(sa, c);
        CHECK(work >= previous * (1 - 1e-12));
        previous = work;
      }
    }
  }
}

TEST_CASE("Sim.Truth.decoder_lm_has_no_caption_work") {
  // Llama-3-8B: no cross-attention, so no caption seconds, the GEMMs are the 6 N and recompute
  // formulas over the sample tokens alone, and the sample count changes nothing.
  const auto truth = llama_truth();
  const auto one = text(8192);
  auto many = one;
  many.samples = 7;
  const auto& model = truth.model();
  for (std::int64_t d : {1, 8}) {
    for (auto r : {recompute_setting::none(), recompute_setting::full(32)}) {
      const auto c = at(d, sequence_parallel::ulysses, r);
      CHECK(truth.caption_seconds(many, c) == 0.0);
      CHECK(truth.seconds(many, c) == truth.seconds(one, c));
      CHECK(truth.peak_bytes(many, c) == truth.peak_bytes(one, c));
      const double flops =
          6.0 * static_cast<double>(model.per_token_params()) +
          2.0 * static_cast<double>(model.block_params()) * static_cast<double>(r.layers);
      CHECK(truth.micro_step_parts(one, c).gemm_seconds ==
            flops * (8192.0 / static_cast<double>(d) + truth.constants().gemm_half_tokens) /
                (truth.constants().gemm_efficiency_max * truth.cluster().gpu.peak_flops));
    }
  }
}

// ---- the simulator -----------------------------------------------------------------------------

TEST_CASE("Sim.Simulator.independent_steps_sum_per_rank") {
  const auto truth = llama_truth(1);
  std::vector<sample> batch;
  for (std::uint64_t i = 0; i < 12; ++i)
    batch.push_back(text_sample(i, 500 + 700 * static_cast<std::int64_t>(i)));
  // Ranks 0..3 get three single-GPU micro-steps each; ranks 4..7 stay idle.
  std::vector<micro_step> steps;
  std::vector<double> expected(8, 0.0);
  for (std::uint64_t i = 0; i < 12; ++i) {
    const auto rank = static_cast<std::int64_t>(i % 4);
    steps.push_back(step(static_cast<std::int64_t>(i), rank, 1, {i}));
    expected[static_cast<std::size_t>(rank)] +=
        truth.seconds(micro_batch_shape::of(batch[i]), at(1));
  }
  const auto result = sim::simulate(plan_of(8, steps), batch, truth, exact);
  double busy = 0;
  for (std::size_t r = 0; r < 8; ++r) {
    CAPTURE(r);
    CHECK(result.rank_busy_seconds[r] == doctest::Approx(expected[r]).epsilon(1e-12));
    busy += expected[r];
  }
  const double makespan = *std::max_element(expected.begin(), expected.end());
  CHECK(result.makespan_seconds == doctest::Approx(makespan).epsilon(1e-12));
  CHECK(result.idle_fraction == doctest::Approx(1.0 - busy / (8 * makespan)));
  CHECK(result.step_seconds ==
        doctest::Approx(result.makespan_seconds + truth.gradient_sync_seconds()));
  CHECK(result.oom_events == 0);
  CHECK(result.tokens == 500 * 12 + 700 * 66);
  CHECK(result.timelines[0].size() == 3);
  CHECK(result.timelines[5].empty());
  CHECK(result.rank_peak_bytes[5] == doctest::Approx(truth.static_bytes()));
}

TEST_CASE("Sim.Simulator.group_waits_for_all_members") {
  const auto truth = llama_truth(1);
  const std::vector<sample> batch{text_sample(1, 30000), text_sample(2, 300), text_sample(3, 8000)};
  // Rank 0 runs a long step, rank 1 a short one; then both run a degree-2 step together.
  const auto plan = plan_of(8, {step(0, 0, 1, {1}), step(1, 1, 1, {2}), step(2, 0, 2, {3})});
  const auto result = sim::simulate(plan, batch, truth, exact);
  const auto& long_step = result.micro_steps[0];
  const auto& short_step = result.micro_steps[1];
  const auto& group = result.micro_steps[2];
  REQUIRE(long_step.end_seconds > short_step.end_seconds);
  CHECK(group.start_seconds == long_step.end_seconds);
  CHECK(group.seconds() == doctest::Approx(truth.seconds(micro_batch_shape::of(batch[2]), at(2))));
  // Rank 1 idles from the end of its short step until its partner is free.
  CHECK(result.timelines[1].size() == 2);
  CHECK(result.timelines[1][1].start - result.timelines[1][0].end ==
        doctest::Approx(long_step.end_seconds - short_step.end_seconds));
  CHECK(result.timelines[1][1].degree == 2);
  CHECK(result.makespan_seconds == doctest::Approx(group.end_seconds));
}

TEST_CASE("Sim.Simulator.ranks_follow_sequence_order") {
  const auto truth = llama_truth(1);
  const std::vector<sample> batch{text_sample(1, 1000), text_sample(2, 2000), text_sample(3, 4000)};
  // Listed in reverse: rank 0 must still run #0, #1, #2 in that order.
  const auto plan = plan_of(8, {step(2, 0, 1, {3}), step(1, 0, 1, {2}), step(0, 0, 1, {1})});
  const auto result = sim::simulate(plan, batch, truth, exact);
  const auto& line = result.timelines[0];
  REQUIRE(line.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(line[k].sequence == static_cast<std::int64_t>(k));
    if (k > 0) CHECK(line[k].start == line[k - 1].end);
  }
  CHECK(line[0].start == 0.0);
  CHECK(line[0].step == 2);
  CHECK(result.micro_steps[2].start_seconds == 0.0);
  // A group step later in sequence waits for an earlier step of one member even if the other
  // member is free: rank 1 is free at 0, but #3 on ranks 0..1 follows rank 0's #0..#2.
  auto grouped = plan;
  grouped.micro_steps.push_back(step(3, 0, 2, {4}));
  std::vector<sample> more = batch;
  more.push_back(text_sample(4, 500));
  const auto r2 = sim::simulate(grouped, more, truth, exact);
  CHECK(r2.micro_steps[3].start_seconds == doctest::Approx(result.makespan_seconds));
}

TEST_CASE("Sim.Simulator.nic_sharing_slows_concurrent_cross_node_groups") {
  // Two degree-2 groups that each straddle a node boundary and both touch node 1: ranks 7-8
  // (nodes 0-1) and 15-16 (nodes 1-2). With one NIC per node they share node 1's NIC.
  sim::truth_constants one_nic;
  one_nic.nics_per_node = 1;
  const auto shared = llama_truth(3, {}, one_nic);
  const auto hgx = llama_truth(3);
  const std::vector<sample> batch{text_sample(1, 16384), text_sample(2, 16384)};
  const auto alone = plan_of(24, {step(0, 7, 2, {1})});
  const auto both = plan_of(24, {step(0, 7, 2, {1}), step(1, 15, 2, {2})});
  sim::sim_options partial = exact;
  partial.require_every_sample = false;
  const auto r_alone = sim::simulate(alone, batch, shared, partial);
  const auto r_both = sim::simulate(both, batch, shared, exact);
  const auto parts = shared.micro_step_parts_at(text(16384), at(2), 7);
  REQUIRE(parts.crosses_nodes);
  CHECK(r_alone.micro_steps[0].seconds() == doctest::Approx(parts.seconds()));
  CHECK(r_alone.nic_contention_seconds == 0.0);
  // Identical transfers running side by side: each gets half the NIC for its whole duration.
  CHECK(r_both.micro_steps[0].seconds() > r_alone.micro_steps[0].seconds());
  CHECK(r_both.micro_steps[0].seconds() ==
        doctest::Approx(parts.seconds_at(parts.nic_bandwidth / 2)));
  CHECK(r_both.micro_steps[1].seconds() ==
        doctest::Approx(parts.seconds_at(parts.nic_bandwidth / 2)));
  CHECK(r_both.nic_contention_seconds > 0.0);
  // A shorter partner: the first group speeds up again once the second ends (event-driven).
  const std::vector<sample> uneven{text_sample(1, 16384), text_sample(2, 4096)};
  const auto r_uneven = sim::simulate(both, uneven, shared, exact);
  const double first = r_uneven.micro_steps[0].seconds();
  CHECK(first > parts.seconds());
  CHECK(first < parts.seconds_at(parts.nic_bandwidth / 2));
  // HGX (one NIC per GPU): disjoint GPUs never contend.
  const auto r_hgx = sim::simulate(both, batch, hgx, exact);
  CHECK(r_hgx.micro_steps[0].seconds() == doctest::Approx(r_alone.micro_steps[0].seconds()));
  CHECK(r_hgx.nic_contention_seconds == 0.0);
}

TEST_CASE("Sim.Simulator.oom_is_counted_not_hidden") {
  const auto truth = llama_truth(1);
  // A 64K sample on one GPU with nothing recomputed needs far more than 140 GiB.
  const std::vector<sample> batch{text_sample(1, 65536), text_sample(2, 1000)};
  const auto plan = plan_of(8, {step(0, 0, 1, {1}), step(1, 1, 1, {2})});
  const auto result = sim::simulate(plan, batch, truth, exact);
  CHECK(result.oom_events == 1);
  CHECK(result.oom_gpu_events == 1);
  CHECK(result.micro_steps[0].oom);
  CHECK_FALSE(result.micro_steps[1].oom);
  CHECK(result.peak_bytes > truth.capacity_bytes());
  CHECK(result.timelines[0][0].oom);
  CHECK(result.makespan_seconds > 0);  // the step still completes
  // A planner with no headroom packs micro-batches up to the capacity by its own model; the
  // truth model's fragmentation pushes some past it, and every one is counted.
  training_spec no_headroom;
  no_headroom.headroom_bytes = 0;
  no_headroom.headroom_fraction = 0;
  const auto cluster = hgx_cluster(1, gpus::h200_sxm());
  const DataCentricScheduler<> scheduler(
      analytic_cost_model(models::llama3_8b(), cluster, no_headroom));
  const auto big = test::heavy_tailed_batch(11, 400, 65536);
  const auto tight = sim::simulate(scheduler.plan(big), big,
                                   sim::truth_model(models::llama3_8b(), cluster), exact);
  CHECK(tight.oom_events > 0);
  CHECK(tight.peak_bytes > tight.capacity_bytes);
}

TEST_CASE("Sim.Simulator.deadlock_is_reported_not_hung") {
  const auto truth = llama_truth(1);
  const std::vector<sample> batch{text_sample(1, 1000), text_sample(2, 1000), text_sample(3, 1000)};
  // Two micro-steps with sequence 4 sharing ranks 2..3: rank 2 may take one first, rank 3 the
  // other, and each waits for the other forever.
  const auto plan = plan_of(8, {step(4, 0, 4, {1}), step(4, 2, 2, {2}), step(5, 6, 1, {3})});
  const auto msg = message_of([&] { (void)sim::simulate(plan, batch, truth); });
  CAPTURE(msg);
  CHECK(contains(msg, "deadlock"));
  CHECK(contains(msg, "share ranks 2..3"));
  CHECK(contains(msg, "#4 (entry 0, ranks 0..3)"));
  CHECK(contains(msg, "#4 (entry 1, ranks 2..3)"));
  // The same numbers on disjoint groups are fine.
  const auto fine = plan_of(8, {step(4, 0, 2, {1}), step(4, 2, 2, {2}), step(5, 6, 1, {3})});
  CHECK(sim::simulate(fine, batch, truth, exact).makespan_seconds > 0);
}

TEST_CASE("Sim.Simulator.bad_plans_name_the_sample_or_step") {
  const auto truth = llama_truth(1);
  const std::vector<sample> batch{text_sample(1, 1000), text_sample(2, 1000)};
  CHECK(contains(message_of([&] {
                   (void)sim::simulate(plan_of(8, {step(0, 0, 1, {1, 2, 99})}), batch, truth);
                 }),
                 "sample id 99, which is not in the batch"));
  CHECK(contains(
      message_of([&] {
        (void)sim::simulate(plan_of(8, {step(0, 0, 1, {1, 2}), step(1, 1, 1, {2})}), batch, truth);
      }),
      "sample id 2 is in micro-step #0"));
  CHECK(contains(
      message_of([&] { (void)sim::simulate(plan_of(8, {step(0, 0, 1, {1})}), batch, truth); }),
      "sample id 2 of the batch is in no micro-step"));
  CHECK(contains(message_of([&] {
                   (void)sim::simulate(plan_of(8, {step(0, 6, 4, {1, 2})}), batch, truth);
                 }),
                 "ranks 6..9) lies outside the cluster's ranks 0..7"));
  CHECK(contains(message_of([&] {
                   (void)sim::simulate(plan_of(8, {step(0, 0, 3, {1, 2})}), batch, truth);
                 }),
                 "degree = 3"));
  CHECK(contains(message_of([&] {
                   (void)sim::simulate(plan_of(16, {step(0, 0, 1, {1, 2})}), batch, truth);
                 }),
                 "the plan is for 16 GPUs"));
}

TEST_CASE("Sim.Simulator.a_micro_step_holds_clips_of_one_grid_or_text_only") {
  // Video DiTs batch clips as dense tensors of one latent grid (what varlen_buckets keeps
  // apart, and what the truth bound counts on): a plan that mixes grids, or a clip and text,
  // in one micro-step is refused, naming both samples.
  const sim::truth_model truth(models::stdit3_xl(), hgx_cluster(1, gpus::h200_sxm()));
  const std::vector<sample> batch{video_sample(1, {4, 16, 16}), video_sample(2, {4, 16, 16}),
                                  video_sample(3, {8, 16, 16}), text_sample(4, 1000)};
  CHECK(contains(
      message_of([&] {
        (void)sim::simulate(plan_of(8, {step(0, 0, 1, {1, 2, 3}), step(1, 1, 1, {4})}), batch,
                            truth);
      }),
      "holds sample id 3 (video grid 8 x 16 x 16) beside sample id 1 (video grid 4 x 16 x 16)"));
  CHECK(contains(message_of([&] {
                   (void)sim::simulate(plan_of(8, {step(0, 0, 1, {4, 1, 2}), step(1, 1, 1, {3})}),
                                       batch, truth);
                 }),
                 "holds sample id 1 (video grid 4 x 16 x 16) beside sample id 4 (text)"));
  // One grid per micro-step runs.
  CHECK(sim::simulate(plan_of(8, {step(0, 0, 1, {1, 2}), step(1, 1, 1, {3}), step(2, 2, 1, {4})}),
                      batch, truth, exact)
            .makespan_seconds > 0);
}

TEST_CASE("Sim.Simulator.deterministic_for_a_seed") {
  const auto truth = llama_truth(1);
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), truth.cluster()));
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    const auto batch = test::heavy_tailed_batch(seed, 120, 32768);
    const auto plan = scheduler.plan(batch);
    const auto a = sim::simulate(plan, batch, truth, {seed, 0.03});
    const auto b = sim::simulate(plan, batch, truth, {seed, 0.03});
    const auto c = sim::simulate(plan, batch, truth, {seed + 100, 0.03});
    CHECK(a == b);
    CHECK(a.makespan_seconds != c.makespan_seconds);
    // Without noise the seed does not matter.
    CHECK(sim::simulate(plan, batch, truth, {seed, 0.0}) ==
          sim::simulate(plan, batch, truth, {seed + 100, 0.0}));
    // Noise is mean one: the sum of durations stays within a few percent.
    double noisy = 0, plain = 0;
    for (const auto& m : a.micro_steps) {
      noisy += m.alone_seconds;
      plain += m.alone_seconds / m.noise;
    }
    CHECK(noisy == doctest::Approx(plain).epsilon(0.05));
  }
}

TEST_CASE("Sim.Simulator.truth_bound_is_below_the_simulated_makespan") {
  // The truth lower bound holds for the default scheduler's plans (noise off), whatever the
  // planner predicted: both SP styles, one and four nodes, ZeRO 1 and 3.
  struct scenario {
    std::int64_t nodes;
    sequence_parallel sp;
    int zero;
  };
  for (const auto& sc :
       {scenario{1, sequence_parallel::ulysses, 1}, scenario{4, sequence_parallel::ulysses, 1},
        scenario{4, sequence_parallel::ring, 1}, scenario{2, sequence_parallel::ulysses, 3}}) {
    training_spec t;
    t.sp = sc.sp;
    t.zero_stage = sc.zero;
    const auto cluster = hgx_cluster(sc.nodes, gpus::h200_sxm());
    const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), cluster, t));
    const sim::truth_model truth(models::llama3_8b(), cluster, t);
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      CAPTURE(seed);
      CAPTURE(sc.nodes);
      const auto batch =
          test::heavy_tailed_batch(seed, 40 + 30 * static_cast<std::size_t>(sc.nodes), 65536);
      const auto plan = scheduler.plan(batch);
      const auto result = sim::simulate(plan, batch, truth, exact);
      const double bound = sim::truth_lower_bound_seconds(batch, truth);
      CHECK(result.oom_events == 0);
      CHECK(bound > 0);
      CHECK(bound <= result.makespan_seconds * (1 + 1e-9));
    }
  }
  if (test::skip_without_wikipedia()) return;
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const DataCentricScheduler<> scheduler(analytic_cost_model(models::llama3_8b(), cluster));
  const sim::truth_model truth(models::llama3_8b(), cluster);
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    const auto batch = test::wikipedia_batch(seed, 1'000'000, 65536);
    const auto result = sim::simulate(scheduler.plan(batch), batch, truth, exact);
    CHECK(result.oom_events == 0);
    CHECK(sim::truth_lower_bound_seconds(batch, truth) <= result.makespan_seconds * (1 + 1e-9));
  }
}

TEST_CASE("Sim.Simulator.empty_plan_takes_no_time") {
  const auto truth = llama_truth(1);
  const auto result = sim::simulate(plan_of(8, {}), std::vector<sample>{}, truth);
  CHECK(result.step_seconds == 0.0);
  CHECK(result.idle_fraction == 0.0);
  CHECK(result.timelines.size() == 8);
  CHECK(result.peak_bytes == doctest::Approx(truth.static_bytes()));
}

TEST_CASE("Sim.Truth.host_time_decides_small_micro_steps") {
  // A micro-step takes the longer of its device time and the host's time to issue its kernels:
  // the host decides a short one, a long one hides it (on a Grace host; an x86 host issues a
  // 200-token micro-step's kernels faster than the GPU runs them).
  sim::truth_constants grace;
  grace.host_seconds_per_kernel = grace_host.seconds_per_kernel;
  const auto m = llama_truth(4, {}, grace);
  const execution_config c{1, sequence_parallel::ulysses, recompute_setting::none()};
  const auto small = micro_batch_shape::of(text_sample(0, 200));
  const auto large = micro_batch_shape::of(text_sample(1, 60000));
  const auto ps = m.micro_step_parts(small, c);
  const auto pl = m.micro_step_parts(large, c);
  const auto& k = m.constants();
  const double kernels = k.forward_kernels_per_layer * 3.0 * 32 + k.loss_kernels;
  CHECK(ps.host_seconds == doctest::Approx(kernels * k.host_seconds_per_kernel).epsilon(1e-12));
  CHECK(pl.host_seconds == doctest::Approx(ps.host_seconds));  // the kernels, not the tokens
  CHECK(ps.host_seconds > ps.device_seconds_at(ps.nic_bandwidth));
  CHECK(m.seconds(small, c) == doctest::Approx(ps.host_seconds));
  CHECK(pl.host_seconds < pl.device_seconds_at(pl.nic_bandwidth));
  CHECK(m.seconds(large, c) == doctest::Approx(pl.device_seconds_at(pl.nic_bandwidth)));
  // Without the host cost every micro-step is its device time.
  auto none = k;
  none.host_seconds_per_kernel = 0;
  const sim::truth_model device_only(m.model(), m.cluster(), m.training(), none);
  CHECK(device_only.seconds(small, c) == doctest::Approx(ps.device_seconds_at(ps.nic_bandwidth)));
  CHECK(device_only.fixed_seconds(c) == doctest::Approx(m.fixed_seconds(c)));
  // Ring attention: d steps per layer and pass, each with its own kernels (TE's P2P loop).
  const execution_config r{4, sequence_parallel::ring, recompute_setting::partial(8)};
  const auto pr = m.micro_step_parts(small, r);
  const double ring_kernels =
      4.0 * (k.ring_forward_kernels_per_step * (32 + 8) + k.ring_backward_kernels_per_step * 32);
  CHECK(pr.host_seconds == doctest::Approx((k.forward_kernels_per_layer * (3.0 * 32 + 8) +
                                            k.loss_kernels + ring_kernels) *
                                           k.host_seconds_per_kernel)
                               .epsilon(1e-12));
}
