#pragma once
// Megatron-Core's fixed-CP sequence packing, the baseline of its dynamic-CP benchmark, as a
// placement policy.
//
// Source: NVIDIA/Megatron-LM dev branch, `DpBalancedScheduler.get_groups_and_subsamples` in
// megatron/core/datasets/data_schedule.py (`--sequence-packing-scheduler dp_balanced`), run by
// examples/dynamic_context_parallel/benchmark_dcp.sh as the baseline (`--context-parallel-size
// 4 --max-seqlen-per-dp-cp-rank 2048`, no recompute flags). Notes: docs/baselines.md.
//
// The algorithm, per global batch: samples in the data loader's order are packed into THD
// packs of at most max_seqlen_per_dp_cp_rank × cp tokens (a sample that does not fit closes
// the pack and opens the next); while the pack count is not a multiple of the data-parallel
// size, the last sample of the last pack holding more than one is moved into a pack of its own
// at the end; pack p runs as micro-batch p / DP on data-parallel rank p mod DP, every pack over
// that rank's CP group of `context_parallel_size` GPUs, without recomputation.
//
// Simplifications and adaptations:
//  - The loader's order is sample id order (the workloads number samples in draw order), as
//    user_static.hpp; samples of different bucket labels never share a pack.
//  - Upstream asserts when it would have to split the first pack, or when there are fewer
//    samples than DP ranks; here the first pack may be split too, and if no pack is left to
//    split the last round leaves DP ranks idle.
//  - Every micro-step runs without recomputation, whatever the scheduler's strategy (no
//    recompute flag is set); a pack that does not fit is the peer's OOM, counted by the
//    simulator. Like user_static.hpp, this policy does not keep placement_policy's budget
//    requirement.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/baselines/user_static.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

struct megatron_dp_balanced {
  std::int64_t context_parallel_size = 4;  ///< `--context-parallel-size`: every pack's degree
  std::int64_t max_seqlen_per_dp_cp_rank = 2048;  ///< `--max-seqlen-per-dp-cp-rank`

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "megatron-dp-balanced"; }
  friend bool operator==(const megatron_dp_balanced&, const megatron_dp_balanced&) = default;
};

namespace detail {

/// DpBalancedScheduler's fix-up: while the pack count is not a multiple of `multiple`, the last
/// sample of the last pack with more than one moves into a pack of its own at the end.
inline void split_packs_to_multiple(std::vector<std::vector<std::size_t>>& packs,
                                    std::size_t multiple) {
  if (multiple <= 1 || packs.size() % multiple == 0) return;
  auto to_move = multiple - packs.size() % multiple;
  auto i = packs.size();  // one past the pack being split
  while (to_move > 0 && i > 0) {
    if (packs[i - 1].size() > 1) {
      const auto moved = packs[i - 1].back();
      packs[i - 1].pop_back();
      packs.push_back({moved});
      --to_move;
    } else {
      --i;
    }
  }
}

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement megatron_dp_balanced::place(const placement_input<M, R>& input) const {
  if (max_seqlen_per_dp_cp_rank < 1)
    throw invalid_spec("megatron-dp-balanced: max_seqlen_per_dp_cp_rank = " +
                       std::to_string(max_seqlen_per_dp_cp_rank) + ", must be >= 1");
  const auto k =
      detail::fixed_degree_index(input, name(), "context_parallel_size", context_parallel_size);
  if (input.size() == 0) return placement{{}, 0, 0, 0, std::string(name())};
  const auto limit = dcp::detail::checked_mul(max_seqlen_per_dp_cp_rank, context_parallel_size);
  if (!limit)
    throw invalid_spec("megatron-dp-balanced: max_seqlen_per_dp_cp_rank = " +
                       std::to_string(max_seqlen_per_dp_cp_rank) + " times CP " +
                       std::to_string(context_parallel_size) + " passes int64");
  auto packs = detail::pack_in_arrival_order(input, *limit);
  detail::split_packs_to_multiple(packs,
                                  static_cast<std::size_t>(input.gpus() / context_parallel_size));
  return detail::deal_round_robin(
      input, k, packs, recompute_setting::none(),
      "megatron-dp-balanced (CP " + std::to_string(context_parallel_size) + ", " +
          std::to_string(*limit) + "-token packs, no recompute, DP-multiple packs)");
}

static_assert(placement_policy<megatron_dp_balanced, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
