// The runtime's pure-C++ foundation: the in-process communicator against the conformance checks,
// the group cache, plan agreement and run_step, including their faults.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/in_process.hpp"
#include "dcp/runtime/plan_agreement.hpp"
#include "dcp/testing/communicator_conformance.hpp"

#include "../support/batches.hpp"
#include "../support/errors.hpp"
#include "../support/plans.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

/// An in-process communicator whose split counts its calls and, when asked, fails the way a
/// backend would (comm_error with the backend's call name and code).
struct test_adapter {
  in_process_communicator inner;
  int splits = 0;
  bool fail_split = false;

  int rank() const noexcept { return inner.rank(); }
  int size() const noexcept { return inner.size(); }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    return inner.all_gather(mine);
  }
  std::optional<in_process_communicator> split(int color, int key) {
    if (fail_split) throw comm_error("ncclCommSplit", 5, "simulated invalid usage");
    ++splits;
    return inner.split(color, key);
  }
};
static_assert(communicator<test_adapter>);

/// Calls f on each rank with the rank's failures collected under a lock.
struct collected {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(const std::string& line) {
    const std::lock_guard lock(mutex);
    lines.push_back(line);
  }
  void add_all(const std::vector<std::string>& more) {
    const std::lock_guard lock(mutex);
    lines.insert(lines.end(), more.begin(), more.end());
  }
  std::string text() {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

/// The plan of a seeded heavy-tailed batch on one 8-GPU H200 node.
const step_plan& plan_on_8_gpus() {
  static const step_plan plan = [] {
    const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(1, gpus::h200_sxm()));
    const DataCentricScheduler<> scheduler(cost);
    return scheduler.plan(dcp::test::heavy_tailed_batch(7, 256, 131072));
  }();
  return plan;
}

/// What a recording executor saw for one micro-step.
struct call {
  std::int64_t sequence = 0;
  std::vector<std::int64_t> group_members;  // world ranks, gathered over the group itself
  recompute_setting recompute{};
  double loss_scale = 0;
};

/// Records each call; gathers the world ranks over the group, so a wrong group or a wrong order
/// between members shows up (as wrong members or as a deadlock).
struct recording_executor {
  std::vector<call> calls;
  std::int64_t throw_at_call = -1;  // index of the call that throws, or -1

  execution_report run(const micro_step& m, in_process_communicator& group, recompute_setting r,
                       double loss_scale) {
    if (static_cast<std::int64_t>(calls.size()) == throw_at_call)
      throw std::runtime_error("CUDA out of memory (simulated)");
    const std::int64_t mine[1] = {group.world_rank()};
    calls.push_back({m.sequence, group.all_gather(mine), r, loss_scale});
    return {static_cast<double>(m.tokens) * 1e-6, m.peak_bytes};
  }
};
static_assert(micro_batch_executor<recording_executor, in_process_communicator>);

std::vector<std::int64_t> iota(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = first; r < first + count; ++r) out.push_back(r);
  return out;
}

}  // namespace

// ---- in-process communicator -------------------------------------------------------------------

TEST_CASE("Runtime.InProcess.passes_conformance") {
  for (const int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    collected failures;
    run_ranks(n, [&](in_process_communicator& comm) {
      failures.add_all(dcp::testing::check_communicator(comm));
    });
    CHECK_MESSAGE(failures.lines.empty(), failures.text());
  }
}

TEST_CASE("Runtime.InProcess.count_mismatch_is_a_comm_error") {
  const auto msg = message_of([] {
    run_ranks(3, [](in_process_communicator& comm) {
      const std::vector<std::int64_t> mine(comm.rank() == 1 ? 2 : 1, 0);
      (void)comm.all_gather(mine);
    });
  });
  CHECK(contains(msg, "in_process all_gather failed with code 1"));
  CHECK(contains(msg, "rank 1 passed 2 values"));
}

