// The analytic cost model: formulas against hand computation, monotonicity, memory terms; and
// the promises both it and the truth model make as cost models.

#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/sim/truth_model.hpp"

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
  // Less the attention (its per-row term remains at zero pairs), the dense term:
  // 6 * per-token params * tokens.
  micro_batch_shape s{1, 4096, 4096, 0.0};
  const double expected = 6.0 * static_cast<double>(m.model().per_token_params()) * 4096.0 /
                          (m.constants().dense_efficiency * m.cluster().gpu.peak_flops);
  CHECK(m.compute_seconds(s, at(1)) - m.attention_compute_seconds(s, at(1)) ==
        doctest::Approx(expected).epsilon(1e-12));
  CHECK(m.compute_seconds(s, at(4)) - m.attention_compute_seconds(s, at(4)) / 4 ==
        doctest::Approx(expected / 4).epsilon(1e-12));
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
  const auto packed =
      micro_batch_shape::of(text_sample(0, 8192)) + micro_batch_shape::of(text_sample(1, 8192));
  CHECK(packed.attention_pairs == doctest::Approx(2.0 * 0.5 * 8192.0 * 8192.0));
}

TEST_CASE("Cost.Analytic.factorised_video_attention_uses_spatial_and_temporal_terms") {
  const sample v = video_sample(0, {30, 45, 80});
  const double frames = 30, per_frame = 45 * 80;
  CHECK(micro_batch_shape::pairs_of(v) ==
        doctest::Approx(0.5 * (frames * per_frame * per_frame + per_frame * frames * frames)));
  CHECK(micro_batch_shape::pairs_of(v) <
        0.1 * static_cast<double>(v.tokens) * static_cast<double>(v.tokens));
}

TEST_CASE("Cost.Analytic.time_and_memory_are_monotone_in_length") {
  const auto& m = llama();
  for (std::int64_t d : {1, 2, 8, 32}) {
    double previous_time = 0, previous_bytes = 0;
    for (std::int64_t tokens = 128; tokens <= (1 << 20); tokens *= 2) {
      const auto s = micro_batch_shape::of(text_sample(0, tokens));
      // The device's time grows with every token; the micro-step's never falls (the host's
      // issue time may decide short ones).
      CHECK(m.device_seconds(s, at(d)) > previous_time);
      CHECK(m.seconds(s, at(d)) >= m.device_seconds(s, at(d)));
      CHECK(m.peak_bytes(s, at(d)) > previous_bytes);
      previous_time = m.device_seconds(s, at(d));
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
  // Full recompute repeats the forward: dense work grows by about 4/3 (docs/cost-sources.md §2.2).
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
    const double gpu_seconds =
        static_cast<double>(d) * (m.device_seconds(s, at(d)) - m.fixed_seconds(at(d)));
    CHECK(gpu_seconds >= previous * (1 - 1e-12));
    previous = gpu_seconds;
  }
}

TEST_CASE("Cost.Analytic.zero_stages_shrink_model_states") {
  auto states = [](int stage) {
    training_spec t;
    t.zero_stage = stage;
    return analytic_cost_model(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()), t)
        .state_bytes();
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
  // 6 bytes per vocabulary entry per token: 65536 * 128256 * 6 ≈ 47 GiB
  // (docs/cost-sources.md §4.2).
  CHECK(plain.peak_bytes(s, at(1)) - fused.peak_bytes(s, at(1)) ==
        doctest::Approx(6.0 * 128256.0 * (65536.0 - 8192.0)).epsilon(1e-9));
}

TEST_CASE("Cost.Analytic.marginal_time_is_a_floor_for_packing") {
  // cost_model requirement 5: seconds(a + b) >= seconds({}) + marginal(a) + marginal(b), for
  // both sequence-parallel styles (ring: each sample's compute counts in full, since attention
  // hides transfers but is never hidden).
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
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
            const double empty = m.fixed_seconds(c);  // the empty micro-step's device time
            CHECK(empty <= m.seconds(micro_batch_shape{}, c));
            CHECK(m.seconds(sa + sb, c) >=
                  empty + m.marginal_seconds(sa, c) + m.marginal_seconds(sb, c) - 1e-12);
            CHECK(m.seconds(sb, c) >= empty + m.marginal_seconds(sb, c) - 1e-12);
            CHECK(m.marginal_seconds(sb, c) >= 0.0);
            // Ring: the floor is the whole compute.
            if (sp == sequence_parallel::ring)
              CHECK(m.marginal_seconds(sb, c) == m.compute_seconds(sb, c));
          }
        }
      }
    }
  }
}

