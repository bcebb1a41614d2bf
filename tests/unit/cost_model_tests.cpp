// The analytic cost model: formulas against hand computation, monotonicity, memory terms.

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

using namespace dcp;

namespace {
const analytic_cost_model& llama() {
  static const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  return cost;
}
execution_config at(std::int64_t d, recompute_setting r = {}) {
  return {d, sequence_parallel::ulysses, r};
}
}  // namespace

TEST_CASE("Cost.Analytic.dense_time_is_6N_per_token_over_peak_times_efficiency") {
  const auto& m = llama();
  // Attention pairs zero isolates the dense term: 6 * per-token params * tokens.
  micro_batch_shape s{1, 4096, 4096, 0.0};
  const double expected = 6.0 * static_cast<double>(m.model().per_token_params()) * 4096.0 /
                          (m.constants().dense_efficiency * m.cluster().gpu.peak_flops);
  CHECK(m.compute_seconds(s, at(1)) == doctest::Approx(expected).epsilon(1e-12));
  CHECK(m.compute_seconds(s, at(4)) == doctest::Approx(expected / 4).epsilon(1e-12));
  // LM head included: per-token params exceed the block params by vocab * hidden.
  CHECK(m.model().per_token_params() ==
        m.model().layers * m.model().block_params() + m.model().vocab * m.model().hidden);
}

TEST_CASE("Cost.Analytic.attention_is_quadratic_and_causal_halves_it") {
  const auto& m = llama();
  auto attention = [&](const sample& s) {
    auto shape = micro_batch_shape::of(s);
    auto dense_only = shape;
    dense_only.attention_pairs = 0;
    return m.compute_seconds(shape, at(1)) - m.compute_seconds(dense_only, at(1));
  };
  const double a1 = attention(text_sample(0, 8192));
  const double a2 = attention(text_sample(0, 16384));
  CHECK(a2 == doctest::Approx(4.0 * a1).epsilon(1e-12));
  sample full = text_sample(0, 8192);
  full.attention = attention_kind::full;
  CHECK(attention(full) == doctest::Approx(2.0 * a1).epsilon(1e-12));
  // Packed micro-batches add per-sample pairs, never (Σs)².
  const auto packed = micro_batch_shape::of(text_sample(0, 8192)) + micro_batch_shape::of(text_sample(1, 8192));
  CHECK(packed.attention_pairs == doctest::Approx(2.0 * 0.5 * 8192.0 * 8192.0));
}

TEST_CASE("Cost.Analytic.factorised_video_attention_uses_spatial_and_temporal_terms") {
  const sample v = video_sample(0, {30, 45, 80});
  const double frames = 30, per_frame = 45 * 80;
  CHECK(micro_batch_shape::pairs_of(v) ==
        doctest::Approx(0.5 * (frames * per_frame * per_frame + per_frame * frames * frames)));
  CHECK(micro_batch_shape::pairs_of(v) < 0.1 * static_cast<double>(v.tokens) * static_cast<double>(v.tokens));
}

TEST_CASE("Cost.Analytic.time_and_memory_are_monotone_in_length") {
  const auto& m = llama();
  for (std::int64_t d : {1, 2, 8, 32}) {
    double previous_time = 0, previous_bytes = 0;
    for (std::int64_t tokens = 128; tokens <= (1 << 20); tokens *= 2) {
      const auto s = micro_batch_shape::of(text_sample(0, tokens));
      CHECK(m.seconds(s, at(d)) > previous_time);
      CHECK(m.peak_bytes(s, at(d)) > previous_bytes);
      previous_time = m.seconds(s, at(d));
      previous_bytes = m.peak_bytes(s, at(d));
    }
  }
}

TEST_CASE("Cost.Analytic.recompute_trades_time_for_memory") {
  const auto& m = llama();
  const auto s = micro_batch_shape::of(text_sample(0, 32768));
  const auto none = at(1);
  const auto full = at(1, recompute_setting::full(32));
  const auto half = at(1, recompute_setting::partial(16));
  const auto selective = at(1, recompute_setting::selective_only());
  CHECK(m.peak_bytes(s, full) < m.peak_bytes(s, half));
  CHECK(m.peak_bytes(s, half) < m.peak_bytes(s, none));
  CHECK(m.peak_bytes(s, selective) < m.peak_bytes(s, none));
  CHECK(m.seconds(s, full) > m.seconds(s, half));
  CHECK(m.seconds(s, half) > m.seconds(s, none));
  CHECK(m.seconds(s, selective) > m.seconds(s, none));
  // Full recompute repeats the forward: dense work grows by about 4/3 (perf-model §2.2).
  micro_batch_shape dense{1, 32768, 32768, 0.0};
  CHECK(m.compute_seconds(dense, full) / m.compute_seconds(dense, none) ==
        doctest::Approx(4.0 / 3.0).epsilon(0.02));
}

