#pragma once
// The transformer being trained, described by the shapes that decide its FLOPs and bytes, with
// presets for the models the project evaluates (parameter counts checked against the published
// ones in tests/unit/spec_tests.cpp).

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "dcp/detail/checked.hpp"
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
  std::int64_t text_tokens = 0;                       ///< cross-attention context (DiT captions)
  std::int64_t text_embed_dim = 0;                    ///< width of the text encoder output
  /// Width of one attention head; 0 means hidden / heads. Models such as Qwen3 set it apart from
  /// the hidden size (Qwen3-32B: hidden 5120, 64 heads of 128), so q and the attention output
  /// are heads x head_dim wide, not hidden.
  std::int64_t head_dim = 0;

  /// Largest value of a shape field: recompute_setting counts layers in int32, and no real
  /// tensor dimension, vocabulary or caption length comes near it.
  static constexpr std::int64_t max_dimension = std::numeric_limits<std::int32_t>::max();

  /// The width of one head in use: head_dim, or hidden / heads where head_dim is 0.
  [[nodiscard]] std::int64_t head_width() const noexcept {
    if (head_dim != 0) return head_dim;
    return heads ? hidden / heads : 0;
  }
  /// Width of q and of the attention output: heads x head_width() (hidden unless head_dim
  /// sets the heads apart).
  [[nodiscard]] std::int64_t q_hidden() const noexcept { return heads * head_width(); }
  /// Width of k or of v: kv_heads x head_width().
  [[nodiscard]] std::int64_t kv_hidden() const noexcept { return kv_heads * head_width(); }
  [[nodiscard]] bool has_cross_attention() const noexcept { return text_tokens > 0; }

  /// Parameters of one transformer block (weights, biases, norms).
  [[nodiscard]] std::int64_t block_params() const noexcept {
    return block_params_as<std::int64_t>();
  }

  /// Parameters outside the blocks: embeddings and LM head for LMs; patch, timestep and caption
  /// embedders and the output head for DiTs.
  [[nodiscard]] std::int64_t outer_params() const noexcept {
    return outer_params_as<std::int64_t>();
  }

  [[nodiscard]] std::int64_t total_params() const noexcept {
    return total_params_as<std::int64_t>();
  }

  /// Parameters that act on every token in matrix multiplies (embedding lookups excluded, the LM
  /// head included; cross-attention k/v act on text tokens, not on sample tokens).
  [[nodiscard]] std::int64_t per_token_params() const noexcept {
    return per_token_params_as<std::int64_t>();
  }

  /// The parameter counts in `Int`: std::int64_t for use, detail::checked_int64 to validate.
  template <class Int>
  [[nodiscard]] Int block_params_as() const noexcept {
    const Int h = hidden;
    const Int f = ffn;
    const Int q = Int{heads} * Int{head_width()};
    const Int kv = Int{kv_heads} * Int{head_width()};
    const Int mlp_params =
        mlp == mlp_kind::swiglu ? 3 * h * f : 2 * h * f + f + h;  // GELU MLPs carry biases
    if (family == model_family::decoder_lm) {
      // Llama/Qwen block: q (h x q), o (q x h), k, v (h x h_kv), MLP, two RMSNorm weights.
      Int p = 2 * h * q + 2 * h * kv + mlp_params + 2 * h;
      if (qkv_bias) p += q + 2 * kv;
      return p;
    }
    // DiT block: self-attention and cross-attention (q, k, v of h x q and o of q x h, with
    // biases), MLP, adaLN table and q/k norms (docs/cost-sources.md §2.3 and §6).
    const Int attention_params = 4 * h * q + 3 * q + h;
    Int p = attention_params + mlp_params + 6 * h + 2 * h;
    if (has_cross_attention()) p += attention_params;
    return p;
  }
  template <class Int>
  [[nodiscard]] Int outer_params_as() const noexcept {
    const Int h = hidden;
    if (family == model_family::decoder_lm)
      return 2 * Int{vocab} * h + h;  // untied embedding + head
    const Int caption = Int{text_embed_dim} * h + h + h * h + h;
    const Int timestep = 256 * h + h + h * h + h;
    const Int modulation = 6 * h * h + 6 * h;
    return caption + timestep + modulation;
  }
  template <class Int>
  [[nodiscard]] Int total_params_as() const noexcept {
    return Int{layers} * block_params_as<Int>() + outer_params_as<Int>();
  }
  template <class Int>
  [[nodiscard]] Int per_token_params_as() const noexcept {
    const Int h = hidden;
    const Int q = Int{heads} * Int{head_width()};
    Int p = Int{layers} * block_params_as<Int>();
    if (has_cross_attention()) p -= Int{layers} * 2 * h * q;  // k, v act on the caption
    if (family == model_family::decoder_lm) p += Int{vocab} * h;
    return p;
  }

  friend bool operator==(const model_spec&, const model_spec&) = default;

  /// Throws invalid_spec naming the first inconsistent field, its value and the limit: an
  /// unknown kind, a shape field outside [1, max_dimension] (vocab, text_tokens,
  /// text_embed_dim and head_dim may be 0), heads that do not divide hidden where head_dim is
  /// 0, kv_heads that do not divide heads, a decoder LM without vocab or with cross-attention,
  /// cross-attention without a text width, or parameter counts beyond int64.
  void validate() const {
    const auto where = [&] { return "model '" + name + "': "; };
    const auto require_known = [&](bool known, auto value, const char* field, const char* allowed) {
      if (!known)
        throw invalid_spec(where() + field + " = " + std::to_string(static_cast<unsigned>(value)) +
                           ", must be " + allowed);
    };
    require_known(
        family == model_family::decoder_lm || family == model_family::diffusion_transformer, family,
        "family", "decoder_lm or diffusion_transformer");
    require_known(mlp == mlp_kind::swiglu || mlp == mlp_kind::gelu, mlp, "mlp", "swiglu or gelu");
    require_known(detail::known_attention(attention), attention, "attention",
                  "causal, full or factorised");
    const auto require_in_range = [&](std::int64_t value, const char* field, std::int64_t least) {
      if (value < least)
        throw invalid_spec(where() + field + " = " + std::to_string(value) +
                           ", must be >= " + std::to_string(least));
      if (value > max_dimension)
        throw invalid_spec(where() + field + " = " + std::to_string(value) + ", must be at most " +
                           std::to_string(max_dimension));
    };
    require_in_range(layers, "layers", 1);
    require_in_range(hidden, "hidden", 1);
    require_in_range(heads, "heads", 1);
    require_in_range(kv_heads, "kv_heads", 1);
    require_in_range(ffn, "ffn", 1);
    require_in_range(vocab, "vocab", 0);
    require_in_range(text_tokens, "text_tokens", 0);
    require_in_range(text_embed_dim, "text_embed_dim", 0);
    require_in_range(head_dim, "head_dim", 0);
    if (head_dim == 0 && hidden % heads != 0)
      throw invalid_spec(where() + "hidden = " + std::to_string(hidden) +
                         " is not a multiple of heads = " + std::to_string(heads) +
                         " (set head_dim for heads narrower or wider than hidden / heads)");
    if (kv_heads > heads || heads % kv_heads != 0)
      throw invalid_spec(where() + "kv_heads = " + std::to_string(kv_heads) +
                         " must divide heads = " + std::to_string(heads));
    if (family == model_family::decoder_lm && vocab <= 0)
      throw invalid_spec(where() + "vocab = " + std::to_string(vocab) +
                         ", a decoder LM needs vocab >= 1");
    if (family == model_family::decoder_lm && text_tokens > 0)
      throw invalid_spec(where() + "text_tokens = " + std::to_string(text_tokens) +
                         ", must be 0 for a decoder LM (no cross-attention)");
    if (text_tokens > 0 && text_embed_dim <= 0)
      throw invalid_spec(where() + "text_embed_dim = " + std::to_string(text_embed_dim) +
                         ", cross-attention to text_tokens = " + std::to_string(text_tokens) +
                         " needs text_embed_dim >= 1");
    // The same formulas as block_params() and the others, with every step checked.
    const auto require_representable = [&](detail::checked_int64 count, const char* what) {
      if (count.overflow)
        throw invalid_spec(
            where() + what + " exceeds " + std::to_string(detail::int64_max) +
            " (layers = " + std::to_string(layers) + ", hidden = " + std::to_string(hidden) +
            ", heads = " + std::to_string(heads) + ", head_dim = " + std::to_string(head_dim) +
            ", ffn = " + std::to_string(ffn) + ", vocab = " + std::to_string(vocab) +
            ", text_embed_dim = " + std::to_string(text_embed_dim) + ")");
    };
    require_representable(block_params_as<detail::checked_int64>(), "block_params");
    require_representable(outer_params_as<detail::checked_int64>(), "outer_params");
    require_representable(total_params_as<detail::checked_int64>(), "total_params");
    require_representable(per_token_params_as<detail::checked_int64>(), "per_token_params");
  }
};