namespace {
/// k clips of 16 frames at 480p under OpenSora 1.2: 4 latent frames of 30 x 53 patches.
micro_batch_shape clips_480p_16_frames(std::int64_t k) {
  micro_batch_shape s;
  for (std::int64_t i = 0; i < k; ++i)
    s += micro_batch_shape::of(video_sample(static_cast<std::uint64_t>(i), {4, 30, 53}));
  return s;
}
/// The same micro-batch with its sample count zeroed: every term but the caption's is unchanged.
micro_batch_shape without_samples(micro_batch_shape s) {
  s.samples = 0;
  return s;
}
}  // namespace

TEST_CASE("Cost.Analytic.caption_work_runs_whole_on_every_gpu_of_the_group") {
  // STDiT3-XL: every rank embeds each sample's 300 caption tokens (Linear 4096 -> 1152, GELU,
  // Linear 1152 -> 1152) and projects them to K and V in all 56 blocks (VideoSys attentions.py
  // ~157: only the video tokens are sharded), so this work is not divided by the degree.
  const analytic_cost_model m(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  const double h = 1152, text = 300, embed = 4096, blocks = 56;
  const auto flops_per_text_token = [&](double recomputed) {
    return 6.0 * blocks * 2.0 * h * h + 2.0 * recomputed * 2.0 * h * h + 4.0 * embed * h +
           6.0 * h * h;
  };
  // 275.6 GFLOP per sample without recomputation: 267.5 in the k/v projections, 8.1 in the
  // embedder.
  CHECK(text * flops_per_text_token(0) == doctest::Approx(275.595264e9).epsilon(1e-12));
  CHECK(text * detail::caption_flops_per_text_token(m.model(), 0) ==
        doctest::Approx(275.595264e9).epsilon(1e-12));
  const double rate = m.constants().dense_efficiency * m.cluster().gpu.peak_flops;
  for (std::int64_t k : {1, 3}) {
    const auto s = clips_480p_16_frames(k);
    for (std::int64_t d : {1, 2, 8, 16}) {
      for (std::int32_t r : {0, 56}) {
        CAPTURE(k);
        CAPTURE(d);
        CAPTURE(r);
        const auto c = at(d, r == 0 ? recompute_setting::none() : recompute_setting::full(r));
        const double expected = static_cast<double>(k) * text * flops_per_text_token(r) / rate;
        CHECK(m.caption_seconds(s, c) == doctest::Approx(expected).epsilon(1e-12));
        // In the micro-step's time and in the floor the bound uses, whole at every degree:
        // dropping it, or dividing it by the degree, fails these.
        CHECK(m.compute_seconds(s, c) - m.compute_seconds(without_samples(s), c) ==
              doctest::Approx(expected).epsilon(1e-9));
        CHECK(m.device_seconds(s, c) - m.device_seconds(without_samples(s), c) ==
              doctest::Approx(expected).epsilon(1e-9));
        CHECK(m.marginal_seconds(s, c) - m.marginal_seconds(without_samples(s), c) ==
              doctest::Approx(expected).epsilon(1e-9));
        // The dense time term carries it (calibrated<M> refits it with the other GEMMs).
        CHECK(m.time_terms(s, c)[0] - m.time_terms(without_samples(s), c)[0] ==
              doctest::Approx(expected).epsilon(1e-9));
      }
    }
  }
  // Wan2.1-14B: 512 umT5 tokens into 40 blocks of hidden 5120, 6.57 TFLOP per sample.
  const analytic_cost_model wan(models::wan21_14b(), hgx_cluster(4, gpus::h200_sxm()));
  const double wan_flops =
      512.0 * (6.0 * 40 * 2.0 * 5120.0 * 5120.0 + 4.0 * 4096 * 5120 + 6.0 * 5120.0 * 5120.0);
  CHECK(wan_flops == doctest::Approx(6.5659e12).epsilon(1e-4));
  const auto clip = micro_batch_shape::of(video_sample(0, {21, 30, 52}, attention_kind::full));
  CHECK(wan.caption_seconds(clip, at(8)) == doctest::Approx(wan_flops / rate).epsilon(1e-12));
  CHECK(wan.caption_seconds(clip, at(8)) == wan.caption_seconds(clip, at(1)));
}

TEST_CASE("Cost.Analytic.caption_keys_and_values_are_kept_whole_on_every_gpu") {
  // Per sample: 4h bytes per caption token per block that keeps its activations (the caption's
  // K and V in BF16), plus 2 x 4096 + 6h once (the embedder's input, hidden layer and output).
  const analytic_cost_model m(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  const double h = 1152, text = 300;
  for (std::int64_t d : {1, 8}) {
    for (std::int32_t r : {0, 20, 56}) {
      CAPTURE(d);
      CAPTURE(r);
      const auto c = at(d, r == 0 ? recompute_setting::none() : recompute_setting::partial(r));
      const double kv_blocks = 56.0 - r + (r > 0 ? 1.0 : 0.0);
      const double per_sample = text * (kv_blocks * 4.0 * h + 2.0 * 4096 + 6.0 * h);
      const auto s = clips_480p_16_frames(3);
      CHECK(m.peak_bytes(s, c) - m.peak_bytes(without_samples(s), c) ==
            doctest::Approx(3.0 * per_sample).epsilon(1e-9));
    }
  }
  // 81.9 MB per sample when no block is recomputed.
  CHECK(detail::caption_activation_bytes_per_sample(m.model(), 0) == doctest::Approx(81.9456e6));
}

TEST_CASE("Cost.Analytic.dit_recompute_leaves_the_caption_projections_to_the_caption") {
  // A recomputed block repeats its forward over the video tokens with every block weight but
  // the cross-attention k and v (which act on the caption, recomputed in caption_seconds).
  const analytic_cost_model m(models::stdit3_xl(), hgx_cluster(4, gpus::h200_sxm()));
  const auto& model = m.model();
  const double tokens = 6360;
  const micro_batch_shape dense{0, 6360, 6360, 0.0};  // no samples, no self-attention pairs
  const double per_block =
      static_cast<double>(model.block_params() - 2 * model.hidden * model.hidden);
  const double rate = m.constants().dense_efficiency * m.cluster().gpu.peak_flops;
  // The recomputed forward also repeats the cross-attention scores and values: 4h per
  // (video token, caption token) pair per block, plus the saturating curve's per-row term for
  // the self- and cross-attention rows of every video token.
  const auto& k = m.constants();
  const double cross_attention =
      4.0 * 1152.0 * (tokens * 300.0 + k.attention_forward_half_rows * 2.0 * tokens) * 56.0 /
      (k.attention_forward_efficiency * m.cluster().gpu.peak_flops);
  CHECK(m.compute_seconds(dense, at(1, recompute_setting::full(56))) -
            m.compute_seconds(dense, at(1)) ==
        doctest::Approx(2.0 * per_block * 56.0 * tokens / rate + cross_attention).epsilon(1e-9));
}

TEST_CASE("Cost.Analytic.decoder_lm_has_no_caption_work") {
  // Llama-3-8B has no cross-attention: no caption seconds or bytes, and its time is the dense
  // and attention formulas alone, whatever the sample count.
  const auto& m = llama();
  const auto one = micro_batch_shape::of(text_sample(0, 8192));
  auto many = one;
  many.samples = 7;
  for (std::int64_t d : {1, 8}) {
    for (auto r : {recompute_setting::none(), recompute_setting::full(32)}) {
      const auto c = at(d, r);
      CHECK(m.caption_seconds(one, c) == 0.0);
      CHECK(m.caption_seconds(many, c) == 0.0);
      CHECK(m.compute_seconds(one, c) ==
            (m.dense_compute_seconds(8192.0, c) + m.attention_compute_seconds(one, c)) /
                static_cast<double>(d));
      CHECK(m.seconds(many, c) == m.seconds(one, c));
      CHECK(m.peak_bytes(many, c) == m.peak_bytes(one, c));
    }
  }
  CHECK(detail::caption_flops_per_text_token(m.model(), 32) == 0.0);
  CHECK(detail::caption_activation_bytes_per_sample(m.model(), 0) == 0.0);
  CHECK(detail::recomputed_params_per_token_block(m.model()) == m.model().block_params());
  // Full recompute adds 2 x block params per token per layer: dense work x (6N + 2 L B) / 6N.
  const micro_batch_shape dense{1, 32768, 32768, 0.0};
  const double n = static_cast<double>(m.model().per_token_params());
  const double lb = static_cast<double>(m.model().layers * m.model().block_params());
  const auto dense_part = [&](const execution_config& c) {
    return m.compute_seconds(dense, c) - m.attention_compute_seconds(dense, c);
  };
  CHECK(dense_part(at(1, recompute_setting::full(32))) / dense_part(at(1)) ==
        doctest::Approx((6.0 * n + 2.0 * lb) / (6.0 * n)).epsilon(1e-12));
}

namespace {
// cost_model optional member 8 for one model: peak bytes of any micro-batch equal those of its
// (tokens, samples) alone and grow with each; an empty micro-batch is fastest without
// recomputation, and recomputation never shortens a micro-batch's marginal time.
template <class Model>
void check_memory_by_tokens(const Model& m, std::uint64_t seed) {
  static_assert(dcp::detail::memory_by_tokens<Model>);
  std::uint64_t state = seed;
  const auto next = [&state](std::int64_t below) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(below));
  };
  const auto layers = static_cast<std::int32_t>(m.model().layers);
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
    for (std::int64_t d : {1, 8, 16}) {
      const execution_config none{d, sp, {}};
      const double empty = m.seconds(micro_batch_shape{}, none);
      for (std::int32_t r = 0; r <= layers; ++r)
        for (bool selective : {false, true}) {
          const execution_config c{d, sp, {r, selective}};
          CHECK(m.seconds(micro_batch_shape{}, c) >= empty);
        }
      for (int trial = 0; trial < 20; ++trial) {
        micro_batch_shape packed;
        const auto count = 1 + next(6);
        for (std::int64_t i = 0; i < count; ++i)
          packed +=
              micro_batch_shape::of(text_sample(static_cast<std::uint64_t>(i), 1 + next(60000)));
        micro_batch_shape one;
        one.samples = packed.samples;
        one.tokens = packed.tokens;
        one.longest = packed.tokens;
        const execution_config c{
            d, sp, {static_cast<std::int32_t>(next(layers + 1)), next(2) == 1}};
        CHECK(m.peak_bytes(packed, c) == m.peak_bytes(one, c));
        auto more_tokens = one;
        more_tokens.tokens += 1 + next(1000);
        auto more_samples = one;
        more_samples.samples += 1;
        CHECK(m.peak_bytes(more_tokens, c) >= m.peak_bytes(one, c));
        CHECK(m.peak_bytes(more_samples, c) >= m.peak_bytes(one, c));
        // Recomputation never shortens what a micro-batch's samples add (the ladder of the
        // truth bound takes each range's floor at its fewest layers).
        const auto marginal = [&](recompute_setting r) {
          return dcp::detail::bound_detail::marginal_at(m, packed, execution_config{d, sp, r});
        };
        const auto r = static_cast<std::int32_t>(next(layers));
        CHECK(marginal({r + 1, false}) >= marginal({r, false}) - 1e-12);
        CHECK(marginal({r, true}) >= marginal({r, false}) - 1e-12);
      }
    }
  }
}
}  // namespace

