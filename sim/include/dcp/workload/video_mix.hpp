#pragma once
// The OpenSora video workload of the VideoSys DCP benchmark: buckets of resolution x frame
// count, chosen with Zipf probabilities, each clip turned into its latent token grid.
// Sources: VideoSys examples/training/open_sora/configs/benchmarks/*.yaml (buckets, zipf
// offset 5, one 0.56 aspect ratio per resolution), videosys/training/datasets/open_sora/
// datasets.py (DummyVariableVideoTextDataset: alpha 3, separate image and video pools, bucket
// order); docs/workloads.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/deterministic_math.hpp"
#include "dcp/workload/distribution.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// A named frame size in pixels.
struct video_resolution {
  std::string name;
  std::int64_t height_pixels = 0;
  std::int64_t width_pixels = 0;

  friend bool operator==(const video_resolution&, const video_resolution&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const video_resolution& r) {
  return os << r.name << '(' << r.height_pixels << 'x' << r.width_pixels << ')';
}

/// The latent token grid of a clip under OpenSora 1.2 (STDiT3 on the OpenSora VAE):
///   frames: 17 pixel frames -> 5 latent frames, i.e. frames * 5 / 17 rounded down, and 1 for a
///           single image (VideoSys datasets.py: nf = num_frames * 5 // 17, 1 if num_frames == 1;
///           51/102/204/408 frames -> 15/30/60/120). Not ceil(frames / 4): 13/26/51/102.
///   height, width: the VAE's 8x downsampling rounds down (VideoSys: height // 8), then the 1x2x2
///           patch pads up to even (STDiT3 get_dynamic_size): ceil(floor(pixels / 8) / 2).
///           144p 9x16, 240p 15x27, 360p 23x40, 480p 30x53, 720p 45x80 patches per frame.
/// Throws invalid_spec for frames < 1 or a side below 8 pixels.
[[nodiscard]] inline dcp::video_shape opensora_latent_shape(std::int64_t frames,
                                                            std::int64_t height_pixels,
                                                            std::int64_t width_pixels) {
  if (frames < 1) {
    throw invalid_spec("opensora_latent_shape: frames = " + std::to_string(frames) +
                       ", must be >= 1");
  }
  if (height_pixels < 8 || width_pixels < 8) {
    throw invalid_spec("opensora_latent_shape: " + std::to_string(height_pixels) + "x" +
                       std::to_string(width_pixels) + " pixels, each side must be >= 8");
  }
  const std::int64_t latent_frames = frames == 1 ? 1 : std::max<std::int64_t>(1, frames * 5 / 17);
  const auto patches = [](std::int64_t pixels) { return (pixels / 8 + 1) / 2; };
  return {latent_frames, patches(height_pixels), patches(width_pixels)};
}

/// How buckets are ranked for the Zipf weights (rank 1 = most frequent).
enum class zipf_order : std::uint8_t {
  frames_times_height,  ///< VideoSys datasets.py: key num_frames * height (its comment says pixels)
  frames_times_pixels,  ///< num_frames * height * width
};

/// One bucket of the mix, with the probability that a draw lands in it.
struct video_bucket {
  std::string resolution;
  std::int64_t frames = 1;  ///< pixel frames; 1 is an image
  std::int64_t height_pixels = 0;
  std::int64_t width_pixels = 0;
  dcp::video_shape shape{};  ///< latent grid, see opensora_latent_shape
  double probability = 0;

