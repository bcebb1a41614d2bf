#pragma once
// WLB-LLM variable-length packing as a placement policy: one static context-parallel degree,
// documents packed greedily into micro-batches of up to S_max tokens by predicted workload, the
// micro-batches balanced over the data-parallel groups.
//
// Source: WLB-LLM (Wang et al., OSDI'25, arXiv 2503.17924), §4 and Algorithm 1; no code is
// public. Notes: docs/baselines.md.
//  - Variable-length packing: a micro-batch may hold any documents up to S_max tokens (a memory
//    cap, above the context window). Documents are sorted by length, longest first; each goes to
//    the micro-batch with the lowest predicted workload W_a + W_l (attention quadratic, the rest
//    linear, fitted from profiles) among those it fits in; one that fits nowhere is carried over.
//  - The micro-batches of a step are spread over the DP groups (and pipeline stages).
//
// Simplifications and adaptations:
//  - The predicted workload of a document is the cost model's marginal time at the CP degree
//    (WLB-LLM's profiled W_a + W_l).
//  - A step has DP × m micro-batches, m = ceil(batch tokens / (DP × S_max)) unless given. A
//    document that fits no micro-batch opens a new one instead of being carried to the next
//    step: every sample of this batch runs in this step.
//  - Outlier delay (the multi-level queues that hold long documents for later steps) is not
//    modelled, for the same reason; neither are per-document CP sharding and its adaptive
//    choice (the cost model prices CP the same way for every policy).
//  - Micro-batches go to the DP groups longest-processing-time-first on predicted time.
//  - degree = 0 (default) searches the static CP degree: every allowed degree at which the
//    longest document fits with every layer recomputed (degree × the per-GPU capacity under full
//    recomputation holds it) is laid out and the fastest by the cost model is kept — a tuned
//    WLB-LLM configuration, as best_static_placement tunes the static layout. (Changed: the
//    filter used the capacity without recomputation, which forced degrees whose groups cross
//    nodes, e.g. CP 16 for a 64K document where CP 4 with recomputation holds it.)
//  - S_max defaults to degree × the most tokens one GPU holds at the recompute strategy's
//    lightest setting; a document above it opens a micro-batch of its own. Each micro-step runs
//    with the recompute strategy's setting (every layer recomputed when it has none that fits),
//    so recomputation is allowed wherever the strategy chooses it.
// Memory: WLB-LLM is memory-aware only through S_max; a larger S_max or a document longer than
// it gives micro-steps over the budget — on purpose: this policy does NOT promise
// placement_policy's budget requirement.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

struct wlb_llm {
  /// The static CP degree; 0 searches the allowed degrees for the fastest.
  std::int64_t degree = 0;
  /// S_max, tokens per micro-batch; 0 derives degree × per-GPU capacity.
  std::int64_t max_tokens = 0;
  /// Micro-batches per DP group; 0 derives ceil(batch tokens / (DP × S_max)).
  std::int64_t micro_batches_per_group = 0;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "wlb-llm"; }
  friend bool operator==(const wlb_llm&, const wlb_llm&) = default;
};

namespace detail {

template <class Context>
class wlb_solver {
 public:
  wlb_solver(const Context& ctx, const wlb_llm& options) : ctx_(ctx), options_(options) {
    capacity_ = std::max<std::int64_t>(1, per_gpu_token_capacity(ctx));
    recomputed_capacity_ = std::max<std::int64_t>(
        capacity_, per_gpu_token_capacity(ctx, recompute_setting::full(ctx.cost().model().layers)));
  }