TEST_CASE("Cost.MemoryByTokens.holds_for_the_analytic_and_truth_models") {
  std::uint64_t seed = 1;
  for (const auto& model : {models::llama3_8b(), models::llama3_70b(), models::stdit3_xl()}) {
    for (int zero : {1, 3}) {
      CAPTURE(model.name);
      CAPTURE(zero);
      training_spec t;
      t.zero_stage = zero;
      const auto cluster = hgx_cluster(4, gpus::h200_sxm());
      check_memory_by_tokens(analytic_cost_model(model, cluster, t), seed++);
      check_memory_by_tokens(sim::truth_model(model, cluster, t), seed++);
    }
  }
}

namespace {
/// A decoder whose every GEMM is 256 wide or a multiple (QKV 768, the rest 256), so with one SM
/// each GEMM runs ceil(M / 128) x (width / 256) waves of one tile: eta = M / (128 ceil(M / 128)).
model_spec narrow_decoder() {
  return {"narrow", model_family::decoder_lm, 2, 256, 2, 2, 256, 256, mlp_kind::gelu,
          false,    attention_kind::causal,   0, 0};
}
}  // namespace

TEST_CASE("Cost.GemmWaves.efficiency_is_the_useful_share_of_the_waves") {
  const auto m = narrow_decoder();
  // One SM: every tile is a wave of its own; only the last row tile is partly empty.
  CHECK(detail::gemm_wave_efficiency(m, 1, 128) == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(detail::gemm_wave_efficiency(m, 1, 129) == doctest::Approx(129.0 / 256.0).epsilon(1e-12));
  CHECK(detail::gemm_wave_efficiency(m, 1, 200) == doctest::Approx(200.0 / 256.0).epsilon(1e-12));
  // Many SMs: each GEMM is one partly filled wave, so useful FLOPs over SMs x tile FLOPs,
  // summed with each GEMM's FLOPs: forward and data gradient of QKV (256 x 768), O, up, down
  // (256 x 256, two per layer each) and the head (256 x 256, once).
  const double rows = 64;
  double useful = 0, spent = 0;
  for (const auto& [inner, width, count] :
       {std::tuple{256.0, 768.0, 2.0}, std::tuple{256.0, 256.0, 6.0},
        std::tuple{256.0, 256.0, 1.0}}) {
    useful += 2.0 * count * inner * width * rows;
    spent +=
        count * (inner + width) * 1000.0 * 128.0 * 256.0;  // forward: inner; data gradient: width
  }
  CHECK(detail::gemm_wave_efficiency(m, 1000, rows) ==
        doctest::Approx(useful / spent).epsilon(1e-12));
  // Unknown SMs or no rows: no quantisation charged.
  CHECK(detail::gemm_wave_efficiency(m, 0, rows) == 1.0);
  CHECK(detail::gemm_half_tokens(m, 0) == 0.0);
}

TEST_CASE("Cost.GemmWaves.half_saturation_falls_with_width_and_rises_with_sms") {
  const double n8b = detail::gemm_half_tokens(models::llama3_8b(), 132);
  const double n70b = detail::gemm_half_tokens(models::llama3_70b(), 132);
  // Wider GEMMs fill the machine with fewer rows; more SMs need more rows.
  CHECK(n70b < n8b);
  CHECK(detail::gemm_half_tokens(models::llama3_8b(), 108) < n8b);
  CHECK(detail::gemm_half_tokens(models::stdit3_xl(), 132) > n8b);
  // The fit describes the curve it was made from: 1/eta within 30 % of 1 + n_half / M at and
  // beyond a wave's worth of rows, and within a factor 2 below.
  for (const auto& m : {models::llama3_8b(), models::llama3_70b(), models::stdit3_xl()}) {
    const double half = detail::gemm_half_tokens(m, 132);
    CAPTURE(m.name);
    CHECK(half > 0);
    for (const double rows : {128.0, 512.0, 2048.0, 8192.0, 32768.0}) {
      CAPTURE(rows);
      const double ratio = (1.0 + half / rows) * detail::gemm_wave_efficiency(m, 132, rows);
      CHECK(ratio > 0.5);
      CHECK(ratio < 2.0);
      if (rows >= 8192) CHECK(ratio == doctest::Approx(1.0).epsilon(0.3));
    }
  }
}

TEST_CASE("Cost.Analytic.fixed_gemm_cost_is_the_gemm_time_of_n_half_tokens") {
  const auto& m = llama();
  const double half = m.gemm_half_tokens();
  CHECK(half == doctest::Approx(detail::gemm_half_tokens(models::llama3_8b(), 132)));
  for (const auto r : {recompute_setting{}, recompute_setting{32, false}}) {
    const auto c = at(1, r);
    CHECK(m.gemm_fixed_seconds(c) ==
          doctest::Approx(m.dense_compute_seconds(half, c)).epsilon(1e-12));
    // The empty micro-step's device time is it with the framework work and every launch.
    CHECK(m.device_seconds(micro_batch_shape{}, c) ==
          doctest::Approx(m.overhead_seconds(c) + m.recompute_launch_seconds(c) +
                          m.gemm_fixed_seconds(c))
              .epsilon(1e-12));
  }
  // Recomputed blocks launch a third of their kernels again; collectives launch one each.
  CHECK(m.recompute_launch_seconds(at(1, {32, false})) ==
        doctest::Approx(32.0 * m.constants().kernels_per_layer / 3.0 *
                        m.constants().kernel_launch_seconds));
  CHECK(m.overhead_seconds(at(4)) - m.overhead_seconds(at(1)) ==
        doctest::Approx(4.0 * 2.0 * 32.0 * m.constants().kernel_launch_seconds));
  // A GPU that does not declare its SMs gets no fixed GEMM cost.
  auto cluster = hgx_cluster(1, gpus::h200_sxm());
  cluster.gpu.streaming_multiprocessors = 0;
  const analytic_cost_model unknown(models::llama3_8b(), cluster);
  CHECK(unknown.gemm_half_tokens() == 0.0);
  CHECK(unknown.gemm_fixed_seconds(at(1)) == 0.0);
}

TEST_CASE("Cost.Analytic.host_time_decides_micro_steps_too_small_to_hide_it") {
  // On a Grace host (an x86 host issues a 200-token micro-step faster than the GPU runs it).
  analytic_constants grace;
  grace.host_seconds_per_kernel = grace_host.seconds_per_kernel;
  const analytic_cost_model m(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()), {}, grace);
  const auto& k = m.constants();
  const auto c = at(1);
  // The host issues every block's forward and backward kernels (and a third again per
  // recomputed block, and the collectives); its time does not depend on the tokens.
  CHECK(m.host_seconds(c) ==
        doctest::Approx(k.host_seconds_per_kernel * k.kernels_per_layer * 32).epsilon(1e-12));
  CHECK(m.host_seconds(at(1, {32, false})) > m.host_seconds(c));
  CHECK(m.host_seconds(at(8)) > m.host_seconds(c));
  const micro_batch_shape small{1, 200, 200, 0.5 * 200 * 200};
  const micro_batch_shape large{1, 60000, 60000, 0.5 * 60000.0 * 60000.0};
  CHECK(m.device_seconds(small, c) < m.host_seconds(c));
  CHECK(m.seconds(small, c) == doctest::Approx(m.host_seconds(c)));
  CHECK(m.device_seconds(large, c) > m.host_seconds(c));
  CHECK(m.seconds(large, c) == doctest::Approx(m.device_seconds(large, c)));
  // The bounds' fixed part is the empty micro-step's device time, below its (host) time, and
  // requirement 5 holds with it: a sum of samples takes at least it plus their marginals.
  CHECK(m.fixed_seconds(c) == doctest::Approx(m.device_seconds(micro_batch_shape{}, c)));
  CHECK(m.fixed_seconds(c) < m.seconds(micro_batch_shape{}, c));
  CHECK(m.seconds(small + small, c) >= m.fixed_seconds(c) + 2 * m.marginal_seconds(small, c));
  // A framework whose launches never limit (CUDA graphs): host time 0.
  auto graphs = k;
  graphs.host_seconds_per_kernel = 0;
  const analytic_cost_model graphed(m.model(), m.cluster(), m.training(), graphs);
  CHECK(graphed.seconds(small, c) == doctest::Approx(m.device_seconds(small, c)));
}

