// Compile-only tests: minimal conforming types model each concept; near-miss types, each
// missing or breaking one requirement, do not.

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dcp/dcp.hpp"

namespace {

using dcp::execution_config;
using dcp::micro_batch_shape;

// ---- cost_model ------------------------------------------------------------------------------
struct minimal_cost {
  double seconds(const micro_batch_shape&, const execution_config&) const { return 0; }
  double peak_bytes(const micro_batch_shape&, const execution_config&) const { return 0; }
  double memory_budget() const { return 1; }
  const dcp::model_spec& model() const { return m; }
  const dcp::cluster_spec& cluster() const { return c; }
  const dcp::training_spec& training() const { return t; }
  dcp::model_spec m;
  dcp::cluster_spec c;
  dcp::training_spec t;
};
struct cost_without_peak_bytes {
  double seconds(const micro_batch_shape&, const execution_config&) const { return 0; }
  double memory_budget() const { return 1; }
  const dcp::model_spec& model() const { return m; }
  const dcp::cluster_spec& cluster() const { return c; }
  const dcp::training_spec& training() const { return t; }
  dcp::model_spec m;
  dcp::cluster_spec c;
  dcp::training_spec t;
};
struct cost_with_mutable_seconds : minimal_cost {  // seconds() not callable on const
  double seconds(const micro_batch_shape&, const execution_config&) { return 0; }
};
struct cost_with_string_budget : minimal_cost {
  std::string_view memory_budget() const { return "lots"; }
};
static_assert(dcp::cost_model<minimal_cost>);
// calibrated<M> is a cost model over any cost model: M's own terms, or one term for a model
// that does not split its time.
static_assert(dcp::cost_model<dcp::calibrated<minimal_cost>>);
static_assert(dcp::cost_model<dcp::calibrated<dcp::analytic_cost_model>>);
static_assert(dcp::calibrated<minimal_cost>::time_term_count == 1);
static_assert(dcp::calibrated<dcp::analytic_cost_model>::time_term_count ==
              dcp::analytic_cost_model::time_term_count);
static_assert(dcp::cost_model<dcp::analytic_cost_model>);
static_assert(!dcp::cost_model<cost_without_peak_bytes>);
static_assert(!dcp::cost_model<cost_with_mutable_seconds>);
static_assert(!dcp::cost_model<cost_with_string_budget>);
static_assert(!dcp::cost_model<int>);

// ---- bucketing_policy ------------------------------------------------------------------------
struct minimal_bucketing {
  std::vector<std::int32_t> assign(std::span<const dcp::sample>) const { return {}; }
  std::string_view name() const { return "minimal"; }
};
struct bucketing_returning_int64 {
  std::vector<std::int64_t> assign(std::span<const dcp::sample>) const { return {}; }
  std::string_view name() const { return "near-miss"; }
};
struct bucketing_without_name {
  std::vector<std::int32_t> assign(std::span<const dcp::sample>) const { return {}; }
};
struct bucketing_taking_one_sample {
  std::vector<std::int32_t> assign(const dcp::sample&) const { return {}; }
  std::string_view name() const { return "near-miss"; }
};
static_assert(dcp::bucketing_policy<minimal_bucketing>);
static_assert(dcp::bucketing_policy<dcp::log2_buckets>);
static_assert(dcp::bucketing_policy<dcp::padding_optimal_buckets>);
static_assert(!dcp::bucketing_policy<bucketing_returning_int64>);
static_assert(!dcp::bucketing_policy<bucketing_without_name>);
static_assert(!dcp::bucketing_policy<bucketing_taking_one_sample>);

// ---- recompute_strategy ----------------------------------------------------------------------
struct minimal_recompute {
  std::optional<dcp::recompute_setting> choose(const minimal_cost&, const micro_batch_shape&,
                                               const execution_config&) const {
    return dcp::recompute_setting::none();
  }
  std::string_view name() const { return "minimal"; }
};
struct recompute_returning_plain_setting {  // must say "does not fit" with nullopt
  dcp::recompute_setting choose(const minimal_cost&, const micro_batch_shape&,
                                const execution_config&) const {
    return {};
  }
  std::string_view name() const { return "near-miss"; }
};
struct recompute_without_name {
  std::optional<dcp::recompute_setting> choose(const minimal_cost&, const micro_batch_shape&,
                                               const execution_config&) const {
    return {};
  }
};
static_assert(dcp::recompute_strategy<minimal_recompute, minimal_cost>);
static_assert(dcp::recompute_strategy<dcp::pyramid_recompute, dcp::analytic_cost_model>);
static_assert(!dcp::recompute_strategy<minimal_recompute, dcp::analytic_cost_model>);  // wrong model
static_assert(!dcp::recompute_strategy<recompute_returning_plain_setting, minimal_cost>);
static_assert(!dcp::recompute_strategy<recompute_without_name, minimal_cost>);
static_assert(!dcp::recompute_strategy<dcp::pyramid_recompute, cost_without_peak_bytes>);

// ---- placement_policy ------------------------------------------------------------------------
struct minimal_placement {
  template <class M, class R>
  dcp::placement place(const dcp::placement_problem<M, R>&) const { return {}; }
  std::string_view name() const { return "minimal"; }
};
struct placement_returning_plan {  // returns the scheduler's output type, not a placement
  template <class M, class R>
  dcp::step_plan place(const dcp::placement_problem<M, R>&) const { return {}; }
  std::string_view name() const { return "near-miss"; }
};
struct placement_without_name {
  template <class M, class R>
  dcp::placement place(const dcp::placement_problem<M, R>&) const { return {}; }
};
using cost = dcp::analytic_cost_model;
using rec = dcp::pyramid_recompute;
static_assert(dcp::placement_policy<minimal_placement, cost, rec>);
static_assert(dcp::placement_policy<dcp::balanced_placement, cost, rec>);
static_assert(dcp::placement_policy<dcp::static_placement, cost, rec>);
static_assert(!dcp::placement_policy<placement_returning_plan, cost, rec>);
static_assert(!dcp::placement_policy<placement_without_name, cost, rec>);

// The scheduler composes minimal models of every concept.
using minimal_scheduler =
    dcp::DataCentricScheduler<minimal_cost, minimal_bucketing, minimal_recompute, minimal_placement>;
static_assert(std::is_class_v<minimal_scheduler>);

}  // namespace
