#pragma once
// Comparison entries for policies that carry samples across steps: WLB-LLM with its outlier
// delay (baselines/wlb_outlier_delay.hpp) in front of its packing (baselines/wlb_llm.hpp), as a
// policy_entry with an admission stage (compare.hpp).

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

/// WLB-LLM with its outlier delay as a comparison entry: each step, the drawn documents at or
/// above the first threshold join the queues, every level holding N releases its N oldest, and
/// the documents kept plus those released are packed by wlb_llm (the same options as the
/// wlb-llm row unless `options.wlb` says otherwise).
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
  struct state {
    scheduler_t scheduler;
    baselines::wlb_outlier_queues queues;
    std::int64_t micro_batches = 0;
    std::vector<sample> planned_batch{};  ///< the admitted batch already planned during admission
    std::optional<step_plan> planned{};
  };
  auto thresholds = options.thresholds.empty() ? baselines::wlb_default_thresholds(context_tokens)
                                               : std::move(options.thresholds);
  const auto shared = std::make_shared<state>(
      state{scheduler_t(cost, varlen_buckets{}, selective_pyramid_recompute{}, options.wlb),
            baselines::wlb_outlier_queues(thresholds), options.micro_batches});
  std::string note =
      "outlier delay (WLB-LLM section 4) of text documents, video never held: levels from";
  for (std::size_t i = 0; i < thresholds.size(); ++i)
    note += (i ? ", " : " ") + std::to_string(thresholds[i]);
  note +=
      " tokens (ours: the paper's are tuned on its data and unpublished), a level released when it "
      "holds " +
      (options.micro_batches > 0 ? std::to_string(options.micro_batches)
                                 : std::string("N (the micro-batches of the first step's plan)")) +
      " documents; what is still queued at the end is not trained";
  policy_entry entry;
  entry.name = std::move(name);
  entry.note = std::move(note);
  entry.admit = [shared](std::span<const sample> drawn) {
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

}  // namespace dcp::inline DCP_ABI_NAMESPACE::evaluation
