#pragma once
// How a user configures the static layouts of user_static.hpp for a run: once, from the
// longest sample the run may see, by trying the setting on the hardware and taking the next
// one when it runs out of memory. Here the hardware is whatever `peak(shape, config)` says —
// the simulator's truth model in dcp-sim — against `capacity_bytes` (the GPU's memory). No
// batch is looked at: the degree and budget hold for every step of the run.
//
//  - Megatron-style: CP degree = the smallest allowed power of two at which a full window of
//    `--seq-length` L tokens (L = the longest sample kind) fits with the fixed recompute
//    setting, and at which the data-parallel size GPUs / CP is at most the windows a step's
//    `batch_tokens` fill (Megatron requires the global batch to be a multiple of
//    micro-batch × DP: no DP rank without a micro-batch).
//  - DeepSpeed-Ulysses-style: SP degree = the smallest allowed power of two that holds the
//    longest sample kind alone with full recompute, with the same share condition (every
//    data-parallel group's share of the step holds an L-token sample); tokens per rank = the
//    largest power of two whose micro-batch (tokens per rank × degree tokens) fits with full
//    recompute — a user doubles the token budget until it runs out of memory — capped at a
//    GPU's share of the step rounded up to a power of two (more would leave groups idle), and
//    never below ceil(L / degree), so that the longest sample fits its micro-batch.
//  - Megatron dynamic CP (megatron_dynamic_cp_user_layout): --max-seqlen-per-dp-cp-rank =
//    the Megatron-style run's --seq-length / --context-parallel-size, the rule Megatron's
//    documentation gives.
// batch_tokens = 0 drops the share conditions.
// "Fits" is judged on the worst window the run can form: for every sample kind, as many
// copies of it as the window holds (the kinds are the workload's: for text, one L-token
// document and a document of L / 64 tokens, packed 64 to a window; for video, one clip per
// grid of the mix).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dcp/baselines/megatron_dynamic_cp.hpp"
#include "dcp/baselines/user_static.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/spec/micro_batch_shape.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// A user layout with the line that says how the rule chose it.
template <class Layout>
struct user_layout {
  Layout layout;
  std::string reason;
};

namespace detail {

/// The shape of as many copies of `kind` as `limit` tokens hold (at least one, at most
/// `max_samples` when > 0).
[[nodiscard]] inline micro_batch_shape copies_within(const sample& kind, std::int64_t limit,
                                                     std::int64_t max_samples = 0) {
  const auto one = micro_batch_shape::of(kind);
  auto count = std::max<std::int64_t>(1, limit / std::max<std::int64_t>(kind.tokens, 1));
  if (max_samples > 0) count = std::min(count, max_samples);
  return {count * one.samples, count * one.tokens, one.longest,
          static_cast<double>(count) * one.attention_pairs};
}

template <class Peak>
[[nodiscard]] double worst_peak(const std::vector<sample>& kinds, std::int64_t limit,
                                const execution_config& config, const Peak& peak,
                                std::int64_t max_samples = 0) {
  double worst = 0;
  for (const auto& kind : kinds)
    if (kind.tokens <= limit)
      worst = std::max(worst,
                       static_cast<double>(peak(copies_within(kind, limit, max_samples), config)));
  return worst;
}

[[nodiscard]] inline std::int64_t longest_tokens(const std::vector<sample>& kinds) {
  if (kinds.empty()) throw invalid_spec("user static layout: no sample kinds to size it for");
  std::int64_t longest = 0;
  for (const auto& k : kinds) longest = std::max(longest, k.tokens);
  return longest;
}

[[nodiscard]] inline std::string gib_of(double bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << bytes / gib << " GiB";
  return os.str();
}

/// The smallest allowed degree at which a window of `limit` tokens fits; throws if none does.
template <class Peak>
[[nodiscard]] std::int64_t smallest_fitting_degree(
    const std::vector<std::int64_t>& degrees, const std::vector<sample>& kinds, std::int64_t limit,
    const std::function<sequence_parallel(std::int64_t)>& style_at, recompute_setting setting,
    const Peak& peak, double capacity_bytes, std::string_view who, std::int64_t gpus,
    std::int64_t batch_tokens, std::string& tried, std::int64_t max_samples = 0) {
  for (auto d : degrees) {
    if (batch_tokens > 0 && d < degrees.back() && (gpus / d) * limit > batch_tokens) {
      tried += (tried.empty() ? "" : ", ") + std::to_string(d) +
               " would leave data-parallel groups without a " + std::to_string(limit) +
               "-token share of the " + std::to_string(batch_tokens) + "-token step";
      continue;
    }
    const double bytes =
        worst_peak(kinds, limit, execution_config{d, style_at(d), setting}, peak, max_samples);
    if (bytes <= capacity_bytes) return d;
    tried += (tried.empty() ? "" : ", ") + std::to_string(d) + " would run out of memory (" +
             gib_of(bytes) + ")";
  }
  throw invalid_spec(std::string(who) + ": no degree holds a " + std::to_string(limit) +
                     "-token window within " + gib_of(capacity_bytes) + " (" + tried + ")");
}

}  // namespace detail

