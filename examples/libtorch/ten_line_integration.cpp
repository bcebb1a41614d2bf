// The ten-line integration for libtorch: plain_training_loop.cpp with dcp planning every step.
// Between the example-begin and example-end lines, the lines marked `// dcp` are all that
// differs from the plain loop (CTest example.libtorch.ten_line_integration.lines checks it and
// that they are at most ten). dcp::c10d_communicator wraps the loop's own world process group
// and store; dcp::run_step hands the executor (tiny_llama_dcp.hpp, written once per framework)
// this rank's micro-steps, each with its group, recompute setting and loss scale.
// Run: mpiexec -n 4 libtorch/ten_line_integration
// example-begin training
#include <cstdint>
#include <cstdio>
#include <vector>

#include "dcp/dcp.hpp"                 // dcp
#include "dcp/runtime/executor.hpp"    // dcp
#include "dcp/torch/communicator.hpp"  // dcp

#include "mpi_launch.hpp"
#include "tiny_llama.hpp"
#include "tiny_llama_dcp.hpp"  // dcp

namespace {

int train(tiny::launch& job) {
  const auto lengths = tiny::read_lengths(DCP_SHARED_DATA_DIR "/wikipedia-lengths.txt");
  const auto world = tiny::gloo_group(job.store(), job.rank(), job.size());
  tiny::model model(/*seed=*/7);
  dcp::c10d_communicator comm(job.store(), world);                                // dcp
  const dcp::DataCentricScheduler<> scheduler(tiny::llama3_8b_node(job.size()));  // dcp
  dcp::group_cache cache(comm);                                                   // dcp
  for (int step = 0; step < 20; ++step) {
    const tiny::batch batch = tiny::make_batch(lengths, /*seed=*/2024, step, /*count=*/16);
    model.zero_grad();
    tiny::executor executor(model, batch);                                               // dcp
    dcp::run_step(comm, cache, scheduler.plan(tiny::planner_samples(batch)), executor);  // dcp
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
