#pragma once
// dcp::chosen_recompute: one of the shipped recompute strategies, picked at run time by name
// (a configuration file, a command-line flag, the Python bindings), as one type the scheduler
// is instantiated over once.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/error.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Holds selective_pyramid_recompute (the default, as the scheduler's), pyramid_recompute,
/// selective_recompute, full_recompute or no_recompute and behaves as the one it holds:
/// choose() and name() forward to it. Every alternative declares fit_decides, so this does too.
class chosen_recompute {
 public:
  using alternatives = std::variant<selective_pyramid_recompute, pyramid_recompute,
                                    selective_recompute, full_recompute, no_recompute>;
  static constexpr bool fit_decides = true;
  /// The names from_name accepts, as the strategies' name() spells them.
  static constexpr std::array<std::string_view, 5> names{"selective-pyramid", "pyramid",
                                                         "selective", "full", "none"};

  constexpr chosen_recompute() noexcept = default;
  template <class R>
    requires std::constructible_from<alternatives, R>
  constexpr chosen_recompute(R strategy) noexcept
      : strategy_(strategy) {}  // NOLINT: implicit on purpose

  /// The strategy whose name() is `name`; throws invalid_spec naming the value and the choices.
  [[nodiscard]] static chosen_recompute from_name(std::string_view name) {
    if (name == "selective-pyramid") return selective_pyramid_recompute{};
    if (name == "pyramid") return pyramid_recompute{};
    if (name == "selective") return selective_recompute{};
    if (name == "full") return full_recompute{};
    if (name == "none") return no_recompute{};
    std::string known;
    for (const auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    throw invalid_spec("recompute = '" + std::string(name) +
                       "': not a recompute strategy (known: " + known + ")");
  }

  template <cost_model M>
  [[nodiscard]] std::optional<recompute_setting> choose(const M& m, const micro_batch_shape& s,
                                                        const execution_config& c) const {
    return std::visit([&](const auto& r) { return r.choose(m, s, c); }, strategy_);
  }
  /// choose() with the peak bytes of the chosen setting (strategies.hpp, chooses_by_fitting).
  template <cost_model M>
  [[nodiscard]] std::optional<fitting_setting> choose_fitting(const M& m,
                                                              const micro_batch_shape& s,
                                                              const execution_config& c) const {
    return std::visit([&](const auto& r) { return r.choose_fitting(m, s, c); }, strategy_);
  }
  [[nodiscard]] constexpr std::string_view name() const noexcept {
    return std::visit([](const auto& r) { return r.name(); }, strategy_);
  }
  [[nodiscard]] constexpr const alternatives& strategy() const noexcept { return strategy_; }

  friend constexpr bool operator==(const chosen_recompute&, const chosen_recompute&) = default;

 private:
  alternatives strategy_{};
};

static_assert(recompute_strategy<chosen_recompute, analytic_cost_model>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