TEST_CASE("Runtime.InProcess.failing_rank_releases_the_others") {
  std::atomic<int> aborted{0};
  const auto msg = message_of([&] {
    run_ranks(4, [&](in_process_communicator& comm) {
      if (comm.rank() == 2) throw dcp::error("rank 2 gave up");
      try {
        const std::int64_t mine[1] = {0};
        (void)comm.all_gather(mine);
      } catch (const comm_error& e) {
        if (e.code() == in_process_aborted) ++aborted;
        throw;
      }
    });
  });
  CHECK(msg == "rank 2 gave up");
  CHECK(aborted.load() == 3);
}

// ---- group cache -------------------------------------------------------------------------------

TEST_CASE("Runtime.GroupCache.aligned_groups_have_the_right_members") {
  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    cache.warm_up(8);
    if (cache.entries() != 4 || cache.groups_in_world() != 15)
      failures.add("rank " + std::to_string(comm.rank()) + ": entries " +
                   std::to_string(cache.entries()));
    for (std::int64_t degree = 1; degree <= 8; degree *= 2) {
      const auto first = comm.rank() / degree * degree;
      auto& group = cache.group(first, degree);
      const std::int64_t mine[1] = {comm.rank()};
      const auto members = group.all_gather(mine);
      if (members != iota(first, degree) || group.rank() != comm.rank() - first)
        failures.add("rank " + std::to_string(comm.rank()) + ": degree " + std::to_string(degree) +
                     " group has the wrong members or rank");
    }
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.GroupCache.lookup_reuses_the_group_and_creates_lazily") {
  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    test_adapter adapter{comm};
    group_cache<test_adapter> cache(adapter);
    const auto first4 = comm.rank() / 4 * 4;
    auto* a = &cache.group(first4, 4);  // creates degree 4: one split
    auto* b = &cache.group(first4, 4);  // O(1) lookup: same object, no split
    const bool same = a == b && adapter.splits == 1 && cache.entries() == 1 && cache.contains(4) &&
                      !cache.contains(2);
    cache.group(comm.rank(), 1);  // a second degree: one more split
    cache.group(first4, 4);
    if (!same || adapter.splits != 2 || cache.entries() != 2 || cache.groups_in_world() != 2 + 8)
      failures.add("rank " + std::to_string(comm.rank()) + ": splits " +
                   std::to_string(adapter.splits));
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.GroupCache.bad_requests_name_first_rank_degree_and_limit") {
  // Each request is rejected before any collective, so one rank's handle is enough.
  const in_process_world world(8);
  auto comm = world.communicator(0);
  group_cache<in_process_communicator> cache(comm);

  auto msg = message_of([&] { cache.group(0, 3); });
  CHECK(contains(msg, "first_rank = 0"));
  CHECK(contains(msg, "degree = 3"));
  CHECK(contains(msg, "power of two in [1, 8]"));

  msg = message_of([&] { cache.group(2, 4); });
  CHECK(contains(msg, "first_rank = 2"));
  CHECK(contains(msg, "degree = 4"));
  CHECK(contains(msg, "multiple of degree 4"));

  msg = message_of([&] { cache.group(0, 16); });
  CHECK(contains(msg, "degree = 16"));
  CHECK(contains(msg, "[1, 8]"));

  msg = message_of([&] { cache.group(-2, 2); });
  CHECK(contains(msg, "first_rank = -2"));

  msg = message_of([&] { cache.group(4, 4); });
  CHECK(contains(msg, "first_rank = 4, degree = 4"));
  CHECK(contains(msg, "rank 0 is not a member of ranks [4, 8)"));

  msg = message_of([&] { cache.warm_up(6); });
  CHECK(contains(msg, "degree = 6"));
  CHECK(cache.entries() == 0);
}

