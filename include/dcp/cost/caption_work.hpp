#pragma once
// The caption work of a diffusion transformer with cross-attention (STDiT3, Wan2.1), which
// sequence parallelism does not split: the transformer shards only the video tokens, so every
// GPU of a group embeds every sample's caption and projects it to keys and values in every
// block (VideoSys attentions.py ~157; docs/cost-sources.md §2.3: "k/v
// on n_text text tokens"). Shared by the planner's analytic model and the simulator's truth
// model; every count is 0 for a model without cross-attention (decoder LMs).

#include <cstdint>

#include "dcp/spec/model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// Cross-attention k and v weights of one block, h x h_q each (h_q = heads x head width, h
/// unless head_dim says otherwise; OpenSora kv_linear h -> 2h, Wan k and v);
/// model_spec::per_token_params leaves exactly these out of the sample tokens' work.
[[nodiscard]] inline std::int64_t cross_attention_kv_weights(const model_spec& model) noexcept {
  return model.has_cross_attention() ? 2 * model.hidden * model.q_hidden() : 0;
}

/// Block parameters a recomputed block's forward multiplies every sample token by: the block
/// less its cross-attention k/v weights, which act on caption tokens (recomputed by
/// caption_flops_per_text_token instead).
[[nodiscard]] inline std::int64_t recomputed_params_per_token_block(
    const model_spec& model) noexcept {
  return model.block_params() - cross_attention_kv_weights(model);
}

/// FLOPs per caption token per micro-step on each GPU of the group, with `recomputed_layers`
/// blocks fully recomputed:
///  - k/v projections in every block: 2 FLOPs per weight forward + 4 backward (data and weight
///    gradients, §2.1's 6 N), plus one more forward (2 per weight) in each recomputed block
///    (§2.2; the projection runs inside the checkpointed block);
///  - the caption embedder (OpenSora CaptionEmbedder / Wan text_embedding: Linear(text_embed_dim
///    -> h), GELU, Linear(h -> h); model_spec::outer_params_as counts the same weights), outside
///    the checkpointed blocks so never recomputed: 6 per weight of the second layer, 4 per
///    weight of the first, whose input (the frozen text encoder's output) needs no gradient.
/// Biases are elementwise adds (under 1/h of the weights) and are left out.
[[nodiscard]] inline double caption_flops_per_text_token(const model_spec& model,
                                                         std::int64_t recomputed_layers) noexcept {
  if (!model.has_cross_attention()) return 0.0;
  const double h = static_cast<double>(model.hidden);
  const double kv = static_cast<double>(cross_attention_kv_weights(model));
  const double layers = static_cast<double>(model.layers);
  const double recomputed = static_cast<double>(recomputed_layers);
  const double embedder = 4.0 * static_cast<double>(model.text_embed_dim) * h + 6.0 * h * h;
  return 6.0 * kv * layers + 2.0 * kv * recomputed + embedder;
}

/// Bytes per sample that the caption keeps for backward on each GPU of the group (BF16, the
/// Korthikanti accounting of §4.2 applied to the caption's tensors):
///  - per block that keeps its activations: K and V of the caption, 2h_q values per caption
///    token (the kv_linear output FlashAttention saves for its backward, attentions.py), 4h_q
///    bytes;
///    a fully recomputed block keeps only its inputs (the caption embedding is one of them,
///    counted below), and the block being recomputed holds its K and V once more;
///  - once: the embedder's input (text_embed_dim values, kept for the first layer's weight
///    gradient), its hidden layer before and after the GELU (h values each) and the caption
///    embedding every block reads (h values): 2 text_embed_dim + 6h bytes per caption token.
/// Model-only terms are kept in caption_memory, which the activation accounting builds once.
class caption_memory {
 public:
  caption_memory() = default;
  explicit caption_memory(const model_spec& model) noexcept
      : present_(model.has_cross_attention()),
        layers_(model.layers),
        h_(static_cast<double>(model.hidden)),
        h_q_(static_cast<double>(model.q_hidden())),
        text_(static_cast<double>(model.text_tokens)),
        embedder_(2.0 * static_cast<double>(model.text_embed_dim) + 6.0 * h_) {}

  [[nodiscard]] bool present() const noexcept { return present_; }
  /// Bytes per sample with `recomputed_layers` blocks fully recomputed.
  [[nodiscard]] double bytes_per_sample(std::int64_t recomputed_layers) const noexcept {
    if (!present_) return 0.0;
    const double kv_blocks =
        static_cast<double>(layers_ - recomputed_layers) + (recomputed_layers > 0 ? 1.0 : 0.0);
    return text_ * (kv_blocks * 4.0 * h_q_ + embedder_);
  }

 private:
  bool present_ = false;
  std::int64_t layers_ = 0;
  double h_ = 0, h_q_ = 0, text_ = 0, embedder_ = 0;
};

[[nodiscard]] inline double caption_activation_bytes_per_sample(
    const model_spec& model, std::int64_t recomputed_layers) noexcept {
  return caption_memory(model).bytes_per_sample(recomputed_layers);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
