#pragma once
// Global batches from a workload: draw samples up to a token budget, and cut documents longer
// than the context window into context-sized chunks as pretraining pipelines do.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/distribution.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

namespace detail {

/// a + b, or invalid_sample naming `what` when the sum passes the int64 range.
[[nodiscard]] inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  if (b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) {
    throw invalid_sample(std::string(what) + ": the token total passes " +
                         std::to_string(std::numeric_limits<std::int64_t>::max()));
  }
  return a + b;
}

[[nodiscard]] inline std::uint64_t next_id(std::uint64_t id, const char* what) {
  if (id == std::numeric_limits<std::uint64_t>::max()) {
    throw invalid_sample(std::string(what) + ": sample ids pass " + std::to_string(id));
  }
  return id + 1;
}

}  // namespace detail

/// Draws samples from `distribution` with rng(seed) until their tokens total at least
/// `target_tokens`: the last sample is kept whole, so the total lies in
/// [target_tokens, target_tokens + last sample's tokens - 1]. Ids are first_id, first_id + 1, ...
/// in draw order. The same (distribution, target, seed, first_id) gives the same batch on every
/// platform. Throws invalid_spec when target_tokens < 1.
template <sample_distribution D>
[[nodiscard]] std::vector<dcp::sample> draw_batch(const D& distribution, std::int64_t target_tokens,
                                                  std::uint64_t seed, std::uint64_t first_id = 0) {
  if (target_tokens < 1) {
    throw invalid_spec("draw_batch: target_tokens = " + std::to_string(target_tokens) +
                       ", must be >= 1");
  }
  rng random(seed);
  std::vector<dcp::sample> samples;
  std::int64_t total = 0;
  std::uint64_t id = first_id;
  while (total < target_tokens) {
    if (!samples.empty()) id = detail::next_id(id, "draw_batch");
    samples.push_back(distribution.draw(random, id));
    if (samples.back().tokens < 1) {  // would never reach the target
      throw invalid_sample("draw_batch: sample id=" + std::to_string(id) + " has tokens = " +
                           std::to_string(samples.back().tokens) + ", must be >= 1");
    }
    total = detail::checked_add(total, samples.back().tokens, "draw_batch");
  }
  return samples;
}

/// Draws exactly `count` samples from `distribution` with rng(seed); ids first_id, first_id + 1,
/// ... The first k samples equal those of draw_batch with the same seed.
template <sample_distribution D>
[[nodiscard]] std::vector<dcp::sample> draw_samples(const D& distribution, std::int64_t count,
                                                    std::uint64_t seed,
                                                    std::uint64_t first_id = 0) {
  if (count < 0) {
    throw invalid_spec("draw_samples: count = " + std::to_string(count) + ", must be >= 0");
  }
  rng random(seed);
  std::vector<dcp::sample> samples;
  samples.reserve(static_cast<std::size_t>(count));
  std::uint64_t id = first_id;
  for (std::int64_t i = 0; i < count; ++i) {
    if (i > 0) id = detail::next_id(id, "draw_samples");
    samples.push_back(distribution.draw(random, id));
  }
  return samples;
}

/// What split_to_context did.
struct split_report {
  std::int64_t documents_split = 0;      ///< text samples longer than the context
  std::int64_t chunks = 0;               ///< chunks those documents became
  std::int64_t videos_over_context = 0;  ///< videos longer than the context, left whole
  std::int64_t tokens_before = 0;
  std::int64_t tokens_after = 0;

  [[nodiscard]] bool tokens_conserved() const noexcept { return tokens_before == tokens_after; }
  friend bool operator==(const split_report&, const split_report&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const split_report& r) {
  return os << "split_report{documents_split=" << r.documents_split << ", chunks=" << r.chunks
            << ", videos_over_context=" << r.videos_over_context
            << ", tokens_before=" << r.tokens_before << ", tokens_after=" << r.tokens_after << '}';
}

struct split_result {
  std::vector<dcp::sample> samples;
  split_report report;
};

/// Cuts every text sample longer than `context_tokens` into chunks of context_tokens, the last
/// chunk the remainder, as pretraining packs a document stream into fixed windows. Order is
/// kept: a split document's chunks stand where it stood. Samples that fit keep their ids; the
/// chunks get fresh ids max(input id) + 1, + 2, ... in output order, so ids stay unique and the
/// result depends only on the input. Chunks keep the document's attention kind. Video samples
/// are never split (a clip's latent grid is one unit); those longer than the context are left
/// whole and counted in the report.
/// Throws invalid_spec for context_tokens < 1 and invalid_sample for a sample with tokens < 1
/// or an id that appears twice.
[[nodiscard]] inline split_result split_to_context(std::span<const dcp::sample> samples,
                                                   std::int64_t context_tokens) {
  if (context_tokens < 1) {
    throw invalid_spec("split_to_context: context_tokens = " + std::to_string(context_tokens) +
                       ", must be >= 1");
  }
  std::vector<std::uint64_t> ids;
  ids.reserve(samples.size());
  split_result result;
  split_report& report = result.report;
  for (const auto& s : samples) {
    if (s.tokens < 1) {
      throw invalid_sample("split_to_context: sample id=" + std::to_string(s.id) +
                           " has tokens = " + std::to_string(s.tokens) + ", must be >= 1");
    }
    ids.push_back(s.id);
    report.tokens_before = detail::checked_add(report.tokens_before, s.tokens, "split_to_context");
  }
  std::sort(ids.begin(), ids.end());
  const auto repeated = std::adjacent_find(ids.begin(), ids.end());
  if (repeated != ids.end()) {
    throw invalid_sample("split_to_context: sample id=" + std::to_string(*repeated) +
                         " appears more than once; ids must be unique");
  }

  // Chunk ids count up from the largest input id, one per chunk made, so that an input whose
  // ids reach the top of the range is fine as long as nothing needs splitting.
  std::uint64_t last_id = ids.empty() ? 0 : ids.back();
  for (const auto& s : samples) {
    if (s.tokens <= context_tokens) {
      result.samples.push_back(s);
      continue;
    }
    if (s.video) {
      ++report.videos_over_context;
      result.samples.push_back(s);
      continue;
    }
    ++report.documents_split;
    for (std::int64_t remaining = s.tokens; remaining > 0;) {
      last_id = detail::next_id(last_id, "split_to_context");
      dcp::sample chunk = s;
      chunk.id = last_id;
      chunk.tokens = std::min(context_tokens, remaining);
      remaining -= chunk.tokens;
      result.samples.push_back(chunk);
      ++report.chunks;
    }
  }
  for (const auto& s : result.samples) report.tokens_after += s.tokens;
  return result;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
