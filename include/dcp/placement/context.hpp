#pragma once
// The degree_option table every placement policy works from (ours, the peers' and the bounds): the
// degrees a cluster allows, per-sample options (degree -> recompute, seconds, bytes) computed
// once per (sample, degree), and the memory-budget packer.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "dcp/concepts/placement_policy.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/detail/largest_fitting.hpp"
#include "dcp/detail/prefetch.hpp"
#include "dcp/error.hpp"
#include "dcp/placement/detail/first_fit_index.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The result of asking "how does this micro-batch run at degree d".
struct degree_option {
  bool feasible = false;
  recompute_setting recompute{};
  double seconds = std::numeric_limits<double>::infinity();
  double peak_bytes = 0;
  sequence_parallel sp = sequence_parallel::ulysses;  ///< the style it runs with (moot at degree 1)
};

/// Powers of two up to the cluster size at which `sp` has a valid style (styles_at): Ulysses
/// degrees must also divide the head count.
[[nodiscard]] inline std::vector<std::int64_t> allowed_degrees(const model_spec& model,
                                                 const cluster_spec& cluster,
                                                 sequence_parallel sp) {
  std::vector<std::int64_t> degrees;
  for (std::int64_t d = 1; d <= cluster.gpus; d *= 2) {
    if (sp != sequence_parallel::ulysses || model.heads % d == 0) degrees.push_back(d);
    if (d > cluster.gpus / 2) break;  // the next d would pass gpus (and could overflow)
  }
  return degrees;
}

namespace detail {

[[nodiscard]] inline std::string format_gib(double bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << bytes / gib << " GiB";
  return os.str();
}

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
class placement_context {
public:
  explicit placement_context(const placement_problem<M, R>& problem)
      : placement_context(problem, problem.cost.training().sp) {}
  /// The context of `problem` as if its training run named `style`: the degrees and styles that
  /// style allows (under an automatic run, one fixed style's layouts: balanced_placement
  /// searches static layouts in each).
  placement_context(const placement_problem<M, R>& problem, sequence_parallel style)
      : problem_(problem),
        sp_(style),
        gpus_(problem.cost.cluster().gpus),
        gpus_per_node_(problem.cost.cluster().gpus_per_node),
        budget_(problem.cost.memory_budget()),
        degrees_(allowed_degrees(problem.cost.model(), problem.cost.cluster(), sp_)),
        workspace_(problem.workspace) {
    if (workspace_ != nullptr) {
      shapes_ = workspace_->take<micro_batch_shape>(problem.samples.size());
      run_of_ = workspace_->take<std::uint32_t>(problem.samples.size());
    }
    shapes_.reserve(problem.samples.size());
    run_of_.reserve(problem.samples.size());
    for (const auto& s : problem.samples) {
      shapes_.push_back(micro_batch_shape::of(s));
      const auto i = shapes_.size() - 1;
      if (i == 0 || !(shapes_[i] == shapes_[i - 1])) run_first_.push_back(static_cast<std::uint32_t>(i));
      run_of_.push_back(static_cast<std::uint32_t>(run_first_.size() - 1));
    }
    for (auto d : degrees_) {
      auto& at = styles_.emplace_back();
      for (auto style : styles_at(sp_, d, problem.cost.model(), problem.cost.cluster())) {
        const execution_config c{d, style, {}};
        at.push_back({style, problem.cost.seconds(micro_batch_shape{}, c),
                      detail::fixed_seconds_of(problem.cost, c), problem.cost.peak_bytes(micro_batch_shape{}, c)});
      }
      double empty = 0;
      for (const auto& e : at) empty = std::max(empty, e.empty_bytes);
      empty_bytes_.push_back(empty);
    }
    alone_.resize(degrees_.size());
    packing_.resize(degrees_.size());
    for (auto& column : alone_) column.resize((run_first_.size() + option_block::size - 1) / option_block::size);
  }

  placement_context(const placement_context&) = delete;
  placement_context& operator=(const placement_context&) = delete;
  /// Gives the per-sample tables back to the problem's workspace.
  ~placement_context() {
    if (workspace_ == nullptr) return;
    workspace_->give(std::move(shapes_));
    workspace_->give(std::move(run_of_));
  }

