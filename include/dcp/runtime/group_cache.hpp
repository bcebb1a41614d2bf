#pragma once
// dcp::group_cache: the aligned groups a plan runs on (degree d a power of two, first rank a
// multiple of d), made by splitting the world once per degree and then looked up in O(1).

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A hybrid micro-step's two sub-groups on this rank (sequence_parallel::hybrid): the Ulysses
/// group, the aligned `u` ranks that hold this rank, and the ring group, the degree / u ranks of
/// the micro-step's group at this rank's offset in its Ulysses group (ranks u apart). `whole` is
/// the micro-step's group of `degree` ranks.
template <class G>
struct hybrid_groups {
  G& whole;
  G& ulysses;
  G& ring;
};

/// Holds, for each power-of-two degree d, this rank's aligned group of degree d (the ranks
/// [rank / d * d, rank / d * d + d)). One split of the world makes every group of a degree at
/// once, so a world of N ranks needs at most log2(N) + 1 splits; the rings of hybrid
/// micro-steps take one more split per (degree, Ulysses degree) pair.
///
/// Creating a degree is collective over the world: every rank must create the same degrees in
/// the same order — warm_up(max_degree) or prepare(plan) do (run_step calls prepare); group()
/// creates a missing degree itself, so call it first for a new degree on every rank. Lookups of
/// a created degree are local and O(1). If a split throws, the cache is unchanged.
template <communicator C>
class group_cache {
 public:
  using group_type = split_result_t<C>;

  /// `max_entries`: how many degrees (communicators held by this rank) the cache may create.
  explicit group_cache(C& world, std::int64_t max_entries = 64)
      : world_(&world),
        rank_(static_cast<std::int64_t>(world.rank())),
        size_(static_cast<std::int64_t>(world.size())),
        max_entries_(max_entries) {
    if (max_entries < 1)
      throw error("group_cache: max_entries = " + std::to_string(max_entries) +
                  " must be at least 1");
    std::size_t levels = 0;
    while ((std::int64_t{1} << levels) <= size_) ++levels;
    slots_.resize(levels);
  }

  group_cache(const group_cache&) = delete;
  group_cache& operator=(const group_cache&) = delete;

  /// This rank's group of ranks [first_rank, first_rank + degree). Throws dcp::error when the
  /// degree is not a power of two, first_rank is not a multiple of it, the group lies outside the
  /// world, or this rank is not in it; creates the degree (collectively) if it is new.
  group_type& group(std::int64_t first_rank, std::int64_t degree) {
    check_request(first_rank, degree);
    if (rank_ < first_rank || rank_ - first_rank >= degree)
      throw error(request(first_rank, degree) + ": rank " + std::to_string(rank_) +
                  " is not a member of ranks [" + std::to_string(first_rank) + ", " +
                  std::to_string(first_rank + degree) + ")");
    auto& slot = slots_[level(degree)];
    if (!slot.created) create(degree);
    return *slot.group;
  }

  /// This rank's sub-groups of a hybrid micro-step on ranks [first_rank, first_rank + degree)
  /// with Ulysses degree `ulysses` (2 <= ulysses < degree, a power of two). Throws dcp::error as
  /// group() does, or for a Ulysses degree outside that range; creates what is missing
  /// (collectively: call it for the same micro-steps in the same order on every rank, as
  /// prepare(plan) does).
  hybrid_groups<group_type> hybrid(std::int64_t first_rank, std::int64_t degree,
                                   std::int64_t ulysses) {
    check_hybrid(degree, ulysses);
    auto& whole = group(first_rank, degree);
    auto& local = group(rank_ / ulysses * ulysses, ulysses);
    return {whole, local, ring(degree, ulysses)};
  }

  /// Creates every degree 1, 2, 4, ..., max_degree (a power of two within the world).
  void warm_up(std::int64_t max_degree) {
    check_request(0, max_degree);
    for (std::int64_t d = 1; d <= max_degree; d *= 2) ensure(d);
  }

