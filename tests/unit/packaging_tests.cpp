// What a framework team expects of a dependency (issue findings 04): symbols in the versioned
// inline namespace, and optional cost-model members that are either used or rejected — never
// silently ignored. The compile-time halves are in tests/static/.

#include <string>
#include <typeinfo>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/version.hpp"

namespace {

#define DCP_TEST_TEXT_(x) #x
#define DCP_TEST_TEXT(x) DCP_TEST_TEXT_(x)

// The analytic model plus a gradient all-reduce of a fixed length, declared as the library
// calls it (const, no arguments).
struct with_gradient_sync : dcp::analytic_cost_model {
  using analytic_cost_model::analytic_cost_model;
  double gradient_sync_seconds() const { return 0.25; }
};
// The same member non-const: a cost model the library would call without it, so it must not be
// a cost model at all.
struct with_mutable_gradient_sync : dcp::analytic_cost_model {
  using analytic_cost_model::analytic_cost_model;
  double gradient_sync_seconds() { return 0.25; }
};

}  // namespace

TEST_CASE("Finding.04_dependency_expectations.symbols_carry_the_abi_namespace") {
  // The mangled names of types and functions hold the ABI tag, so two dcp versions in one
  // process never share a symbol.
  const std::string tag = DCP_TEST_TEXT(DCP_ABI_NAMESPACE);
  CAPTURE(tag);
  CHECK(tag == "v" + std::to_string(DCP_VERSION_MAJOR) + "_" + std::to_string(DCP_VERSION_MINOR));
  for (const std::string name :
       {typeid(dcp::step_plan).name(), typeid(dcp::sample).name(),
        typeid(dcp::DataCentricScheduler<>).name(), typeid(&dcp::validate_batch).name()}) {
    CAPTURE(name);
    CHECK(name.find(tag) != std::string::npos);
  }
}

TEST_CASE("Finding.04_dependency_expectations.optional_member_is_used_or_rejected") {
  static_assert(dcp::cost_model<with_gradient_sync>);
  static_assert(!dcp::cost_model<with_mutable_gradient_sync>);

  const auto cluster = dcp::hgx_cluster(1, dcp::gpus::h200_sxm());
  std::vector<dcp::sample> batch;
  for (std::uint64_t id = 0; id < 24; ++id)
    batch.push_back({id, static_cast<std::int64_t>(512 + 331 * id)});
  const dcp::DataCentricScheduler<> plain(
      dcp::analytic_cost_model(dcp::models::llama3_8b(), cluster));
  const dcp::DataCentricScheduler<with_gradient_sync> synced(
      with_gradient_sync(dcp::models::llama3_8b(), cluster));
  const auto a = plain.plan(batch);
  const auto b = synced.plan(batch);
  // The member is called: its seconds are the plan's gradient tail, on top of the same
  // micro-steps (the base model's gradient sync is replaced, not added to).
  CHECK(b.gradient_sync_seconds == doctest::Approx(0.25));
  CHECK(b.makespan_seconds == doctest::Approx(a.makespan_seconds));
  CHECK(b.step_seconds() == doctest::Approx(a.makespan_seconds + 0.25));
}
