#pragma once
// dcp::calibrated<M>: a cost model that refits M's time and memory, term by term, from what the
// framework measured (observe), and tightens the memory of a configuration that ran out of
// memory. It models dcp::cost_model, so every scheduler, recompute strategy and placement
// works on it unchanged.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/execution_report.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// How calibrated<M> fits.
struct calibration_options {
  /// Most recent observations kept (older ones are dropped, so the fit follows drift).
  std::size_t window = 256;
  /// Ridge pull toward M's own weights, relative to the mean squared relative residual: keeps
  /// terms the observations cannot tell apart at M's values.
  double prior_strength = 1e-3;
  /// Relative residual below which an observation always has full weight; beyond the larger of
  /// this and 1.345 robust standard deviations its weight falls as 1/residual (Huber).
  double robust_floor = 0.01;
  /// Predicted peaks cover every observed peak by this fraction.
  double memory_margin = 0.02;
  /// After an out-of-memory report, the shape that failed is predicted this much above capacity.
  double oom_margin = 0.05;
  /// Once peaks have been measured, the fraction of capacity kept free in place of the training
  /// spec's headroom_fraction (training_spec::headroom_bytes still applies). That headroom is
  /// there because reserved bytes exceed what a model counts (fragmentation,
  /// docs/cost-sources.md §8); measured peaks already include it, so only the low end of §8's
  /// 5-10 % is kept, for the variation between runs. Set it to the spec's fraction to keep the
  /// budget unchanged.
  double measured_headroom_fraction = 0.05;

  friend bool operator==(const calibration_options&, const calibration_options&) = default;
};

/// One micro-batch the framework ran: what it was and what it measured.
struct observation {
  micro_batch_shape shape{};
  execution_config config{};
  execution_report report{};  ///< seconds or peak_bytes of 0 mean "not measured"

  friend bool operator==(const observation&, const observation&) = default;
};

/// How well the current fit explains the observations it was made from.
struct calibration_report {
  std::size_t observations = 0;    ///< in the window
  std::size_t time_rows = 0;       ///< with measured seconds
  std::size_t memory_rows = 0;     ///< with measured peak bytes
  std::int64_t out_of_memory = 0;  ///< out-of-memory reports ever observed
  double time_rms_error = 0;       ///< of predicted / measured - 1, full-weight rows
  double time_max_error = 0;       ///< largest |predicted / measured - 1| over all rows
  double memory_safety = 1;        ///< factor that makes predicted peaks cover the measured
};

