// dcp::mpi::communicator on a real multi-process world. CTest runs it as
// `mpiexec --oversubscribe -np 4 dcp_mpi_tests` (test mpi.conformance_4_ranks, label mpi):
// the conformance checks, the group cache, plan agreement, run_step and run_calibrated_step over
// MPI_COMM_WORLD.
// Every rank collects its failures; the exit code is non-zero on every rank if any rank failed.
// main is dcp::mpi::environment::run: an unexpected exception, or a failed run (non-zero
// return), aborts the whole job (MPI_Abort) rather than leaving ranks waiting.

#include <bit>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <mpi.h>

#include "dcp/dcp.hpp"
#include "dcp/mpi/communicator.hpp"
#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/plan_agreement.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/testing/communicator_conformance.hpp"

#include "../support/batches.hpp"
#include "../support/errors.hpp"

namespace {

using dcp::mpi::communicator;
using dcp::test::contains;
using dcp::test::message_of;

struct failures {
  int rank = 0;
  std::vector<std::string> lines;
  void expect(bool ok, const std::string& what) {
    if (!ok) lines.push_back("rank " + std::to_string(rank) + ": " + what);
  }
};

std::string join(const std::vector<std::int64_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

std::vector<std::int64_t> iota(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = first; r < first + count; ++r) out.push_back(r);
  return out;
}

/// The world ranks of `group`, by group rank, gathered over the group itself.
std::vector<std::int64_t> members_of(communicator& group, std::int64_t world_rank) {
  const std::int64_t mine[1] = {world_rank};
  return group.all_gather(mine);
}

/// A plan for a 4-GPU node (gpus = 4, gpus_per_node = 4), the same on every rank for one seed.
dcp::step_plan plan_on_4_gpus(std::uint64_t seed) {
  dcp::cluster_spec cluster;
  cluster.gpus = 4;
  cluster.gpus_per_node = 4;
  cluster.gpu = dcp::gpus::h200_sxm();
  const dcp::analytic_cost_model cost(dcp::models::llama3_8b(), cluster);
  const dcp::DataCentricScheduler<> scheduler(cost);
  return scheduler.plan(dcp::test::heavy_tailed_batch(seed, 64, 65536));
}

struct call {
  std::int64_t sequence = 0;
  std::vector<std::int64_t> group_members;
  dcp::recompute_setting recompute{};
  double loss_scale = 0;
};

/// Records each call and gathers the world ranks over the group (a wrong group or a wrong order
/// between members shows up as wrong members, or as a hang that the CTest timeout ends).
struct recording_executor {
  std::int64_t world_rank = 0;
  std::vector<call> calls;
  dcp::execution_report run(const dcp::micro_step& m, communicator& group, dcp::recompute_setting r,
                            double loss_scale) {
    calls.push_back({m.sequence, members_of(group, world_rank), r, loss_scale});
    return {static_cast<double>(m.tokens) * 1e-6, m.peak_bytes};
  }
};
static_assert(dcp::micro_batch_executor<recording_executor, communicator>);

void check_errors(failures& f) {
  // A failed call names the call, the code and MPI's text for it.
  try {
    dcp::mpi::check(MPI_ERR_COMM, "MPI_Comm_split");
    f.expect(false, "check(MPI_ERR_COMM) did not throw");
  } catch (const dcp::comm_error& e) {
    f.expect(
        e.call() == "MPI_Comm_split" && e.code() == MPI_ERR_COMM &&
            contains(e.what(), "MPI_Comm_split failed with code " + std::to_string(MPI_ERR_COMM)) &&
            !e.detail().empty(),
        std::string("check(MPI_ERR_COMM) gave: ") + e.what());
  }
  f.expect(
      message_of([] { (void)communicator::borrowed(MPI_COMM_NULL); }) != "(no dcp::error thrown)",
      "wrapping MPI_COMM_NULL did not throw");

  // Bad options name the field and the value.
  const auto zero_code =
      message_of([] { dcp::mpi::environment env(nullptr, nullptr, {.abort_code = 0}); });
  f.expect(contains(zero_code, "options.abort_code = 0, must be non-zero"),
           "abort_code 0 gave: " + zero_code);
  const auto negative = message_of([] {
    dcp::mpi::environment env(nullptr, nullptr,
                              {.finalize_timeout = std::chrono::milliseconds(-5)});
  });
  f.expect(contains(negative, "options.finalize_timeout = -5 ms, must be >= 0"),
           "finalize_timeout -5 gave: " + negative);
  // An environment made while MPI runs owns nothing: it neither finalizes nor aborts, even when
  // destroyed during unwinding (the one that owns MPI decides).
  try {
    dcp::mpi::environment nested;
    throw dcp::error("thrown past a nested environment");
  } catch (const dcp::error&) {
  }
  int finalised = 1;
  dcp::mpi::check(MPI_Finalized(&finalised), "MPI_Finalized");
  f.expect(!finalised, "a nested environment finalized MPI");
}

void check_conformance(communicator& world, failures& f) {
  for (const auto& line : dcp::testing::check_communicator(world))
    f.lines.push_back("conformance: " + line);
}

void check_ownership(communicator& world, failures& f) {
  auto made = world.split(0, world.rank());
  f.expect(made && made->owns(), "a split's communicator is not owning");
  f.expect(!world.owns(), "the world handle claims to own MPI_COMM_WORLD");
  if (!made) return;
  communicator moved(std::move(*made));
  f.expect(made->native() == MPI_COMM_NULL && !made->owns(),
           "a moved-from communicator still holds its handle");
  f.expect(moved.owns() && moved.size() == world.size() && moved.rank() == world.rank(),
           "a moved communicator lost its rank, size or ownership");
  const auto members = members_of(moved, world.rank());
  f.expect(members == iota(0, world.size()), "a moved communicator gathers " + join(members));
}

void check_group_cache(communicator& world, failures& f) {
  const std::int64_t rank = world.rank();
  dcp::group_cache<communicator> cache(world);
  cache.warm_up(4);
  f.expect(cache.entries() == 3,
           "cache holds " + std::to_string(cache.entries()) + " degrees, expected 3");
  f.expect(cache.groups_in_world() == 4 + 2 + 1, "cache reports " +
                                                     std::to_string(cache.groups_in_world()) +
                                                     " groups in the world, expected 7");
  for (const std::int64_t degree : {1, 2, 4}) {
    const auto first = rank / degree * degree;
    auto& group = cache.group(first, degree);
    f.expect(&group == &cache.group(first, degree),
             "degree " + std::to_string(degree) + ": a second lookup gave another object");
    f.expect(group.size() == degree && group.rank() == rank - first,
             "degree " + std::to_string(degree) + ": rank " + std::to_string(group.rank()) +
                 " of " + std::to_string(group.size()));
    const auto members = members_of(group, rank);
    f.expect(members == iota(first, degree), "degree " + std::to_string(degree) + ": members " +
                                                 join(members) + ", expected " +
                                                 join(iota(first, degree)));
  }
  // A bad request names the degree and the limit, and creates nothing.
  const auto msg = message_of([&] { cache.group(0, 3); });
  f.expect(contains(msg, "degree = 3") && contains(msg, "power of two in [1, 4]"),
           "bad degree gave: " + msg);
  f.expect(cache.entries() == 3, "a bad request changed the cache");
}

void check_agreement(communicator& world, failures& f) {
  const auto plan = plan_on_4_gpus(7);
  f.expect(plan.gpus == 4, "the plan is for " + std::to_string(plan.gpus) + " GPUs");
  const auto agreed = dcp::agree_on_plan(world, plan);
  f.expect(agreed == plan.fingerprint, "agreed fingerprint differs from the plan's");

  // Rank 1 plans a different batch: every rank gets the error, naming rank 1 on its own.
  const auto other = plan_on_4_gpus(8);
  f.expect(dcp::compute_fingerprint(other) != plan.fingerprint,
           "two batches gave the same fingerprint");
  const auto msg = message_of([&] { dcp::agree_on_plan(world, world.rank() == 1 ? other : plan); });
  f.expect(contains(msg, "plan disagreement across 4 ranks") &&
               contains(msg, "ranks 0, 2 and 3 planned fingerprint " +
                                 dcp::detail::hex64(plan.fingerprint)) &&
               contains(msg, "; rank 1 planned fingerprint " +
                                 dcp::detail::hex64(dcp::compute_fingerprint(other))),
           "mismatch gave: " + msg);
}

void check_run_step(communicator& world, failures& f) {
  const std::int64_t rank = world.rank();
  const auto plan = plan_on_4_gpus(7);
  dcp::group_cache<communicator> cache(world);
  recording_executor executor{rank, {}};
  const auto reports = dcp::run_step(world, cache, plan, executor);
  const auto mine = plan.steps_of(rank);
  if (reports.size() != mine.size() || executor.calls.size() != mine.size()) {
    f.expect(false, "ran " + std::to_string(executor.calls.size()) + " of " +
                        std::to_string(mine.size()) + " micro-steps");
    return;
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto& m = plan.micro_steps[mine[i]];
    const auto& c = executor.calls[i];
    const auto where = "micro-step " + std::to_string(m.sequence) + ": ";
    f.expect(c.sequence == m.sequence && (i == 0 || c.sequence > executor.calls[i - 1].sequence),
             where + "out of order at call " + std::to_string(i));
    f.expect(c.group_members == iota(m.first_rank, m.degree()),
             where + "group " + join(c.group_members) + ", expected " +
                 join(iota(m.first_rank, m.degree())));
    f.expect(c.recompute == m.config.recompute && c.loss_scale == m.loss_scale,
             where + "wrong settings");
    f.expect(reports[i].peak_bytes == m.peak_bytes, where + "report out of order");
  }
  // A second step reuses the cache: no new degrees.
  const auto held = cache.entries();
  executor.calls.clear();
  dcp::run_step(world, cache, plan, executor);
  f.expect(cache.entries() == held, "the second step created degrees");
  f.expect(executor.calls.size() == mine.size(),
           "the second step ran a different number of micro-steps");
}

/// Reports the simulator's truth model for its micro-batches, each rank its own measurement
/// (rank r sees (1 + r/100) x the truth), and out of memory where the true peak exceeds the GPU.
struct truth_executor {
  const dcp::sim::truth_model* truth;
  const std::vector<dcp::sample>* batch;
  std::int64_t world_rank = 0;
  int discarded = 0;
  dcp::execution_report run(const dcp::micro_step& m, communicator& group, dcp::recompute_setting r,
                            double) {
    (void)members_of(group, world_rank);  // a collective over the group, as a real one runs
    dcp::micro_batch_shape s;
    for (const auto id : m.sample_ids)
      for (const auto& x : *batch)
        if (x.id == id) s += dcp::micro_batch_shape::of(x);
    const dcp::execution_config c{m.degree(), truth->training().sp, r};
    const double peak = truth->peak_bytes(s, c);
    return {truth->seconds(s, c) * (1.0 + 0.01 * static_cast<double>(world_rank)), peak,
            peak > truth->capacity_bytes()};
  }
  void discard_gradients() { ++discarded; }
};

/// Online calibration across processes: every rank refits from the same shared measurements, so
/// after each step all ranks hold the same model (bit for bit) and keep agreeing on plans; a step
/// that ran out of memory is re-planned on every rank.
void check_calibrated_step(communicator& world, failures& f) {
  dcp::cluster_spec cluster;
  cluster.gpus = 4;
  cluster.gpus_per_node = 4;
  cluster.gpu = dcp::gpus::h200_sxm();
  dcp::training_spec no_headroom;  // the first plans ride on the GPU's last bytes
  no_headroom.headroom_fraction = 0;
  const dcp::sim::truth_model truth(dcp::models::llama3_8b(), cluster, no_headroom);
  using model = dcp::calibrated<dcp::analytic_cost_model>;
  dcp::DataCentricScheduler<model> scheduler{
      model(dcp::analytic_cost_model(dcp::models::llama3_8b(), cluster, no_headroom))};
  dcp::group_cache<communicator> cache(world);
  std::int64_t replans = 0;
  for (std::uint64_t step = 0; step < 3; ++step) {
    const auto batch = dcp::test::heavy_tailed_batch(11 + step, 96, 65536);
    truth_executor executor{&truth, &batch, world.rank()};
    const auto result = dcp::run_calibrated_step(world, cache, scheduler, batch, executor);
    replans += result.attempts - 1;
    f.expect(executor.discarded == result.attempts - 1,
             "discarded gradients " + std::to_string(executor.discarded) + " times in " +
                 std::to_string(result.attempts) + " attempts");
    // The same model on every rank: gather the bits of its weights.
    std::vector<std::int64_t> mine;
    for (const double w : scheduler.cost().time_weights())
      mine.push_back(std::bit_cast<std::int64_t>(w));
    for (const double w : scheduler.cost().memory_weights())
      mine.push_back(std::bit_cast<std::int64_t>(w));
    mine.push_back(static_cast<std::int64_t>(result.plan.fingerprint));
    mine.push_back(result.attempts);
    const auto all = world.all_gather(mine);
    for (std::size_t r = 1; r < 4; ++r)
      f.expect(std::equal(mine.begin(), mine.end(),
                          all.begin() + static_cast<std::ptrdiff_t>(r * mine.size())),
               "step " + std::to_string(step) + ": rank " + std::to_string(r) +
                   " holds another model, plan or attempt count");
    for (const auto& o : result.observations)
      f.expect(!o.report.out_of_memory, "the finished plan has a micro-step out of memory");
  }
  f.expect(replans >= 1, "no step ran out of memory: the scenario no longer tests the re-plan");
  f.expect(scheduler.cost().report().observations > 0, "nothing was observed");
}

}  // namespace

