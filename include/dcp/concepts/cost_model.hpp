#pragma once
// dcp::cost_model — what the planner asks of a cost model.

#include <array>
#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "dcp/detail/member_probe.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {

DCP_DETAIL_MEMBER_PROBE(gradient_sync_seconds);
DCP_DETAIL_MEMBER_PROBE(marginal_seconds);
DCP_DETAIL_MEMBER_PROBE(time_terms);
DCP_DETAIL_MEMBER_PROBE(marginal_time_terms);
DCP_DETAIL_MEMBER_PROBE(memory_terms);
DCP_DETAIL_MEMBER_PROBE(memory_by_tokens);
DCP_DETAIL_MEMBER_PROBE(fixed_seconds);
DCP_DETAIL_MEMBER_PROBE(device_seconds);

/// Optional member 6: the time split into named terms (calibrated<M> refits their weights).
template <class M>
concept has_time_terms =
    requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
      { M::time_term_count } -> std::convertible_to<std::size_t>;
      { m.time_terms(s, c) } -> std::same_as<std::array<double, M::time_term_count>>;
      { m.marginal_time_terms(s, c) } -> std::same_as<std::array<double, M::time_term_count>>;
      { M::time_term_priors } -> std::convertible_to<std::array<double, M::time_term_count>>;
      {
        M::time_term_names
      } -> std::convertible_to<std::array<std::string_view, M::time_term_count>>;
    };

/// Optional member 7: the peak bytes split into named terms.
template <class M>
concept has_memory_terms =
    requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
      { M::memory_term_count } -> std::convertible_to<std::size_t>;
      { m.memory_terms(s, c) } -> std::same_as<std::array<double, M::memory_term_count>>;
      {
        M::memory_term_names
      } -> std::convertible_to<std::array<std::string_view, M::memory_term_count>>;
    };

/// Optional member 8 declared well: `static constexpr bool memory_by_tokens`.
template <class M>
concept has_well_formed_memory_by_tokens =
    std::same_as<std::remove_cvref_t<decltype(M::memory_by_tokens)>, bool> &&
    requires { typename std::bool_constant<M::memory_by_tokens>; };

/// M declares memory_by_tokens = true: the bounds may charge each sample its share of the
/// fixed per-micro-step cost (dcp/plan/lower_bound.hpp).
template <class M>
concept memory_by_tokens = has_well_formed_memory_by_tokens<M> && M::memory_by_tokens;

/// fixed(c) of cost_model requirement 5: M's fixed_seconds, else an empty micro-step's time.
template <class M>
[[nodiscard]] double fixed_seconds_of(const M& m, const execution_config& c) {
  if constexpr (requires { m.fixed_seconds(c); }) {
    return static_cast<double>(m.fixed_seconds(c));
  } else {
    return static_cast<double>(m.seconds(micro_batch_shape{}, c));
  }
}

}  // namespace detail

/// Whether every optional member M declares has the signature the library calls it with. A
/// member that is absent is fine (the library then uses its default); one that is present with
/// another signature — non-const, other parameters, another return type — fails this concept,
/// and so `cost_model`, instead of being silently ignored.
///
/// Mind the shape when adding a member: GCC 12 normalizes these disjunctions into clauses when it
/// compares constrained declarations, and one more `(!declares_x<M> || requires ...)` here made
/// a translation unit that includes dcp/dcp.hpp take over 100 s to parse. A new member's check
/// goes into a `constexpr bool` variable template, which is one atomic constraint.
template <class M>
concept optional_cost_members_are_well_formed =
    (!detail::declares_gradient_sync_seconds<M> ||
     requires(const M& m) {
       { m.gradient_sync_seconds() } -> std::convertible_to<double>;
     }) &&
    (!detail::declares_marginal_seconds<M> ||
     requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
       { m.marginal_seconds(s, c) } -> std::convertible_to<double>;
     }) &&
    (!(detail::declares_time_terms<M> || detail::declares_marginal_time_terms<M>) ||
     detail::has_time_terms<M>)&&(!detail::declares_memory_terms<M> ||
                                  detail::has_memory_terms<
                                      M>)&&(!detail::declares_memory_by_tokens<M> ||
                                            detail::has_well_formed_memory_by_tokens<
                                                M>)&&(!detail::declares_fixed_seconds<M> ||
                                                      requires(const M& m,
                                                               const execution_config& c) {
                                                        {
                                                          m.fixed_seconds(c)
                                                        } -> std::convertible_to<double>;
                                                      }) &&
    (!detail::declares_device_seconds<M> ||
     requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
       { m.device_seconds(s, c) } -> std::convertible_to<double>;
     });