TEST_CASE("Cost.Analytic.attention_efficiency_saturates_with_the_rows_a_kernel_runs") {
  // The analytic attention reproduces the FA3 table it is fitted to (research §1.2, hd128 BF16
  // H100, against the 989.4 TFLOP/s peak) within 3.5 %: s rows of s keys each (P = s^2 pairs
  // over s rows, the form the simulator's truth model fits too), forward and backward.
  const auto& k = llama().constants();
  const std::array<double, 6> lengths{512, 1024, 2048, 4096, 8192, 16384};
  const std::array<double, 6> forward{467, 565, 625, 638, 646, 648};
  const std::array<double, 6> backward{316, 424, 501, 542, 559, 561};
  for (std::size_t n = 0; n < lengths.size(); ++n) {
    const double s = lengths[n];
    const double pairs = s * s;
    CAPTURE(s);
    CHECK(k.attention_forward_efficiency * pairs / (pairs + k.attention_forward_half_rows * s) *
              989.4 ==
          doctest::Approx(forward[n]).epsilon(0.035));
    CHECK(k.attention_backward_efficiency * pairs / (pairs + k.attention_backward_half_rows * s) *
              989.4 ==
          doctest::Approx(backward[n]).epsilon(0.035));
  }
  // Ring attention runs each GPU's rows against every key chunk: at degree 8 a sample's
  // attention costs more than under Ulysses by exactly 7 more per-row passes; short sequences
  // pay relatively more of it.
  training_spec ring_training;
  ring_training.sp = sequence_parallel::ring;
  const analytic_cost_model ring(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()),
                                 ring_training);
  const auto& model = ring.model();
  const double peak = ring.cluster().gpu.peak_flops;
  const double per_row =
      4.0 * static_cast<double>(model.hidden) * static_cast<double>(model.layers) *
      (k.attention_forward_half_rows / (k.attention_forward_efficiency * peak) +
       2.5 * k.attention_backward_half_rows / (k.attention_backward_efficiency * peak));
  double previous_share = 1.0;
  for (const std::int64_t tokens : {2048, 32768}) {
    const auto s = micro_batch_shape::of(text_sample(0, tokens));
    const execution_config ulysses{8, sequence_parallel::ulysses, {}};
    const execution_config ring8{8, sequence_parallel::ring, {}};
    const double extra =
        ring.attention_compute_seconds(s, ring8) - ring.attention_compute_seconds(s, ulysses);
    CHECK(extra == doctest::Approx(7.0 * per_row * static_cast<double>(tokens)).epsilon(1e-9));
    const double share = extra / ring.attention_compute_seconds(s, ring8);
    CHECK(share < previous_share);
    previous_share = share;
  }
}

