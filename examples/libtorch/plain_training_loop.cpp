// A plain data-parallel libtorch training loop, the baseline of the ten-line integration: every
// rank trains the tiny Llama (tiny_llama.hpp) on every n-th sequence of each batch as one
// micro-batch, and the gradients are all-reduced with SUM over a c10d ProcessGroupGloo.
// ten_line_integration.cpp is this loop with dcp planning every step; between the
// example-begin and example-end lines the two differ only in the lines marked `// dcp` there
// (CTest example.libtorch.ten_line_integration.lines checks it).
// Run: mpiexec -n 4 libtorch/plain_training_loop
// example-begin training
#include <cstdint>
#include <cstdio>
#include <vector>

#include "mpi_launch.hpp"
#include "tiny_llama.hpp"

namespace {

int train(tiny::launch& job) {
  const auto lengths = tiny::read_lengths(DCP_SHARED_DATA_DIR "/wikipedia-lengths.txt");
  const auto world = tiny::gloo_group(job.store(), job.rank(), job.size());
  tiny::model model(/*seed=*/7);
  for (int step = 0; step < 20; ++step) {
    const tiny::batch batch = tiny::make_batch(lengths, /*seed=*/2024, step, /*count=*/16);
    model.zero_grad();
    std::vector<std::uint64_t> mine;  // every n-th sequence, one micro-batch on this rank alone
    for (auto id = static_cast<std::size_t>(job.rank()); id < batch.size(); id += job.size())
      mine.push_back(id);
    model.forward_backward(batch, mine, /*group=*/{},
                           1.0 / static_cast<double>(tiny::tokens_of(batch)));
    model.all_reduce(world);  // SUM: the gradient of the batch's mean loss per token
    if (job.rank() == 0 && (step % 5 == 0 || step == 19))
      std::printf("step %2d  loss %.12g\n", step, model.loss());
    model.sgd(/*learning_rate=*/0.5);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return tiny::launch::run(argc, argv, train); }
// example-end training
