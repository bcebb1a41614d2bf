// dcp::c10d_communicator on a real multi-process world: CTest runs
// `mpiexec -n 4 dcp_torch_c10d_tests` (torch.c10d_conformance_4_ranks, labels torch and mpi).
// MPI only launches the processes and agrees on a fresh FileStore (examples/libtorch/
// mpi_launch.hpp); every group and collective below is c10d's ProcessGroupGloo. Checks: the
// communicator conformance, the split cache (a member list made before is not rebuilt), the
// group cache and run_step over the adapter with tensor collectives on each group, and the
// errors: unequal all_gather counts (the same comm_error on every rank, the group usable
// after) and a group whose peer never joins (a timeout). Every rank collects its failures; the
// exit code is non-zero on every rank if any rank failed.

#include <cstdint>
#include <iostream>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/testing/communicator_conformance.hpp"
#include "dcp/torch/communicator.hpp"

#include "../../examples/libtorch/mpi_launch.hpp"
#include "../support/batches.hpp"
#include "../support/errors.hpp"

namespace {

using dcp::c10d_communicator;
using dcp::test::contains;

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
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  std::iota(out.begin(), out.end(), first);
  return out;
}

/// The world ranks of a group's members, gathered over the group.
std::vector<std::int64_t> members_of(c10d_communicator& group, std::int64_t world_rank) {
  const std::int64_t mine[1] = {world_rank};
  return group.all_gather(mine);
}

/// The sum of world_rank + 1 over the group, by a c10d all-reduce on its process group.
double tensor_sum(c10d_communicator& group, std::int64_t world_rank) {
  std::vector<at::Tensor> t{at::full({1}, static_cast<double>(world_rank + 1), at::kDouble)};
  group.process_group()->allreduce(t)->wait();
  return t[0].item<double>();
}

void check_conformance(c10d_communicator& world, failures& f) {
  for (const auto& line : dcp::testing::check_communicator(world))
    f.lines.push_back("conformance: " + line);
}

void check_split_cache(c10d_communicator& world, failures& f) {
  const int rank = world.rank();
  // The world's own member list is cached: a duplicate reuses its process group.
  const auto reused = world.groups_reused();
  const auto created = world.groups_created();
  auto copy = world.split(0, rank);
  f.expect(copy && copy->process_group().get() == world.process_group().get(),
           "a duplicate of the world built a new process group");
  f.expect(world.groups_reused() == reused + 1 && world.groups_created() == created,
           "a duplicate of the world: reused " + std::to_string(world.groups_reused() - reused) +
               ", created " + std::to_string(world.groups_created() - created));
  // Halves: built once, then found again (from the copy too: one cache for the whole tree).
  auto first = world.split(rank / 2, rank);
  f.expect(world.groups_created() == created + 1,
           "the first split into halves did not build one group");
  auto second = copy->split(rank / 2, rank);
  f.expect(first && second && first->process_group().get() == second->process_group().get(),
           "the second split into halves built another process group");
  f.expect(world.groups_created() == created + 1 && world.groups_reused() == reused + 2,
           "after two splits into halves: created " +
               std::to_string(world.groups_created() - created) + ", reused " +
               std::to_string(world.groups_reused() - reused));
  if (second) {
    f.expect(members_of(*second, rank) == iota(rank / 2 * 2, 2),
             "the reused half gathers " + join(members_of(*second, rank)));
    f.expect(tensor_sum(*second, rank) == (rank / 2 * 2 + 1) + (rank / 2 * 2 + 2),
             "a tensor all-reduce on the reused half");
  }
  // Another order of the same ranks is another group (ranks differ), so it is built.
  auto reversed = world.split(rank / 2, -rank);
  f.expect(reversed && world.groups_created() == created + 2,
           "a split into reversed halves reused a group");
  if (reversed) f.expect(reversed->rank() == 1 - rank % 2, "the reversed half ranks by key");
  // Copies share the split count, so their children never share a store prefix.
  auto shared = world;
  auto a = shared.split(0, rank);
  auto b = world.split(0, rank);
  f.expect(a && b && a->name() != b->name(), "a copy's split and the original's got the same name");
}

/// Records each call, gathers the members over the group and all-reduces a tensor on its
/// process group (a wrong group shows up as wrong members or a wrong sum).
struct recording_executor {
  std::int64_t world_rank = 0;
  std::int64_t calls = 0;
  std::vector<std::string> problems;
  dcp::execution_report run(const dcp::micro_step& m, c10d_communicator& group,
                            dcp::recompute_setting, double) {
    ++calls;
    const auto members = members_of(group, world_rank);
    if (members != iota(m.first_rank, m.degree()))
      problems.push_back("micro-step " + std::to_string(m.sequence) + " ran on " + join(members));
    const double expected =
        static_cast<double>(m.degree() * (2 * m.first_rank + m.degree() + 1)) / 2;
    if (tensor_sum(group, world_rank) != expected)
      problems.push_back("micro-step " + std::to_string(m.sequence) +
                         ": the tensor all-reduce is wrong");
    return {static_cast<double>(m.tokens) * 1e-6, m.peak_bytes, false};
  }
};
static_assert(dcp::micro_batch_executor<recording_executor, c10d_communicator>);

