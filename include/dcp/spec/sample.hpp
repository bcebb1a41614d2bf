#pragma once
// One training sample as the scheduler sees it: an id, a token count, and for video its latent
// token grid and attention layout.

#include <compare>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "dcp/config.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// How a sample's tokens attend to each other; decides the attention FLOPs and the mask factor.
enum class attention_kind : std::uint8_t {
  causal,      ///< decoder LLM: each token sees its prefix (mask factor 1/2)
  full,        ///< bidirectional over the whole sample (full 3D attention DiTs, mask factor 1)
  factorised,  ///< spatial attention within a frame, then temporal attention across frames (STDiT)
};

[[nodiscard]] constexpr std::string_view to_string(attention_kind kind) noexcept {
  switch (kind) {
    case attention_kind::causal:
      return "causal";
    case attention_kind::full:
      return "full";
    case attention_kind::factorised:
      return "factorised";
  }
  return "unknown";
}

inline std::ostream& operator<<(std::ostream& os, attention_kind kind) {
  return os << to_string(kind);
}

namespace detail {
/// False for a value cast into the enumeration that names none of its kinds.
[[nodiscard]] constexpr bool known_attention(attention_kind kind) noexcept {
  return kind == attention_kind::causal || kind == attention_kind::full ||
         kind == attention_kind::factorised;
}
}  // namespace detail

/// A video sample's latent token grid after VAE compression and patchification:
/// tokens = frames * height * width (all in latent patches, not pixels).
struct video_shape {
  std::int64_t frames = 1;
  std::int64_t height = 1;
  std::int64_t width = 1;

  /// frames * height * width, or nullopt where int64 cannot hold it.
  [[nodiscard]] constexpr std::optional<std::int64_t> checked_tokens() const noexcept {
    const auto per_frame = detail::checked_mul(height, width);
    if (!per_frame) return std::nullopt;
    return detail::checked_mul(frames, *per_frame);
  }
  /// frames * height * width; throws invalid_sample where int64 cannot hold it.
  [[nodiscard]] constexpr std::int64_t tokens() const {
    if (const auto t = checked_tokens()) return *t;
    throw invalid_sample(overflow_message());
  }
  /// height * width; throws invalid_sample where int64 cannot hold it.
  [[nodiscard]] constexpr std::int64_t tokens_per_frame() const {
    if (const auto t = detail::checked_mul(height, width)) return *t;
    throw invalid_sample(overflow_message());
  }
  /// "video grid frames = F, height = H, width = W holds more than 2^63 - 1 tokens".
  [[nodiscard]] std::string overflow_message() const {
    return "video grid frames = " + std::to_string(frames) +
           ", height = " + std::to_string(height) + ", width = " + std::to_string(width) +
           ": frames x height x width exceeds " + std::to_string(detail::int64_max) + " tokens";
  }
  friend constexpr auto operator<=>(const video_shape&, const video_shape&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const video_shape& v) {
  return os << v.frames << 'x' << v.height << 'x' << v.width;
}

/// One sample of a global batch. `id` must be unique within a batch; it is what plans refer to.
struct sample {
  std::uint64_t id = 0;
  std::int64_t tokens = 0;
  attention_kind attention = attention_kind::causal;
  std::optional<video_shape> video{};  ///< set for video samples; then tokens == video->tokens()

  friend constexpr bool operator==(const sample&, const sample&) = default;
};

/// A text sample of `tokens` tokens with causal attention.
[[nodiscard]] constexpr sample text_sample(std::uint64_t id, std::int64_t tokens) noexcept {
  return sample{id, tokens, attention_kind::causal, std::nullopt};
}

/// A video sample over a latent grid; tokens are derived from the grid. Throws invalid_sample,
/// naming the sample and the grid, where frames x height x width exceeds int64.
[[nodiscard]] constexpr sample video_sample(std::uint64_t id, video_shape shape,
                                            attention_kind attention = attention_kind::factorised) {
  if (const auto tokens = shape.checked_tokens()) return sample{id, *tokens, attention, shape};
  throw invalid_sample("sample " + std::to_string(id) + ": " + shape.overflow_message());
}

inline std::ostream& operator<<(std::ostream& os, const sample& s) {
  os << "sample{id=" << s.id << ", tokens=" << s.tokens << ", attention=" << s.attention;
  if (s.video) os << ", video=" << *s.video;
  return os << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
