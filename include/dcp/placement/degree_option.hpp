#pragma once
// degree_option: how one micro-batch runs at one degree (setting, style, seconds, bytes), and the
// degrees a cluster allows. Every placement policy and the bounds work from these.

#include <cstdint>
#include <limits>
#include <vector>

#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The result of asking "how does this micro-batch run at degree d".
struct degree_option {
  bool feasible = false;
  recompute_setting recompute{};
  double seconds = std::numeric_limits<double>::infinity();
  double peak_bytes = 0;
  sequence_parallel sp = sequence_parallel::ulysses;  ///< the style it runs with (moot at degree 1)
};

/// Powers of two up to the cluster size at which `sp` has a valid style (styles_at): Ulysses
/// degrees must also divide the head count.
[[nodiscard]] inline std::vector<std::int64_t> allowed_degrees(const model_spec& model,
                                                               const cluster_spec& cluster,
                                                               sequence_parallel sp) {
  std::vector<std::int64_t> degrees;
  for (std::int64_t d = 1; d <= cluster.gpus; d *= 2) {
    if (sp != sequence_parallel::ulysses || model.heads % d == 0) degrees.push_back(d);
    if (d > cluster.gpus / 2) break;  // the next d would pass gpus (and could overflow)
  }
  return degrees;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
