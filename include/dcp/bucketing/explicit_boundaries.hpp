#pragma once
// Buckets between user-given boundaries: label i holds lengths in [b[i-1], b[i]).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/concepts/bucketing_policy.hpp"
#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

class explicit_boundaries {
 public:
  /// `boundaries` must be strictly increasing and positive; throws invalid_spec otherwise.
  explicit explicit_boundaries(std::vector<std::int64_t> boundaries)
      : boundaries_(std::move(boundaries)) {
    for (std::size_t i = 0; i < boundaries_.size(); ++i) {
      if (boundaries_[i] <= 0)
        throw invalid_spec("explicit_boundaries: boundary[" + std::to_string(i) +
                           "] = " + std::to_string(boundaries_[i]) + ", must be >= 1");
      if (i > 0 && boundaries_[i] <= boundaries_[i - 1])
        throw invalid_spec("explicit_boundaries: boundary[" + std::to_string(i) +
                           "] = " + std::to_string(boundaries_[i]) + " must exceed boundary[" +
                           std::to_string(i - 1) + "] = " + std::to_string(boundaries_[i - 1]));
    }
  }

  [[nodiscard]] std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    std::vector<std::int32_t> labels;
    labels.reserve(batch.size());
    for (const auto& s : batch) {
      const auto it = std::upper_bound(boundaries_.begin(), boundaries_.end(), s.tokens);
      labels.push_back(static_cast<std::int32_t>(it - boundaries_.begin()));
    }
    return labels;
  }
  [[nodiscard]] const std::vector<std::int64_t>& boundaries() const noexcept { return boundaries_; }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "explicit"; }
  friend bool operator==(const explicit_boundaries&, const explicit_boundaries&) = default;

 private:
  std::vector<std::int64_t> boundaries_;
};

static_assert(bucketing_policy<explicit_boundaries>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
