// A plain data-parallel training loop, the baseline of the ten-line integration: every rank
// trains the toy attention model (toy_attention.hpp) on every n-th sequence of each batch, and
// the gradients are all-reduced with SUM. ten_line_integration.cpp is this loop with dcp planning
// every step; between the example-begin and example-end lines the two differ only in the lines
// marked `// dcp` there (CTest example.mpi.ten_line_integration.lines checks it; the diff is in
// docs/integration.md). Run: mpiexec -n 4 plain_training_loop
// example-begin training
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <mpi.h>

#include "toy_attention.hpp"

namespace {

void train(int rank, int ranks) {
  toy::model model(/*seed=*/7);
  for (int step = 0; step < 30; ++step) {
    const toy::batch batch = toy::make_batch(/*seed=*/2024, step, /*count=*/32);
    model.zero_grad();
    std::vector<std::uint64_t> mine;  // every ranks-th sequence, one micro-batch on this rank alone
    for (std::size_t id = rank; id < batch.size(); id += ranks) mine.push_back(id);
    model.forward_backward(batch, mine, MPI_COMM_SELF, 1.0 / toy::tokens_of(batch));
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
