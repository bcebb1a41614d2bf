#pragma once
// dcp::recompute_strategy — how much activation recomputation a micro-batch gets.

#include <concepts>
#include <optional>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/detail/member_probe.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

namespace detail {
DCP_DETAIL_MEMBER_PROBE(fit_decides);
template <bool>
struct constant_bool {};
}  // namespace detail

/// Whether R's optional `fit_decides`, if R declares one, is a static constant convertible to
/// bool (a non-static member, a function or a non-constant would otherwise be ignored).
template <class R>
concept optional_recompute_members_are_well_formed =
    !detail::declares_fit_decides<R> ||
    (
        requires {  // a static data member of type bool (not a function, not per object)
          { &R::fit_decides } -> std::convertible_to<const volatile bool*>;
        } && requires {  // and a constant
          typename detail::constant_bool<R::fit_decides>;
        });

/// A recompute strategy picks the recomputation a micro-batch runs with so that it fits its
/// memory budget under the cost model.
///
/// Requirements on `const R& r`, a cost model `const M& m`, `micro_batch_shape s` and an
/// `execution_config c` (its `recompute` member is ignored):
///  1. `r.choose(m, s, c)` -> `std::optional<recompute_setting>`: a setting with
///     `m.peak_bytes(s, c with that setting) <= m.memory_budget()`, or nullopt when the
///     strategy has none that fits.
///  2. `r.name()` -> convertible to std::string_view, for reports.
///  3. Semantics: pure and deterministic; if it returns a setting for s, it returns one for
///     any smaller micro-batch, and that setting recomputes no more.
/// Optional refinement: a strategy that declares `static constexpr bool fit_decides = true`
/// promises that whenever a setting it chose for s still fits a larger s', it chooses that same
/// setting for s' (true of fixed settings and of "the least that fits"); packers then test a
/// join with one cost-model call instead of a full choose().
/// A strategy that declares `fit_decides` in any other form (not a constant expression
/// convertible to bool, or a function) does not model the concept.
/// Optional member: `r.choose_fitting(m, s, c)` -> `std::optional<fitting_setting>`
/// (dcp/recompute/strategies.hpp): the setting choose() returns, with `m.peak_bytes` under it,
/// which the strategy has just computed to check the fit; placement then evaluates a sample
/// with one memory call instead of two. The shipped strategies declare it.
/// Models: no_recompute, full_recompute, selective_recompute, pyramid_recompute.
template <class R, class M>
concept recompute_strategy =
    cost_model<M> && std::copy_constructible<R> &&
    requires(const R& r, const M& m, const micro_batch_shape& s, const execution_config& c) {
      { r.choose(m, s, c) } -> std::same_as<std::optional<recompute_setting>>;
      { r.name() } -> std::convertible_to<std::string_view>;
    } && optional_recompute_members_are_well_formed<R>;

template <class R>
inline constexpr bool fit_decides_v = [] {
  if constexpr (requires { R::fit_decides; })
    return static_cast<bool>(R::fit_decides);
  else
    return false;
}();

}  // namespace dcp::inline DCP_ABI_NAMESPACE