TEST_CASE("Cost.Memory.ceil_whole_is_std_ceil") {
  // The activation accounting rounds tokens per GPU up with detail::ceil_whole instead of
  // std::ceil: it must agree on every double, whole or not, small or beyond 2^52.
  const std::array<double, 16> xs{0.0,   0.25,      1.0,          1.5,          -0.5,       -1.0,
                                  -2.75, 1e9 / 3.0, 0x1p52 - 0.5, 0x1p52,       0x1p52 + 2, 0x1p63,
                                  1e300, -1e300,    4.9e-324,     1.0 - 0x1p-53};
  for (const double x : xs) {
    CAPTURE(x);
    CHECK(detail::ceil_whole(x) == std::ceil(x));
  }
  for (std::int64_t tokens = 1; tokens < 3000; tokens += 7)
    for (const double d : {1.0, 2.0, 8.0, 64.0, 1024.0})
      CHECK(detail::ceil_whole(static_cast<double>(tokens) / d) ==
            std::ceil(static_cast<double>(tokens) / d));
}

TEST_CASE("Cost.Memory.a_group_holds_its_tokens_rounded_up_per_gpu") {
  // 1,001 tokens over 8 GPUs: each holds 126 (the busiest GPU), so the bytes are those of
  // 1,008 tokens, not of 1,001.
  const analytic_cost_model m(models::llama3_8b(), hgx_cluster(1, gpus::h100_sxm()),
                              training_spec{});
  const execution_config c{8, sequence_parallel::ulysses, recompute_setting::none()};
  const auto bytes = [&](std::int64_t tokens) {
    return m.activation_bytes(micro_batch_shape{1, tokens, tokens, 0.0}, c);
  };
  CHECK(bytes(1001) == bytes(1008));
  CHECK(bytes(1001) > bytes(1000));
}

