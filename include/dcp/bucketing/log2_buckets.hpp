#pragma once
// Buckets by powers of two of the token count: [1,2), [2,4), ..., [2^k, 2^(k+1)).

#include <bit>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dcp/concepts/bucketing_policy.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

struct log2_buckets {
  [[nodiscard]] static std::int32_t bucket_of(std::int64_t tokens) noexcept {
    return tokens <= 0
               ? 0
               : static_cast<std::int32_t>(std::bit_width(static_cast<std::uint64_t>(tokens)) - 1);
  }
  [[nodiscard]] std::vector<std::int32_t> assign(std::span<const sample> batch) const {
    std::vector<std::int32_t> labels;
    labels.reserve(batch.size());
    for (const auto& s : batch) labels.push_back(bucket_of(s.tokens));
    return labels;
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "log2"; }
  friend constexpr bool operator==(log2_buckets, log2_buckets) noexcept { return true; }
};

static_assert(bucketing_policy<log2_buckets>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