namespace detail {

/// M's time terms, or the whole time as one term for a model that does not split it.
template <class M>
struct time_terms_of {
  static constexpr std::size_t count = 1;
  static constexpr std::array<double, 1> priors{1.0};
  static constexpr std::array<std::string_view, 1> names{"seconds"};
  [[nodiscard]] static std::array<double, 1> values(const M& m, const micro_batch_shape& s,
                                                    const execution_config& c) {
    return {static_cast<double>(m.seconds(s, c))};
  }
  [[nodiscard]] static std::array<double, 1> marginals(const M& m, const micro_batch_shape& s,
                                                       const execution_config& c) {
    if constexpr (requires { m.marginal_seconds(s, c); })
      return {static_cast<double>(m.marginal_seconds(s, c))};
    else
      return {static_cast<double>(m.seconds(s, c)) -
              static_cast<double>(m.seconds(micro_batch_shape{}, c))};
  }
};

template <has_time_terms M>
struct time_terms_of<M> {
  static constexpr std::size_t count = M::time_term_count;
  static constexpr std::array<double, count> priors = M::time_term_priors;
  static constexpr std::array<std::string_view, count> names = M::time_term_names;
  [[nodiscard]] static std::array<double, count> values(const M& m, const micro_batch_shape& s,
                                                        const execution_config& c) {
    return m.time_terms(s, c);
  }
  [[nodiscard]] static std::array<double, count> marginals(const M& m, const micro_batch_shape& s,
                                                           const execution_config& c) {
    return m.marginal_time_terms(s, c);
  }
};

/// M's memory terms (the first one static, the others growing with the micro-batch), or the
/// whole peak as one term.
template <class M>
struct memory_terms_of {
  static constexpr std::size_t count = 1;
  static constexpr std::array<std::string_view, 1> names{"peak"};
  [[nodiscard]] static std::array<double, 1> values(const M& m, const micro_batch_shape& s,
                                                    const execution_config& c) {
    return {static_cast<double>(m.peak_bytes(s, c))};
  }
};

template <has_memory_terms M>
struct memory_terms_of<M> {
  static constexpr std::size_t count = M::memory_term_count;
  static constexpr std::array<std::string_view, count> names = M::memory_term_names;
  [[nodiscard]] static std::array<double, count> values(const M& m, const micro_batch_shape& s,
                                                        const execution_config& c) {
    return m.memory_terms(s, c);
  }
};

template <std::size_t K>
using square_matrix = std::array<std::array<double, K>, K>;

/// Solves A_FF x = b_F on the indices where `free` is set (Gaussian elimination with partial
/// pivoting); the result is scattered back to K entries, 0 elsewhere.
template <std::size_t K>
[[nodiscard]] std::array<double, K> solve_on_free_set(const square_matrix<K>& a,
                                                      const std::array<double, K>& b,
                                                      const std::array<bool, K>& free) {
  std::array<std::size_t, K> index{};
  std::size_t n = 0;
  for (std::size_t k = 0; k < K; ++k)
    if (free[k]) index[n++] = k;
  std::array<std::array<double, K + 1>, K> m{};
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) m[i][j] = a[index[i]][index[j]];
    m[i][n] = b[index[i]];
  }
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    std::swap(m[col], m[pivot]);
    for (std::size_t r = col + 1; r < n; ++r) {
      const double f = m[r][col] / m[col][col];
      for (std::size_t j = col; j <= n; ++j) m[r][j] -= f * m[col][j];
    }
  }
  std::array<double, K> packed{};
  for (std::size_t i = n; i-- > 0;) {
    double v = m[i][n];
    for (std::size_t j = i + 1; j < n; ++j) v -= m[i][j] * packed[j];
    packed[i] = v / m[i][i];
  }
  std::array<double, K> out{};
  for (std::size_t i = 0; i < n; ++i) out[index[i]] = packed[i];
  return out;
}

/// The clamped index whose gradient (Aw - b) is most negative (it wants to grow), or K if none.
template <std::size_t K>
[[nodiscard]] std::size_t most_violating(const square_matrix<K>& a, const std::array<double, K>& b,
                                         const std::array<bool, K>& free,
                                         const std::array<double, K>& w) {
  std::size_t best = K;
  double most = -1e-15;
  for (std::size_t k = 0; k < K; ++k) {
    if (free[k]) continue;
    double g = -b[k];
    for (std::size_t j = 0; j < K; ++j) g += a[k][j] * w[j];
    if (g < most) {
      most = g;
      best = k;
    }
  }
  return best;
}

/// argmin over w >= 0 of  1/2 w'Aw - b'w  for a symmetric positive definite A (K small): an
/// active-set method — solve on the free set, clamp what turns negative, free a clamped weight
/// whose gradient points inward, repeat.
template <std::size_t K>
[[nodiscard]] std::array<double, K> nonnegative_quadratic_minimum(const square_matrix<K>& a,
                                                                  const std::array<double, K>& b) {
  std::array<bool, K> free{};
  free.fill(true);
  std::array<double, K> w{};
  for (std::size_t round = 0; round < 4 * K + 4; ++round) {
    w = solve_on_free_set(a, b, free);
    bool clamped = false;
    for (std::size_t k = 0; k < K; ++k) {
      if (free[k] && w[k] < 0) {
        free[k] = false;
        w[k] = 0;
        clamped = true;
      }
    }
    if (clamped) continue;
    const std::size_t grow = most_violating(a, b, free, w);
    if (grow == K) break;
    free[grow] = true;
  }
  return w;
}