TEST_CASE("Runtime.GroupCache.outside_a_world_that_is_not_a_power_of_two") {
  collected failures;
  run_ranks(6, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    cache.warm_up(4);  // degrees 1, 2, 4: group [4, 8) does not fit, ranks 4 and 5 opt out
    const auto rank = comm.rank();
    if (rank < 4) {
      if (cache.group(0, 4).world_ranks() != std::vector<int>{0, 1, 2, 3})
        failures.add("wrong group of 4");
    } else {
      const auto msg = message_of([&] { cache.group(4, 4); });
      if (!contains(msg, "lie outside the world of 6 ranks"))
        failures.add("rank " + std::to_string(rank) + ": " + msg);
    }
    if (cache.group(rank / 2 * 2, 2).size() != 2) failures.add("wrong group of 2");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.GroupCache.bound_on_entries") {
  collected failures;
  run_ranks(4, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm, 2);
    cache.ensure(1);
    cache.ensure(2);
    cache.ensure(2);  // already there: no new entry
    const auto msg = message_of([&] { cache.ensure(4); });
    if (!contains(msg, "degree 4") || !contains(msg, "max_entries = 2") || cache.entries() != 2 ||
        cache.contains(4))
      failures.add("rank " + std::to_string(comm.rank()) + ": " + msg);
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.GroupCache.failed_split_names_call_and_code_and_registers_nothing") {
  collected failures;
  run_ranks(4, [&](in_process_communicator& comm) {
    test_adapter adapter{comm};
    group_cache<test_adapter> cache(adapter);
    cache.ensure(1);
    adapter.fail_split = true;
    try {
      cache.group(comm.rank() / 2 * 2, 2);
      failures.add("no error");
    } catch (const comm_error& e) {
      const std::string msg = e.what();
      if (e.call() != "ncclCommSplit" || e.code() != 5 ||
          !contains(msg, "ncclCommSplit failed with code 5") || !contains(msg, "degree 2") ||
          !contains(msg, "simulated invalid usage"))
        failures.add("rank " + std::to_string(comm.rank()) + ": " + msg);
    }
    if (cache.contains(2) || cache.entries() != 1)
      failures.add("half-registered after a failed split");
    adapter.fail_split = false;  // the cache still works once the backend does
    if (cache.group(comm.rank() / 2 * 2, 2).size() != 2 || cache.entries() != 2)
      failures.add("no recovery");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

// ---- plan agreement ----------------------------------------------------------------------------

TEST_CASE("Runtime.Agreement.same_plan_passes") {
  const auto& plan = plan_on_8_gpus();
  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    if (agree_on_plan(comm, plan) != plan.fingerprint)
      failures.add("fingerprint differs from the plan's");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.Agreement.mismatch_names_the_ranks") {
  const auto& plan = plan_on_8_gpus();
  REQUIRE(!plan.micro_steps.empty());
  auto other = plan;
  other.micro_steps.front().loss_scale *= 2;  // ranks 1 and 3 normalise the loss differently
  collected messages;
  run_ranks(8, [&](in_process_communicator& comm) {
    const bool odd_one = comm.rank() == 1 || comm.rank() == 3;
    messages.add(message_of([&] { agree_on_plan(comm, odd_one ? other : plan); }));
  });
  REQUIRE(messages.lines.size() == 8);
  for (const auto& msg : messages.lines) {
    CAPTURE(msg);
    CHECK(contains(
        msg, "ranks 0, 2, 4, 5, 6 and 7 planned fingerprint " + detail::hex64(plan.fingerprint)));
    CHECK(contains(
        msg, "ranks 1 and 3 planned fingerprint " + detail::hex64(compute_fingerprint(other))));
  }
}

TEST_CASE("Runtime.Agreement.plan_for_another_world_size") {
  const auto& plan = plan_on_8_gpus();
  collected messages;
  run_ranks(4, [&](in_process_communicator& comm) {
    messages.add(message_of([&] { agree_on_plan(comm, plan); }));
  });
  for (const auto& msg : messages.lines)
    CHECK(contains(msg, "gpus = 8 run on a communicator of 4 ranks"));
}

// ---- run_step ----------------------------------------------------------------------------------

TEST_CASE("Runtime.RunStep.walks_micro_steps_in_plan_order") {
  const auto& plan = plan_on_8_gpus();
  std::vector<std::int64_t> degrees;
  for (const auto& m : plan.micro_steps) degrees.push_back(m.degree());
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  CAPTURE(plan);
  CHECK(degrees.size() >= 2);  // the batch is heavy-tailed enough to mix degrees

  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    recording_executor executor;
    const auto reports = run_step(comm, cache, plan, executor);
    const auto mine = plan.steps_of(comm.rank());
    const auto where = "rank " + std::to_string(comm.rank()) + ": ";
    if (reports.size() != mine.size() || executor.calls.size() != mine.size()) {
      failures.add(where + "ran " + std::to_string(executor.calls.size()) + " of " +
                   std::to_string(mine.size()));
      return;
    }
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto& m = plan.micro_steps[mine[i]];
      const auto& c = executor.calls[i];
      if (c.sequence != m.sequence || (i > 0 && c.sequence <= executor.calls[i - 1].sequence))
        failures.add(where + "out of order at call " + std::to_string(i));
      if (c.group_members != iota(m.first_rank, m.degree()))
        failures.add(where + "wrong group for micro-step " + std::to_string(m.sequence));
      if (c.recompute != m.config.recompute || c.loss_scale != m.loss_scale)
        failures.add(where + "wrong settings for micro-step " + std::to_string(m.sequence));
      if (reports[i].peak_bytes != m.peak_bytes) failures.add(where + "report out of order");
    }
    if (cache.entries() != static_cast<std::int64_t>(degrees.size()))
      failures.add(where + "cache holds " + std::to_string(cache.entries()) + " degrees");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.RunStep.lockstep_plan_runs_equal_counts_and_a_false_claim_is_refused") {
  auto plan = plan_on_8_gpus();
  make_lockstep(plan);
  const auto rounds = plan.barriers.size() + 1;
  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    recording_executor executor;
    (void)run_step(comm, cache, plan, executor);
    const auto where = "rank " + std::to_string(comm.rank()) + ": ";
    // One call per round, the padding ones included (they run the collectives).
    if (executor.calls.size() != rounds)
      failures.add(where + "ran " + std::to_string(executor.calls.size()) + " micro-steps of " +
                   std::to_string(rounds) + " rounds");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());

  // The claim without the rounds: every rank refuses before running anything.
  auto broken = plan;
  broken.barriers.pop_back();
  broken.fingerprint = compute_fingerprint(broken);
  collected refused;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    recording_executor executor;
    const auto msg = message_of([&] { (void)run_step(comm, cache, broken, executor); });
    if (!contains(msg, "run_step: plan.lockstep is set, but rank") || !executor.calls.empty())
      refused.add("rank " + std::to_string(comm.rank()) + ": " + msg);
  });
  CHECK_MESSAGE(refused.lines.empty(), refused.text());
}

