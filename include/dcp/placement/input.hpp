#pragma once
// placement_input: what every placement policy works from (ours, the peers' and the bounds),
// built once per plan by the scheduler. The batch in canonical order with its bucket labels,
// the cost model and the recompute strategy; the degrees and styles the cluster allows; and
// per-sample options (degree -> recompute, seconds, bytes), computed once per (run of equal
// shapes, degree) when first asked for.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/concepts/recompute_strategy.hpp"
#include "dcp/placement/degree_option.hpp"
#include "dcp/placement/detail/does_not_fit.hpp"
#include "dcp/placement/detail/option_cache.hpp"
#include "dcp/placement/detail/packing_density.hpp"
#include "dcp/placement/scratch.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// What a placement is planned for: the batch in canonical order (tokens descending, then id),
/// a bucket label per sample, the cost model and the recompute strategy.
template <cost_model M, recompute_strategy<M> R>
struct placement_problem {
  std::span<const sample> samples;
  std::span<const std::int32_t> buckets;
  const M& cost;
  const R& recompute;
};

template <cost_model M, recompute_strategy<M> R>
class placement_input {
 public:
  using cost_type = M;
  using recompute_type = R;
  using packing = packing_settings;

  /// The input of `problem`, working in `scratch`: memory the caller lends for as long as the
  /// input lives (the scheduler's, taken from its workspace for a large batch), which holds the
  /// input's per-sample tables and the shipped placement's arrays.
  placement_input(const placement_problem<M, R>& problem, placement_scratch& scratch)
      : placement_input(problem, &scratch) {}
  /// The input of `problem` with scratch memory of its own.
  explicit placement_input(const placement_problem<M, R>& problem)
      : placement_input(problem, nullptr) {}
  /// `base` as if its training run named `style`: the degrees and styles that style allows
  /// (under an automatic run, one fixed style's layouts: balanced_placement searches static
  /// layouts in each). It shares base's per-sample tables and scratch; base must outlive it.
  placement_input(const placement_input& base, sequence_parallel style)
      : samples_(base.samples_),
        buckets_(base.buckets_),
        cost_(base.cost_),
        recompute_(base.recompute_),
        sp_(style),
        gpus_(base.gpus_),
        gpus_per_node_(base.gpus_per_node_),
        budget_(base.budget_),
        degrees_(allowed_degrees(cost_.model(), cost_.cluster(), sp_)),
        scratch_(base.scratch_),
        shapes_(base.shapes_),
        run_of_(base.run_of_),
        run_first_(base.run_first_) {
    tabulate_styles();
  }

  placement_input(const placement_input&) = delete;
  placement_input& operator=(const placement_input&) = delete;

  // ---- the problem ----------------------------------------------------------------------------
  [[nodiscard]] std::span<const dcp::sample> samples() const noexcept { return samples_; }
  [[nodiscard]] const dcp::sample& sample(std::size_t i) const noexcept { return samples_[i]; }
  [[nodiscard]] std::span<const std::int32_t> buckets() const noexcept { return buckets_; }
  [[nodiscard]] const M& cost() const noexcept { return cost_; }
  [[nodiscard]] const R& recompute() const noexcept { return recompute_; }
  /// The scratch memory lent with the input (placement_scratch): a placement may work in its
  /// arrays, one placement at a time, except the input's own tables (shapes, run_of).
  [[nodiscard]] placement_scratch& scratch() const noexcept { return *scratch_; }

