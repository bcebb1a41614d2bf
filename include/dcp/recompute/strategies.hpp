#pragma once
// The shipped recompute strategies: none, full, selective, pyramid — the fewest fully
// recomputed layers that make this micro-batch fit, found exactly per micro-batch — and
// selective-pyramid, the default: selective recomputation first, then the fewest fully
// recomputed layers on top of it.

#include <optional>
#include <string_view>

#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/cost/analytic.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A setting a strategy chose for a micro-batch, with the micro-batch's peak bytes under it:
/// what the optional `choose_fitting` of a recompute strategy returns (the check that the
/// setting fits has just computed the bytes, so placement need not ask the cost model again).
struct fitting_setting {
  recompute_setting setting;
  double peak_bytes = 0;
};

namespace detail {
/// `r` with the micro-batch's peak bytes under it if it fits the budget, else nullopt.
template <cost_model M>
[[nodiscard]] std::optional<fitting_setting> fitting(const M& m, const micro_batch_shape& s,
                                                     execution_config c, recompute_setting r) {
  c.recompute = r;
  const auto bytes = m.peak_bytes(s, c);
  if (!(bytes <= m.memory_budget())) return std::nullopt;
  return fitting_setting{r, static_cast<double>(bytes)};
}

[[nodiscard]] inline std::optional<recompute_setting> setting_of(
    const std::optional<fitting_setting>& f) {
  if (!f) return std::nullopt;
  return f->setting;
}

/// The first of setting(1), ..., setting(L) that fits, given that setting(0) does not (binary
/// search: peak bytes never increase along the ladder); nullopt when setting(L) does not fit.
template <cost_model M, class Ladder>
[[nodiscard]] std::optional<fitting_setting> first_rung_that_fits(const M& m,
                                                                  const micro_batch_shape& s,
                                                                  const execution_config& c,
                                                                  Ladder setting) {
  const auto layers = m.model().layers;
  auto fit = fitting(m, s, c, setting(layers));
  if (!fit) return std::nullopt;
  std::int64_t low = 0;        // does not fit
  std::int64_t high = layers;  // fits, as `fit` says
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    if (auto at = fitting(m, s, c, setting(mid))) {
      high = mid;
      fit = at;
    } else {
      low = mid;
    }
  }
  return fit;
}
}  // namespace detail

/// The shipped strategies' choose(): their choose_fitting(), which also returns the peak bytes
/// of the chosen setting (placement_input::evaluate reads them instead of asking the cost
/// model a second time), without the bytes.
template <class Strategy>
struct chooses_by_fitting {
  template <cost_model M>
  [[nodiscard]] std::optional<recompute_setting> choose(const M& m, const micro_batch_shape& s,
                                                        const execution_config& c) const {
    return detail::setting_of(static_cast<const Strategy&>(*this).choose_fitting(m, s, c));
  }
};

/// Never recompute: a micro-batch either fits with every activation kept or not at all.
struct no_recompute : chooses_by_fitting<no_recompute> {
  static constexpr bool fit_decides = true;
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    return detail::fitting(m, s, c, recompute_setting::none());
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "none"; }
  friend constexpr bool operator==(no_recompute, no_recompute) noexcept { return true; }
};

/// Recompute every layer, always (the usual static long-context setting).
struct full_recompute : chooses_by_fitting<full_recompute> {
  static constexpr bool fit_decides = true;
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    return detail::fitting(m, s, c, recompute_setting::full(m.model().layers));
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "full"; }
  friend constexpr bool operator==(full_recompute, full_recompute) noexcept { return true; }
};

/// Selective recomputation (norms and MLP activation) on every layer, always.
struct selective_recompute : chooses_by_fitting<selective_recompute> {
  static constexpr bool fit_decides = true;
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    return detail::fitting(m, s, c, recompute_setting::selective_only());
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "selective"; }
  friend constexpr bool operator==(selective_recompute, selective_recompute) noexcept {
    return true;
  }
};

/// Pyramid: the fewest fully recomputed layers k in [0, L] that make this micro-batch fit.
/// Exact: binary search on k, valid because peak bytes never increase with k (cost_model
/// requirement 5); O(log L) cost-model calls per micro-batch.
struct pyramid_recompute : chooses_by_fitting<pyramid_recompute> {
  static constexpr bool fit_decides = true;
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    if (auto none = detail::fitting(m, s, c, recompute_setting::none())) return none;
    return detail::first_rung_that_fits(
        m, s, c, [](std::int64_t k) { return recompute_setting::partial(k); });
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "pyramid"; }
  friend constexpr bool operator==(pyramid_recompute, pyramid_recompute) noexcept { return true; }
};

/// Selective pyramid, the scheduler's default: no recomputation if the micro-batch fits, else
/// selective recomputation (norms and the MLP activation, memory-bound and cheap) if that is
/// enough, else selective recomputation plus the fewest fully recomputed layers k in [1, L] that
/// make it fit — what DynaPipe's "none, then selective, then full" and Megatron-Core's
/// recompute_num_layers do, found exactly per micro-batch. Peak bytes never increase along
/// none, selective, selective + 1 layer, ..., selective + L - 1 layers, full, so the first that
/// fits is found by two checks and a binary search: O(log L) cost-model calls. Selective
/// recomputation saves (4h + 2f) bytes per token per kept layer for a memory-bound re-run, so it
/// is taken before a layer is fully recomputed (docs/planner.md "Recomputation" has the measured
/// effect).
struct selective_pyramid_recompute : chooses_by_fitting<selective_pyramid_recompute> {
  static constexpr bool fit_decides = true;
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    if (auto none = detail::fitting(m, s, c, recompute_setting::none())) return none;
    if (auto selective = detail::fitting(m, s, c, recompute_setting::selective_only()))
      return selective;
    // Every layer fully recomputed leaves nothing for selective recomputation: that is full().
    const auto layers = m.model().layers;
    return detail::first_rung_that_fits(m, s, c, [layers](std::int64_t k) {
      return k == layers ? recompute_setting::full(layers)
                         : recompute_setting{static_cast<std::int32_t>(k), true};
    });
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept { return "selective-pyramid"; }
  friend constexpr bool operator==(selective_pyramid_recompute,
                                   selective_pyramid_recompute) noexcept {
    return true;
  }
};

static_assert(recompute_strategy<no_recompute, analytic_cost_model>);
static_assert(recompute_strategy<full_recompute, analytic_cost_model>);
static_assert(recompute_strategy<selective_recompute, analytic_cost_model>);
static_assert(recompute_strategy<pyramid_recompute, analytic_cost_model>);
static_assert(recompute_strategy<selective_pyramid_recompute, analytic_cost_model>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