  [[nodiscard]] placement solve() {
    if (options_.degree > 0) {
      validate(execution_config{options_.degree,
                                default_style(ctx_.sp(), options_.degree, ctx_.cost().model(),
                                              ctx_.cost().cluster()),
                                {}},
               ctx_.cost().model(), ctx_.cost().cluster());
      return plan_at(degree_index_of(ctx_, options_.degree));
    }
    const auto longest = ctx_.sample(0).tokens;
    std::optional<placement> best;
    for (std::size_t k = 0; k < ctx_.degrees().size(); ++k) {
      const bool last = k + 1 == ctx_.degrees().size();
      const bool holds = options_.max_tokens > 0 ? s_max(k) >= longest
                                                 : ctx_.degree(k) * recomputed_capacity_ >= longest;
      if (!holds && !(last && !best)) continue;
      auto candidate = plan_at(k);
      if (!best || candidate.makespan_seconds < best->makespan_seconds) best = std::move(candidate);
    }
    return std::move(*best);
  }

 private:
  [[nodiscard]] std::int64_t tokens(std::size_t i) const { return ctx_.sample(i).tokens; }
  [[nodiscard]] std::int64_t s_max(std::size_t k) const {
    return options_.max_tokens > 0 ? options_.max_tokens : ctx_.degree(k) * capacity_;
  }

  struct micro_batch {
    std::vector<std::size_t> items{};
    std::int64_t tokens = 0;
    double workload = 0;
  };

  [[nodiscard]] placement plan_at(std::size_t k) const {
    const std::int64_t d = ctx_.degree(k);
    const auto groups = static_cast<std::size_t>(ctx_.gpus() / d);
    const std::int64_t cap = s_max(k);
    std::int64_t total = 0;
    for (std::size_t i = 0; i < ctx_.size(); ++i) total += tokens(i);
    const auto per_group =
        options_.micro_batches_per_group > 0
            ? options_.micro_batches_per_group
            : std::max<std::int64_t>(1, (total + static_cast<std::int64_t>(groups) * cap - 1) /
                                            (static_cast<std::int64_t>(groups) * cap));
    std::vector<micro_batch> batches(groups * static_cast<std::size_t>(per_group));
    // Algorithm 1: longest first, each to the least-loaded micro-batch it fits in.
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      const double work = predicted(i, k);
      std::size_t target = batches.size();
      for (std::size_t b = 0; b < batches.size(); ++b) {
        if (batches[b].tokens + tokens(i) > cap) continue;
        if (target == batches.size() || batches[b].workload < batches[target].workload) target = b;
      }
      if (target == batches.size()) batches.emplace_back();  // carried over: a new micro-batch
      batches[target].items.push_back(i);
      batches[target].tokens += tokens(i);
      batches[target].workload += work;
    }
    std::erase_if(batches, [](const micro_batch& b) { return b.items.empty(); });
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t b = 0; b < batches.size(); ++b)
      order.emplace_back(ctx_.empty_seconds(k) + batches[b].workload, b);
    const auto assigned =
        dcp::detail::lpt_assign(std::move(order), std::vector<double>(groups, 0.0));
    placement out;
    rank_clock clock(ctx_.gpus());
    for (std::size_t g = 0; g < groups; ++g)
      for (auto b : assigned[g])
        append_micro_batch(out, clock, ctx_, static_cast<std::int64_t>(g) * d, k, batches[b].items);
    out.policy =
        "wlb-llm (CP degree " + std::to_string(d) + ", S_max " + std::to_string(cap) + " tokens)";
    return out;
  }

  // W_a + W_l: the cost model's marginal time of the document at degree index k.
  [[nodiscard]] double predicted(std::size_t i, std::size_t k) const {
    const auto& alone = ctx_.alone(i, k);
    if (alone.feasible) return ctx_.marginal_seconds(i, alone, k);
    const auto run = run_with_strategy(ctx_, ctx_.shape(i), k);
    return std::max(run.seconds - ctx_.empty_seconds(k), 0.0);
  }

  const Context& ctx_;
  const wlb_llm& options_;
  std::int64_t capacity_ = 1;
  std::int64_t recomputed_capacity_ = 1;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement wlb_llm::place(const placement_input<M, R>& input) const {
  if (input.size() == 0) return placement{{}, 0, 0, 0, "wlb-llm"};
  return detail::wlb_solver<dcp::placement_input<M, R>>(input, *this).solve();
}

static_assert(placement_policy<wlb_llm, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