int main(int argc, char** argv) {
  // run: an exception out of a check, or a non-zero return, ends the whole job (MPI_Abort).
  return dcp::mpi::environment::run(argc, argv, [] {
    auto world = communicator::world();
    failures f;
    f.rank = world.rank();
    if (world.size() != 4) {
      if (f.rank == 0)
        std::cerr << "dcp_mpi_tests needs 4 ranks (mpiexec -n 4), got " << world.size()
                  << std::endl;
      return 1;
    }

    const std::pair<const char*, void (*)(communicator&, failures&)> checks[] = {
        {"errors", [](communicator&, failures& fl) { check_errors(fl); }},
        {"conformance", check_conformance},
        {"ownership", check_ownership},
        {"group_cache", check_group_cache},
        {"agreement", check_agreement},
        {"run_step", check_run_step},
        {"calibrated_step", check_calibrated_step},
    };
    for (const auto& [name, check] : checks) {
      try {
        check(world, f);
      } catch (const std::exception&) {
        // The other ranks may be inside a collective this rank will never reach: run aborts.
        std::cerr << "rank " << f.rank << ": " << name << " threw" << std::endl;
        throw;
      }
    }

    std::ostringstream out;
    for (const auto& line : f.lines) out << "FAILED " << line << '\n';
    std::cerr << out.str() << std::flush;

    int mine = f.lines.empty() ? 0 : 1;
    int any = 0;
    dcp::mpi::check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                    "MPI_Allreduce");
    if (f.rank == 0)
      std::cout << (any ? "mpi tests FAILED" : "mpi tests passed") << " on " << world.size()
                << " ranks" << std::endl;
    return any ? 1 : 0;
  });
}
