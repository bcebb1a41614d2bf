#pragma once
// WLB-LLM's outlier delay: documents above a length threshold wait in multi-level FIFO queues
// keyed by length range, and a queue is released only when it holds N documents, one for each
// of the N micro-batches of the step that takes them.
//
// Source: WLB-LLM (Wang et al., OSDI'25, arXiv 2503.17924), §4; no code is public. Notes:
// docs/baselines.md.
//  - Levels L_1 < L_2 < ... : a document of l tokens with l >= L_1 joins level i, the last with
//    L_i <= l; shorter documents are never held.
//  - A level is released only when it holds N documents (N = micro-batches per step): its N
//    oldest, in arrival order. The paper tunes the thresholds offline on a sample, trading
//    balance against delay, and measures an average delay of 0.5 iterations per token.
// Choices of ours (the paper gives no more detail):
//  - A level holding 2N or more releases N at a time, as often as it can, in the same step.
//  - Documents are held in the step they are drawn, before the release, so a document that
//    completes a level's N-th place runs in its own step (no delay).
//  - Video samples are never held: the mechanism is WLB-LLM's for the documents of a text
//    corpus, and a clip's grid is one of a few fixed sizes, not a length tail.
//  - At the end of a run the queues drain (`drain`): documents leave oldest first over every
//    level, whatever the levels hold, in batches of at most a step's tokens, so that every drawn
//    document is trained and its time is charged (the paper trains for a fixed number of steps
//    and says nothing of what is queued when training stops).
// The queues keep samples as given, ids included: ids must be unique across the steps they span
// (evaluation::run gives an admitting policy run-unique ids).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/config.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// The default levels for a context window of `context_tokens`: {ceil(C/2), ceil(3C/4)}.
///
/// WLB-LLM tunes its thresholds on a sample of Meta's data and publishes none, so these are
/// ours. Two levels: the paper's best setting (imbalance degree 1.24 with one queue, 1.05 with
/// two). The first at half the window: the paper's own account of its data is that documents
/// below half the window carry over 75% of the tokens, so what lies above is the tail the
/// queues exist for. The second halves that range, so that the N documents released together
/// differ in length by at most 1.5x. Throws invalid_spec for context_tokens < 2.
[[nodiscard]] inline std::vector<std::int64_t> wlb_default_thresholds(std::int64_t context_tokens) {
  if (context_tokens < 2)
    throw invalid_spec("wlb_default_thresholds: context_tokens = " +
                       std::to_string(context_tokens) + ", must be >= 2");
  const std::int64_t half = context_tokens - context_tokens / 2;            // ceil(C / 2)
  const std::int64_t three_quarters = context_tokens - context_tokens / 4;  // ceil(3C / 4)
  if (three_quarters <= half) return {half};
  return {half, three_quarters};
}

/// WLB-LLM's multi-level outlier queues (state carried from step to step).
class wlb_outlier_queues {
 public:
  /// `thresholds`: the levels' lower bounds in tokens, strictly increasing, each >= 1. Throws
  /// invalid_spec naming the threshold otherwise.
  explicit wlb_outlier_queues(std::vector<std::int64_t> thresholds)
      : thresholds_(std::move(thresholds)) {
    if (thresholds_.empty())
      throw invalid_spec("wlb_outlier_queues: no thresholds, need at least one level");
    for (std::size_t i = 0; i < thresholds_.size(); ++i) {
      if (thresholds_[i] < 1)
        throw invalid_spec("wlb_outlier_queues: thresholds[" + std::to_string(i) +
                           "] = " + std::to_string(thresholds_[i]) + ", must be >= 1");
      if (i > 0 && thresholds_[i] <= thresholds_[i - 1])
        throw invalid_spec("wlb_outlier_queues: thresholds[" + std::to_string(i) +
                           "] = " + std::to_string(thresholds_[i]) + ", must exceed thresholds[" +
                           std::to_string(i - 1) + "] = " + std::to_string(thresholds_[i - 1]));
    }
    queues_.resize(thresholds_.size());
    arrivals_.resize(thresholds_.size());
  }