/// The normal equations of  sum_i weight_i (1 - x_i . w)^2 / sum_i weight_i
///   + strength sum_k scale_k (w_k - prior_k)^2,  with w_k pinned to prior_k where scale_k = 0.
template <std::size_t K>
[[nodiscard]] std::pair<square_matrix<K>, std::array<double, K>> normal_equations(
    const std::vector<std::array<double, K>>& rows, const std::vector<double>& weight,
    const std::array<double, K>& scale, const std::array<double, K>& prior, double strength) {
  square_matrix<K> a{};
  std::array<double, K> b{};
  double total = 0;
  for (const double wi : weight) total += wi;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double wi = weight[i] / total;
    for (std::size_t j = 0; j < K; ++j) {
      b[j] += wi * rows[i][j];
      for (std::size_t k = 0; k < K; ++k) a[j][k] += wi * rows[i][j] * rows[i][k];
    }
  }
  for (std::size_t k = 0; k < K; ++k) {
    if (!(scale[k] > 0)) {  // never seen: a unit row pins w_k to its prior
      for (std::size_t j = 0; j < K; ++j) a[k][j] = a[j][k] = 0;
      a[k][k] = 1;
      b[k] = prior[k];
      continue;
    }
    a[k][k] += strength * scale[k];
    b[k] += strength * scale[k] * prior[k];
  }
  return {a, b};
}

/// Huber weights for the relative residuals |x_i . w - 1|: 1 up to the larger of `floor` and
/// 1.345 robust standard deviations (from the median absolute residual), then threshold/residual.
template <std::size_t K>
[[nodiscard]] std::vector<double> huber_weights(const std::vector<std::array<double, K>>& rows,
                                                const std::array<double, K>& w, double floor) {
  std::vector<double> residual(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double predicted = 0;
    for (std::size_t k = 0; k < K; ++k) predicted += rows[i][k] * w[k];
    residual[i] = std::abs(predicted - 1.0);
  }
  auto sorted = residual;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  const double threshold = std::max(floor, 1.345 * 1.4826 * *middle);
  std::vector<double> weight(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    weight[i] = residual[i] <= threshold ? 1.0 : threshold / residual[i];
  return weight;
}

/// Weighted ridge fit of x_i . w ~= 1 (x_i = terms / measured, so residuals are relative), w >= 0,
/// pulled toward `prior`, with Huber reweighting when `robust`. Terms never seen keep their prior.
template <std::size_t K>
[[nodiscard]] std::array<double, K> fit_relative(const std::vector<std::array<double, K>>& rows,
                                                 const std::array<double, K>& prior,
                                                 const calibration_options& options, bool robust) {
  if (rows.empty()) return prior;
  std::array<double, K> scale{};  // mean square of each term, for the ridge's units
  for (const auto& x : rows)
    for (std::size_t k = 0; k < K; ++k) scale[k] += x[k] * x[k] / static_cast<double>(rows.size());
  std::vector<double> weight(rows.size(), 1.0);
  std::array<double, K> w = prior;
  for (int iteration = 0; iteration < 50; ++iteration) {
    const auto [a, b] = normal_equations(rows, weight, scale, prior, options.prior_strength);
    const auto next = nonnegative_quadratic_minimum(a, b);
    double change = 0;
    for (std::size_t k = 0; k < K; ++k)
      change = std::max(change, std::abs(next[k] - w[k]) * std::sqrt(scale[k]));
    w = next;
    if (!robust || (iteration > 0 && change < 1e-12)) break;
    weight = huber_weights(rows, w, options.robust_floor);
  }
  return w;
}

}  // namespace detail

/// M with its time and memory refitted from measurements.
///
/// Time: M's time terms (M::time_terms, e.g. analytic_cost_model's dense, attention,
/// communication, latency, overhead and three effects it leaves out), each with its own weight,
/// fitted to the observed seconds by a robust (Huber) non-negative ridge regression on relative
/// error, pulled toward M's own weights; a model without terms gets one weight. Memory: M's
/// memory terms (static, activations) refitted the same way, then scaled so that every observed
/// peak is covered with `memory_margin`. An observation with out_of_memory set raises the
/// activation memory of its (degree, sequence-parallel) configuration until the shape that
/// failed is predicted `oom_margin` above the GPU's capacity: plans made afterwards do not
/// repeat it. With no observations every prediction is M's.
///
/// observe() refits at once; the scheduler copies its cost model, so hand the updated model to
/// it (DataCentricScheduler::set_cost) — run_calibrated_step (dcp/runtime/calibrated_step.hpp)
/// does this on every rank with the same observations, so plans keep agreeing.
template <cost_model M>
class calibrated {
  using time_basis = detail::time_terms_of<M>;
  using memory_basis = detail::memory_terms_of<M>;