  [[nodiscard]] std::size_t size() const noexcept { return shapes_.size(); }
  [[nodiscard]] const micro_batch_shape& shape(std::size_t i) const noexcept { return shapes_[i]; }
  /// The first sample of the run of equal shapes sample i is in (canonical order puts equal
  /// lengths side by side): everything computed from a sample's shape alone is computed once
  /// per run. (Indices fit 32 bits, as in the packer.)
  [[nodiscard]] std::size_t first_alike(std::size_t i) const noexcept {
    return run_first_[run_of_[i]];
  }
  [[nodiscard]] std::int32_t bucket(std::size_t i) const noexcept { return buckets_[i]; }
  /// The order samples are packed in, bucket descending then index: empty when that is index
  /// order (buckets never increase along the canonical order, the usual case), else computed
  /// once.
  [[nodiscard]] const std::vector<std::size_t>& packing_order() const {
    if (!order_known_) {
      const auto& b = buckets_;
      if (!std::is_sorted(b.begin(), b.end(), std::greater<>{})) {
        packing_order_.resize(shapes_.size());
        for (std::size_t i = 0; i < packing_order_.size(); ++i) packing_order_[i] = i;
        std::stable_sort(packing_order_.begin(), packing_order_.end(),
                         [&](std::size_t x, std::size_t y) { return b[x] > b[y]; });
      }
      order_known_ = true;
    }
    return packing_order_;
  }

  // ---- the cluster's degrees and styles -------------------------------------------------------
  [[nodiscard]] const std::vector<std::int64_t>& degrees() const noexcept { return degrees_; }
  [[nodiscard]] std::int64_t degree(std::size_t k) const noexcept { return degrees_[k]; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return gpus_; }
  [[nodiscard]] std::int64_t gpus_per_node() const noexcept { return gpus_per_node_; }
  [[nodiscard]] bool crosses_nodes(std::size_t k) const noexcept {
    return degrees_[k] > gpus_per_node_;
  }
  [[nodiscard]] double budget() const noexcept { return budget_; }
  /// The training run's style (sequence_parallel::automatic: chosen per micro-batch).
  [[nodiscard]] sequence_parallel sp() const noexcept { return sp_; }
  /// How many styles a micro-batch at degree index k may run (1 unless the style is automatic).
  [[nodiscard]] std::size_t style_count(std::size_t k) const noexcept { return styles_[k].size(); }
  [[nodiscard]] sequence_parallel style(std::size_t k, std::size_t j) const noexcept {
    return styles_[k][j].sp;
  }
  /// An empty micro-batch's time at degree index k in its default style (the first).
  [[nodiscard]] double empty_seconds(std::size_t k) const noexcept {
    return styles_[k].front().empty_seconds;
  }
  /// An empty micro-batch's time, and the fixed part of cost_model requirement 5, at degree
  /// index k in its j-th style, without recomputation.
  [[nodiscard]] double empty_seconds(std::size_t k, std::size_t j) const noexcept {
    return styles_[k][j].empty_seconds;
  }
  [[nodiscard]] double fixed_seconds(std::size_t k, std::size_t j) const noexcept {
    return styles_[k][j].fixed_seconds;
  }
  /// The least fixed part (cost_model requirement 5) of a micro-step at degree index k without
  /// recomputation, over the styles it may run.
  [[nodiscard]] double least_fixed_seconds(std::size_t k) const noexcept {
    double least = styles_[k].front().fixed_seconds;
    for (const auto& s : styles_[k]) least = std::min(least, s.fixed_seconds);
    return least;
  }
  [[nodiscard]] double empty_bytes(std::size_t k) const noexcept { return empty_bytes_[k]; }

  /// The config at degree index k in its default style (the first of styles_at).
  [[nodiscard]] execution_config config(std::size_t k, recompute_setting r = {}) const noexcept {
    return {degrees_[k], styles_[k].front().sp, r};
  }
  [[nodiscard]] execution_config config(std::size_t k, recompute_setting r,
                                        sequence_parallel sp) const noexcept {
    return {degrees_[k], sp, r};
  }
  /// The config a degree_option at degree index k runs with.
  [[nodiscard]] execution_config config_of(std::size_t k, const degree_option& o) const noexcept {
    return {degrees_[k], o.sp, o.recompute};
  }