  [[nodiscard]] bool is_image() const noexcept { return frames == 1; }
  friend bool operator==(const video_bucket&, const video_bucket&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const video_bucket& b) {
  return os << b.resolution << 'x' << b.frames << " -> " << b.shape << " (" << b.shape.tokens()
            << " tokens, p=" << b.probability << ')';
}

/// Video clips drawn over resolution x frame-count buckets. As in VideoSys, images (1 frame)
/// and videos form two pools, each Zipf over its own ranks: p(rank r) proportional to
/// 1 / (r + zipf_offset)^zipf_exponent, r = 1, 2, ... in zipf_order, ties in resolution-major
/// order. A draw is an image with probability image_share. Samples are dcp::video_sample with
/// the latent grid of opensora_latent_shape.
class opensora_video_mix {
 public:
  struct params {
    /// VideoSys benchmark resolutions at aspect ratio 0.56 (9:16), from its common_ar override.
    std::vector<video_resolution> resolutions = {{"144p", 144, 256},
                                                 {"240p", 240, 426},
                                                 {"360p", 360, 640},
                                                 {"480p", 480, 854},
                                                 {"720p", 720, 1280}};
    std::vector<std::int64_t> frame_counts = {1, 51, 102, 204, 408};  // bucket_config frames
    double zipf_exponent = 3.0;  // zipf_alpha = 3.0, datasets.py
    double zipf_offset = 5;      // zipf_offset: 5, benchmark yaml
    /// 50 images per video: image_mixing_type exclusive, image_mixing_frac 50 (the dummy dataset:
    /// 100,000 images beside 2,000 videos).
    double image_share = 50.0 / 51.0;
    zipf_order order = zipf_order::frames_times_height;
    dcp::attention_kind attention = dcp::attention_kind::factorised;  // STDiT3

    friend bool operator==(const params&, const params&) = default;
  };

  opensora_video_mix() : opensora_video_mix(params{}) {}

  explicit opensora_video_mix(params p) : params_(std::move(p)) {
    validate();
    build_buckets();
  }

  /// The VideoSys DCP benchmark mix (the defaults of params).
  [[nodiscard]] static opensora_video_mix videosys_benchmark() {
    return opensora_video_mix(params{});
  }

  [[nodiscard]] const params& parameters() const noexcept { return params_; }

  /// All buckets: images by Zipf rank, then videos by Zipf rank.
  [[nodiscard]] const std::vector<video_bucket>& buckets() const noexcept { return buckets_; }

