// The one definition of the default scheduler declared in dcp/default_scheduler.hpp. Compiled
// into the program by the CMake target dcp::default_scheduler, or by hand.

#include "dcp/default_scheduler.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

template class DataCentricScheduler<>;

}  // namespace dcp::inline DCP_ABI_NAMESPACE