  // ---- options --------------------------------------------------------------------------------
  /// evaluate() of sample i alone at degree index k, computed once per (run of equal shapes,
  /// degree) (detail::option_cache).
  [[nodiscard]] const degree_option& alone(std::size_t i, std::size_t k) const {
    const std::size_t run = run_of_[i];
    if (const auto* known = alone_.find(run, k)) return *known;
    return alone_.store(run, k, evaluate(shapes_[run_first_[run]], k));
  }
  /// marginal_seconds of sample i run as alone(i, k), computed once per (run of equal shapes,
  /// degree): the static search and the bound both ask for it.
  [[nodiscard]] double alone_marginal(std::size_t i, std::size_t k) const {
    const std::size_t run = run_of_[i];
    const auto& option = alone(i, k);
    return alone_.marginal(run, k, [&] { return marginal_seconds(run_first_[run], option, k); });
  }

  /// A floor on the time sample i, run as degree_option `o` at degree index k, adds to any
  /// micro-batch: the cost model's `marginal_seconds` when it has one, otherwise its seconds
  /// minus those of an empty micro-batch with the same setting (cost_model requirement 5).
  [[nodiscard]] double marginal_seconds(std::size_t i, const degree_option& o,
                                        std::size_t k) const {
    const auto c = config_of(k, o);
    if constexpr (requires { cost_.marginal_seconds(shapes_[i], c); }) {
      return cost_.marginal_seconds(shapes_[i], c);
    } else {
      const double empty = o.recompute.is_none() ? layout_of(k, o.sp).empty_seconds
                                                 : cost_.seconds(micro_batch_shape{}, c);
      return std::max(o.seconds - empty, 0.0);
    }
  }

  /// Peak bytes of `shape` at degree index k in style `sp` if the recompute strategy runs it
  /// with exactly `setting` and it fits the budget; nullopt otherwise. The budget check comes
  /// first: it is one cost-model call and rejects most attempts.
  [[nodiscard]] std::optional<double> runs_with(const micro_batch_shape& shape, std::size_t k,
                                                recompute_setting setting,
                                                sequence_parallel sp) const {
    const double bytes = cost_.peak_bytes(shape, config(k, setting, sp));
    if (bytes > budget_) return std::nullopt;
    if constexpr (!fit_decides_v<R>) {
      const auto chosen = recompute_.choose(cost_, shape, config(k, {}, sp));
      if (!chosen || *chosen != setting) return std::nullopt;
    }
    return bytes;
  }
  /// runs_with in the default style at degree index k.
  [[nodiscard]] std::optional<double> runs_with(const micro_batch_shape& shape, std::size_t k,
                                                recompute_setting setting) const {
    return runs_with(shape, k, setting, styles_[k].front().sp);
  }

  /// The setting a new micro-batch is opened with at degree index k for a sample that runs
  /// with `alone`: the degree's packing setting (packing_setting) where the sample alone gets
  /// the strategy's lightest setting, else the sample's own. The packer falls back to the
  /// lightest setting for a micro-batch that ends up fitting it (first_fit_packer::finish).
  [[nodiscard]] recompute_setting opening_setting(std::size_t k, const degree_option& alone) const {
    const auto& p = packing_setting(k);
    return alone.recompute == p.lightest ? p.dense : alone.recompute;
  }
  /// Whether degree index k has a dense packing setting other than its lightest: the packer
  /// then packs a group both ways and keeps the faster.
  [[nodiscard]] bool packs_denser(std::size_t k) const {
    const auto& p = packing_setting(k);
    return p.dense != p.lightest;
  }
  /// What short samples are packed with at degree index k: the recompute strategy's lightest
  /// setting (an empty micro-batch's) and the setting micro-batches of them are filled to. The
  /// dense setting is the one with the least time per token for a micro-batch filled to the
  /// budget with copies of a typical short sample (the batch's median, or the first shorter one
  /// that fits at the lightest setting) among the lightest and what the strategy chooses for
  /// 1.25 to 8 times as many copies as fit at the lightest — fewer, fuller micro-steps where the
  /// fixed cost per micro-step outweighs the recomputation, as selective recomputation does for
  /// 70B-class models under ZeRO-3 (docs/planner.md "Recomputation"). Kept only if at least 1 %
  /// faster per token. Only for strategies with fit_decides (a join is then checked against the
  /// budget at the micro-batch's setting; other strategies decide per union). Computed once per
  /// degree (detail::choose_packing).
  [[nodiscard]] const packing& packing_setting(std::size_t k) const {
    auto& p = packing_[k];
    if (!p) p = detail::choose_packing(*this, k);
    return *p;
  }

