// The translation unit bench/compile_time.sh compiles: a framework's file that includes dcp and
// plans a batch with the default scheduler. With DCP_BENCH_EXTERN it includes
// dcp/default_scheduler.hpp, so the planner is not instantiated here.
#include <dcp/dcp.hpp>
#if defined(DCP_BENCH_EXTERN)
#include <dcp/default_scheduler.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  const dcp::analytic_cost_model cost(dcp::models::llama3_8b(),
                                      dcp::hgx_cluster(4, dcp::gpus::h200_sxm()));
  const dcp::DataCentricScheduler<> scheduler(cost);
  std::vector<dcp::sample> batch;
  for (std::uint64_t id = 0; id < 64; ++id)
    batch.push_back({id, static_cast<std::int64_t>(1000 + 97 * id)});
  const auto plan = scheduler.plan(batch);
  std::printf("%zu micro-steps\n", plan.micro_steps.size());
}
