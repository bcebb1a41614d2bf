// Plan one training step for a lopsided batch and walk rank 0's micro-steps.
#include <iostream>
#include <vector>

#include "dcp/dcp.hpp"

int main() {
  // example-begin plan
  using namespace dcp;
  const analytic_cost_model cost(models::llama3_8b(), hgx_cluster(4, gpus::h200_sxm()));
  const DataCentricScheduler<> scheduler(cost);  // defaults: varlen buckets, selective-pyramid
                                                 // recompute, balanced placement

  std::vector<sample> batch;               // every rank builds the same list from the global batch
  batch.push_back(text_sample(0, 65536));  // one long document...
  for (std::uint64_t id = 1; id <= 600; ++id)  // ...and many short ones
    batch.push_back(text_sample(id, 200 + static_cast<std::int64_t>(id * 37 % 3000)));

  const step_plan plan = scheduler.plan(batch);
  std::cout << plan << '\n';

  const std::int64_t rank = 0;
  for (std::size_t index : plan.steps_of(rank)) {
    const micro_step& step = plan.micro_steps[index];
    // Run step.sample_ids on ranks [step.first_rank, step.first_rank + step.degree()) with
    // step.config.recompute, and scale the micro-batch's mean loss by step.loss_scale.
    std::cout << "  " << step << '\n';
  }
  // example-end plan
  return plan.micro_steps.empty() ? 1 : 0;
}