  /// Time and bytes of `shape` at degree index k with a given setting and style.
  [[nodiscard]] degree_option run(const micro_batch_shape& shape, std::size_t k,
                                  recompute_setting setting, sequence_parallel sp) const {
    const auto c = config(k, setting, sp);
    return {true, setting, cost_.seconds(shape, c), cost_.peak_bytes(shape, c), sp};
  }
  /// run() in the default style at degree index k.
  [[nodiscard]] degree_option run(const micro_batch_shape& shape, std::size_t k,
                                  recompute_setting setting) const {
    return run(shape, k, setting, styles_[k].front().sp);
  }
  /// run() for a shape whose peak `bytes` runs_with() has just returned at the same degree,
  /// setting and style: the same option without a second memory evaluation.
  [[nodiscard]] degree_option run_fitting(const micro_batch_shape& shape, std::size_t k,
                                          recompute_setting setting, sequence_parallel sp,
                                          double bytes) const {
    return {true, setting, cost_.seconds(shape, config(k, setting, sp)), bytes, sp};
  }
  /// run_fitting() in the default style at degree index k.
  [[nodiscard]] degree_option run_fitting(const micro_batch_shape& shape, std::size_t k,
                                          recompute_setting setting, double bytes) const {
    return run_fitting(shape, k, setting, styles_[k].front().sp, bytes);
  }

  /// The recompute strategy's setting for this shape at degree index k in style `sp`, with its
  /// time and bytes.
  [[nodiscard]] degree_option evaluate(const micro_batch_shape& shape, std::size_t k,
                                       sequence_parallel sp) const {
    const auto c = config(k, {}, sp);
    if constexpr (requires { recompute_.choose_fitting(cost_, shape, c); }) {
      // The shipped strategies give the setting with the bytes they have just checked
      // (recompute/strategies.hpp, chooses_by_fitting): one memory evaluation, not two.
      const auto chosen = recompute_.choose_fitting(cost_, shape, c);
      if (!chosen) return {};
      return run_fitting(shape, k, chosen->setting, sp, chosen->peak_bytes);
    } else {
      const auto chosen = recompute_.choose(cost_, shape, c);
      if (!chosen) return {};
      return run(shape, k, *chosen, sp);
    }
  }
  /// The fastest of evaluate(shape, k, style) over the styles degree index k allows: with an
  /// automatic style the cost model chooses the style per micro-batch as it chooses the degree.
  [[nodiscard]] degree_option evaluate(const micro_batch_shape& shape, std::size_t k) const {
    degree_option best{};
    for (const auto& e : styles_[k]) {
      auto o = evaluate(shape, k, e.sp);
      if (o.feasible && (!best.feasible || o.seconds < best.seconds)) best = o;
    }
    return best;
  }

  /// Time sample i adds to a micro-batch at degree index k, run as `alone`, with its share of
  /// the fixed per-micro-step cost in proportion to the activation memory it takes (the packer
  /// fills micro-batches to the budget, so that share is how many micro-steps it costs). Both
  /// from the device's time (cost_model optional member 9): a micro-batch filled to the budget
  /// hides the host's issue time that may decide the sample alone.
  [[nodiscard]] double packed_estimate(std::size_t i, std::size_t k,
                                       const degree_option& alone) const {
    const auto& at = layout_of(k, alone.sp);
    const double fixed = at.fixed_seconds;
    const double room = std::max(budget_ - at.empty_bytes, 1.0);
    const double share = std::clamp((alone.peak_bytes - at.empty_bytes) / room, 0.0, 1.0);
    double device = alone.seconds;
    if constexpr (requires { cost_.device_seconds(shapes_[i], config_of(k, alone)); })
      device = cost_.device_seconds(shapes_[i], config_of(k, alone));
    return std::max(device - fixed, 0.0) + fixed * share;
  }

