// Compile-time customisation: a user-defined recompute strategy plugged into the scheduler.
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include "dcp/dcp.hpp"

// example-begin custom
/// Selective recomputation when it is enough, else the pyramid: never fully recompute a layer
/// that selective recomputation could have saved.
struct selective_then_pyramid {
  static constexpr bool fit_decides = false;  // the choice is not "the least that fits"

  template <dcp::cost_model M>
  std::optional<dcp::recompute_setting> choose(const M& m, const dcp::micro_batch_shape& s,
                                               dcp::execution_config c) const {
    c.recompute = {};
    if (m.peak_bytes(s, c) <= m.memory_budget()) return dcp::recompute_setting::none();
    c.recompute = dcp::recompute_setting::selective_only();
    if (m.peak_bytes(s, c) <= m.memory_budget()) return c.recompute;
    return dcp::pyramid_recompute{}.choose(m, s, c);
  }
  std::string_view name() const { return "selective-then-pyramid"; }
};
static_assert(dcp::recompute_strategy<selective_then_pyramid, dcp::analytic_cost_model>);

using scheduler = dcp::DataCentricScheduler<dcp::analytic_cost_model, dcp::varlen_buckets,
                                            selective_then_pyramid>;
// example-end custom

int main() {
  const dcp::analytic_cost_model cost(dcp::models::llama3_8b(),
                                      dcp::hgx_cluster(1, dcp::gpus::h100_sxm()));
  std::vector<dcp::sample> batch;
  for (std::uint64_t id = 0; id < 64; ++id)
    batch.push_back(dcp::text_sample(id, 500 + static_cast<std::int64_t>(id * id * 11)));
  const auto plan = scheduler(cost).plan(batch);
  std::cout << plan << '\n';
  int selective = 0;
  for (const auto& m : plan.micro_steps) selective += m.config.recompute.selective ? 1 : 0;
  std::cout << selective << " of " << plan.micro_steps.size()
            << " micro-steps use selective recomputation\n";
  return 0;
}