  [[nodiscard]] const std::vector<std::int64_t>& thresholds() const noexcept { return thresholds_; }
  [[nodiscard]] std::size_t levels() const noexcept { return thresholds_.size(); }

  /// The level `s` joins, or nullopt where it is not held (below the first threshold, or video).
  [[nodiscard]] std::optional<std::size_t> level_of(const sample& s) const noexcept {
    if (s.video || s.tokens < thresholds_.front()) return std::nullopt;
    const auto above = std::upper_bound(thresholds_.begin(), thresholds_.end(), s.tokens);
    return static_cast<std::size_t>(above - thresholds_.begin()) - 1;
  }

  /// Queues this step's outliers, in batch order, and returns the other samples in batch order.
  [[nodiscard]] std::vector<sample> hold(std::span<const sample> drawn) {
    std::vector<sample> kept;
    kept.reserve(drawn.size());
    for (const auto& s : drawn) {
      if (const auto level = level_of(s)) {
        queues_[*level].push_back(s);
        arrivals_[*level].push_back(next_arrival_++);
      } else {
        kept.push_back(s);
      }
    }
    return kept;
  }

  /// From every level, lowest first, its `n` oldest documents as often as it holds n. Throws
  /// invalid_spec for n < 1.
  [[nodiscard]] std::vector<sample> release(std::int64_t n) {
    if (n < 1)
      throw invalid_spec("wlb_outlier_queues::release: n = " + std::to_string(n) +
                         ", must be >= 1");
    const auto count = static_cast<std::size_t>(n);
    std::vector<sample> out;
    for (std::size_t level = 0; level < queues_.size(); ++level) {
      auto& queue = queues_[level];
      auto& arrivals = arrivals_[level];
      const auto n_oldest = static_cast<std::ptrdiff_t>(count);
      while (queue.size() >= count) {
        out.insert(out.end(), queue.begin(), queue.begin() + n_oldest);
        queue.erase(queue.begin(), queue.begin() + n_oldest);
        arrivals.erase(arrivals.begin(), arrivals.begin() + n_oldest);
      }
    }
    return out;
  }

  /// The end of a run: queued documents regardless of the levels' counts, oldest first over
  /// every level, as many as fit in `max_tokens` in that order (the first always, so that each
  /// call makes progress); empty when nothing is queued. Throws invalid_spec for max_tokens < 1.
  [[nodiscard]] std::vector<sample> drain(std::int64_t max_tokens) {
    if (max_tokens < 1)
      throw invalid_spec("wlb_outlier_queues::drain: max_tokens = " + std::to_string(max_tokens) +
                         ", must be >= 1");
    std::vector<sample> out;
    std::int64_t tokens = 0;
    for (;;) {
      std::optional<std::size_t> oldest;
      for (std::size_t level = 0; level < queues_.size(); ++level)
        if (!arrivals_[level].empty() &&
            (!oldest || arrivals_[level].front() < arrivals_[*oldest].front()))
          oldest = level;
      if (!oldest) break;
      const auto& next = queues_[*oldest].front();
      if (!out.empty() && tokens + next.tokens > max_tokens) break;
      tokens += next.tokens;
      out.push_back(next);
      queues_[*oldest].pop_front();
      arrivals_[*oldest].pop_front();
    }
    return out;
  }

  /// The documents waiting in `level`, oldest first.
  [[nodiscard]] const std::deque<sample>& queued(std::size_t level) const {
    return queues_.at(level);
  }

  /// Tokens waiting over all levels.
  [[nodiscard]] std::int64_t queued_tokens() const noexcept {
    std::int64_t total = 0;
    for (const auto& queue : queues_)
      for (const auto& s : queue) total += s.tokens;
    return total;
  }

 private:
  std::vector<std::int64_t> thresholds_;
  std::vector<std::deque<sample>> queues_;
  std::vector<std::deque<std::uint64_t>> arrivals_;  ///< per level, each document's arrival number
  std::uint64_t next_arrival_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