  /// Throws sample_does_not_fit for sample i (detail::throw_does_not_fit).
  [[noreturn]] void throw_does_not_fit(std::size_t i) const {
    detail::throw_does_not_fit(*this, i);
  }

 private:
  // `scratch`: null for the input's own.
  placement_input(const placement_problem<M, R>& problem, placement_scratch* scratch)
      : samples_(problem.samples),
        buckets_(problem.buckets),
        cost_(problem.cost),
        recompute_(problem.recompute),
        sp_(cost_.training().sp),
        gpus_(cost_.cluster().gpus),
        gpus_per_node_(cost_.cluster().gpus_per_node),
        budget_(cost_.memory_budget()),
        degrees_(allowed_degrees(cost_.model(), cost_.cluster(), sp_)),
        scratch_(scratch != nullptr ? scratch : &own_) {
    tabulate_shapes();
    tabulate_styles();
  }

  // Each sample's shape and run of equal shapes, into the scratch.
  void tabulate_shapes() {
    auto& shapes = scratch_->shapes;
    auto& run_of = scratch_->run_of;
    shapes.clear();
    run_of.clear();
    shapes.reserve(samples_.size());
    run_of.reserve(samples_.size());
    for (const auto& s : samples_) {
      shapes.push_back(micro_batch_shape::of(s));
      const auto i = shapes.size() - 1;
      if (i == 0 || !(shapes[i] == shapes[i - 1]))
        run_first_storage_.push_back(static_cast<std::uint32_t>(i));
      run_of.push_back(static_cast<std::uint32_t>(run_first_storage_.size() - 1));
    }
    shapes_ = shapes;
    run_of_ = run_of;
    run_first_ = run_first_storage_;
  }
  // An empty micro-batch's costs in every style at every degree; the caches sized.
  void tabulate_styles() {
    for (auto d : degrees_) {
      auto& at = styles_.emplace_back();
      for (auto style : styles_at(sp_, d, cost_.model(), cost_.cluster())) {
        const execution_config c{d, style, {}};
        at.push_back({style, cost_.seconds(micro_batch_shape{}, c),
                      detail::fixed_seconds_of(cost_, c),
                      cost_.peak_bytes(micro_batch_shape{}, c)});
      }
      double empty = 0;
      for (const auto& e : at) empty = std::max(empty, e.empty_bytes);
      empty_bytes_.push_back(empty);
    }
    alone_.reset(degrees_.size(), run_first_.size());
    packing_.resize(degrees_.size());
  }

  /// An empty micro-batch's costs in one style at one degree.
  struct layout_costs {
    sequence_parallel sp;
    double empty_seconds;
    double fixed_seconds;  ///< cost_model requirement 5's fixed part
    double empty_bytes;
  };
  [[nodiscard]] const layout_costs& layout_of(std::size_t k, sequence_parallel sp) const noexcept {
    for (const auto& e : styles_[k])
      if (e.sp == sp) return e;
    return styles_[k].front();
  }

  std::span<const dcp::sample> samples_;
  std::span<const std::int32_t> buckets_;
  const M& cost_;
  const R& recompute_;
  sequence_parallel sp_;
  std::int64_t gpus_;
  std::int64_t gpus_per_node_;
  double budget_;
  std::vector<std::int64_t> degrees_;
  placement_scratch own_;  // the scratch of an input lent none
  placement_scratch* scratch_;
  std::span<const micro_batch_shape> shapes_;      // per sample, in the scratch
  std::span<const std::uint32_t> run_of_;          // per sample: its run of equal shapes
  std::vector<std::uint32_t> run_first_storage_;   // per run: its first sample (as many as lengths)
  std::span<const std::uint32_t> run_first_;       // run_first_storage_, or the base input's
  std::vector<std::vector<layout_costs>> styles_;  ///< per degree index, in styles_at order
  std::vector<double> empty_bytes_;  ///< per degree index, the largest over its styles
  mutable detail::option_cache alone_;
  mutable std::vector<std::optional<packing>> packing_;
  mutable std::vector<std::size_t> packing_order_;
  mutable bool order_known_ = false;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