 public:
  static constexpr std::size_t time_term_count = time_basis::count;
  static constexpr std::size_t memory_term_count = memory_basis::count;

  explicit calibrated(M base, calibration_options options = {})
      : base_(std::move(base)), options_(options) {
    if (options_.window < 1) throw invalid_spec("calibration options: window = 0, must be >= 1");
    const auto check = [](double value, const char* field) {
      if (!(value >= 0) || !std::isfinite(value))
        throw invalid_spec(std::string("calibration options: ") + field + " = " +
                           std::to_string(value) + ", must be >= 0 and finite");
    };
    check(options_.prior_strength, "prior_strength");
    check(options_.robust_floor, "robust_floor");
    check(options_.memory_margin, "memory_margin");
    check(options_.oom_margin, "oom_margin");
    check(options_.measured_headroom_fraction, "measured_headroom_fraction");
    if (options_.measured_headroom_fraction >= 1)
      throw invalid_spec("calibration options: measured_headroom_fraction = " +
                         std::to_string(options_.measured_headroom_fraction) + ", must be < 1");
    time_weights_ = time_basis::priors;
    memory_weights_.fill(1.0);
  }

  [[nodiscard]] const M& base() const noexcept { return base_; }
  [[nodiscard]] const calibration_options& options() const noexcept { return options_; }
  [[nodiscard]] const model_spec& model() const noexcept { return base_.model(); }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return base_.cluster(); }
  [[nodiscard]] const training_spec& training() const noexcept { return base_.training(); }
  /// M's budget until a peak has been measured; then capacity minus the larger of the spec's
  /// headroom_bytes and measured_headroom_fraction of capacity.
  [[nodiscard]] double memory_budget() const noexcept {
    if (!memory_measured_) return static_cast<double>(base_.memory_budget());
    const double capacity = static_cast<double>(cluster().gpu.memory_bytes);
    return capacity -
           std::max(training().headroom_bytes, options_.measured_headroom_fraction * capacity);
  }

  // ---- predictions --------------------------------------------------------------------------

  /// The refitted terms, or M's host time where that is longer (M's `host_seconds(config)`,
  /// when M has time terms and that member: the terms are then its device time, and a
  /// measurement of a host-bound micro-step says nothing about them), or M's per-micro-step
  /// parameter gathers (ZeRO-3) where those are longer still.
  [[nodiscard]] double seconds(const micro_batch_shape& s, const execution_config& c) const {
    return std::max({host_floor(c), device_seconds(s, c), parameter_gather_seconds()});
  }

  /// cost_model optional member 9: the refitted terms (the device's time, where M has a host
  /// time), and those of an empty micro-step (with no host time in M, seconds of it).
  [[nodiscard]] double device_seconds(const micro_batch_shape& s, const execution_config& c) const {
    const auto t = time_basis::values(base_, s, c);
    double out = 0;
    for (std::size_t k = 0; k < time_term_count; ++k) out += time_weights_[k] * t[k];
    return std::max(0.0, out);
  }
  /// The refitted terms of an empty micro-step.
  [[nodiscard]] double fixed_seconds(const execution_config& c) const {
    return device_seconds(micro_batch_shape{}, c);
  }

  /// A floor on what s adds to any micro-batch under c: the terms' own floors, reweighted.
  [[nodiscard]] double marginal_seconds(const micro_batch_shape& s,
                                        const execution_config& c) const {
    const auto t = time_basis::marginals(base_, s, c);
    double out = 0;
    for (std::size_t k = 0; k < time_term_count; ++k) out += time_weights_[k] * t[k];
    return std::max(0.0, out);
  }

  [[nodiscard]] double peak_bytes(const micro_batch_shape& s, const execution_config& c) const {
    const auto [fixed, growing] = memory_parts(s, c);
    return (fixed + growing * tightening_of(c)) * memory_safety_;
  }

  /// M's gradient synchronisation, unchanged (measured per step, not per micro-batch); 0, the
  /// scheduler's default, for a model without one.
  [[nodiscard]] double gradient_sync_seconds() const {
    if constexpr (requires { base_.gradient_sync_seconds(); })
      return static_cast<double>(base_.gradient_sync_seconds());
    else
      return 0.0;
  }
  /// M's collectives in every micro-step (ZeRO-3's parameter gathers), unchanged; 0 for a model
  /// without them.
  [[nodiscard]] double parameter_gather_seconds() const {
    if constexpr (requires { base_.parameter_gather_seconds(); })
      return static_cast<double>(base_.parameter_gather_seconds());
    else
      return 0.0;
  }

  // ---- calibration --------------------------------------------------------------------------

  /// Adds one measured micro-batch and refits. Throws invalid_spec naming the field and value
  /// for a config that cannot run on the cluster, a malformed shape or a negative, infinite or
  /// NaN measurement.
  void observe(const observation& o) { observe(std::span<const observation>(&o, 1)); }

  /// Adds measured micro-batches (in order) and refits once: O(window x terms²) per call. A call
  /// with more than `window` measured micro-batches (a whole step on a large cluster) keeps an
  /// evenly spaced subset of them, so the window stays a sample of the whole step rather than of
  /// its last micro-steps.
  /// An empty micro-step (a lockstep round's padding, plan/lockstep.hpp: no samples, no tokens)
  /// is skipped: its time is the collectives it waits in, which no term describes.
  void observe(std::span<const observation> observations) {
    for (std::size_t i = 0; i < observations.size(); ++i)
      if (!is_padding(observations[i])) validate(observations[i], i);
    std::vector<const observation*> measured;
    for (const auto& o : observations) {
      if (is_padding(o)) continue;
      if (o.report.out_of_memory) {
        ++out_of_memory_;
        out_of_memory_shapes_.push_back(o);
      } else {
        measured.push_back(&o);
      }
    }
    const std::size_t n = measured.size();
    const std::size_t take = std::min(n, options_.window);
    for (std::size_t i = 0; i < take; ++i) window_.push_back(*measured[i * n / take]);
    // Keep the most recent `window` of each (one erase per call, not per observation).
    const auto keep_recent = [&](std::vector<observation>& v) {
      if (v.size() > options_.window)
        v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() - options_.window));
    };
    keep_recent(window_);
    keep_recent(out_of_memory_shapes_);
    refit();
  }

  /// The measured micro-batches the fit uses (the window), oldest first.
  [[nodiscard]] const std::vector<observation>& observations() const noexcept { return window_; }

  /// The weight of M's host time: 1 before any observation, then the least-error fit of refit().
  [[nodiscard]] double host_weight() const noexcept { return host_weight_; }

  /// The current weight of each time term (M's terms, in M::time_term_names order).
  [[nodiscard]] const std::array<double, time_term_count>& time_weights() const noexcept {
    return time_weights_;
  }
  [[nodiscard]] static constexpr std::array<std::string_view, time_term_count>
  time_term_names() noexcept {
    return time_basis::names;
  }
  [[nodiscard]] const std::array<double, memory_term_count>& memory_weights() const noexcept {
    return memory_weights_;
  }
  [[nodiscard]] static constexpr std::array<std::string_view, memory_term_count>
  memory_term_names() noexcept {
    return memory_basis::names;
  }
  /// The factor on activation memory of (degree, sp) configurations from out-of-memory reports
  /// (1 when none).
  [[nodiscard]] double tightening_of(const execution_config& c) const noexcept {
    for (const auto& t : tightenings_)
      if (t.degree == c.degree && t.sp == c.sp) return t.factor;
    return 1.0;
  }
  [[nodiscard]] calibration_report report() const {
    calibration_report r;
    r.observations = window_.size();
    r.out_of_memory = out_of_memory_;
    r.memory_safety = memory_safety_;
    double sum = 0;
    std::size_t full = 0;
    for (const auto& o : window_) {
      if (o.report.peak_bytes > 0) ++r.memory_rows;
      if (!(o.report.seconds > 0)) continue;
      ++r.time_rows;
      const double e = std::abs(seconds(o.shape, o.config) / o.report.seconds - 1.0);
      r.time_max_error = std::max(r.time_max_error, e);
      sum += e * e;
      ++full;
    }
    r.time_rms_error = full > 0 ? std::sqrt(sum / static_cast<double>(full)) : 0.0;
    return r;
  }

 private:
  struct tightening {
    std::int64_t degree = 1;
    sequence_parallel sp = sequence_parallel::ulysses;
    double factor = 1;
  };

  /// The refitted memory before tightening and safety: what stays for the step (M's first memory
  /// term, when M splits its peak) and what grows with the micro-batch (the rest).
  struct memory_split {
    double fixed = 0;
    double growing = 0;
  };
  [[nodiscard]] memory_split memory_parts(const micro_batch_shape& s,
                                          const execution_config& c) const {
    const auto m = memory_basis::values(base_, s, c);
    memory_split out;
    for (std::size_t k = 0; k < memory_term_count; ++k)
      (k == 0 && memory_term_count > 1 ? out.fixed : out.growing) += memory_weights_[k] * m[k];
    return out;
  }

  [[nodiscard]] static bool is_padding(const observation& o) noexcept {
    return o.shape.samples == 0 && o.shape.tokens == 0 && o.shape.longest == 0 &&
           o.shape.attention_pairs == 0;
  }

  void validate(const observation& o, std::size_t index) const {
    const auto where = [&] { return "observation " + std::to_string(index) + ": "; };
    try {
      dcp::validate(o.config, model(), cluster());
    } catch (const invalid_spec& e) {
      throw invalid_spec(where() + e.what());
    }
    const auto& s = o.shape;
    if (s.samples < 1 || s.tokens < s.samples || s.longest < 1 || s.longest > s.tokens ||
        !(s.attention_pairs >= 0) || !std::isfinite(s.attention_pairs))
      throw invalid_spec(where() + "shape has samples = " + std::to_string(s.samples) +
                         ", tokens = " + std::to_string(s.tokens) +
                         ", longest = " + std::to_string(s.longest) +
                         ", pairs = " + std::to_string(s.attention_pairs) +
                         "; needs 1 <= samples <= tokens, 1 <= longest <= tokens, pairs >= 0");
    const auto measured = [&](double value, const char* field) {
      if (!(value >= 0) || !std::isfinite(value))
        throw invalid_spec(where() + "report." + field + " = " + std::to_string(value) +
                           ", must be >= 0 and finite (0 = not measured)");
    };
    measured(o.report.seconds, "seconds");
    measured(o.report.peak_bytes, "peak_bytes");
  }

  [[nodiscard]] double base_host(const execution_config& c) const {
    if constexpr (detail::has_time_terms<M> && requires(const M& m) { m.host_seconds(c); }) {
      return static_cast<double>(base_.host_seconds(c));
    } else {
      return 0.0;
    }
  }
  [[nodiscard]] double host_floor(const execution_config& c) const {
    return host_weight_ * base_host(c);
  }
  /// What a micro-step lasts at least whatever its samples: the host floor or M's per-micro-step
  /// collectives (ZeRO-3's parameter gathers), whichever is longer.
  [[nodiscard]] double floor(const execution_config& c) const {
    return std::max(host_floor(c), parameter_gather_seconds());
  }

  /// The host weight of refit(): keeps 1 when M has no host time or nothing was measured.
  void fit_host_weight() {
    struct row {
      double host, device, measured;
    };
    std::vector<row> rows;
    const double gather = parameter_gather_seconds();
    for (const auto& o : window_) {
      const double host = base_host(o.config);
      if (o.report.seconds > 0 && host > 0)
        rows.push_back({host, device_seconds(o.shape, o.config), o.report.seconds});
    }
    host_weight_ = 1.0;
    if (rows.empty()) return;
    const auto error = [&](double w) {
      double sum = 0;
      for (const auto& r : rows)
        sum += std::abs(std::max({w * r.host, r.device, gather}) / r.measured - 1.0);
      return sum;
    };
    double best = error(1.0);
    double best_distance = 0;
    for (int k = -400; k <= 170; ++k) {  // w = 10^(k/100): 1e-4 .. 50
      const double w = std::pow(10.0, k / 100.0);
      const double e = error(w);
      const double distance = std::abs(static_cast<double>(k));
      if (e < best * (1.0 - 1e-9) || (e <= best * (1.0 + 1e-9) && distance < best_distance)) {
        best = std::min(best, e);
        best_distance = distance;
        host_weight_ = w;
      }
    }
  }

  /// The device terms from the micro-steps the host time (M's, times the host weight) and M's
  /// parameter gathers cannot explain — measured more than 1/0.7 of the longer: a host- or
  /// gather-bound one tells nothing about them — and
  /// the host weight that best explains every measurement with the longer of the two (least
  /// mean absolute relative error over a log grid of 1e-4..50; among equally good weights the
  /// one closest to 1, M's own), twice, starting from M's host time. When M's host time leaves
  /// fewer than half the measurements to the device terms, M's host time is off by more than
  /// the measurements allow (a slower or faster machine than M describes), and the first round
  /// fits the device terms on all of them.
  void refit() {
    std::vector<std::array<double, memory_term_count>> memory_rows;
    for (const auto& o : window_) {
      if (o.report.peak_bytes > 0) {
        auto x = memory_basis::values(base_, o.shape, o.config);
        for (auto& v : x) v /= o.report.peak_bytes;
        memory_rows.push_back(x);
      }
    }
    host_weight_ = 1.0;
    for (int round = 0; round < 2; ++round) {
      std::vector<std::array<double, time_term_count>> time_rows;
      std::size_t measured = 0;
      const auto rows_where = [&](bool all) {
        time_rows.clear();
        measured = 0;
        for (const auto& o : window_) {
          if (!(o.report.seconds > 0)) continue;
          ++measured;
          if (!all && !(floor(o.config) < 0.7 * o.report.seconds)) continue;
          auto x = time_basis::values(base_, o.shape, o.config);
          for (auto& v : x) v /= o.report.seconds;
          time_rows.push_back(x);
        }
      };
      rows_where(false);
      if (round == 0 && 2 * time_rows.size() < measured) rows_where(true);
      time_weights_ = detail::fit_relative(time_rows, time_basis::priors, options_, true);
      fit_host_weight();
    }
    std::array<double, memory_term_count> memory_prior{};
    memory_prior.fill(1.0);
    memory_weights_ = detail::fit_relative(memory_rows, memory_prior, options_, false);

    // Cover every observed peak.
    memory_safety_ = 1.0;
    tightenings_.clear();
    memory_measured_ = !memory_rows.empty();
    if (memory_measured_) {
      double worst = 0;
      for (const auto& o : window_) {
        if (!(o.report.peak_bytes > 0)) continue;
        worst = std::max(worst, o.report.peak_bytes / peak_bytes(o.shape, o.config));
      }
      memory_safety_ = std::max(1.0, worst) * (1.0 + options_.memory_margin);
    }
    // Re-derive each configuration's tightening from the out-of-memory reports kept.
    const double target =
        static_cast<double>(cluster().gpu.memory_bytes) * (1.0 + options_.oom_margin);
    for (const auto& o : out_of_memory_shapes_) {
      auto [fixed, growing] = memory_parts(o.shape, o.config);
      fixed *= memory_safety_;
      growing *= memory_safety_;
      if (!(growing > 0)) continue;
      const double needed = std::max(1.0, (target - fixed) / growing);
      auto it = std::find_if(tightenings_.begin(), tightenings_.end(), [&](const tightening& t) {
        return t.degree == o.config.degree && t.sp == o.config.sp;
      });
      if (it == tightenings_.end())
        tightenings_.push_back({o.config.degree, o.config.sp, needed});
      else
        it->factor = std::max(it->factor, needed);
    }
  }

  M base_;
  calibration_options options_;
  std::array<double, time_term_count> time_weights_{};
  double host_weight_ = 1.0;  ///< M's host time is scaled by this (refit's least-error search)
  std::array<double, memory_term_count> memory_weights_{};
  double memory_safety_ = 1.0;
  bool memory_measured_ = false;
  std::vector<tightening> tightenings_;
  std::vector<observation> window_;
  std::vector<observation> out_of_memory_shapes_;
  std::int64_t out_of_memory_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