TEST_CASE(
    "Cost.Analytic.ring_transfers_hide_behind_every_pass_attention_the_recomputed_forward_too") {
  // A ring micro-step passes K and V chunks (r - 1 steps per layer and pass: forward, backward
  // twice, a recomputed block's forward once more) behind the attention of the same passes, so
  // what stays exposed is max(0, transfers - its whole attention); a recomputed forward adds
  // both its transfers and its attention. Short sequences leave transfers exposed, long ones
  // hide them. Degree 16 spans two nodes: the chunks go through the NICs.
  const analytic_cost_model& m = llama();
  const auto& model = m.model();
  const double layers = static_cast<double>(model.layers);
  bool some_exposed = false, some_hidden = false;
  for (const std::int64_t tokens : {2048, 8192, 32768, 131072}) {
    for (const auto recompute : {recompute_setting{}, recompute_setting::full(model.layers)}) {
      const auto s = micro_batch_shape::of(text_sample(0, tokens));
      const execution_config ring16{16, sequence_parallel::ring, recompute};
      const double passes = 3.0 * layers + static_cast<double>(recompute.layers);
      const double transfers = 15.0 * (static_cast<double>(tokens) / 16.0) * 2.0 *
                               static_cast<double>(model.kv_hidden()) * 2.0 * passes /
                               m.cluster().nic_bandwidth;
      const double attention = m.attention_compute_seconds(s, ring16) / 16.0;
      const double exposed = m.time_terms(s, ring16)[4];
      CAPTURE(tokens);
      CAPTURE(recompute.layers);
      CHECK(exposed == doctest::Approx(std::max(0.0, transfers - attention)).epsilon(1e-9));
      (exposed > 0 ? some_exposed : some_hidden) = true;
    }
  }
  CHECK(some_exposed);
  CHECK(some_hidden);
}

