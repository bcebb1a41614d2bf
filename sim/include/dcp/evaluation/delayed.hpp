#pragma once
// Comparison entries for policies that carry samples across steps: WLB-LLM's outlier delay
// (baselines/wlb_outlier_delay.hpp) in front of a scheduler — WLB-LLM's own packing
// (baselines/wlb_llm.hpp), or any other — as a policy_entry with an admission stage and a drain
// (compare.hpp).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/baselines/wlb_llm.hpp"
#include "dcp/baselines/wlb_outlier_delay.hpp"
#include "dcp/bucketing/varlen_buckets.hpp"
#include "dcp/evaluation/compare.hpp"
#include "dcp/recompute/strategies.hpp"
#include "dcp/scheduler.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::evaluation {

struct wlb_delay_options {
  baselines::wlb_llm wlb{};  ///< the packing, as the wlb-llm row runs it by default
  /// The levels' lower bounds in tokens; empty: baselines::wlb_default_thresholds(context).
  std::vector<std::int64_t> thresholds{};
  /// N, the documents a level releases at once; 0: set on the first step, the micro-batches
  /// wlb_llm lays out for that step's documents that are not held.
  std::int64_t micro_batches = 0;
};

/// A scheduler behind WLB-LLM's outlier delay as a comparison entry: each step, the drawn
/// documents at or above the first threshold join the queues, every level holding N releases
/// its N oldest, and the documents kept plus those released are planned by `scheduler` (any
/// type with `plan(std::span<const sample>)`). After the run's last step the entry drains
/// (policy_entry::drain): the queues release what they hold, oldest first, in batches of at
/// most the largest step's drawn tokens, each planned as a step of its own, until none is left.
/// `micro_batches` is N; 0 sets it on the first step (wlb_llm_with_outlier_delay says how).
template <class Scheduler>
[[nodiscard]] policy_entry with_outlier_delay(Scheduler scheduler,
                                              std::vector<std::int64_t> thresholds,
                                              std::int64_t micro_batches, std::string name,
                                              std::string note) {
  if (micro_batches < 0)
    throw invalid_spec("with_outlier_delay: micro_batches = " + std::to_string(micro_batches) +
                       ", must be >= 0 (0 derives it)");
  struct state {
    Scheduler scheduler;
    baselines::wlb_outlier_queues queues;
    std::int64_t micro_batches = 0;
    std::int64_t step_tokens = 1;  ///< the most tokens drawn in one step: a drain batch's limit
    std::vector<sample> planned_batch{};  ///< the admitted batch already planned during admission
    std::optional<step_plan> planned{};
  };
  const auto shared = std::make_shared<state>(state{
      std::move(scheduler), baselines::wlb_outlier_queues(std::move(thresholds)), micro_batches});
  policy_entry entry;
  entry.name = std::move(name);
  entry.note = std::move(note);
  entry.admit = [shared](std::span<const sample> drawn) {
    std::int64_t drawn_tokens = 0;
    for (const auto& s : drawn) drawn_tokens += s.tokens;
    shared->step_tokens = std::max(shared->step_tokens, drawn_tokens);
    auto kept = shared->queues.hold(drawn);
    shared->planned.reset();
    if (shared->micro_batches == 0) {
      auto plan = shared->scheduler.plan(kept);
      shared->micro_batches =
          std::max<std::int64_t>(1, static_cast<std::int64_t>(plan.micro_steps.size()));
      shared->planned = std::move(plan);
    }
    const auto released = shared->queues.release(shared->micro_batches);
    if (!released.empty()) shared->planned.reset();
    kept.insert(kept.end(), released.begin(), released.end());
    if (shared->planned) shared->planned_batch = kept;
    return kept;
  };
  entry.drain = [shared] {
    shared->planned.reset();
    return shared->queues.drain(shared->step_tokens);
  };
  entry.plan = [shared](std::span<const sample> batch) {
    if (shared->planned && std::equal(batch.begin(), batch.end(), shared->planned_batch.begin(),
                                      shared->planned_batch.end())) {
      auto plan = std::move(*shared->planned);
      shared->planned.reset();
      return plan;
    }
    return shared->scheduler.plan(batch);
  };
  return entry;
}

/// What an outlier-delay entry's note says of its levels and N, and of its drain.
[[nodiscard]] inline std::string outlier_delay_note(const std::vector<std::int64_t>& thresholds,
                                                    std::int64_t micro_batches) {
  std::string note =
      "outlier delay (WLB-LLM section 4) of text documents, video never held: levels from";
  for (std::size_t i = 0; i < thresholds.size(); ++i)
    note += (i ? ", " : " ") + std::to_string(thresholds[i]);
  note +=
      " tokens (ours: the paper's are tuned on its data and unpublished), a level released when it "
      "holds " +
      (micro_batches > 0 ? std::to_string(micro_batches)
                         : std::string("N (the micro-batches of the first step's plan)")) +
      " documents; what is still queued after the last step is trained in drain steps, counted "
      "in its time";
  return note;
}

/// WLB-LLM with its outlier delay as a comparison entry: with_outlier_delay in front of
/// wlb_llm's packing (the same options as the wlb-llm row unless `options.wlb` says otherwise).
///
/// N (options.micro_batches = 0): the paper's N is the micro-batches per step, a constant of its
/// training configuration. wlb_llm searches the CP degree per step and its micro-batch count
/// moves with the degree (Llama-3-8B on 4x8 H200, 1M-token Wikipedia steps: 16 at CP 4, 8 at
/// CP 8, 32 at CP 2), so a count taken per step would make N jump with it. N is set once, on the
/// first step's batch (the sample WLB-LLM tunes on offline): the micro-batches of wlb_llm's plan
/// of that step's documents that are not held, i.e. of the regular traffic the released
/// documents are dealt into. They are the plan's micro-steps: one per micro-batch for text,
/// whose documents share one bucket (a micro-batch of several video grids runs as several, but
/// video is never held). That plan is the first step's plan when nothing is released in it.
/// `context_tokens`: the workload's context window (its longest document), for the default
/// thresholds.
template <cost_model Cost>
[[nodiscard]] policy_entry wlb_llm_with_outlier_delay(const Cost& cost, std::int64_t context_tokens,
                                                      wlb_delay_options options = {},
                                                      std::string name = "wlb-llm-delay") {
  if (options.micro_batches < 0)
    throw invalid_spec("wlb_llm_with_outlier_delay: micro_batches = " +
                       std::to_string(options.micro_batches) + ", must be >= 0 (0 derives it)");
  using scheduler_t =
      DataCentricScheduler<Cost, varlen_buckets, selective_pyramid_recompute, baselines::wlb_llm>;
  auto thresholds = options.thresholds.empty() ? baselines::wlb_default_thresholds(context_tokens)
                                               : std::move(options.thresholds);
  auto note = outlier_delay_note(thresholds, options.micro_batches);
  return with_outlier_delay(
      scheduler_t(cost, varlen_buckets{}, selective_pyramid_recompute{}, options.wlb),
      std::move(thresholds), options.micro_batches, std::move(name), std::move(note));
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
