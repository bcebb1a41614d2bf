#pragma once
// dcp::bucketing_policy — which samples are alike enough to share a micro-batch.

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A bucketing policy labels the samples of a batch; only samples with the same label are packed
/// into one micro-batch.
///
/// Requirements on `const B& b` and `std::span<const sample> batch`:
///  1. `b.assign(batch)` -> `std::vector<std::int32_t>`: one label per sample, in input order.
///  2. `b.name()` -> convertible to std::string_view, for reports.
///  3. Semantics: pure and deterministic; a sample's label depends only on the multiset of the
///     batch's shapes, not on the input order or the ids.
/// Models: log2_buckets, explicit_boundaries, padding_optimal_buckets, video_buckets.
template <class B>
concept bucketing_policy =
    std::copy_constructible<B> && requires(const B& b, std::span<const sample> batch) {
      { b.assign(batch) } -> std::same_as<std::vector<std::int32_t>>;
      { b.name() } -> std::convertible_to<std::string_view>;
    };

}  // namespace dcp::inline DCP_ABI_NAMESPACE