TEST_CASE("Cost.HeadDim.attention_width_is_heads_times_head_dim") {
  // Llama-3-8B with heads of 256 instead of 128: q and the attention output double in width
  // (4096 -> 8192), k and v too (1024 -> 2048); the hidden size stays 4096.
  const auto cluster = hgx_cluster(4, gpus::h200_sxm());
  const auto base = models::llama3_8b();
  auto wide = base;
  wide.head_dim = 256;
  const analytic_cost_model narrow_cost(base, cluster);
  const analytic_cost_model wide_cost(wide, cluster);
  const auto s = micro_batch_shape::of(text_sample(0, 32768));

  // Attention FLOPs: 4 h_q per pair, so twice the time (§2.1).
  CHECK(wide_cost.attention_compute_seconds(s, at(4)) ==
        doctest::Approx(2.0 * narrow_cost.attention_compute_seconds(s, at(4))).epsilon(1e-12));
  // Ulysses all-to-alls: (2 h_q + 2 h_kv) values per token, twice as many bytes (§3.2).
  const auto bytes_term = [](const analytic_cost_model& m, const micro_batch_shape& shape) {
    return m.time_terms(shape, at(8))[3];
  };
  CHECK(bytes_term(wide_cost, s) ==
        doctest::Approx(2.0 * bytes_term(narrow_cost, s)).epsilon(1e-12));
  // Activations: attention keeps 4h + 4h_q + 4h_kv bytes per token and layer (§4.2).
  CHECK(wide_cost.activation_bytes_per_token_layer() -
            narrow_cost.activation_bytes_per_token_layer() ==
        4 * 4096 + 4 * 1024);
  CHECK(wide_cost.activation_bytes(s, at(4)) > narrow_cost.activation_bytes(s, at(4)));

  // The truth model's attention and Ulysses bytes follow the same width.
  const sim::truth_model narrow_truth(base, cluster);
  const sim::truth_model wide_truth(wide, cluster);
  const auto narrow_parts = narrow_truth.micro_step_parts(s, at(8));
  const auto wide_parts = wide_truth.micro_step_parts(s, at(8));
  CHECK(wide_parts.attention_seconds ==
        doctest::Approx(2.0 * narrow_parts.attention_seconds).epsilon(1e-12));
  CHECK(wide_parts.intra_node_bytes ==
        doctest::Approx(2.0 * narrow_parts.intra_node_bytes).epsilon(1e-12));
}