TEST_CASE("Runtime.RunStep.world_barrier_holds_later_micro_steps") {
  // Rank 0 runs micro-step 0 slowly, rank 1 micro-step 1, behind a barrier at 1: rank 1 may
  // start only after rank 0 finished, although the two share no rank. Without the barrier rank 1
  // starts at once (the sleep makes that visible).
  auto plan = dcp::test::one_sample_per_rank(2, 2, 2);
  plan.barriers = {1};
  plan.fingerprint = compute_fingerprint(plan);
  std::atomic<bool> first_done{false};
  std::atomic<bool> second_saw_first{false};
  struct ordered_executor {
    std::atomic<bool>* first_done;
    std::atomic<bool>* second_saw_first;
    execution_report run(const micro_step& m, in_process_communicator&, recompute_setting, double) {
      if (m.sequence == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        first_done->store(true);
      } else {
        second_saw_first->store(first_done->load());
      }
      return {0.0, 0.0};
    }
  };
  run_ranks(2, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    ordered_executor executor{&first_done, &second_saw_first};
    (void)run_step(comm, cache, plan, executor);
  });
  CHECK(second_saw_first.load());
  // A rank with no micro-step after a barrier still joins it (or the others would hang).
  plan.barriers = {1};
  plan.micro_steps.pop_back();
  plan.micro_steps[0].loss_scale = 1.0;
  plan.fingerprint = compute_fingerprint(plan);
  run_ranks(2, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    ordered_executor executor{&first_done, &second_saw_first};
    CHECK(run_step(comm, cache, plan, executor).size() == (comm.rank() == 0 ? 1u : 0u));
  });
}

