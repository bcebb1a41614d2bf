// Compile-only tests: minimal conforming types model each concept; near-miss types, each
// missing or breaking one requirement, do not.

#include <array>
#include <cstddef>
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

// Optional members (Finding 04): present with the right signature, the type models the concept;
// present with another signature, it does not — never silently ignored.
struct cost_with_gradient_sync : minimal_cost {
  double gradient_sync_seconds() const { return 0.5; }
};
struct cost_with_mutable_gradient_sync
    : minimal_cost {  // non-const: the scheduler calls it on const
  double gradient_sync_seconds() { return 0.5; }
};
struct cost_with_gradient_sync_taking_a_plan : minimal_cost {
  double gradient_sync_seconds(int micro_steps) const { return 0.1 * micro_steps; }
};
struct cost_with_gradient_sync_field : minimal_cost {  // a data member of that name
  double gradient_sync_seconds = 0.5;
};
struct cost_with_marginal : minimal_cost {
  double marginal_seconds(const micro_batch_shape&, const execution_config&) const { return 0; }
};
struct cost_with_marginal_of_a_sample : minimal_cost {
  double marginal_seconds(const dcp::sample&) const { return 0; }
};
struct cost_with_private_marginal : minimal_cost {
 private:
  double marginal_seconds(const micro_batch_shape&, const execution_config&) const { return 0; }
};
struct cost_with_time_terms : minimal_cost {
  static constexpr std::size_t time_term_count = 2;
  static constexpr std::array<double, 2> time_term_priors{1.0, 1.0};
  static constexpr std::array<std::string_view, 2> time_term_names{"a", "b"};
  std::array<double, 2> time_terms(const micro_batch_shape&, const execution_config&) const {
    return {};
  }
  std::array<double, 2> marginal_time_terms(const micro_batch_shape&,
                                            const execution_config&) const {
    return {};
  }
};
struct cost_with_time_terms_but_no_marginals : minimal_cost {
  static constexpr std::size_t time_term_count = 2;
  [[maybe_unused]] static constexpr std::array<double, 2> time_term_priors{1.0, 1.0};
  [[maybe_unused]] static constexpr std::array<std::string_view, 2> time_term_names{"a", "b"};
  std::array<double, 2> time_terms(const micro_batch_shape&, const execution_config&) const {
    return {};
  }
};
struct cost_with_memory_terms_of_wrong_size : minimal_cost {
  static constexpr std::size_t memory_term_count = 2;
  [[maybe_unused]] static constexpr std::array<std::string_view, 2> memory_term_names{"a", "b"};
  std::array<double, 3> memory_terms(const micro_batch_shape&, const execution_config&) const {
    return {};
  }
};
struct cost_by_tokens : minimal_cost {
  static constexpr bool memory_by_tokens = true;
};
struct cost_with_runtime_memory_by_tokens : minimal_cost {  // not a constant expression
  bool memory_by_tokens = true;
};
struct cost_with_memory_by_tokens_function : minimal_cost {
  static bool memory_by_tokens() { return true; }
};
struct cost_with_fixed_seconds : minimal_cost {
  double fixed_seconds(const execution_config&) const { return 0.1; }
};
struct cost_with_fixed_seconds_of_a_shape : minimal_cost {  // takes the config, not a shape
  double fixed_seconds(const micro_batch_shape&) const { return 0.1; }
};
struct cost_with_device_seconds : minimal_cost {
  double device_seconds(const micro_batch_shape&, const execution_config&) const { return 0.1; }
};
struct cost_with_device_seconds_of_a_config : minimal_cost {  // takes a shape and a config
  double device_seconds(const execution_config&) const { return 0.1; }
};
struct final_cost_with_mutable_gradient_sync final : minimal_cost {
  double gradient_sync_seconds() { return 0.5; }
};
static_assert(dcp::cost_model<cost_with_gradient_sync>);
static_assert(!dcp::cost_model<cost_with_mutable_gradient_sync>);
static_assert(!dcp::cost_model<cost_with_gradient_sync_taking_a_plan>);
static_assert(!dcp::cost_model<cost_with_gradient_sync_field>);
static_assert(dcp::cost_model<cost_with_marginal>);
static_assert(!dcp::cost_model<cost_with_marginal_of_a_sample>);
static_assert(!dcp::cost_model<cost_with_private_marginal>);
static_assert(dcp::cost_model<cost_with_time_terms>);
static_assert(!dcp::cost_model<cost_with_time_terms_but_no_marginals>);
static_assert(!dcp::cost_model<cost_with_memory_terms_of_wrong_size>);
static_assert(!dcp::cost_model<final_cost_with_mutable_gradient_sync>);
static_assert(dcp::cost_model<cost_with_fixed_seconds>);
static_assert(!dcp::cost_model<cost_with_fixed_seconds_of_a_shape>);
static_assert(dcp::cost_model<cost_with_device_seconds>);
static_assert(!dcp::cost_model<cost_with_device_seconds_of_a_config>);
static_assert(dcp::cost_model<cost_by_tokens> && dcp::detail::memory_by_tokens<cost_by_tokens>);
static_assert(!dcp::detail::memory_by_tokens<minimal_cost>);
static_assert(!dcp::cost_model<cost_with_runtime_memory_by_tokens>);
static_assert(!dcp::cost_model<cost_with_memory_by_tokens_function>);
static_assert(dcp::detail::memory_by_tokens<dcp::analytic_cost_model>);
static_assert(dcp::cost_model<dcp::calibrated<cost_with_gradient_sync>>);
static_assert(dcp::cost_model<dcp::calibrated<cost_with_time_terms>>);
static_assert(dcp::calibrated<cost_with_time_terms>::time_term_count == 2);

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
static_assert(
    !dcp::recompute_strategy<minimal_recompute, dcp::analytic_cost_model>);  // wrong model
