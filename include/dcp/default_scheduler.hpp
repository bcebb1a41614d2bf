#pragma once
// The default scheduler, compiled once: `DataCentricScheduler<>` (analytic cost model, varlen
// buckets, selective-pyramid recompute, balanced placement) declared as an explicit instantiation,
// so a translation unit that includes this header and calls plan() does not instantiate the planner
// again. Exactly one translation unit of the program must hold the definition: link the CMake
// target dcp::default_scheduler (it adds share/dcp/src/default_scheduler.cpp to your target) or
// compile that file yourself. Plans are the same bit for bit either way. docs/building.md
// ("Compile time") has the measured effect.

#include "dcp/scheduler.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

extern template class DataCentricScheduler<>;

}  // namespace dcp::inline DCP_ABI_NAMESPACE