/// Megatron-style: `--context-parallel-size` and `--seq-length` for a run over `kinds`.
template <class Peak>
[[nodiscard]] user_layout<megatron_static> megatron_user_layout(
    const model_spec& model, const cluster_spec& cluster, const training_spec& training,
    const std::vector<sample>& kinds, recompute_granularity recompute, std::int64_t batch_tokens,
    const Peak& peak, double capacity_bytes) {
  const auto window = detail::longest_tokens(kinds);
  const auto degrees = allowed_degrees(model, cluster, training.sp);
  const auto style_at = [&](std::int64_t d) {
    return default_style(training.sp, d, model, cluster);
  };
  const auto setting = setting_of(recompute, model.layers);
  // A window packed full of the shortest kind may need more memory than the longest sample
  // (per-sample state such as a DiT's caption activations): then the user caps the samples
  // per window (`--thd-max-packed-sequences`), halving from the most the window can hold
  // until some degree fits. Without such a cap, the first attempt decides.
  std::int64_t most = 1;
  for (const auto& k : kinds) most = std::max(most, window / std::max<std::int64_t>(k.tokens, 1));
  std::int64_t cap = 0;  // no limit
  std::string tried;
  std::int64_t degree = 0;
  for (;;) {
    try {
      tried.clear();
      degree = detail::smallest_fitting_degree(degrees, kinds, window, style_at, setting, peak,
                                               capacity_bytes, "megatron-static", cluster.gpus,
                                               batch_tokens, tried, cap);
      break;
    } catch (const invalid_spec&) {
      std::int64_t next = 1;  // the largest power of two below the current limit
      while (next * 2 < (cap == 0 ? most : cap)) next *= 2;
      if ((cap == 0 ? most : cap) <= 1) throw;
      cap = next;
    }
  }
  const execution_config config{degree, training.sp, setting};
  std::string reason =
      "CP " + std::to_string(degree) + " for the run: the smallest power of two whose " +
      std::to_string(window) + "-token window" +
      (cap > 0 ? " of at most " + std::to_string(cap) +
                     " samples (--thd-max-packed-sequences; "
                     "full windows of the shortest kind fit no degree)"
               : "") +
      " fits with " + std::string(to_string(recompute)) + " recompute" +
      (batch_tokens > 0 ? " and leaves no data-parallel group without a window" : "") +
      " (worst window " + detail::gib_of(detail::worst_peak(kinds, window, config, peak, cap)) +
      " of " + detail::gib_of(capacity_bytes) + ")";
  if (!tried.empty()) reason += "; CP " + tried;
  return {{degree, window, recompute, cap}, std::move(reason)};
}