namespace {

// A plan on 8 ranks in nodes of 4: a hybrid micro-step over all 8 (Ulysses 4 in each node, rings
// of 2 across), then one on ranks 0-3 with Ulysses and a hybrid one on ranks 0-7 again.
step_plan hybrid_plan() {
  step_plan plan;
  plan.gpus = 8;
  plan.gpus_per_node = 4;
  plan.hybrid_ulysses_degree = 4;
  const auto add = [&](std::int64_t first, std::int64_t degree, sequence_parallel sp) {
    micro_step m;
    m.sequence = static_cast<std::int64_t>(plan.micro_steps.size());
    m.first_rank = first;
    m.config = {degree, sp, {}};
    m.sample_ids = {static_cast<std::uint64_t>(m.sequence)};
    m.loss_units = 1;  // normalised by samples
    m.loss_scale = 1.0 / 3.0;
    plan.micro_steps.push_back(m);
  };
  add(0, 8, sequence_parallel::hybrid);
  add(0, 4, sequence_parallel::ulysses);
  add(0, 8, sequence_parallel::hybrid);
  plan.fingerprint = compute_fingerprint(plan);
  return plan;
}

// Records, per hybrid micro-step, the world ranks of its three groups (gathered over each).
struct hybrid_recorder {
  struct groups_seen {
    std::int64_t sequence;
    std::vector<std::int64_t> whole, ulysses, ring;
  };
  std::vector<groups_seen> hybrid;
  std::vector<std::int64_t> plain;  // sequences run on one group
  execution_report run(const micro_step& m, in_process_communicator&, recompute_setting, double) {
    plain.push_back(m.sequence);
    return {};
  }
  execution_report run(const micro_step& m, hybrid_groups<in_process_communicator> g,
                       recompute_setting, double) {
    const std::int64_t mine[1] = {g.whole.world_rank()};
    hybrid.push_back({m.sequence, g.whole.all_gather(mine), g.ulysses.all_gather(mine),
                      g.ring.all_gather(mine)});
    return {};
  }
};
static_assert(hybrid_executor<hybrid_recorder, in_process_communicator>);
static_assert(!hybrid_executor<recording_executor, in_process_communicator>);

}  // namespace

TEST_CASE("Runtime.RunStep.hybrid_micro_steps_get_their_ulysses_and_ring_sub_groups") {
  const auto plan = hybrid_plan();
  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    hybrid_recorder executor;
    const auto reports = run_step(comm, cache, plan, executor);
    const auto rank = static_cast<std::int64_t>(comm.rank());
    const auto where = "rank " + std::to_string(rank) + ": ";
    if (reports.size() != (rank < 4 ? 3u : 2u))
      failures.add(where + "ran " + std::to_string(reports.size()));
    if (executor.hybrid.size() != 2) {
      failures.add(where + std::to_string(executor.hybrid.size()) + " hybrid calls");
      return;
    }
    for (const auto& seen : executor.hybrid) {
      const std::vector<std::int64_t> ring{rank % 4, rank % 4 + 4};
      if (seen.whole != iota(0, 8) || seen.ulysses != iota(rank / 4 * 4, 4) || seen.ring != ring)
        failures.add(where + "wrong sub-groups for micro-step " + std::to_string(seen.sequence));
    }
    if (executor.plain != (rank < 4 ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{}))
      failures.add(where + "plain micro-steps out of order");
    // Degrees 4 and 8, and one ring split for degree 8.
    if (cache.entries() != 3 || cache.rings() != 1)
      failures.add(where + "cache holds " + std::to_string(cache.entries()) + " entries");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.RunStep.hybrid_plan_refused_by_an_executor_without_sub_groups_or_a_bad_split") {
  // Every rank refuses before any micro-step runs, naming the micro-step.
  collected messages;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    recording_executor executor;
    messages.add(message_of([&] { (void)run_step(comm, cache, hybrid_plan(), executor); }));
    if (!executor.calls.empty()) messages.add("ran a micro-step");
  });
  REQUIRE(messages.lines.size() == 8);
  for (const auto& m : messages.lines) CHECK(contains(m, "micro-step 0 (index 0) is hybrid"));
  auto bad = hybrid_plan();
  bad.hybrid_ulysses_degree = 8;  // not below the degree
  bad.fingerprint = compute_fingerprint(bad);
  collected split;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    hybrid_recorder executor;
    split.add(message_of([&] { (void)run_step(comm, cache, bad, executor); }));
  });
  REQUIRE(split.lines.size() == 8);
  for (const auto& m : split.lines)
    CHECK(contains(m, "plan.hybrid_ulysses_degree = 8, must be a power of two in [2, degree)"));
  // validate_plan names it too.
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 3; ++id) batch.push_back(text_sample(id, 1000));
  CHECK_THROWS_WITH_AS(validate_plan(bad, batch, 8),
                       doctest::Contains("with plan.hybrid_ulysses_degree = 8"), invalid_plan);
  auto good = hybrid_plan();
  CHECK_NOTHROW(validate_plan(good, batch, 8));
}

