#pragma once
// GEMM efficiency at small token counts from the hardware: wave quantisation of output tiles on
// the GPU's streaming multiprocessors (docs/cost-sources.md §1.1 for the SM counts,
// §5 "eta_g saturates with n"). A GEMM of M token rows and output width N is cut into
// ceil(M / 128) x ceil(N / 256) tiles (the 128 x 256 CTA tile of Hopper's CUTLASS/cuBLAS BF16
// kernels); the SMs run them in ceil(tiles / SMs) waves, so at few tokens per GPU most SMs idle.
// Over a model's forward and data-gradient GEMMs (weighted by their FLOPs) the fraction of SM
// time doing useful work is eta_w(M) = sum_g F_g M N_g / sum_g F_g waves_g(M) SMs 128 x 256;
// gemm_half_tokens() fits 1/eta_w(M) = 1 + n_half / M to it over M = 128 .. 65,536 (relative
// time error, geometric grid), which makes a micro-step's GEMM time affine in its tokens:
// F (n + n_half) / (eta R), n tokens per GPU — a fixed cost F n_half / (eta R) per micro-step.
// Weight-gradient GEMMs (output the weight matrix, whatever M) are assumed to behave alike.

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "dcp/spec/model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// One kind of GEMM of a model: `inner` x `width` weights applied `count` times per token pass.
struct gemm_shape {
  double inner = 0;
  double width = 0;
  double count = 0;
};

/// The GEMMs acting on sample tokens, as model_spec counts them (per_token_params): per block
/// QKV (h_q + 2 h_kv wide, h_q = heads x head width), O (h_q -> h), cross-attention Q and O for
/// DiTs (their K/V act on the caption), the MLP's up (2f for SwiGLU's gate + up) and down; the
/// LM head once. An inner x width GEMM and its transpose count alike (forward and data gradient).
[[nodiscard]] inline std::array<gemm_shape, 6> token_gemms(const model_spec& m) noexcept {
  const double h = static_cast<double>(m.hidden);
  const double h_q = static_cast<double>(m.q_hidden());
  const double f = static_cast<double>(m.ffn);
  const double layers = static_cast<double>(m.layers);
  const double qkv = m.family == model_family::decoder_lm
                         ? h_q + 2.0 * static_cast<double>(m.kv_hidden())
                         : 3.0 * h_q;
  return {{{h, qkv, layers},
           {h_q, h, layers},
           {h, h_q, m.has_cross_attention() ? 2.0 * layers : 0.0},
           {h, m.mlp == mlp_kind::swiglu ? 2.0 * f : f, layers},
           {f, h, layers},
           {h, static_cast<double>(m.vocab), 1.0}}};
}

/// eta_w(M): the fraction of SM time the forward and data-gradient GEMMs of M token rows spend
/// on useful tiles (1 when every wave is full). 1 for sms <= 0 or rows <= 0.
[[nodiscard]] inline double gemm_wave_efficiency(const model_spec& m, std::int64_t sms,
                                                 double rows) noexcept {
  if (sms <= 0 || !(rows > 0)) return 1.0;
  constexpr double tile_rows = 128;
  constexpr double tile_cols = 256;
  const double machine = static_cast<double>(sms);
  double useful = 0;
  double spent = 0;
  for (const auto& g : token_gemms(m)) {
    if (g.count <= 0 || g.width <= 0) continue;
    // Forward: output width N = width; data gradient: output width = inner. Same FLOPs.
    for (const auto& [out, in] : {std::pair{g.width, g.inner}, std::pair{g.inner, g.width}}) {
      const double tiles = std::ceil(rows / tile_rows) * std::ceil(out / tile_cols);
      const double waves = std::ceil(tiles / machine);
      useful += g.count * in * rows * out;
      spent += g.count * in * waves * machine * tile_rows * tile_cols;
    }
  }
  return spent > 0 ? useful / spent : 1.0;
}

/// The n_half of 1/eta = 1 + n_half / M fitted to gemm_wave_efficiency over M = 128 .. 65,536
/// on a 5 % geometric grid, minimising sum (eta_k (1 + n_half / M_k) - 1)^2 (relative time
/// error). 0 when the SM count is unknown (sms <= 0): no fixed GEMM cost.
[[nodiscard]] inline double gemm_half_tokens(const model_spec& m, std::int64_t sms) noexcept {
  if (sms <= 0) return 0.0;
  double num = 0;
  double den = 0;
  for (double rows = 128; rows <= 65536; rows = std::floor(rows * 1.05) + 1) {
    const double eta = gemm_wave_efficiency(m, sms, rows);
    const double x = eta / rows;
    num += x * (1.0 - eta);
    den += x * x;
  }
  return den > 0 ? num / den : 0.0;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
