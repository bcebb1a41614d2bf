#pragma once
// The policies dcp-sim --pipeline compares: dcp's pipeline planner first, then the static
// Megatron layouts people run and the best one a search finds, and the peers' pipeline
// mechanisms, each as its source runs it (dcp/baselines/pipeline_peers.hpp, docs/baselines.md
// "Pipeline peers"). Every policy trains every drawn token in the run.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dcp/baselines/pipeline_peers.hpp"
#include "dcp/evaluation/pipeline_compare.hpp"
#include "dcp/pipeline.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail {

/// A policy that plans each step on its own with `plan_one`.
template <class F>
[[nodiscard]] evaluation::pipeline_policy per_step_policy(std::string name, F plan_one) {
  return {std::move(name),
          [plan_one = std::move(plan_one)](const std::vector<std::vector<sample>>& steps) {
            std::vector<evaluation::pipeline_step_plan> plans;
            for (const auto& batch : steps) {
              auto plan = plan_one(std::span<const sample>(batch));
              plans.push_back({std::move(plan.micro_batches), plan.slots});
            }
            return plans;
          }};
}

/// dcp first (the rows' speedups are against it); then Megatron 4D with `--seq-length` the
/// workload's context window at `context_parallel` (0: the smallest CP size that holds it),
/// every layer recomputed
/// (Plain-4D as people run it); the best static Megatron layout the executor finds; Megatron's
/// packing scheduler at that context; WLB-LLM at `context_parallel` (0: its fastest; its
/// packing and outlier delay, every delayed document trained by the run's end); DynaPipe.
inline std::vector<evaluation::pipeline_policy> pipeline_policies(
    const pipeline_cost_model& cost, std::int64_t context, std::int64_t context_parallel = 0) {
  using namespace baselines;
  std::vector<evaluation::pipeline_policy> out;
  out.push_back(evaluation::dcp_pipeline_policy(pipeline_planner(cost)));
  out.push_back(per_step_policy("megatron-4d (S = context, full recompute)",
                                [cost, context, context_parallel](std::span<const sample> batch) {
                                  const std::vector<sample> window{text_sample(0, context)};
                                  auto layout = megatron_4d_sized(cost, window);
                                  if (context_parallel > 0)
                                    layout.context_parallel = context_parallel;
                                  layout.window_tokens = context;
                                  return megatron_4d(cost, batch, layout);
                                }));
  out.push_back(per_step_policy("megatron-4d best static", [cost](std::span<const sample> batch) {
    return megatron_4d_best_static(cost, batch);
  }));
  out.push_back(
      per_step_policy("megatron packing scheduler", [cost, context](std::span<const sample> batch) {
        megatron_packing_scheduler scheduler;
        scheduler.seq_length = context;
        return scheduler.plan(cost, batch);
      }));
  out.push_back({"wlb-llm (packing + outlier delay)",
                 [cost, context, context_parallel](const std::vector<std::vector<sample>>& steps) {
                   wlb_pipeline_options options;
                   options.context_tokens = context;
                   options.degree = context_parallel;
                   wlb_llm_pipeline wlb(cost, options);
                   std::vector<evaluation::pipeline_step_plan> plans;
                   for (const auto& batch : steps) {
                     auto step = wlb.plan_step(batch);
                     plans.push_back({std::move(step.plan.micro_batches), step.plan.slots});
                   }
                   for (auto& plan : wlb.flush())
                     plans.push_back({std::move(plan.micro_batches), plan.slots});
                   return plans;
                 }});
  out.push_back(per_step_policy("dynapipe", [cost](std::span<const sample> batch) {
    return dynapipe_pipeline{}.plan(cost, batch);
  }));
  return out;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::tool::sim_detail