TEST_CASE("Cost.HeadDim.explicit_hidden_over_heads_changes_no_prediction") {
  // head_dim = hidden / heads describes the model head_dim = 0 does: every prediction agrees
  // to the bit, for a decoder and for a DiT with cross-attention.
  const auto cluster = hgx_cluster(2, gpus::h100_sxm());
  for (const auto& model : {models::qwen25_7b(), models::stdit3_xl()}) {
    CAPTURE(model.name);
    auto set = model;
    set.head_dim = model.hidden / model.heads;
    const analytic_cost_model a(model, cluster);
    const analytic_cost_model b(set, cluster);
    const sim::truth_model ta(model, cluster);
    const sim::truth_model tb(set, cluster);
    const auto s = micro_batch_shape::of(text_sample(0, 20000));
    for (const auto& c : {execution_config{1, sequence_parallel::ulysses, {}},
                          execution_config{4, sequence_parallel::ulysses, {}},
                          execution_config{16, sequence_parallel::ring, recompute_setting::full(4)},
                          execution_config{16, sequence_parallel::hybrid, {}}}) {
      CAPTURE(c);
      CHECK(a.seconds(s, c) == b.seconds(s, c));
      CHECK(a.peak_bytes(s, c) == b.peak_bytes(s, c));
      CHECK(ta.seconds(s, c) == tb.seconds(s, c));
      CHECK(ta.peak_bytes(s, c) == tb.peak_bytes(s, c));
    }
    CHECK(a.gemm_half_tokens() == b.gemm_half_tokens());
  }
}
