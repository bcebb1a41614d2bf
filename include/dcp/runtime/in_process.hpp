#pragma once
// dcp::in_process_world and dcp::in_process_communicator: N ranks as threads of one process, for
// unit tests of everything above the communicator. Not a performance path: every collective of
// every group takes the same mutex.

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// comm_error codes of the in-process communicator.
inline constexpr std::int64_t in_process_count_mismatch = 1;  ///< ranks passed different counts
inline constexpr std::int64_t in_process_aborted = 2;         ///< another rank failed

namespace detail {

/// One per world: the lock and wake-up every group of the world shares, so that aborting the
/// world wakes every rank whatever group it waits in.
struct in_process_shared {
  std::mutex mutex;
  std::condition_variable changed;
  bool aborted = false;
  std::string abort_reason;
};

/// One per group (the world, or a group made by split). Guarded by shared->mutex.
struct in_process_group {
  in_process_group(std::shared_ptr<in_process_shared> s, std::vector<int> world_ranks)
      : shared(std::move(s)), members(std::move(world_ranks)), contributions(members.size()) {}

  std::shared_ptr<in_process_shared> shared;
  std::vector<int> members;  ///< world rank of each group rank
  std::uint64_t round = 0;   ///< collectives completed
  std::size_t arrived = 0;
  std::vector<std::vector<std::int64_t>> contributions;
  std::vector<std::int64_t> result;  ///< of the last completed round
  std::string result_error;          ///< non-empty when the last round failed

  /// Groups being made by a split: keyed by (round of the split's all-gather, colour); erased
  /// once every member has taken its handle.
  struct pending_child {
    std::shared_ptr<in_process_group> group;
    std::size_t taken = 0;
  };
  std::map<std::pair<std::uint64_t, std::int64_t>, pending_child> children;

  [[nodiscard]] int size() const noexcept { return static_cast<int>(members.size()); }
};

}  // namespace detail

/// One rank's handle on a group of an in_process_world. Models dcp::communicator.
class in_process_communicator {
 public:
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return group_->size(); }
  /// This rank's rank in the world the group was split from.
  [[nodiscard]] int world_rank() const noexcept {
    return group_->members[static_cast<std::size_t>(rank_)];
  }
  /// The world ranks of the group, by group rank.
  [[nodiscard]] const std::vector<int>& world_ranks() const noexcept { return group_->members; }
  /// True when both handles are on the same group (ranks may differ).
  [[nodiscard]] bool same_group(const in_process_communicator& other) const noexcept {
    return group_ == other.group_;
  }

  [[nodiscard]] std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    return gather(mine).first;
  }

  /// Collective over this group: all-gathers (colour, key), then each member builds the member
  /// list of its colour ordered by (key, rank) — the way rank-list backends implement split.
  [[nodiscard]] std::optional<in_process_communicator> split(std::int64_t color, std::int64_t key) {
    const std::int64_t mine[2] = {color, key};
    const auto [all, round] = gather(mine);
    if (color < 0) return std::nullopt;
    std::vector<std::pair<std::int64_t, int>> ordered;  // (key, parent rank)
    for (int r = 0; r < size(); ++r)
      if (all[2 * static_cast<std::size_t>(r)] == color)
        ordered.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r);
    std::sort(ordered.begin(), ordered.end());
    std::vector<int> world_ranks;
    int child_rank = 0;
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      if (ordered[i].second == rank_) child_rank = static_cast<int>(i);
      world_ranks.push_back(group_->members[static_cast<std::size_t>(ordered[i].second)]);
    }
    std::shared_ptr<detail::in_process_group> child;
    {
      const std::lock_guard lock(group_->shared->mutex);
      const auto slot = std::make_pair(round, color);
      auto& pending = group_->children[slot];
      if (!pending.group)
        pending.group =
            std::make_shared<detail::in_process_group>(group_->shared, std::move(world_ranks));
      child = pending.group;
      if (++pending.taken == ordered.size()) group_->children.erase(slot);
    }
    return in_process_communicator(std::move(child), child_rank);
  }

 private:
  friend class in_process_world;
  in_process_communicator(std::shared_ptr<detail::in_process_group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  /// The all-gather, and the round it completed (the same on every rank of the group).
  [[nodiscard]] std::pair<std::vector<std::int64_t>, std::uint64_t> gather(
      std::span<const std::int64_t> mine) {
    auto& g = *group_;
    std::unique_lock lock(g.shared->mutex);
    if (g.shared->aborted)
      throw comm_error("in_process all_gather", in_process_aborted, g.shared->abort_reason);
    const auto round = g.round;
    g.contributions[static_cast<std::size_t>(rank_)].assign(mine.begin(), mine.end());
    if (++g.arrived == g.members.size()) {
      // The last rank in completes the round; nobody can start the next round before every
      // rank has read this one, because the next round needs them all.
      g.result.clear();
      g.result_error.clear();
      const auto count = g.contributions[0].size();
      for (std::size_t r = 0; r < g.contributions.size(); ++r) {
        if (g.contributions[r].size() != count && g.result_error.empty())
          g.result_error = "rank " + std::to_string(r) + " passed " +
                           std::to_string(g.contributions[r].size()) + " values, rank 0 passed " +
                           std::to_string(count);
        g.result.insert(g.result.end(), g.contributions[r].begin(), g.contributions[r].end());
        g.contributions[r].clear();
      }
      g.arrived = 0;
      ++g.round;
      g.shared->changed.notify_all();
    } else {
      g.shared->changed.wait(lock, [&] { return g.round != round || g.shared->aborted; });
      if (g.round == round)
        throw comm_error("in_process all_gather", in_process_aborted, g.shared->abort_reason);
    }
    if (!g.result_error.empty())
      throw comm_error("in_process all_gather", in_process_count_mismatch, g.result_error);
    return {g.result, round};
  }

  std::shared_ptr<detail::in_process_group> group_;
  int rank_ = 0;
};