TEST_CASE("Cost.Analytic.degree_divides_activations_and_adds_communication") {
  const auto& m = llama();
  const auto s = micro_batch_shape::of(text_sample(0, 65536));
  CHECK(m.communication_seconds(s, at(1)) == 0.0);
  CHECK(m.communication_seconds(s, at(8)) > 0.0);
  // Crossing nodes puts the all-to-all on the NIC: slower per byte than NVLink.
  const auto per_token_comm = [&](std::int64_t d) {
    return m.communication_seconds(s, at(d)) * static_cast<double>(d);
  };
  CHECK(per_token_comm(16) > per_token_comm(8));
  const double a1 = m.activation_bytes(s, at(1));
  const double a8 = m.activation_bytes(s, at(8));
  CHECK(a8 < a1 / 6.0);
  // GPU-seconds never fall with the degree (cost_model requirement 5).
  double previous = 0;
  for (std::int64_t d = 1; d <= 32; d *= 2) {
    const double gpu_seconds = static_cast<double>(d) * (m.seconds(s, at(d)) - m.seconds({}, at(d)));
    CHECK(gpu_seconds >= previous * (1 - 1e-12));
    previous = gpu_seconds;
  }
}

TEST_CASE("Cost.Analytic.zero_stages_shrink_model_states") {
  auto states = [](int stage) {
    training_spec t;
    t.zero_stage = stage;
    return analytic_cost_model(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()), t).state_bytes();
  };
  const double psi = static_cast<double>(models::llama3_8b().total_params());
  CHECK(states(0) == doctest::Approx(16 * psi));
  CHECK(states(1) == doctest::Approx(4 * psi + 12 * psi / 32));
  CHECK(states(2) == doctest::Approx(2 * psi + 14 * psi / 32));
  CHECK(states(3) < states(2));
  CHECK(states(2) < states(1));
  CHECK(states(1) < states(0));
}

TEST_CASE("Cost.Analytic.logits_dominate_long_sequences_unless_chunked") {
  training_spec chunked;
  chunked.chunked_cross_entropy = true;
  const analytic_cost_model plain(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
  const analytic_cost_model fused(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()), chunked);
  const auto s = micro_batch_shape::of(text_sample(0, 65536));
  // 6 bytes per vocabulary entry per token: 65536 * 128256 * 6 ≈ 47 GiB (perf-model §4.2).
  CHECK(plain.peak_bytes(s, at(1)) - fused.peak_bytes(s, at(1)) ==
        doctest::Approx(6.0 * 128256.0 * (65536.0 - 8192.0)).epsilon(1e-9));
}

TEST_CASE("Cost.Analytic.marginal_time_is_a_floor_for_packing") {
  // cost_model requirement 5: seconds(a + b) >= seconds({}) + marginal(a) + marginal(b), for
  // both sequence-parallel styles (ring: each sample's compute counts in full, since attention
  // hides transfers but is never hidden).
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring}) {
    training_spec t;
    t.sp = sp;
    const analytic_cost_model m(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()), t);
    for (std::int64_t d : {1, 2, 8, 16}) {
      for (std::int64_t a : {100, 3000, 40000}) {
        for (std::int64_t b : {50, 5000, 60000}) {
          for (auto r : {recompute_setting::none(), recompute_setting::partial(7)}) {
            const execution_config c{d, sp, r};
            const auto sa = micro_batch_shape::of(text_sample(0, a));
            const auto sb = micro_batch_shape::of(text_sample(1, b));
            const double empty = m.seconds(micro_batch_shape{}, c);
            CHECK(m.seconds(sa + sb, c) >= empty + m.marginal_seconds(sa, c) + m.marginal_seconds(sb, c) - 1e-12);
            CHECK(m.seconds(sb, c) >= empty + m.marginal_seconds(sb, c) - 1e-12);
            CHECK(m.marginal_seconds(sb, c) >= 0.0);
            // Ring: the floor is the whole compute.
            if (sp == sequence_parallel::ring) CHECK(m.marginal_seconds(sb, c) == m.compute_seconds(sb, c));
          }
        }
      }
    }
  }
}
