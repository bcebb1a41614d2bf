// Finding 12: a rank that leaves on an error while the others wait in a collective must end the
// job, never hang it. CTest runs this program under `mpiexec -n 4` once per scenario (the tests
// mpi.finding_12_*, through dcp_add_mpi_test's EXPECT_FAILURE wrapper, which fails a job that
// exits 0 or does not end in time). In every failing scenario rank 1 hits a dcp error
// (validate_batch on a sample of 0 tokens) while ranks 0, 2 and 3 enter an MPI_Allgather it
// never joins:
//   unwind     plain dcp::mpi::environment; the error is caught in main, outside its scope, so
//              the environment is destroyed during unwinding: it must abort, not finalize
//   run        environment::run; the error escapes fn: run prints it and aborts
//   returned   environment::run; rank 1 catches it and returns 4 from fn: run aborts with 4
//   swallowed  environment::run with finalize_timeout 2 s; rank 1 catches it and returns 0:
//              the destructor's wait for the other ranks times out and aborts
//   clean      environment::run with finalize_timeout 2 s; every rank gathers and returns 0:
//              the job must exit 0 (the wait for the other ranks succeeds)
//   stuck      (Finding 36g) rank 1 is stuck in its executor (sleeps 100 s) while ranks 0, 2
//              and 3 gather with a collective timeout of 2 s: the job must end, naming a rank

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

#include <mpi.h>

#include "dcp/error.hpp"
#include "dcp/mpi/communicator.hpp"
#include "dcp/plan/validate_batch.hpp"

namespace {

/// Rank 1 validates a batch with a sample of 0 tokens (throws dcp::invalid_sample); the other
/// ranks gather over MPI_COMM_WORLD, a collective rank 1 never reaches.
void rank_1_fails_while_others_gather() {
  auto world = dcp::mpi::communicator::world();
  if (world.rank() == 1) {
    const std::vector<dcp::sample> batch = {dcp::text_sample(0, 4096), dcp::text_sample(7, 0)};
    dcp::validate_batch(batch);
    std::fprintf(stderr, "rank 1: validate_batch accepted a sample of 0 tokens\n");
    return;
  }
  const std::int64_t mine[1] = {world.rank()};
  (void)world.all_gather(mine);
}

int usage() {
  std::fprintf(stderr, "usage: dcp_mpi_fault_tests unwind|run|returned|swallowed|clean|stuck\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return usage();
  const std::string_view scenario = argv[1];
  const dcp::mpi::environment_options wait_2_s{.abort_code = 3,
                                               .finalize_timeout = std::chrono::seconds(2)};

  if (scenario == "unwind") {
    try {
      dcp::mpi::environment env(&argc, &argv);
      rank_1_fails_while_others_gather();
    } catch (const dcp::error& e) {
      // Too late: the environment was destroyed on the way here.
      std::fprintf(stderr, "caught after the environment ended: %s\n", e.what());
      return 5;
    }
    return 0;
  }
  if (scenario == "run") {
    return dcp::mpi::environment::run(argc, argv, [] { rank_1_fails_while_others_gather(); });
  }
  if (scenario == "returned") {
    return dcp::mpi::environment::run(argc, argv, [] {
      try {
        rank_1_fails_while_others_gather();
      } catch (const dcp::error& e) {
        std::fprintf(stderr, "rank 1 caught: %s\n", e.what());
        return 4;
      }
      return 0;
    });
  }
  if (scenario == "swallowed") {
    return dcp::mpi::environment::run(
        argc, argv,
        [] {
          try {
            rank_1_fails_while_others_gather();
          } catch (const dcp::error& e) {
            std::fprintf(stderr, "rank 1 caught and swallowed: %s\n", e.what());
          }
          return 0;
        },
        wait_2_s);
  }
  if (scenario == "stuck") {
    return dcp::mpi::environment::run(argc, argv, [] {
      auto world = dcp::mpi::communicator::world();
      world.set_collective_timeout(std::chrono::seconds(2), 6);
      if (world.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(100));
        return 0;
      }
      const std::int64_t mine[1] = {world.rank()};
      (void)world.all_gather(mine);
      return 0;
    });
  }
  if (scenario == "clean") {
    return dcp::mpi::environment::run(
        argc, argv,
        [] {
          auto world = dcp::mpi::communicator::world();
          const std::int64_t mine[1] = {world.rank()};
          const auto all = world.all_gather(mine);
          for (std::size_t r = 0; r < all.size(); ++r)
            if (all[r] != static_cast<std::int64_t>(r)) return 1;
          return 0;
        },
        wait_2_s);
  }
  return usage();
}