inline std::ostream& operator<<(std::ostream& os, const model_spec& m) {
  os << "model{" << m.name << ", layers=" << m.layers << ", hidden=" << m.hidden
     << ", heads=" << m.heads << '/' << m.kv_heads << ", head_dim=" << m.head_width()
     << (m.head_dim == 0 ? " (hidden/heads)" : "") << ", ffn=" << m.ffn << ", vocab=" << m.vocab
     << ", params=";
  // Printing never overflows, whether or not the spec was validated.
  const auto params = m.total_params_as<detail::checked_int64>();
  if (params.overflow)
    os << "(beyond int64)";
  else
    os << params.value;
  return os << '}';
}

/// Presets. Configs from the public model configs as collected in
/// docs/cost-sources.md §6.
namespace models {

[[nodiscard]] inline model_spec llama3_8b() {
  return {"Llama-3-8B", model_family::decoder_lm, 32, 4096, 32, 8, 14336, 128256, mlp_kind::swiglu,
          false,        attention_kind::causal,   0,  0};
}
[[nodiscard]] inline model_spec llama3_70b() {
  return {"Llama-3-70B", model_family::decoder_lm, 80, 8192, 64, 8, 28672, 128256, mlp_kind::swiglu,
          false,         attention_kind::causal,   0,  0};
}
[[nodiscard]] inline model_spec qwen25_7b() {
  return {"Qwen2.5-7B", model_family::decoder_lm, 28, 3584, 28, 4, 18944, 152064, mlp_kind::swiglu,
          true,         attention_kind::causal,   0,  0};
}
[[nodiscard]] inline model_spec qwen25_72b() {
  return {"Qwen2.5-72B", model_family::decoder_lm, 80, 8192, 64, 8, 29568, 152064, mlp_kind::swiglu,
          true,          attention_kind::causal,   0,  0};
}
/// Qwen3-32B (Hugging Face config.json: 64 layers, hidden 5120, 64 query and 8 key-value heads of
/// head_dim 128, so q is 8192 wide; intermediate 25600, vocab 151936, untied embeddings, no QKV
/// bias). The per-head q/k RMSNorm weights (256 per layer) are left out: total_params() is
/// 32.76 B where the model card gives 32.8 B (31.2 B non-embedding).
[[nodiscard]] inline model_spec qwen3_32b() {
  return {"Qwen3-32B", model_family::decoder_lm, 64, 5120, 64, 8, 25600, 151936, mlp_kind::swiglu,
          false,       attention_kind::causal,   0,  0,    128};
}
/// The GPT of Megatron-LM's dynamic-context-parallel benchmark (dev branch,
/// examples/dynamic_context_parallel/benchmark_dcp.sh: NUM_LAYERS 12, HIDDEN_SIZE 2048,
/// FFN_HIDDEN_SIZE 8192, NUM_ATTENTION_HEADS 16, VOCAB_SIZE 131072): Megatron's GPT defaults,
/// GELU MLP, biases on every linear, multi-head attention. Megatron ties the embedding and the
/// output layer by default and uses LayerNorm; model_spec counts an untied head and RMSNorm
/// weights, so total_params() is 1.14 B where the benchmark's model has ~0.89 B.
[[nodiscard]] inline model_spec megatron_dcp_benchmark_gpt() {
  return {"Megatron-DCP-bench-GPT",
          model_family::decoder_lm,
          12,
          2048,
          16,
          16,
          8192,
          131072,
          mlp_kind::gelu,
          true,
          attention_kind::causal,
          0,
          0};
}
/// GPT-7B as FlexSP (arXiv 2412.01523) evaluates it; the paper gives no shape, so GPT-3 6.7B's
/// (Brown et al. 2020, Table 2.1: 32 layers, d_model 4096, 32 heads of 128) with a 4h GELU MLP
/// and the GPT-2 vocabulary of 50,257 (Galvatron's GPT models are Hugging Face GPT-2 classes).
[[nodiscard]] inline model_spec gpt_7b() {
  return {"GPT-7B", model_family::decoder_lm, 32, 4096, 32, 32, 16384, 50257, mlp_kind::gelu,
          true,     attention_kind::causal,   0,  0};
}
/// OpenSora 1.2 STDiT3-XL/2: 28 spatial + 28 temporal blocks, hidden 1152, 16 heads, GELU MLP
/// ratio 4, cross-attention to 300 T5 tokens of width 4096.
[[nodiscard]] inline model_spec stdit3_xl() {
  return {
      "STDiT3-XL", model_family::diffusion_transformer, 56,  1152, 16, 16, 4608, 0, mlp_kind::gelu,
      true,        attention_kind::factorised,          300, 4096};
}
/// Wan2.1-T2V-14B: 40 blocks, hidden 5120, 40 heads, FFN 13824, full 3D attention,
/// cross-attention to 512 umT5 tokens of width 4096.
[[nodiscard]] inline model_spec wan21_14b() {
  return {"Wan2.1-14B",
          model_family::diffusion_transformer,
          40,
          5120,
          40,
          40,
          13824,
          0,
          mlp_kind::gelu,
          true,
          attention_kind::full,
          512,
          4096};
}

}  // namespace models

}  // namespace dcp::inline DCP_ABI_NAMESPACE