  [[nodiscard]] const placement_problem<M, R>& problem() const noexcept { return problem_; }
  [[nodiscard]] std::size_t size() const noexcept { return shapes_.size(); }
  [[nodiscard]] const micro_batch_shape& shape(std::size_t i) const noexcept { return shapes_[i]; }
  /// The first sample of the run of equal shapes sample i is in (canonical order puts equal
  /// lengths side by side): everything computed from a sample's shape alone is computed once
  /// per run. (Indices fit 32 bits, as in the packer.)
  [[nodiscard]] std::size_t first_alike(std::size_t i) const noexcept { return run_first_[run_of_[i]]; }
  [[nodiscard]] std::int32_t bucket(std::size_t i) const noexcept { return problem_.buckets[i]; }
  /// The order samples are packed in, bucket descending then index: empty when that is index
  /// order (buckets never increase along the canonical order, the usual case), else computed
  /// once.
  [[nodiscard]] const std::vector<std::size_t>& packing_order() const {
    if (!order_known_) {
      const auto& b = problem_.buckets;
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
  [[nodiscard]] const std::vector<std::int64_t>& degrees() const noexcept { return degrees_; }
  [[nodiscard]] std::int64_t degree(std::size_t k) const noexcept { return degrees_[k]; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return gpus_; }
  [[nodiscard]] std::int64_t gpus_per_node() const noexcept { return gpus_per_node_; }
  [[nodiscard]]
  bool crosses_nodes(std::size_t k) const noexcept { return degrees_[k] > gpus_per_node_; }
  [[nodiscard]] double budget() const noexcept { return budget_; }
  /// The training run's style (sequence_parallel::automatic: chosen per micro-batch).
  [[nodiscard]] sequence_parallel sp() const noexcept { return sp_; }
  /// How many styles a micro-batch at degree index k may run (1 unless the style is automatic).
  [[nodiscard]] std::size_t style_count(std::size_t k) const noexcept { return styles_[k].size(); }
  [[nodiscard]] sequence_parallel style(std::size_t k, std::size_t j) const noexcept { return styles_[k][j].sp; }
  /// An empty micro-batch's time at degree index k in its default style (the first).
  [[nodiscard]] double empty_seconds(std::size_t k) const noexcept { return styles_[k].front().empty_seconds; }
  /// An empty micro-batch's time, and the fixed part of cost_model requirement 5, at degree
  /// index k in its j-th style, without recomputation.
  [[nodiscard]] double empty_seconds(std::size_t k, std::size_t j) const noexcept { return styles_[k][j].empty_seconds; }
  [[nodiscard]] double fixed_seconds(std::size_t k, std::size_t j) const noexcept { return styles_[k][j].fixed_seconds; }
  /// The least fixed part (cost_model requirement 5) of a micro-step at degree index k without
  /// recomputation, over the styles it may run.
  [[nodiscard]] double least_fixed_seconds(std::size_t k) const noexcept {
    double least = styles_[k].front().fixed_seconds;
    for (const auto& s : styles_[k]) least = std::min(least, s.fixed_seconds);
    return least;
  }

  /// A floor on the time sample i, run as degree_option `o` at degree index k, adds to any
  /// micro-batch: the cost model's `marginal_seconds` when it has one, otherwise its seconds
  /// minus those of an empty micro-batch with the same setting (cost_model requirement 5).
  [[nodiscard]]
  double marginal_seconds(std::size_t i, const degree_option& o, std::size_t k) const {
    const auto c = config_of(k, o);
    if constexpr (requires { problem_.cost.marginal_seconds(shapes_[i], c); }) {
      return problem_.cost.marginal_seconds(shapes_[i], c);
    } else {
      const double empty = o.recompute.is_none()
                               ? layout_of(k, o.sp).empty_seconds
                               : problem_.cost.seconds(micro_batch_shape{}, c);
      return std::max(o.seconds - empty, 0.0);
    }
  }

  /// The config at degree index k in its default style (the first of styles_at).
  [[nodiscard]] execution_config config(std::size_t k, recompute_setting r = {}) const noexcept {
    return {degrees_[k], styles_[k].front().sp, r};
  }
  [[nodiscard]]
  execution_config config(std::size_t k, recompute_setting r, sequence_parallel sp) const noexcept {
    return {degrees_[k], sp, r};
  }
  /// The config a degree_option at degree index k runs with.
  [[nodiscard]] execution_config config_of(std::size_t k, const degree_option& o) const noexcept {
    return {degrees_[k], o.sp, o.recompute};
  }

  /// evaluate() of sample i alone at degree index k, computed once per (run of equal shapes,
  /// degree). The cache is indexed by run, not by sample (a 1M-sample Wikipedia batch has 18K
  /// lengths), and holds blocks of runs allocated when first asked for: runs come longest
  /// first, so degrees only the long samples are asked about cost memory for their few blocks.
  [[nodiscard]] const degree_option& alone(std::size_t i, std::size_t k) const {
    const std::size_t run = run_of_[i];
    const auto& block = alone_[k][run / option_block::size];
    const std::size_t j = run % option_block::size;
    if (block && block->known[j]) return block->options()[j];  // the usual case, kept small
    return compute_alone(run, k);
  }
  /// marginal_seconds of sample i run as alone(i, k), computed once per (run of equal shapes,
  /// degree): the static search and the bound both ask for it.
  [[nodiscard]] double alone_marginal(std::size_t i, std::size_t k) const {
    const std::size_t run = run_of_[i];
    const auto& option = alone(i, k);
    auto& block = *alone_[k][run / option_block::size];
    const std::size_t j = run % option_block::size;
    if (!block.marginal_known[j]) {
      block.marginals[j] = marginal_seconds(run_first_[run], option, k);
      block.marginal_known[j] = true;
    }
    return block.marginals[j];
  }

  /// Peak bytes of `shape` at degree index k in style `sp` if the recompute strategy runs it
  /// with exactly `setting` and it fits the budget; nullopt otherwise. The budget check comes
  /// first: it is one cost-model call and rejects most attempts.
  [[nodiscard]] std::optional<double> runs_with(const micro_batch_shape& shape, std::size_t k,
                                                recompute_setting setting, sequence_parallel sp) const {
    const double bytes = problem_.cost.peak_bytes(shape, config(k, setting, sp));
    if (bytes > budget_) return std::nullopt;
    if constexpr (!fit_decides_v<R>) {
      const auto chosen = problem_.recompute.choose(problem_.cost, shape, config(k, {}, sp));
      if (!chosen || *chosen != setting) return std::nullopt;
    }
    return bytes;
  }
  /// runs_with in the default style at degree index k.
  [[nodiscard]] std::optional<double> runs_with(const micro_batch_shape& shape, std::size_t k,
                                                recompute_setting setting) const {
    return runs_with(shape, k, setting, styles_[k].front().sp);
  }

  [[nodiscard]] double empty_bytes(std::size_t k) const noexcept { return empty_bytes_[k]; }

  /// The setting a new micro-batch is opened with at degree index k for a sample that runs
  /// with `alone`: the degree's packing setting (packing_setting) where the sample alone gets
  /// the strategy's lightest setting, else the sample's own. The packer falls back to the
  /// lightest setting for a micro-batch that ends up fitting it (first_fit_packer::finish).
  [[nodiscard]] recompute_setting opening_setting(std::size_t k, const degree_option& alone) const {
    const auto& p = packing_setting(k);
    return alone.recompute == p.lightest ? p.dense : alone.recompute;
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
  /// degree, O(log L + log n) cost-model calls.
  struct packing {
    recompute_setting lightest{};
    recompute_setting dense{};
  };
  /// Whether degree index k has a dense packing setting other than its lightest: the packer
  /// then packs a group both ways and keeps the faster.
  [[nodiscard]] bool packs_denser(std::size_t k) const {
    const auto& p = packing_setting(k);
    return p.dense != p.lightest;
  }
  [[nodiscard]] const packing& packing_setting(std::size_t k) const {
    auto& p = packing_[k];
    if (!p) p = choose_packing(k);
    return *p;
  }

  /// Time and bytes of `shape` at degree index k with a given setting and style.
  [[nodiscard]] degree_option run(const micro_batch_shape& shape, std::size_t k, recompute_setting setting,
                                  sequence_parallel sp) const {
    const auto c = config(k, setting, sp);
    return {true, setting, problem_.cost.seconds(shape, c), problem_.cost.peak_bytes(shape, c), sp};
  }
  /// run() in the default style at degree index k.
  [[nodiscard]]
  degree_option run(const micro_batch_shape& shape, std::size_t k, recompute_setting setting) const {
    return run(shape, k, setting, styles_[k].front().sp);
  }
  /// run() for a shape whose peak `bytes` runs_with() has just returned at the same degree,
  /// setting and style: the same option without a second memory evaluation.
  [[nodiscard]] degree_option run_fitting(const micro_batch_shape& shape, std::size_t k, recompute_setting setting,
                                          sequence_parallel sp, double bytes) const {
    return {true, setting, problem_.cost.seconds(shape, config(k, setting, sp)), bytes, sp};
  }
  /// run_fitting() in the default style at degree index k.
  [[nodiscard]] degree_option run_fitting(const micro_batch_shape& shape, std::size_t k, recompute_setting setting,
                                          double bytes) const {
    return run_fitting(shape, k, setting, styles_[k].front().sp, bytes);
  }

  /// The recompute strategy's setting for this shape at degree index k in style `sp`, with its
  /// time and bytes.
  [[nodiscard]] degree_option evaluate(const micro_batch_shape& shape, std::size_t k, sequence_parallel sp) const {
    const auto c = config(k, {}, sp);
    if constexpr (requires { problem_.recompute.choose_fitting(problem_.cost, shape, c); }) {
      // The shipped strategies give the setting with the bytes they have just checked
      // (recompute/strategies.hpp, chooses_by_fitting): one memory evaluation, not two.
      const auto chosen = problem_.recompute.choose_fitting(problem_.cost, shape, c);
      if (!chosen) return {};
      return run_fitting(shape, k, chosen->setting, sp, chosen->peak_bytes);
    } else {
      const auto chosen = problem_.recompute.choose(problem_.cost, shape, c);
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
  [[nodiscard]]
  double packed_estimate(std::size_t i, std::size_t k, const degree_option& alone) const {
    const auto& at = layout_of(k, alone.sp);
    const double fixed = at.fixed_seconds;
    const double room = std::max(budget_ - at.empty_bytes, 1.0);
    const double share = std::clamp((alone.peak_bytes - at.empty_bytes) / room, 0.0, 1.0);
    double device = alone.seconds;
    if constexpr (requires { problem_.cost.device_seconds(shapes_[i], config_of(k, alone)); })
      device = problem_.cost.device_seconds(shapes_[i], config_of(k, alone));
    return std::max(device - fixed, 0.0) + fixed * share;
  }

  /// Error for a sample that fits nowhere: names it, the bytes it needs at the largest degree
  /// with every layer recomputed, and the bytes available. When full recomputation would fit
  /// but the recompute strategy does not choose it (none, selective, a user's), the message
  /// names the strategy and gives the bytes without recomputation too.
  [[noreturn]] void throw_does_not_fit(std::size_t i) const {
    const auto& s = problem_.samples[i];
    const std::size_t k = degrees_.size() - 1;
    const auto full = recompute_setting::full(problem_.cost.model().layers);
    double need = std::numeric_limits<double>::infinity();
    sequence_parallel tightest = styles_[k].front().sp;
    for (const auto& e : styles_[k]) {
      const double b = problem_.cost.peak_bytes(shapes_[i], config(k, full, e.sp));
      if (b < need) {
        need = b;
        tightest = e.sp;
      }
    }
    const std::string head =
        "sample " + std::to_string(s.id) + " (" + std::to_string(s.tokens) + " tokens) does not fit";
    const std::string at = " per GPU at degree " + std::to_string(degrees_[k]) +
                           (styles_[k].size() > 1 ? " (" + std::string(to_string(tightest)) + ")" : "");
    const auto bytes = [](double b) {
      return detail::format_gib(b) + " (" + detail::bytes_text(b) + " bytes)";
    };
    const std::string available = bytes(budget_) + " available";
    if (need <= budget_) {
      const double kept = problem_.cost.peak_bytes(shapes_[i], config(k, recompute_setting::none(), tightest));
      throw sample_does_not_fit(head + " under recompute strategy '" +
                                std::string(problem_.recompute.name()) + "': it needs " + bytes(kept) +
                                at + " without recomputation and " + bytes(need) +
                                " with full recompute, which this strategy does not choose; " + available);
    }
    throw sample_does_not_fit(head + ": it needs " + bytes(need) + at + " with full recompute, " + available);
  }

private:
  const placement_problem<M, R>& problem_;
  sequence_parallel sp_;
  std::int64_t gpus_;
  std::int64_t gpus_per_node_;
  double budget_;
  std::vector<std::int64_t> degrees_;
  detail::plan_workspace* workspace_;
  std::vector<micro_batch_shape> shapes_;
  std::vector<std::uint32_t> run_of_;     // per sample: its run of equal shapes
  std::vector<std::uint32_t> run_first_;  // per run: its first sample (as many as lengths, usually few)
  /// An empty micro-batch's costs in one style at one degree.
  struct layout_costs {
    sequence_parallel sp;
    double empty_seconds;
    double fixed_seconds;  ///< cost_model requirement 5's fixed part
    double empty_bytes;
  };
  std::vector<std::vector<layout_costs>> styles_;  ///< per degree index, in styles_at order
  std::vector<double> empty_bytes_;  ///< per degree index, the largest over its styles

  // alone(i, k) computed and cached for a run of equal shapes.
  [[nodiscard]] const degree_option& compute_alone(std::size_t run, std::size_t k) const {
    auto& block = alone_[k][run / option_block::size];
    if (!block) block = std::make_unique_for_overwrite<option_block>();  // options left unbuilt
    const std::size_t j = run % option_block::size;
    std::construct_at(block->options() + j, evaluate(shapes_[run_first_[run]], k));
    block->known[j] = true;
    return block->options()[j];
  }

  [[nodiscard]] const layout_costs& layout_of(std::size_t k, sequence_parallel sp) const noexcept {
    for (const auto& e : styles_[k])
      if (e.sp == sp) return e;
    return styles_[k].front();
  }
  // 1,024 runs' options and their marginal times, each computed when first asked for (a block
  // is not filled on allocation: a 1,000-sample batch reads one block per degree, often only
  // part of it).
  struct option_block {
    static constexpr std::size_t size = 1024;
    static_assert(std::is_trivially_destructible_v<degree_option>);
    alignas(degree_option) std::byte storage[size * sizeof(degree_option)];
    std::array<bool, size> known{};
    std::array<double, size> marginals;  // read only where marginal_known
    std::array<bool, size> marginal_known{};
    [[nodiscard]] degree_option* options() noexcept {
      return std::launder(reinterpret_cast<degree_option*>(storage));
    }
  };
  mutable std::vector<std::vector<std::unique_ptr<option_block>>> alone_;  // [degree][block]
  mutable std::vector<std::optional<packing>> packing_;
  mutable std::vector<std::size_t> packing_order_;

  // `copies` samples shaped like `one`; nullopt where the totals pass int64.
  [[nodiscard]] static std::optional<micro_batch_shape> copies_of(const micro_batch_shape& one,
                                                                  std::int64_t copies) noexcept {
    const auto samples = detail::checked_mul(one.samples, copies);
    const auto tokens = detail::checked_mul(one.tokens, copies);
    if (!samples || !tokens) return std::nullopt;
    return micro_batch_shape{*samples, *tokens, one.longest, one.attention_pairs * static_cast<double>(copies)};
  }
  // The most copies of `one` (up to 2^20) that fit the budget at degree index k with `setting`
  // in the default style.
  [[nodiscard]] std::int64_t copies_fitting(const micro_batch_shape& one, std::size_t k,
                                            recompute_setting setting) const {
    const auto c = config(k, setting);
    return detail::largest_fitting(
        [&](std::int64_t n) {
          const auto shape = copies_of(one, n);
          return shape && static_cast<double>(problem_.cost.peak_bytes(*shape, c)) <= budget_;
        },
        std::int64_t{1} << 20);
  }
  [[nodiscard]] packing choose_packing(std::size_t k) const {
    const auto lightest = evaluate(micro_batch_shape{}, k).recompute;
    packing out{lightest, lightest};
    if constexpr (fit_decides_v<R>) {
      if (shapes_.empty()) return out;
      // The median sample in canonical order (longest first), or a shorter one that fits.
      std::size_t i = shapes_.size() / 2;
      std::int64_t n0 = copies_fitting(shapes_[i], k, lightest);
      while (n0 == 0 && i + 1 < shapes_.size()) {
        i += (shapes_.size() - i) / 2;  // halfway to the shortest, at least one step
        n0 = copies_fitting(shapes_[i], k, lightest);
      }
      if (n0 == 0) return out;
      const auto& one = shapes_[i];
      const auto per_copy = [&](std::int64_t n, recompute_setting r) {
        return problem_.cost.seconds(*copies_of(one, n), config(k, r)) / static_cast<double>(n);
      };
      double best = per_copy(n0, lightest);
      for (const double factor : {1.25, 1.5, 2.0, 3.0, 4.0, 8.0}) {
        const auto more = copies_of(one, static_cast<std::int64_t>(factor * static_cast<double>(n0)) + 1);
        if (!more) break;
        const auto r = problem_.recompute.choose(problem_.cost, *more, config(k));
        if (!r || *r == lightest) continue;
        const auto n = copies_fitting(one, k, *r);
        if (n <= n0) continue;
        const double t = per_copy(n, *r);
        if (t < 0.99 * best) {
          best = t;
          out.dense = *r;
        }
      }
    }
    return out;
  }
  mutable bool order_known_ = false;
};

/// Calls f with the problem's shared degree_option cache, or with a fresh one when it has none.
template <class M, class R, class F>
decltype(auto) with_placement_context(const placement_problem<M, R>& problem, F&& f) {
  if (problem.options) return f(*problem.options);
  const placement_context<M, R> own(problem);
  return f(own);
}

/// A micro-batch being filled by the packer.
struct packed_batch {
  std::vector<std::size_t> samples{};
  micro_batch_shape shape{};
  degree_option run{};
};

namespace detail {

/// First fit for one group, fed its samples in packing order (bucket descending, then index):
/// each joins the first micro-batch of its bucket, in creation order, with room for what it
/// needs alone and whose setting the recompute strategy keeps for the union, else opens one
/// (at the degree's dense packing setting for a short sample: placement_context::opening_setting).
template <class Context>
class first_fit_packer {
public:
  /// `smallest_need`: the least activation bytes any of the group's samples needs alone; a
  /// micro-batch with less free room is closed and never tried again.
  /// `dense`: open a short sample's micro-batch at the degree's dense packing setting.
  first_fit_packer(const Context& ctx, std::size_t k, double smallest_need, std::size_t expected = 0,
                   bool dense = false)
      : ctx_(ctx), k_(k), smallest_need_(smallest_need), dense_(dense) {
    joined_.reserve(expected);
  }

  /// Adds sample i, whose alone option at the packer's degree is `alone`.
  void add(std::size_t i, const degree_option& alone) {
    if (!batches_.empty() && ctx_.bucket(i) != bucket_) bucket_begin_ = batches_.size();
    bucket_ = ctx_.bucket(i);
    // What the sample needs on its own, less a little for rounding: bins with less free room are
    // skipped without asking the cost model (memory is close to additive in samples).
    const double need = 0.999 * (alone.peak_bytes - ctx_.empty_bytes(k_));
    for (std::size_t o = open_.first_at_least(bucket_begin_, need); o != first_fit_index::none;
         o = open_.first_at_least(o + 1, need)) {
      auto& batch = batches_[o];
      const auto joined = batch.shape + ctx_.shape(i);
      if (const auto bytes = ctx_.runs_with(joined, k_, batch.run.recompute, batch.run.sp)) {
        batch.shape = joined;
        batch.run.peak_bytes = *bytes;  // its time is taken once, in finish()
        open_.set(o, room(ctx_.budget() - *bytes));
        joined_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(o)});
        ++made_[o].size;
        return;
      }
    }
    if (!alone.feasible) ctx_.throw_does_not_fit(i);
    joined_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(batches_.size())});
    // A short sample opens its micro-batch at the degree's dense packing setting, if asked.
    auto run = alone;
    const auto opening = dense_ ? ctx_.opening_setting(k_, alone) : alone.recompute;
    if (opening != alone.recompute)
      if (const auto bytes = ctx_.runs_with(ctx_.shape(i), k_, opening, alone.sp))
        run = ctx_.run_fitting(ctx_.shape(i), k_, opening, alone.sp, *bytes);
    batches_.push_back({{}, ctx_.shape(i), run});
    open_.push(room(ctx_.budget() - run.peak_bytes));
    made_.push_back({1, alone.recompute});
  }

  /// The micro-batches, each timed as a whole, their samples in the order they joined; one
  /// opened at the dense packing setting that fits its first sample's own setting gets that.
  [[nodiscard]] std::vector<packed_batch> finish() && {
    for (std::size_t b = 0; b < batches_.size(); ++b) batches_[b].samples.reserve(made_[b].size);
    for (const auto& [i, b] : joined_) batches_[b].samples.push_back(i);
    for (std::size_t b = 0; b < batches_.size(); ++b) {
      auto& batch = batches_[b];
      const auto own_bytes =
          batch.run.recompute != made_[b].own ? ctx_.runs_with(batch.shape, k_, made_[b].own, batch.run.sp) : std::nullopt;
      if (own_bytes)
        batch.run = ctx_.run_fitting(batch.shape, k_, made_[b].own, batch.run.sp, *own_bytes);
      else if (batch.samples.size() > 1)
        batch.run = ctx_.run_fitting(batch.shape, k_, batch.run.recompute, batch.run.sp, batch.run.peak_bytes);
    }
    return std::move(batches_);
  }

private:
  [[nodiscard]] double room(double free) const noexcept {
    return free < smallest_need_ ? -std::numeric_limits<double>::infinity() : free;
  }

  const Context& ctx_;
  std::size_t k_;
  double smallest_need_;
  bool dense_;
  std::vector<packed_batch> batches_{};  // sample lists filled by finish()
  // (sample, micro-batch) in joining order and the size of each micro-batch: the packer's
  // writes go to one sequential log rather than to a list per micro-batch (with thousands of
  // groups packed at once those lists would be far apart in memory and regrown piecemeal).
  // (Sample indices fit 32 bits as elsewhere in the packer: a batch of 2^32 samples would need
  // over a terabyte of planner memory.)
  struct join_record {
    std::uint32_t sample;
    std::uint32_t batch;
  };
  std::vector<join_record> joined_{};
  struct made {
    std::uint32_t size;     // samples that joined
    recompute_setting own;  // its first sample's own setting
  };
  std::vector<made> made_{};  // per micro-batch
  first_fit_index open_{};  // free bytes per micro-batch, -inf once closed
  std::size_t bucket_begin_ = 0;  // first micro-batch of the current bucket
  std::int32_t bucket_ = 0;
};

}  // namespace detail

/// Total seconds of a list of packed micro-batches.
[[nodiscard]] inline double total_seconds(const std::vector<packed_batch>& batches) noexcept {
  double t = 0;
  for (const auto& b : batches) t += b.run.seconds;
  return t;
}

namespace detail {

/// Each group's packing from `packers` (the lightest setting's for every group, then, where
/// `both`, the denser setting's): the one with the shorter total.
template <class Packer>
[[nodiscard]] std::vector<std::vector<packed_batch>> finish_groups(std::vector<Packer> packers, std::size_t groups,
                                                                   bool both) {
  std::vector<std::vector<packed_batch>> out;
  out.reserve(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    out.push_back(std::move(packers[g]).finish());
    if (!both) continue;
    auto dense = std::move(packers[groups + g]).finish();
    if (total_seconds(dense) < total_seconds(out.back())) out.back() = std::move(dense);
  }
  return out;
}

}  // namespace detail

/// Packs the samples one group runs at degree index k into micro-batches: per bucket, first fit
/// in canonical order (longest first), a sample joining a micro-batch only if the recompute
/// strategy's setting for the union is the one the micro-batch already has and the union fits
/// the budget (packing never adds recomputation). Where the degree has a dense packing setting
/// (placement_context::packing_setting: selective recomputation where fuller micro-steps save
/// more fixed cost than it costs), the group is also packed with its short samples'
/// micro-batches opened at that setting (each falling back to the lightest if it ends up
/// fitting it), and the packing with the shorter total is kept. A micro-batch whose free bytes are below what
/// the group's smallest sample needs is closed; the open ones sit in a segment tree, so finding
/// the first that may hold a sample costs O(log micro-batches), not a scan.
template <class Context>
[[nodiscard]]
std::vector<packed_batch> pack_to_budget(const Context& ctx, std::vector<std::size_t> items, std::size_t k) {
  const auto before = [&](std::size_t a, std::size_t b) {
    if (ctx.bucket(a) != ctx.bucket(b)) return ctx.bucket(a) > ctx.bucket(b);
    return a < b;
  };
  if (!std::is_sorted(items.begin(), items.end(), before)) std::sort(items.begin(), items.end(), before);
  double smallest_need = std::numeric_limits<double>::infinity();
  for (auto i : items) {
    const auto& alone = ctx.alone(i, k);
    if (alone.feasible) smallest_need = std::min(smallest_need, alone.peak_bytes - ctx.empty_bytes(k));
  }
  const auto pack = [&](bool dense) {
    detail::first_fit_packer<Context> packer(ctx, k, smallest_need, items.size(), dense);
    for (auto i : items) packer.add(i, ctx.alone(i, k));
    return std::move(packer).finish();
  };
  auto out = pack(false);
  if (ctx.packs_denser(k)) {
    auto dense = pack(true);
    if (total_seconds(dense) < total_seconds(out)) out = std::move(dense);
  }
  return out;
}

/// pack_to_budget for every group at once, with the same result: one pass over the samples in
/// packing order feeds each group's packer, so the per-sample tables are read in order rather
/// than once per group at scattered places. Beyond 64 groups (or where `chunk` is given) the
/// pass goes a chunk of `chunk` samples at a time (0: 32 per group, at least 4,096), each
/// group's samples in the chunk fed together, so a packer's state is brought into cache once
/// per chunk rather than once per sample; with a thousand groups, feeding them sample by sample
/// missed the cache on almost every sample of a 10M batch (with 64 or fewer, their packers stay
/// in the cache and the samples go one at a time). Each sample is in at most one group. `group_of_buffer`, where given, holds the sample-to-group
/// table (as long as the batch) from call to call.
template <class Context>
[[nodiscard]] std::vector<std::vector<packed_batch>> pack_groups_to_budget(
    const Context& ctx, const std::vector<std::vector<std::size_t>>& groups, std::size_t k,
    std::vector<std::uint32_t>* group_of_buffer = nullptr, std::size_t chunk = 0) {
  constexpr auto nowhere = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> own;
  auto& group_of = group_of_buffer != nullptr ? *group_of_buffer : own;
  group_of.assign(ctx.size(), nowhere);
  std::vector<double> smallest_need(groups.size(), std::numeric_limits<double>::infinity());
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (auto i : groups[g]) group_of[i] = static_cast<std::uint32_t>(g);
  const auto& order = ctx.packing_order();
  const auto each = [&](auto&& f) {
    if (order.empty()) {
      for (std::size_t i = 0; i < ctx.size(); ++i)
        if (group_of[i] != nowhere) f(i, group_of[i]);
    } else {
      for (auto i : order)
        if (group_of[i] != nowhere) f(i, group_of[i]);
    }
  };
  each([&](std::size_t i, std::uint32_t g) {
    const auto& alone = ctx.alone(i, k);
    if (alone.feasible) smallest_need[g] = std::min(smallest_need[g], alone.peak_bytes - ctx.empty_bytes(k));
  });
  // Each group packed at the lightest setting and, where the degree has a denser one, at that
  // too; the group keeps the packing with the shorter total.
  const bool both = ctx.packs_denser(k);
  std::vector<detail::first_fit_packer<Context>> packers;
  packers.reserve(both ? 2 * groups.size() : groups.size());
  for (const bool dense : {false, true}) {
    if (dense && !both) break;
    for (std::size_t g = 0; g < groups.size(); ++g)
      packers.emplace_back(ctx, k, smallest_need[g], groups[g].size(), dense);
  }
  const auto add = [&](std::size_t i, std::uint32_t g) {
    const auto& alone = ctx.alone(i, k);
    packers[g].add(i, alone);
    if (both) packers[groups.size() + g].add(i, alone);
  };
  // A few dozen packers stay in the cache: fed one sample at a time (unless a chunk is asked for).
  if (chunk == 0 && groups.size() <= 64) {
    each(add);
    return detail::finish_groups(std::move(packers), groups.size(), both);
  }
  // The chunk's samples by group (a stable counting sort: each packer gets its samples in
  // packing order, as one at a time would feed them).
  if (chunk == 0) chunk = std::max<std::size_t>(4096, 32 * groups.size());
  std::size_t grouped = 0;
  for (const auto& group : groups) grouped += group.size();
  chunk = std::max<std::size_t>(1, std::min(chunk, grouped));
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pending;  // (sample, group) in packing order
  pending.reserve(chunk);
  std::vector<std::uint32_t> by_group(chunk);
  std::vector<std::uint32_t> first(groups.size() + 1);
  const auto feed = [&] {
    std::fill(first.begin(), first.end(), 0);
    for (const auto& [i, g] : pending) ++first[g + 1];
    for (std::size_t g = 0; g < groups.size(); ++g) first[g + 1] += first[g];
    for (const auto& [i, g] : pending) by_group[first[g]++] = i;  // first[g] ends at group g's end
    // By group the chunk's shapes are read in a scattered order: ask for them a few ahead.
    constexpr std::uint32_t ahead = 8;
    const auto n = static_cast<std::uint32_t>(pending.size());
    for (std::uint32_t j = 0; j < std::min(ahead, n); ++j) detail::prefetch(&ctx.shape(by_group[j]));
    std::uint32_t begin = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::uint32_t j = begin; j < first[g]; ++j) {
        if (j + ahead < n) detail::prefetch(&ctx.shape(by_group[j + ahead]));
        add(by_group[j], static_cast<std::uint32_t>(g));
      }
      begin = first[g];
    }
    pending.clear();
  };
  each([&](std::size_t i, std::uint32_t g) {
    pending.emplace_back(static_cast<std::uint32_t>(i), g);
    if (pending.size() == chunk) feed();
  });
  feed();
  return detail::finish_groups(std::move(packers), groups.size(), both);
}

}  // namespace dcp