  /// Creates, in increasing order, the degrees the plan's micro-steps use. Collective; the plan
  /// must be the same on every rank (agree_on_plan checks that).
  void prepare(const step_plan& plan) {
    std::vector<std::int64_t> degrees;
    for (const auto& m : plan.micro_steps) {
      check_request(m.first_rank, m.degree());
      degrees.push_back(m.degree());
    }
    const auto u = plan.hybrid_ulysses_degree;
    bool hybrid = false;
    for (const auto& m : plan.micro_steps)
      if (m.config.sp == sequence_parallel::hybrid) {
        check_hybrid(m.degree(), u);
        hybrid = true;
      }
    if (hybrid) degrees.push_back(u);
    std::sort(degrees.begin(), degrees.end());
    degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
    for (auto d : degrees) ensure(d);
    // The rings of the hybrid micro-steps, by degree ascending: the same order on every rank.
    for (auto d : degrees)
      if (d > u &&
          std::any_of(plan.micro_steps.begin(), plan.micro_steps.end(), [&](const micro_step& m) {
            return m.config.sp == sequence_parallel::hybrid && m.degree() == d;
          }))
        (void)ring(d, u);
  }

  /// Creates the groups of `degree` if they are not there yet. Collective when it creates.
  void ensure(std::int64_t degree) {
    check_request(0, degree);
    if (!slots_[level(degree)].created) create(degree);
  }

  [[nodiscard]] bool contains(std::int64_t degree) const noexcept {
    return degree >= 1 && degree <= size_ && (degree & (degree - 1)) == 0 &&
           slots_[level(degree)].created;
  }
  /// Degrees created so far (one communicator each on this rank).
  [[nodiscard]] std::int64_t entries() const noexcept { return entries_; }
  /// Hybrid rings created so far (one communicator each on this rank, counted in entries()).
  [[nodiscard]] std::int64_t rings() const noexcept {
    return static_cast<std::int64_t>(rings_.size());
  }
  [[nodiscard]] std::int64_t max_entries() const noexcept { return max_entries_; }
  /// Aligned groups that exist across the world: the sum of size / d over created degrees.
  [[nodiscard]] std::int64_t groups_in_world() const noexcept {
    std::int64_t n = 0;
    for (std::size_t k = 0; k < slots_.size(); ++k)
      if (slots_[k].created) n += size_ >> k;
    return n;
  }
  [[nodiscard]] C& world() const noexcept { return *world_; }

 private:
  struct slot {
    bool created = false;
    std::optional<group_type> group;
  };

  [[nodiscard]] static std::size_t level(std::int64_t degree) noexcept {
    std::size_t k = 0;
    while ((std::int64_t{1} << k) < degree) ++k;
    return k;
  }

  [[nodiscard]] static std::string request(std::int64_t first_rank, std::int64_t degree) {
    return "group request (first_rank = " + std::to_string(first_rank) +
           ", degree = " + std::to_string(degree) + ")";
  }

  void check_hybrid(std::int64_t degree, std::int64_t ulysses) const {
    if (!valid_hybrid_split(ulysses, degree))
      throw error("hybrid group request (degree = " + std::to_string(degree) +
                  ", Ulysses degree = " + std::to_string(ulysses) +
                  "): the Ulysses degree must be a power of two in [2, degree)");
  }

