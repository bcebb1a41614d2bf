#pragma once
// dcp::agree_on_plan: before the first micro-step, every rank proves it planned the same step.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {
[[nodiscard]] inline std::string hex64(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

/// "rank 2", "ranks 1 and 3", "ranks 0, 2 and 4".
[[nodiscard]] inline std::string rank_list(const std::vector<std::int64_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}
}  // namespace detail

/// Collective: all-gathers the fingerprint of `plan` (recomputed, so a plan edited after
/// planning is caught too) and throws dcp::error on every rank if any two differ, naming which
/// ranks planned which fingerprint. Also throws if the plan is for a different number of GPUs
/// than the communicator has. Returns the agreed fingerprint.
template <communicator C>
std::uint64_t agree_on_plan(C& comm, const step_plan& plan) {
  const auto fingerprint = compute_fingerprint(plan);
  const std::int64_t mine[1] = {static_cast<std::int64_t>(fingerprint)};
  const auto all = comm.all_gather(mine);
  std::map<std::uint64_t, std::vector<std::int64_t>> ranks_of;  // fingerprint -> ranks
  for (std::size_t r = 0; r < all.size(); ++r)
    ranks_of[static_cast<std::uint64_t>(all[r])].push_back(static_cast<std::int64_t>(r));
  if (ranks_of.size() > 1) {
    // Largest camp first (then by lowest rank), so the odd ones out read last.
    std::vector<std::pair<std::uint64_t, std::vector<std::int64_t>>> camps(ranks_of.begin(),
                                                                           ranks_of.end());
    std::stable_sort(camps.begin(), camps.end(), [](const auto& a, const auto& b) {
      if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
      return a.second.front() < b.second.front();
    });
    std::string message = "plan disagreement across " + std::to_string(all.size()) + " ranks: ";
    for (std::size_t i = 0; i < camps.size(); ++i) {
      if (i > 0) message += "; ";
      message += detail::rank_list(camps[i].second) + " planned fingerprint " +
                 detail::hex64(camps[i].first);
    }
    throw error(message);
  }
  const auto size = static_cast<std::int64_t>(comm.size());
  if (plan.gpus != size)
    throw error("plan for gpus = " + std::to_string(plan.gpus) + " run on a communicator of " +
                std::to_string(size) + " ranks");
  return fingerprint;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