/// A cost model answers, for one micro-batch under one execution config, its time on the group
/// and its peak bytes on each GPU of the group.
///
/// Requirements on `const M& m`, `micro_batch_shape s`, `execution_config c`:
///  1. `m.seconds(s, c)` -> convertible to double: predicted time of the micro-step (forward,
///     backward, recomputation, sequence-parallel communication, fixed overhead), finite, >= 0.
///  2. `m.peak_bytes(s, c)` -> convertible to double: predicted peak bytes on each GPU of the
///     group, model states included.
///  3. `m.memory_budget()` -> convertible to double: bytes a micro-step may peak at.
///  4. `m.model()`, `m.cluster()`, `m.training()` give the specs it was built for.
///  5. Semantics: pure and deterministic; `peak_bytes` never decreases when samples are added
///     and never increases when more layers are recomputed; `seconds` never decreases when
///     samples are added. The marginal time of b — `m.marginal_seconds(b, c)` if the model has
///     that optional member, else seconds(b) - seconds({}) — is b's floor in any micro-batch:
///     for samples b_1..b_n, seconds(b_1 + ... + b_n) >= fixed(c) + sum_i marginal(b_i), with
///     fixed(c) = `m.fixed_seconds(c)` if the model has that optional member, else seconds({}) (the
///     lower bound and the static search rely on it; the default meets it when seconds is
///     superadditive, seconds(a + b) >= seconds(a) + seconds(b) - seconds({})); for a fixed
///     recompute setting, degree * marginal does not decrease with the degree (parallelism is
///     never super-linear).
/// Optional members (each used when present, and checked: one declared with another signature
/// makes M not a cost_model, see optional_cost_members_are_well_formed):
///  - `m.gradient_sync_seconds()` -> double: the step's gradient synchronisation after the last
///    micro-step (default 0); added to every plan's makespan.
///  - `m.marginal_seconds(s, c)` -> double: the floor of requirement 5 (default
///    seconds(s, c) - seconds({}, c)).
///  - time terms: `M::time_term_count`, `m.time_terms(s, c)` and `m.marginal_time_terms(s, c)`
///    -> std::array<double, count>, `M::time_term_priors`, `M::time_term_names`: seconds as a sum
///    of named terms, which calibrated<M> refits one weight each (default: one term, seconds).
///  - memory terms: `M::memory_term_count`, `m.memory_terms(s, c)`, `M::memory_term_names`.
///  - `M::memory_by_tokens` -> static constexpr bool: true promises that peak_bytes(s, c)
///    depends on s only through s.tokens and s.samples and never decreases in either nor, from
///    one recomputed layer on, in c.recompute.layers (so a micro-step holds the most tokens with
///    none or every layer recomputed: with one layer, recomputing it can cost memory), and that
///    an empty micro-batch is fastest without recomputation (seconds({}, c) is least at
///    c.recompute = none). The lower bound then counts each sample's share of the fixed cost
///    every micro-step pays: a micro-step holds at most as many tokens as one sample of that
///    length could (default false: the bound without fixed costs).
///  - `m.fixed_seconds(c)` -> double: the fixed(c) of requirement 5, least at c.recompute =
///    none under memory_by_tokens (default seconds({}, c)). A model whose time is the longer of
///    two parts — the truth model's host issue time and device time — declares the part the
///    marginals add to, since an empty micro-step's time may be the other one; and
///    `m.device_seconds(s, c)` -> double, that part for a micro-batch (default seconds(s, c)):
///    the packer's estimates of what a sample adds use it, not a host time packing hides.
/// Models: analytic_cost_model, calibrated<M>, sim::truth_model.
template <class M>
concept cost_model = std::copy_constructible<M> &&
                     requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
                       { m.seconds(s, c) } -> std::convertible_to<double>;
                       { m.peak_bytes(s, c) } -> std::convertible_to<double>;
                       { m.memory_budget() } -> std::convertible_to<double>;
                       { m.model() } -> std::convertible_to<const model_spec&>;
                       { m.cluster() } -> std::convertible_to<const cluster_spec&>;
                       { m.training() } -> std::convertible_to<const training_spec&>;
                     } && optional_cost_members_are_well_formed<M>;

}  // namespace dcp::inline DCP_ABI_NAMESPACE