void check_group_cache_and_run_step(c10d_communicator& world, failures& f) {
  const std::int64_t rank = world.rank();
  dcp::group_cache<c10d_communicator> cache(world);
  cache.warm_up(4);
  for (const std::int64_t degree : {1, 2, 4}) {
    const auto first = rank / degree * degree;
    auto& group = cache.group(first, degree);
    const auto members = members_of(group, rank);
    f.expect(members == iota(first, degree),
             "degree " + std::to_string(degree) + ": members " + join(members));
  }
  // A second cache over the same world builds no process group: the splits' lists are cached.
  const auto created = world.groups_created();
  dcp::group_cache<c10d_communicator> again(world);
  again.warm_up(4);
  f.expect(world.groups_created() == created, "a second group cache built " +
                                                  std::to_string(world.groups_created() - created) +
                                                  " process groups");

  dcp::cluster_spec cluster;
  cluster.gpus = 4;
  cluster.gpus_per_node = 4;
  cluster.gpu = dcp::gpus::h200_sxm();
  const dcp::DataCentricScheduler<> scheduler(
      dcp::analytic_cost_model(dcp::models::llama3_8b(), cluster));
  const auto plan = scheduler.plan(dcp::test::heavy_tailed_batch(7, 96, 65536));
  recording_executor executor{rank, 0, {}};
  const auto reports = dcp::run_step(world, cache, plan, executor);
  f.expect(reports.size() == plan.steps_of(rank).size() &&
               executor.calls == static_cast<std::int64_t>(plan.steps_of(rank).size()),
           "run_step ran " + std::to_string(executor.calls) + " micro-steps");
  for (const auto& p : executor.problems) f.expect(false, "run_step: " + p);
  std::int64_t degrees = 0;
  for (const std::int64_t d : {1, 2, 4})
    for (const auto& m : plan.micro_steps)
      if (m.degree() == d) {
        ++degrees;
        break;
      }
  f.expect(degrees >= 2, "the plan used only one degree; the run_step check needs a mix");
}

void check_errors(c10d_communicator& world, const tiny::launch& job, failures& f) {
  const int rank = world.rank();
  // Unequal counts: the same error on every rank, naming each rank's count; the group still works.
  std::vector<std::int64_t> values(rank == 1 ? 2 : 1, rank);
  try {
    (void)world.all_gather(values);
    f.expect(false, "unequal all_gather counts did not throw");
  } catch (const dcp::comm_error& e) {
    f.expect(e.call() == "ProcessGroupGloo::allgather" && e.code() == dcp::c10d_count_mismatch &&
                 contains(e.what(), "counts by rank: 1, 2, 1, 1"),
             std::string("unequal counts gave: ") + e.what());
  }
  f.expect(members_of(world, rank) == iota(0, world.size()),
           "the world gathers wrongly after a count mismatch");

  // A group of 2 whose second rank never joins: each rank alone, over its own store, 1 s.
  auto lonely = c10::make_intrusive<::c10d::FileStore>(
      job.directory() + "/lonely-" + std::to_string(rank), 2);
  lonely->setTimeout(std::chrono::seconds(1));
  dcp::c10d_options quick;
  quick.timeout = std::chrono::seconds(1);
  try {
    c10d_communicator never(lonely, 0, 2, quick);
    f.expect(false, "a group whose peer never joined was made");
  } catch (const dcp::comm_error& e) {
    f.expect(e.call() == "ProcessGroupGloo" && e.code() == dcp::c10d_backend_failure &&
                 !e.detail().empty(),
             std::string("a missing peer gave: ") + e.what());
  }
  const auto bad = dcp::test::message_of([&] { c10d_communicator(job.store(), 4, 4); });
  f.expect(contains(bad, "rank 4 of size 4, must be 0 <= rank < size"), "rank 4 of 4 gave: " + bad);
}

}  // namespace

int main(int argc, char** argv) {
  return tiny::launch::run(argc, argv, [](tiny::launch& job) {
    failures f;
    f.rank = job.rank();
    if (job.size() != 4) {
      if (f.rank == 0)
        std::cerr << "dcp_torch_c10d_tests needs 4 ranks (mpiexec -n 4), got " << job.size()
                  << std::endl;
      return 1;
    }
    {
      c10d_communicator world(job.store(), job.rank(), job.size());
      f.expect(world.rank() == job.rank() && world.size() == 4,
               "the world's rank or size is not MPI's");
      check_conformance(world, f);
      check_split_cache(world, f);
      check_group_cache_and_run_step(world, f);
      check_errors(world, job, f);
    }
    std::ostringstream out;
    for (const auto& line : f.lines) out << "FAILED " << line << '\n';
    std::cerr << out.str() << std::flush;
    const bool any = tiny::launch::any_rank(!f.lines.empty());
    if (f.rank == 0)
      std::cout << (any ? "c10d tests FAILED" : "c10d tests passed") << " on 4 ranks" << std::endl;
    return any ? 1 : 0;
  });
}