static_assert(communicator<in_process_communicator>);

/// N ranks sharing one process. Hand communicator(r) to the thread playing rank r.
class in_process_world {
 public:
  explicit in_process_world(int size) {
    if (size < 1)
      throw error("in_process_world: size = " + std::to_string(size) + " must be at least 1");
    std::vector<int> ranks(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
    world_ = std::make_shared<detail::in_process_group>(
        std::make_shared<detail::in_process_shared>(), std::move(ranks));
  }

  [[nodiscard]] int size() const noexcept { return world_->size(); }

  /// Rank `rank`'s handle on the whole world.
  [[nodiscard]] in_process_communicator communicator(int rank) const {
    if (rank < 0 || rank >= size())
      throw error("in_process_world: rank " + std::to_string(rank) + " outside [0, " +
                  std::to_string(size()) + ")");
    return in_process_communicator(world_, rank);
  }

  /// Wakes every rank waiting in a collective of this world (and fails later ones) with
  /// comm_error(in_process_aborted), so one failing rank cannot leave the others hanging.
  void abort(const std::string& reason) {
    const std::lock_guard lock(world_->shared->mutex);
    if (!world_->shared->aborted) {
      world_->shared->aborted = true;
      world_->shared->abort_reason = reason;
    }
    world_->shared->changed.notify_all();
  }

 private:
  std::shared_ptr<detail::in_process_group> world_;
};

/// Runs f(in_process_communicator&) for ranks 0..n-1 on n threads, joins them all, and rethrows
/// the first exception thrown (a failing rank aborts the world, so the others return too).
template <class F>
void run_ranks(int n, F&& f) {
  in_process_world world(n);
  std::mutex first_mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&world, &first_mutex, &first, &f, r] {
      try {
        auto comm = world.communicator(r);
        f(comm);
      } catch (...) {
        {
          const std::lock_guard lock(first_mutex);
          if (!first) first = std::current_exception();
        }
        world.abort("rank " + std::to_string(r) + " failed");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
