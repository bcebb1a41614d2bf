// The consumer program shared by the integration projects: include the umbrella header and use
// one preset, so a missing header, include path or link dependency fails the build. With
// DCP_CONSUMER_USES_<COMPONENT> it also uses that component's headers.
#include <dcp/dcp.hpp>
#include <dcp/runtime.hpp>

#if defined(DCP_CONSUMER_USES_DEFAULT_SCHEDULER)
#include <dcp/default_scheduler.hpp>
#endif
#if defined(DCP_CONSUMER_USES_SIM)
#include <dcp/sim/truth_model.hpp>
#include <dcp/workload/batch.hpp>
#endif
#if defined(DCP_CONSUMER_USES_MPI)
#include <dcp/mpi/communicator.hpp>
#endif
#if defined(DCP_CONSUMER_USES_TORCH)
#include <dcp/torch/communicator.hpp>
#endif

#include <iostream>
#include <vector>

int main() {
  static_assert(DCP_VERSION_MAJOR == 0 && DCP_VERSION_MINOR == 1);
  const auto params = dcp::models::llama3_8b().total_params();
  std::cout << "dcp " << DCP_VERSION_STRING << ", Llama-3 8B parameters: " << params << '\n';
#if defined(DCP_CONSUMER_USES_DEFAULT_SCHEDULER)
  // DataCentricScheduler<> is instantiated once, in the package's default_scheduler.cpp.
  const dcp::DataCentricScheduler<> scheduler(dcp::analytic_cost_model(
      dcp::models::llama3_8b(), dcp::hgx_cluster(1, dcp::gpus::h200_sxm())));
  const auto plan = scheduler.plan(std::vector<dcp::sample>{{1, 4096}, {2, 512}, {3, 30000}});
  std::cout << "plan: " << plan.micro_steps.size() << " micro-steps\n";
  if (plan.micro_steps.empty()) return 1;
#endif
#if defined(DCP_CONSUMER_USES_SIM)
  const dcp::sim::truth_model truth(dcp::models::llama3_8b(),
                                    dcp::hgx_cluster(1, dcp::gpus::h200_sxm()));
  std::cout << "truth model budget: " << truth.memory_budget() << " bytes\n";
#endif
#if defined(DCP_CONSUMER_USES_MPI)
  std::cout << "MPI adapter: " << sizeof(dcp::mpi::communicator) << " bytes\n";
#endif
#if defined(DCP_CONSUMER_USES_TORCH)
  static_assert(dcp::communicator<dcp::c10d_communicator>);
  std::cout << "c10d adapter: " << sizeof(dcp::c10d_communicator) << " bytes\n";
#endif
  return params > 0 ? 0 : 1;
}