static_assert(!dcp::recompute_strategy<recompute_returning_plain_setting, minimal_cost>);
static_assert(!dcp::recompute_strategy<recompute_without_name, minimal_cost>);
// The optional fit_decides must be a constant (Finding 04).
struct recompute_that_fit_decides : minimal_recompute {
  static constexpr bool fit_decides = true;
};
struct recompute_with_runtime_fit_decides : minimal_recompute {
  bool fit_decides = true;  // a member of each object, not a constant: would be ignored
};
struct recompute_with_fit_decides_function : minimal_recompute {
  static bool fit_decides() { return true; }
};
static_assert(dcp::recompute_strategy<recompute_that_fit_decides, minimal_cost>);
static_assert(dcp::fit_decides_v<recompute_that_fit_decides>);
static_assert(!dcp::fit_decides_v<minimal_recompute>);
static_assert(!dcp::recompute_strategy<recompute_with_runtime_fit_decides, minimal_cost>);
static_assert(!dcp::recompute_strategy<recompute_with_fit_decides_function, minimal_cost>);
static_assert(!dcp::recompute_strategy<dcp::pyramid_recompute, cost_without_peak_bytes>);

// ---- placement_policy ------------------------------------------------------------------------
struct minimal_placement {
  template <class M, class R>
  dcp::placement place(const dcp::placement_input<M, R>&) const {
    return {};
  }
  std::string_view name() const { return "minimal"; }
};
struct placement_returning_plan {  // returns the scheduler's output type, not a placement
  template <class M, class R>
  dcp::step_plan place(const dcp::placement_input<M, R>&) const {
    return {};
  }
  std::string_view name() const { return "near-miss"; }
};
struct placement_without_name {
  template <class M, class R>
  dcp::placement place(const dcp::placement_input<M, R>&) const {
    return {};
  }
};
using cost = dcp::analytic_cost_model;
using rec = dcp::pyramid_recompute;
static_assert(dcp::placement_policy<minimal_placement, cost, rec>);
static_assert(dcp::placement_policy<dcp::balanced_placement, cost, rec>);
static_assert(dcp::placement_policy<dcp::static_placement, cost, rec>);
static_assert(!dcp::placement_policy<placement_returning_plan, cost, rec>);
static_assert(!dcp::placement_policy<placement_without_name, cost, rec>);

// The scheduler composes minimal models of every concept.
using minimal_scheduler = dcp::DataCentricScheduler<minimal_cost, minimal_bucketing,
                                                    minimal_recompute, minimal_placement>;
static_assert(std::is_class_v<minimal_scheduler>);

}  // namespace