/// DeepSpeed-Ulysses-style: `sequence_parallel_size` and the per-rank token budget.
template <class Peak>
[[nodiscard]] user_layout<ulysses_static> ulysses_user_layout(
    const model_spec& model, const cluster_spec& cluster, const training_spec& training,
    const std::vector<sample>& kinds, std::int64_t batch_tokens, const Peak& peak,
    double capacity_bytes) {
  const auto longest = detail::longest_tokens(kinds);
  const auto full = recompute_setting::full(model.layers);
  const auto style_at = [&](std::int64_t d) {
    return default_style(training.sp, d, model, cluster);
  };
  std::vector<sample> longest_kind;
  for (const auto& k : kinds)
    if (k.tokens == longest) longest_kind.push_back(k);
  std::string tried;
  const auto degree = detail::smallest_fitting_degree(
      allowed_degrees(model, cluster, training.sp), longest_kind, longest, style_at, full, peak,
      capacity_bytes, "ulysses-static", cluster.gpus, batch_tokens, tried);
  const execution_config config{degree, style_at(degree), full};
  const auto floor_tokens = (longest + degree - 1) / degree;
  std::int64_t per_rank = 1;
  while (per_rank < (std::int64_t{1} << 40) &&
         detail::worst_peak(kinds, 2 * per_rank * degree, config, peak) <= capacity_bytes)
    per_rank *= 2;
  std::int64_t share = 1;  // a GPU's share of the step, rounded up to a power of two
  const auto step_share = batch_tokens > 0 ? (batch_tokens + cluster.gpus - 1) / cluster.gpus : 0;
  while (share < step_share) share *= 2;
  const bool capped = batch_tokens > 0 && share < per_rank;
  if (capped) per_rank = share;
  per_rank = std::max(per_rank, floor_tokens);
  std::string reason =
      "SP " + std::to_string(degree) + " for the run: the smallest power of two that holds the " +
      std::to_string(longest) + "-token sample with full recompute" +
      (batch_tokens > 0 ? " and gives every data-parallel group a share of the step" : "") + "; " +
      std::to_string(per_rank) + " tokens per rank: " +
      (capped ? "a GPU's share of the step rounded up to a power of two (memory holds more)"
              : "the largest power of two that fits") +
      " (worst micro-batch " +
      detail::gib_of(detail::worst_peak(kinds, per_rank * degree, config, peak)) + " of " +
      detail::gib_of(capacity_bytes) + ")";
  if (!tried.empty()) reason += "; SP " + tried;
  return {{degree, per_rank}, std::move(reason)};
}

/// Megatron-Core dynamic CP (megatron_dynamic_cp) sized as its documentation says:
/// `--max-seqlen-per-dp-cp-rank` = maximum sequence length / context parallel size, "a good
/// starting point" (ModelParallelConfig.max_seqlen_per_dp_cp_rank, NVIDIA/Megatron-LM
/// megatron/core/model_parallel_config.py; the example's 8,192 / CP 4 = 2,048 follows it). The
/// sequence length and CP size are those of the Megatron run a user configures for the workload,
/// megatron_user_layout with full recompute: the longest sample kind and the smallest CP that
/// holds it. Where no CP holds it, the largest allowed degree (the cap then still spreads the
/// longest sample over every rank dynamic CP may give it). The cap is rounded up, so that the
/// longest sample fits at that CP.
template <class Peak>
[[nodiscard]] user_layout<megatron_dynamic_cp> megatron_dynamic_cp_user_layout(
    const model_spec& model, const cluster_spec& cluster, const training_spec& training,
    const std::vector<sample>& kinds, std::int64_t batch_tokens, const Peak& peak,
    double capacity_bytes) {
  const auto longest = detail::longest_tokens(kinds);
  std::int64_t context_parallel = 0;
  std::string why;
  try {
    context_parallel =
        megatron_user_layout(model, cluster, training, kinds, recompute_granularity::full,
                             batch_tokens, peak, capacity_bytes)
            .layout.context_parallel_size;
    why = "megatron-static's CP";
  } catch (const invalid_spec&) {
    context_parallel = allowed_degrees(model, cluster, training.sp).back();
    why = "the largest allowed degree (no CP holds a full window)";
  }
  megatron_dynamic_cp options;
  options.max_seqlen_per_dp_cp_rank = (longest + context_parallel - 1) / context_parallel;
  std::string reason =
      "--max-seqlen-per-dp-cp-rank " + std::to_string(options.max_seqlen_per_dp_cp_rank) +
      " by Megatron's documented rule, max sequence length / CP size: " + std::to_string(longest) +
      " tokens (the longest sample) / CP " + std::to_string(context_parallel) + " (" + why + ")";
  return {options, std::move(reason)};
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