  /// Index into buckets() of one draw.
  [[nodiscard]] std::size_t draw_bucket(rng& random) const noexcept {
    const double target = random.uniform() * total_;
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
    if (it != cumulative_.end()) return static_cast<std::size_t>(it - cumulative_.begin());
    // target rounded up to the total: the last bucket that can be drawn at all.
    std::size_t last = 0;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].probability > 0) last = i;
    }
    return last;
  }

  [[nodiscard]] dcp::sample draw(rng& random, std::uint64_t id) const {
    return dcp::video_sample(id, buckets_[draw_bucket(random)].shape, params_.attention);
  }

  /// Expected latent tokens per draw.
  [[nodiscard]] double mean_tokens() const noexcept {
    double mean = 0;
    for (const auto& b : buckets_) {
      mean = std::fma(b.probability, static_cast<double>(b.shape.tokens()), mean);
    }
    return mean;
  }

  friend bool operator==(const opensora_video_mix& a, const opensora_video_mix& b) noexcept {
    return a.params_ == b.params_;
  }

 private:
  void validate() const {
    const auto fail = [](const std::string& what) {
      throw invalid_spec("opensora_video_mix: " + what);
    };
    if (params_.resolutions.empty()) fail("resolutions is empty, needs at least 1");
    if (params_.frame_counts.empty()) fail("frame_counts is empty, needs at least 1");
    for (const auto& r : params_.resolutions) {
      if (r.height_pixels < 8 || r.width_pixels < 8) {
        fail("resolution " + r.name + " is " + std::to_string(r.height_pixels) + "x" +
             std::to_string(r.width_pixels) + " pixels, each side must be >= 8");
      }
    }
    for (std::size_t i = 0; i < params_.frame_counts.size(); ++i) {
      const auto f = params_.frame_counts[i];
      if (f < 1)
        fail("frame_counts[" + std::to_string(i) + "] = " + std::to_string(f) + ", must be >= 1");
      for (std::size_t j = 0; j < i; ++j) {
        if (params_.frame_counts[j] == f) {
          fail("frame_counts[" + std::to_string(i) + "] = " + std::to_string(f) +
               " repeats frame_counts[" + std::to_string(j) + "]");
        }
      }
    }
    if (!(std::isfinite(params_.zipf_exponent) && params_.zipf_exponent >= 0 &&
          params_.zipf_exponent <= 100)) {
      fail("zipf_exponent = " + std::to_string(params_.zipf_exponent) + ", must be in [0, 100]");
    }
    if (!(std::isfinite(params_.zipf_offset) && params_.zipf_offset >= 0)) {
      fail("zipf_offset = " + std::to_string(params_.zipf_offset) + ", must be finite and >= 0");
    }
    if (!(params_.image_share >= 0 && params_.image_share <= 1)) {
      fail("image_share = " + std::to_string(params_.image_share) + ", must be in [0, 1]");
    }
    const bool has_images = std::find(params_.frame_counts.begin(), params_.frame_counts.end(),
                                      std::int64_t{1}) != params_.frame_counts.end();
    const bool has_videos = std::any_of(params_.frame_counts.begin(), params_.frame_counts.end(),
                                        [](std::int64_t f) { return f > 1; });
    if (params_.image_share > 0 && !has_images) {
      fail("image_share = " + std::to_string(params_.image_share) +
           " but frame_counts has no 1 (image); it must be 0");
    }
    if (params_.image_share < 1 && !has_videos) {
      fail("image_share = " + std::to_string(params_.image_share) +
           " but frame_counts has no count > 1 (video); it must be 1");
    }
  }

  /// Zipf probabilities of a pool already in rank order, scaled to the pool's share.
  void add_pool(std::vector<video_bucket> pool, double pool_share) {
    std::vector<double> weights;
    double total = 0;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      // 1 / (rank + offset)^exponent with rank = i + 1 (VideoSys: ranks 1..n, offset added).
      const double rank = static_cast<double>(i + 1) + params_.zipf_offset;
      weights.push_back(detail::portable_pow(rank, -params_.zipf_exponent));
      total += weights.back();
    }
    for (std::size_t i = 0; i < pool.size(); ++i) {
      pool[i].probability = pool_share * (weights[i] / total);
      buckets_.push_back(std::move(pool[i]));
    }
  }

  void build_buckets() {
    std::vector<video_bucket> images, videos;
    for (const auto& r : params_.resolutions) {
      for (const auto frames : params_.frame_counts) {
        video_bucket b{r.name,
                       frames,
                       r.height_pixels,
                       r.width_pixels,
                       opensora_latent_shape(frames, r.height_pixels, r.width_pixels),
                       0.0};
        (frames == 1 ? images : videos).push_back(std::move(b));
      }
    }
    const auto key = [this](const video_bucket& b) {
      const std::int64_t size = params_.order == zipf_order::frames_times_height
                                    ? b.height_pixels
                                    : b.height_pixels * b.width_pixels;
      return b.frames * size;
    };
    const auto by_key = [&](const video_bucket& a, const video_bucket& b) {
      return key(a) < key(b);
    };
    std::stable_sort(images.begin(), images.end(), by_key);
    std::stable_sort(videos.begin(), videos.end(), by_key);
    if (!images.empty()) add_pool(std::move(images), params_.image_share);
    if (!videos.empty()) add_pool(std::move(videos), 1 - params_.image_share);
    double running = 0;
    for (const auto& b : buckets_) {
      running += b.probability;
      cumulative_.push_back(running);
    }
    total_ = running;
  }

  params params_;
  std::vector<video_bucket> buckets_;
  std::vector<double> cumulative_;
  double total_ = 0;
};

static_assert(sample_distribution<opensora_video_mix>);

inline std::ostream& operator<<(std::ostream& os, const opensora_video_mix& mix) {
  return os << "opensora_video_mix{buckets=" << mix.buckets().size()
            << ", image_share=" << mix.parameters().image_share
            << ", mean_tokens=" << mix.mean_tokens() << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
