// The ten-line integration: plain_training_loop.cpp with dcp planning every step. Between the
// example-begin and example-end lines, the lines marked `// dcp` are all that differs from the
// plain loop (CTest example.mpi.ten_line_integration.lines checks it and that they are at most
// ten); docs/integration.md shows the diff and explains each line. Every rank plans the same
// batch, and dcp::run_step hands the toy executor (toy_dcp.hpp, written once per framework) the
// micro-steps of this rank, each with its group, recompute setting and loss scale.
// Run: mpiexec -n 4 ten_line_integration
// example-begin training
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <mpi.h>

#include "dcp/dcp.hpp"               // dcp
#include "dcp/mpi/communicator.hpp"  // dcp
#include "dcp/runtime/executor.hpp"  // dcp

#include "toy_attention.hpp"
#include "toy_dcp.hpp"  // dcp

namespace {

void train(int rank, int ranks) {
  toy::model model(/*seed=*/7);
  auto world = dcp::mpi::communicator::world();                             // dcp
  const dcp::DataCentricScheduler<> scheduler(toy::llama3_8b_node(ranks));  // dcp
  dcp::group_cache cache(world);                                            // dcp
  for (int step = 0; step < 30; ++step) {
    const toy::batch batch = toy::make_batch(/*seed=*/2024, step, /*count=*/32);
    model.zero_grad();
    toy::executor executor(model, batch);                                                // dcp
    dcp::run_step(world, cache, scheduler.plan(toy::planner_samples(batch)), executor);  // dcp
    model.all_reduce(MPI_COMM_WORLD);  // SUM: the gradient of the batch's mean loss per token
    if (rank == 0 && (step % 10 == 0 || step == 29))
      std::printf("step %2d  loss %.12g\n", step, model.loss());
    model.sgd(/*learning_rate=*/2.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  toy::check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
  try {
    int rank = 0;
    int ranks = 0;
    toy::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    toy::check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &ranks), "MPI_Comm_size");
    train(rank, ranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);  // the other ranks may be waiting in a collective
  }
  return MPI_Finalize() == MPI_SUCCESS ? 0 : 1;
}
// example-end training
