#pragma once
// Memory per GPU, shared by the planner's analytic model and the simulator's truth model: model
// states under ZeRO (docs/cost-sources.md §4.1) and activations (Korthikanti et al., with
// FlashAttention, §4.2-§4.3). Both models use the same accounting and differ in what they add
// around it (fragmentation, buffers, constants).

#include <algorithm>
#include <cstdint>

#include "dcp/cost/caption_work.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// Parameters (BF16), gradients and FP32 Adam state per GPU under ZeRO `zero_stage` over
/// `gpus` data-parallel ranks (§4.1): 16 psi unsharded; stage 1 shards the optimizer state,
/// stage 2 the gradients too, stage 3 everything.
[[nodiscard]] inline double zero_state_bytes(const model_spec& model, int zero_stage,
                                             std::int64_t gpus) noexcept {
  const double psi = static_cast<double>(model.total_params());
  const double n = static_cast<double>(gpus);
  switch (zero_stage) {
    case 0:
      return 16.0 * psi;
    case 1:
      return 4.0 * psi + 12.0 * psi / n;
    case 2:
      return 2.0 * psi + 14.0 * psi / n;
    default:
      return 16.0 * psi / n;
  }
}

/// Bytes saved per token per layer of a block kept for backward, with FlashAttention (no s²
/// term): attention 4h + 4h_q + 4h_kv (the norm's input and output; q and the attention
/// output, h_q = heads x head width wide; k and v), SwiGLU MLP 4h + 6f, GELU MLP 4h + 4f,
/// cross-attention 2h + 4h_q (its input, q and output). h_q = h unless head_dim says otherwise.
[[nodiscard]] inline std::int64_t activation_bytes_per_token_layer(
    const model_spec& model) noexcept {
  const std::int64_t h = model.hidden;
  const std::int64_t h_q = model.q_hidden();
  const std::int64_t f = model.ffn;
  std::int64_t bytes = 4 * h + 4 * h_q + 4 * model.kv_hidden();
  bytes += model.mlp == mlp_kind::swiglu ? 4 * h + 6 * f : 4 * h + 4 * f;
  if (model.has_cross_attention()) bytes += 2 * h + 4 * h_q;
  return bytes;
}

/// Selective recomputation drops the two norm outputs and the MLP activation output.
[[nodiscard]] inline std::int64_t bytes_saved_by_selective(const model_spec& model) noexcept {
  return 4 * model.hidden + 2 * model.ffn;
}

/// How the loss keeps its logits.
struct logits_memory {
  bool chunked = false;              ///< fused/chunked cross-entropy
  std::int64_t chunk_tokens = 8192;  ///< tokens per chunk when chunked
  double bytes_per_entry = 6;        ///< BF16 logits + FP32 upcast
};

/// std::ceil(x) in a few instructions where the target has no rounding instruction (x86-64
/// before SSE4.1 expands std::ceil to some twenty): exact for every double, since one of
/// magnitude 2^52 or more is already whole.
[[nodiscard]] constexpr double ceil_whole(double x) noexcept {
  if (!(x < 0x1p52 && x > -0x1p52)) return x;                          // already whole, or NaN
  const double t = static_cast<double>(static_cast<std::int64_t>(x));  // toward zero
  return t < x ? t + 1.0 : t;
}

/// Activations, FlashAttention backward transients, logits, sequence-parallel buffers and, for
/// a DiT, the caption's saved tensors on one GPU of a group (§4.2, §4.3). What depends only on
/// the model and the loss is worked out once: the planner asks for a micro-batch's bytes tens
/// of thousands of times per plan.
class activation_footprint {
 public:
  activation_footprint() = default;
  activation_footprint(const model_spec& model, const logits_memory& logits) noexcept
      : h_(static_cast<double>(model.hidden)),
        h_q_(static_cast<double>(model.q_hidden())),
        h_kv_(static_cast<double>(model.kv_hidden())),
        full_(static_cast<double>(activation_bytes_per_token_layer(model))),
        kept_selective_(full_ - static_cast<double>(bytes_saved_by_selective(model))),
        flash_(4.0 * h_q_ + 2.0 * (h_q_ + 2.0 * h_kv_)),
        a2a_(h_q_ + 2.0 * h_kv_),
        vocab_(static_cast<double>(model.vocab)),
        logits_(logits),
        layers_(model.layers),
        caption_(model) {}

  /// Bytes on one GPU of a group running `s` with config `c`.
  [[nodiscard]] double operator()(const micro_batch_shape& s,
                                  const execution_config& c) const noexcept {
    const double d = static_cast<double>(c.degree);
    const double n = ceil_whole(static_cast<double>(s.tokens) / d);  // tokens held by one GPU
    const double kept = c.recompute.selective ? kept_selective_ : full_;
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double stored_layers = static_cast<double>(layers_) - recomputed;
    // Kept activations, checkpointed inputs (2h per token) of recomputed layers, and one layer's
    // full working set while it is recomputed.
    double bytes = n * (stored_layers * kept + recomputed * 2.0 * h_);
    if (c.recompute.layers > 0) bytes += n * full_;
    // FlashAttention backward transient: FP32 dQ accumulator + BF16 dQ, dK, dV.
    bytes += n * flash_;
    if (vocab_ > 0) {
      const double logit_tokens =
          logits_.chunked ? std::min(n, static_cast<double>(logits_.chunk_tokens)) : n;
      bytes += logit_tokens * vocab_ * logits_.bytes_per_entry;
    }
    // Communication buffers: two all-to-all tensors (Ulysses), two KV chunks (ring; a hybrid's
    // chunk of s/r tokens of h_kv/u is as large as a ring's), a hybrid both.
    if (c.degree > 1) {
      if (c.sp != sequence_parallel::ring) bytes += 2.0 * n * a2a_ * 2.0;
      if (c.sp != sequence_parallel::ulysses) bytes += 2.0 * n * 2.0 * h_kv_ * 2.0;
    }
    // The caption's embedding and K/V, whole on every GPU of the group (caption_work.hpp).
    if (caption_.present())
      bytes += static_cast<double>(s.samples) * caption_.bytes_per_sample(c.recompute.layers);
    return bytes;
  }

 private:
  double h_ = 0, h_q_ = 0, h_kv_ = 0;  // hidden, q (heads x head width), k or v
  double full_ = 0;                    // bytes per token per kept layer
  double kept_selective_ = 0;          // the same under selective recomputation
  double flash_ = 0;                   // FlashAttention backward transient per token
  double a2a_ = 0;                     // values per token of one all-to-all tensor: h_q + 2 h_kv
  double vocab_ = 0;
  logits_memory logits_{};
  std::int64_t layers_ = 0;
  caption_memory caption_{};
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
