// Compile-only tests of what a dependency is expected to have (Finding 04): the version macros
// agree with each other and with CMake's project version, and everything dcp declares lives in
// the versioned inline namespace, so two dcp versions in one process cannot share a symbol.

#include <cstring>
#include <type_traits>

#include "dcp/dcp.hpp"
#include "dcp/runtime.hpp"
#include "dcp/version.hpp"

static_assert(DCP_VERSION ==
              DCP_VERSION_MAJOR * 10000 + DCP_VERSION_MINOR * 100 + DCP_VERSION_PATCH);
// DCP_TEST_PROJECT_VERSION_* come from CMake's project(VERSION), which reads version.hpp.
static_assert(DCP_VERSION_MAJOR == DCP_TEST_PROJECT_VERSION_MAJOR);
static_assert(DCP_VERSION_MINOR == DCP_TEST_PROJECT_VERSION_MINOR);
static_assert(DCP_VERSION_PATCH == DCP_TEST_PROJECT_VERSION_PATCH);

#define DCP_TEST_STRINGIFY_(x) #x
#define DCP_TEST_STRINGIFY(x) DCP_TEST_STRINGIFY_(x)
constexpr bool same_text(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
static_assert(same_text(DCP_VERSION_STRING,
                        DCP_TEST_STRINGIFY(DCP_VERSION_MAJOR) "." DCP_TEST_STRINGIFY(
                            DCP_VERSION_MINOR) "." DCP_TEST_STRINGIFY(DCP_VERSION_PATCH)));
// The ABI tag names the version it belongs to (v<major>_<minor> while the major version is 0).
static_assert(
    DCP_VERSION_MAJOR != 0 ||
    same_text(DCP_TEST_STRINGIFY(DCP_ABI_NAMESPACE),
              "v" DCP_TEST_STRINGIFY(DCP_VERSION_MAJOR) "_" DCP_TEST_STRINGIFY(DCP_VERSION_MINOR)));

// The public names are the inline namespace's: dcp::x and dcp::v0_1::x are one entity, in
// every layer (specs, cost, placement, plan, runtime, detail).
namespace abi = dcp::DCP_ABI_NAMESPACE;
static_assert(std::is_same_v<dcp::step_plan, abi::step_plan>);
static_assert(std::is_same_v<dcp::sample, abi::sample>);
static_assert(std::is_same_v<dcp::analytic_cost_model, abi::analytic_cost_model>);
static_assert(std::is_same_v<dcp::DataCentricScheduler<>, abi::DataCentricScheduler<>>);
static_assert(
    std::is_same_v<dcp::placement_input<dcp::analytic_cost_model, dcp::pyramid_recompute>,
                   abi::placement_input<dcp::analytic_cost_model, dcp::pyramid_recompute>>);
static_assert(std::is_same_v<dcp::in_process_communicator, abi::in_process_communicator>);
static_assert(std::is_same_v<dcp::error, abi::error>);