TEST_CASE("Runtime.RunStep.executor_failure_names_rank_and_micro_step") {
  const auto& plan = plan_on_8_gpus();
  const auto rank1 = plan.steps_of(1);
  REQUIRE(rank1.size() >= 2);
  // Only rank 1 fails, at its second micro-step; that micro-step must be one rank 1 runs alone,
  // or its group partners would wait for it in the recording executor's all-gather.
  std::int64_t throw_at = -1;
  for (std::size_t i = 1; i < rank1.size() && throw_at < 0; ++i)
    if (plan.micro_steps[rank1[i]].degree() == 1) throw_at = static_cast<std::int64_t>(i);
  if (throw_at < 0 && plan.micro_steps[rank1.back()].degree() == 1)
    throw_at = static_cast<std::int64_t>(rank1.size()) - 1;
  REQUIRE_MESSAGE(throw_at >= 0, "rank 1 runs no micro-step alone after its first");
  const auto failing = plan.micro_steps[rank1[static_cast<std::size_t>(throw_at)]];

  collected failures;
  run_ranks(8, [&](in_process_communicator& comm) {
    group_cache<in_process_communicator> cache(comm);
    recording_executor executor;
    if (comm.rank() == 1) executor.throw_at_call = throw_at;
    try {
      run_step(comm, cache, plan, executor);
      if (comm.rank() == 1) failures.add("rank 1 did not fail");
    } catch (const step_error& e) {
      const std::string msg = e.what();
      if (e.rank() != 1 || e.sequence() != failing.sequence ||
          !contains(msg, "rank 1 failed in micro-step " + std::to_string(failing.sequence)) ||
          !contains(msg, "CUDA out of memory (simulated)"))
        failures.add("wrong error: " + msg);
    }
    // The cache is consistent: every degree of the plan is there once, and a retry of the whole
    // step on every rank goes through.
    const auto entries = cache.entries();
    recording_executor retry;
    run_step(comm, cache, plan, retry);
    if (cache.entries() != entries || retry.calls.size() != plan.steps_of(comm.rank()).size())
      failures.add("rank " + std::to_string(comm.rank()) + ": retry after a failure went wrong");
  });
  CHECK_MESSAGE(failures.lines.empty(), failures.text());
}

TEST_CASE("Runtime.RunStep.split_failure_reaches_the_caller_with_call_and_code") {
  const auto& plan = plan_on_8_gpus();
  const auto msg = message_of([&] {
    run_ranks(8, [&](in_process_communicator& comm) {
      test_adapter adapter{comm};
      adapter.fail_split = true;
      group_cache<test_adapter> cache(adapter);
      recording_executor executor;
      run_step(adapter, cache, plan, executor);
    });
  });
  CHECK(contains(msg, "ncclCommSplit failed with code 5"));
  CHECK(contains(msg, "group_cache: split for the groups of degree"));
}
