#pragma once
// dcp::testing::check_communicator: the collective semantics every communicator adapter must
// have, as a function any test framework can call on every rank (it includes no test framework).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::testing {

namespace detail {

[[nodiscard]] inline std::string join(const std::vector<std::int64_t>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "}";
}

/// Records failures of one rank, each prefixed with the rank and the check's name.
struct failure_log {
  std::int64_t rank = 0;
  std::vector<std::string> failures;
  void expect(bool ok, const std::string& check, const std::string& detail) {
    if (!ok) failures.push_back("rank " + std::to_string(rank) + ": " + check + ": " + detail);
  }
  /// A failure after which this rank's collectives would no longer pair with the others'
  /// (a member that got no group): throw, so the harness aborts instead of hanging.
  [[noreturn]] void fatal(const std::string& check, const std::string& detail) {
    expect(false, check, detail);
    std::string all;
    for (const auto& f : failures) all += f + "\n";
    throw dcp::error("communicator conformance stopped:\n" + all);
  }
};

/// The group's world ranks (by group rank), via an all-gather of `world_rank`.
template <class G>
[[nodiscard]] std::vector<std::int64_t> world_ranks_of(G& group, std::int64_t world_rank) {
  const std::int64_t mine[1] = {world_rank};
  return group.all_gather(mine);
}

template <class G>
void check_basics(G& c, failure_log& log, const std::string& where) {
  const auto rank = static_cast<std::int64_t>(c.rank());
  const auto size = static_cast<std::int64_t>(c.size());
  log.expect(size >= 1 && rank >= 0 && rank < size, where + " rank/size",
             "rank " + std::to_string(rank) + ", size " + std::to_string(size));
}

}  // namespace detail

/// Runs the conformance checks on `comm`. Collective: every rank of `comm` must call it, at the
/// same point. Returns this rank's failures (empty when it conforms). A failure that would leave
/// ranks in different collectives throws dcp::error instead of returning, and a backend error
/// propagates as it is; a test harness should fail the test on either.
///
/// Checks: 0 <= rank < size; all_gather is rank-major for 1 and 3 values and handles 0 values;
/// split groups ranks by colour, ordered by key (ties by parent rank); a negative colour gives
/// nullopt; a split of a split groups the right world ranks; rank and size of every group agree
/// with its members.
template <communicator C>
[[nodiscard]] std::vector<std::string> check_communicator(C& comm) {
  detail::failure_log log;
  const auto rank = static_cast<std::int64_t>(comm.rank());
  const auto size = static_cast<std::int64_t>(comm.size());
  log.rank = rank;
  detail::check_basics(comm, log, "world");

  // all_gather: one value, three values, none.
  {
    const std::int64_t one[1] = {rank * 7 + 1};
    std::vector<std::int64_t> expected;
    for (std::int64_t r = 0; r < size; ++r) expected.push_back(r * 7 + 1);
    const auto got = comm.all_gather(one);
    log.expect(got == expected, "all_gather of 1 value",
               "got " + detail::join(got) + ", expected " + detail::join(expected));
  }
  {
    const std::int64_t three[3] = {rank, -rank, rank * 1000 + 3};
    std::vector<std::int64_t> expected;
    for (std::int64_t r = 0; r < size; ++r) expected.insert(expected.end(), {r, -r, r * 1000 + 3});
    const auto got = comm.all_gather(three);
    log.expect(got == expected, "all_gather of 3 values (rank-major)",
               "got " + detail::join(got) + ", expected " + detail::join(expected));
  }
  {
    const auto got = comm.all_gather(std::span<const std::int64_t>{});
    log.expect(got.empty(), "all_gather of 0 values", "got " + detail::join(got));
  }

  // split by parity, keys reversing the order: members in descending parent rank.
  {
    const auto color = static_cast<int>(rank % 2);
    auto child = comm.split(color, static_cast<int>(-rank));
    if (!child) log.fatal("split by parity", "a non-negative colour gave no group");
    std::vector<std::int64_t> expected;
    for (std::int64_t r = size - 1; r >= 0; --r)
      if (r % 2 == color) expected.push_back(r);
    detail::check_basics(*child, log, "parity group");
    log.expect(
        static_cast<std::int64_t>(child->size()) == static_cast<std::int64_t>(expected.size()),
        "split by parity size",
        "size " + std::to_string(child->size()) + ", expected " + std::to_string(expected.size()));
    const auto members = detail::world_ranks_of(*child, rank);
    log.expect(members == expected, "split by parity ordered by key",
               "members " + detail::join(members) + ", expected " + detail::join(expected));
    if (static_cast<std::size_t>(child->rank()) < members.size())
      log.expect(members[static_cast<std::size_t>(child->rank())] == rank, "split by parity rank",
                 "group rank " + std::to_string(child->rank()) + " holds world rank " +
                     std::to_string(members[static_cast<std::size_t>(child->rank())]));

    // Nested: halve the parity group by its own ranks; keys equal, so parent order decides.
    const auto half = static_cast<int>(child->size() > 1 ? child->rank() * 2 / child->size() : 0);
    auto grandchild = child->split(half, 0);
    if (!grandchild) log.fatal("nested split", "a non-negative colour gave no group");
    std::vector<std::int64_t> nested_expected;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto their_half = expected.size() > 1 ? static_cast<int>(i * 2 / expected.size()) : 0;
      if (their_half == half) nested_expected.push_back(expected[i]);
    }
    detail::check_basics(*grandchild, log, "nested group");
    const auto nested = detail::world_ranks_of(*grandchild, rank);
    log.expect(nested == nested_expected, "nested split ordered by parent rank on equal keys",
               "members " + detail::join(nested) + ", expected " + detail::join(nested_expected));
  }

  // A negative colour: odd ranks opt out; even ranks form one group ordered by rank.
  {
    const bool member = rank % 2 == 0;
    auto child = comm.split(member ? 0 : -1, static_cast<int>(rank));
    if (member && !child) log.fatal("split with negative colour", "a member got no group");
    log.expect(member || !child, "split with negative colour", "a rank with colour -1 got a group");
    if (member && child) {
      std::vector<std::int64_t> expected;
      for (std::int64_t r = 0; r < size; r += 2) expected.push_back(r);
      const auto members = detail::world_ranks_of(*child, rank);
      log.expect(members == expected, "split with negative colour members",
                 "members " + detail::join(members) + ", expected " + detail::join(expected));
    }
  }

  // Everyone in one colour: a duplicate of the world, still usable after the splits above.
  {
    auto copy = comm.split(0, static_cast<int>(rank));
    if (!copy) log.fatal("split into one group", "a non-negative colour gave no group");
    log.expect(static_cast<std::int64_t>(copy->rank()) == rank &&
                   static_cast<std::int64_t>(copy->size()) == size,
               "split into one group",
               "rank " + std::to_string(copy->rank()) + " of " + std::to_string(copy->size()));
    const std::int64_t mine[1] = {rank};
    const auto on_copy = copy->all_gather(mine);
    const auto on_world = comm.all_gather(mine);
    log.expect(on_copy == on_world, "duplicate gathers like the world",
               "copy " + detail::join(on_copy) + ", world " + detail::join(on_world));
  }
  return log.failures;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::testing
