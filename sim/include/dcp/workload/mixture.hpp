#pragma once
// A weighted mixture of length distributions: each draw first picks a component with
// probability weight / sum(weights), then draws from it. Corpora that mix short chat with long
// documents (long-SFT, long-context pretraining) are mixtures in the peers' own descriptions.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>

#include "dcp/error.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/distribution.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

template <length_distribution... Components>
  requires(sizeof...(Components) >= 1)
class mixture {
 public:
  static constexpr std::size_t size = sizeof...(Components);

  /// `weights[i]` is the relative weight of `components[i]`: finite, >= 0, not all zero.
  explicit mixture(const std::array<double, size>& weights, Components... components)
      : components_(std::move(components)...), weights_(weights) {
    double total = 0;
    for (std::size_t i = 0; i < size; ++i) {
      if (!(std::isfinite(weights[i]) && weights[i] >= 0)) {
        throw invalid_spec("mixture: weight " + std::to_string(i) + " = " +
                           std::to_string(weights[i]) + ", must be finite and >= 0");
      }
      total += weights[i];
      cumulative_[i] = total;
    }
    if (!(total > 0)) throw invalid_spec("mixture: the weights sum to 0, must be > 0");
    total_ = total;
  }

  [[nodiscard]] const std::tuple<Components...>& components() const noexcept { return components_; }
  [[nodiscard]] const std::array<double, size>& weights() const noexcept { return weights_; }
  /// Probability that a draw comes from component `index`.
  [[nodiscard]] double share(std::size_t index) const noexcept {
    return weights_.at(index) / total_;
  }

  /// The component a draw uses: the first i with u * sum < cumulative weight up to i.
  [[nodiscard]] std::size_t draw_component(rng& random) const noexcept {
    const double target = random.uniform() * total_;
    for (std::size_t i = 0; i < size; ++i) {
      if (target < cumulative_[i]) return i;
    }
    // u * sum rounded up to sum: the last component with a positive weight.
    std::size_t last = 0;
    for (std::size_t i = 0; i < size; ++i) {
      if (weights_[i] > 0) last = i;
    }
    return last;
  }

  /// Draw from component `index` alone (to check a component's own statistics).
  [[nodiscard]] std::int64_t draw_tokens_from(std::size_t index, rng& random) const {
    return draw_from(index, random, std::index_sequence_for<Components...>{});
  }

  [[nodiscard]] std::int64_t draw_tokens(rng& random) const {
    const std::size_t index = draw_component(random);
    return draw_tokens_from(index, random);
  }

  [[nodiscard]] dcp::sample draw(rng& random, std::uint64_t id) const {
    return dcp::text_sample(id, draw_tokens(random));
  }

  friend bool operator==(const mixture&, const mixture&) = default;

 private:
  template <std::size_t... I>
  [[nodiscard]] std::int64_t draw_from(std::size_t index, rng& random,
                                       std::index_sequence<I...>) const {
    std::int64_t tokens = 0;
    const bool found =
        ((I == index ? (tokens = std::get<I>(components_).draw_tokens(random), true) : false) ||
         ...);
    if (!found) {
      throw invalid_spec("mixture: component " + std::to_string(index) + " does not exist, " +
                         "there are " + std::to_string(size));
    }
    return tokens;
  }

  std::tuple<Components...> components_;
  std::array<double, size> weights_{};
  std::array<double, size> cumulative_{};
  double total_ = 0;
};

template <length_distribution... Components>
std::ostream& operator<<(std::ostream& os, const mixture<Components...>& m) {
  os << "mixture{";
  std::apply(
      [&](const auto&... component) {
        std::size_t i = 0;
        ((os << (i == 0 ? "" : ", ") << m.share(i) << " x " << component, ++i), ...);
      },
      m.components());
  return os << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
