#pragma once
// The transformer being trained, described by the shapes that decide its FLOPs and bytes, with
// presets for the models the project evaluates (parameter counts checked against the published
// ones in tests/unit/spec_tests.cpp).

#include <cstdint>
#include <ostream>
#include <string>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

enum class mlp_kind : std::uint8_t { swiglu, gelu };
enum class model_family : std::uint8_t { decoder_lm, diffusion_transformer };

/// Shapes of a transformer. For a diffusion transformer with factorised attention, `layers`
/// counts spatial and temporal blocks together (half of each).
struct model_spec {
  std::string name;
  model_family family = model_family::decoder_lm;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;  ///< 0 for models without an LM head
  mlp_kind mlp = mlp_kind::swiglu;
  bool qkv_bias = false;
  attention_kind attention = attention_kind::causal;  ///< the model's native layout
  std::int64_t text_tokens = 0;                        ///< cross-attention context (DiT captions)
  std::int64_t text_embed_dim = 0;                     ///< width of the text encoder output

  std::int64_t head_dim() const noexcept { return heads ? hidden / heads : 0; }
  std::int64_t kv_hidden() const noexcept { return kv_heads * head_dim(); }
  bool has_cross_attention() const noexcept { return text_tokens > 0; }

  /// Parameters of one transformer block (weights, biases, norms).
  std::int64_t block_params() const noexcept {
    const std::int64_t h = hidden;
    const std::int64_t mlp_params =
        mlp == mlp_kind::swiglu ? 3 * h * ffn : 2 * h * ffn + ffn + h;  // GELU MLPs carry biases
    if (family == model_family::decoder_lm) {
      // Llama/Qwen block: q, o (h x h), k, v (h x h_kv), MLP, two RMSNorm weights.
      std::int64_t p = 2 * h * h + 2 * h * kv_hidden() + mlp_params + 2 * h;
      if (qkv_bias) p += h + 2 * kv_hidden();
      return p;
    }
    // DiT block: self-attention and cross-attention (q, k, v, o with biases), MLP, adaLN table
    // and q/k norms (perf-model.md §2.3 and §6).
    const std::int64_t attention_params = 4 * h * h + 4 * h;
    std::int64_t p = attention_params + mlp_params + 6 * h + 2 * h;
    if (has_cross_attention()) p += attention_params;
    return p;
  }

  /// Parameters outside the blocks: embeddings and LM head for LMs; patch, timestep and caption
  /// embedders and the output head for DiTs.
  std::int64_t outer_params() const noexcept {
    const std::int64_t h = hidden;
    if (family == model_family::decoder_lm) return 2 * vocab * h + h;  // untied embedding + head
    const std::int64_t caption = text_embed_dim * h + h + h * h + h;
    const std::int64_t timestep = 256 * h + h + h * h + h;
    const std::int64_t modulation = 6 * h * h + 6 * h;
    return caption + timestep + modulation;
  }

  std::int64_t total_params() const noexcept { return layers * block_params() + outer_params(); }

  /// Parameters that act on every token in matrix multiplies (embedding lookups excluded, the LM
  /// head included; cross-attention k/v act on text tokens, not on sample tokens).
  std::int64_t per_token_params() const noexcept {
    std::int64_t p = layers * block_params();
    if (has_cross_attention()) p -= layers * 2 * hidden * hidden;
    if (family == model_family::decoder_lm) p += vocab * hidden;
    return p;
  }

  friend bool operator==(const model_spec&, const model_spec&) = default;

  /// Throws invalid_spec naming the first inconsistent field.
  void validate() const {
    auto require_positive = [&](std::int64_t value, const char* field) {
      if (value <= 0)
        throw invalid_spec("model '" + name + "': " + field + " = " + std::to_string(value) +
                           ", must be >= 1");
    };
    require_positive(layers, "layers");
    require_positive(hidden, "hidden");
    require_positive(heads, "heads");
    require_positive(kv_heads, "kv_heads");
    require_positive(ffn, "ffn");
    if (hidden % heads != 0)
      throw invalid_spec("model '" + name + "': hidden = " + std::to_string(hidden) +
                         " is not a multiple of heads = " + std::to_string(heads));
    if (kv_heads > heads || heads % kv_heads != 0)
      throw invalid_spec("model '" + name + "': kv_heads = " + std::to_string(kv_heads) +
                         " must divide heads = " + std::to_string(heads));
    if (family == model_family::decoder_lm && vocab <= 0)
      throw invalid_spec("model '" + name + "': vocab = " + std::to_string(vocab) +
                         ", a decoder LM needs vocab >= 1");
  }
};

inline std::ostream& operator<<(std::ostream& os, const model_spec& m) {
  return os << "model{" << m.name << ", layers=" << m.layers << ", hidden=" << m.hidden
            << ", heads=" << m.heads << '/' << m.kv_heads << ", ffn=" << m.ffn
            << ", vocab=" << m.vocab << ", params=" << m.total_params() << '}';
}

/// Presets. Configs from the public model configs as collected in
/// ../shared/research/perf-model.md §6.
namespace models {

inline model_spec llama3_8b() {
  return {"Llama-3-8B", model_family::decoder_lm, 32, 4096, 32, 8, 14336, 128256,
          mlp_kind::swiglu, false, attention_kind::causal, 0, 0};
}
inline model_spec llama3_70b() {
  return {"Llama-3-70B", model_family::decoder_lm, 80, 8192, 64, 8, 28672, 128256,
          mlp_kind::swiglu, false, attention_kind::causal, 0, 0};
}
inline model_spec qwen25_7b() {
  return {"Qwen2.5-7B", model_family::decoder_lm, 28, 3584, 28, 4, 18944, 152064,
          mlp_kind::swiglu, true, attention_kind::causal, 0, 0};
}
inline model_spec qwen25_72b() {
  return {"Qwen2.5-72B", model_family::decoder_lm, 80, 8192, 64, 8, 29568, 152064,
          mlp_kind::swiglu, true, attention_kind::causal, 0, 0};
}
/// OpenSora 1.2 STDiT3-XL/2: 28 spatial + 28 temporal blocks, hidden 1152, 16 heads, GELU MLP
/// ratio 4, cross-attention to 300 T5 tokens of width 4096.
inline model_spec stdit3_xl() {
  return {"STDiT3-XL", model_family::diffusion_transformer, 56, 1152, 16, 16, 4608, 0,
          mlp_kind::gelu, true, attention_kind::factorised, 300, 4096};
}
/// Wan2.1-T2V-14B: 40 blocks, hidden 5120, 40 heads, FFN 13824, full 3D attention,
/// cross-attention to 512 umT5 tokens of width 4096.
inline model_spec wan21_14b() {
  return {"Wan2.1-14B", model_family::diffusion_transformer, 40, 5120, 40, 40, 13824, 0,
          mlp_kind::gelu, true, attention_kind::full, 512, 4096};
}

}  // namespace models

}  // namespace dcp