  /// This rank's ring of the hybrid groups of `degree` with Ulysses degree u: created by one
  /// split of the world, colour (rank / degree) u + rank mod u, the first time it is asked for.
  group_type& ring(std::int64_t degree, std::int64_t ulysses) {
    check_request(0, degree);
    for (auto& r : rings_)
      if (r.degree == degree && r.ulysses == ulysses) return *r.group;
    if (entries_ >= max_entries_)
      throw error("group_cache: creating the hybrid rings of degree " + std::to_string(degree) +
                  " would exceed max_entries = " + std::to_string(max_entries_) +
                  " (held: " + std::to_string(entries_) + ")");
    const bool member = rank_ / degree * degree <= size_ - degree;
    const auto color = member ? static_cast<int>(rank_ / degree * ulysses + rank_ % ulysses) : -1;
    std::optional<group_type> made;
    try {
      made = world_->split(color, static_cast<int>(rank_));
    } catch (const comm_error& e) {
      std::string context = "group_cache: split for the hybrid rings of degree " +
                            std::to_string(degree) + " failed on rank " + std::to_string(rank_);
      if (!e.detail().empty()) context += " (" + e.detail() + ")";
      throw comm_error(e.call(), e.code(), context);
    }
    if (member && (!made || static_cast<std::int64_t>(made->size()) != degree / ulysses))
      throw error("group_cache: split for the hybrid rings of degree " + std::to_string(degree) +
                  " gave rank " + std::to_string(rank_) +
                  (made ? " a group of size " + std::to_string(made->size()) : " no group"));
    rings_.push_back({degree, ulysses, std::move(made)});
    ++entries_;
    return *rings_.back().group;
  }

  void check_request(std::int64_t first_rank, std::int64_t degree) const {
    if (degree < 1 || (degree & (degree - 1)) != 0 || degree > size_)
      throw error(request(first_rank, degree) + ": degree must be a power of two in [1, " +
                  std::to_string(size_) + "], the world size");
    if (first_rank < 0 || first_rank % degree != 0)
      throw error(request(first_rank, degree) +
                  ": first_rank must be a non-negative multiple of degree " +
                  std::to_string(degree));
    // first_rank > size - degree, not first_rank + degree > size: the sum can overflow.
    if (first_rank > size_ - degree) {
      const auto end = detail::checked_add(first_rank, degree);
      throw error(request(first_rank, degree) + ": ranks [" + std::to_string(first_rank) + ", " +
                  (end ? std::to_string(*end)
                       : std::to_string(first_rank) + " + " + std::to_string(degree)) +
                  ") lie outside the world of " + std::to_string(size_) + " ranks");
    }
  }

  void create(std::int64_t degree) {
    if (entries_ >= max_entries_)
      throw error("group_cache: creating the groups of degree " + std::to_string(degree) +
                  " would exceed max_entries = " + std::to_string(max_entries_) +
                  " (held: " + std::to_string(entries_) + ")");
    const auto first = rank_ / degree * degree;
    // In a world that is not a power of two, the last aligned group may not fit: opt out.
    const bool member = first <= size_ - degree;
    std::optional<group_type> made;
    try {
      made = world_->split(member ? static_cast<int>(rank_ / degree) : -1, static_cast<int>(rank_));
    } catch (const comm_error& e) {
      // Keep the backend's call and code; add what the cache was doing. Nothing was registered.
      std::string context = "group_cache: split for the groups of degree " +
                            std::to_string(degree) + " failed on rank " + std::to_string(rank_);
      if (!e.detail().empty()) context += " (" + e.detail() + ")";
      throw comm_error(e.call(), e.code(), context);
    }
    if (member && !made)
      throw error("group_cache: split for degree " + std::to_string(degree) + " gave rank " +
                  std::to_string(rank_) + " no group");
    if (made && static_cast<std::int64_t>(made->size()) != degree)
      throw error("group_cache: split for degree " + std::to_string(degree) + " gave rank " +
                  std::to_string(rank_) + " a group of size " + std::to_string(made->size()));
    auto& s = slots_[level(degree)];
    s.group = std::move(made);
    s.created = true;
    ++entries_;
  }

  C* world_;
  std::int64_t rank_;
  std::int64_t size_;
  std::int64_t max_entries_;
  std::int64_t entries_ = 0;
  std::vector<slot> slots_;
  struct ring_slot {
    std::int64_t degree;
    std::int64_t ulysses;
    std::optional<group_type> group;
  };
  std::deque<ring_slot> rings_;  // a deque: references handed out stay valid as rings are added
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
