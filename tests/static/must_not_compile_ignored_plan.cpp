// Compiled by CTest with -Werror=unused-result: calling plan() and dropping the plan must be
// diagnosed, because the library's value-returning API is [[nodiscard]] (Finding 04). Not part
// of any target.
#include <vector>

#include "dcp/dcp.hpp"

int main() {
  const dcp::DataCentricScheduler<> scheduler(dcp::analytic_cost_model(
      dcp::models::llama3_8b(), dcp::hgx_cluster(1, dcp::gpus::h200_sxm())));
  scheduler.plan(std::vector<dcp::sample>{{1, 4096}});
  return 0;
}
