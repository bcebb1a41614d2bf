#pragma once
// FlexSP-like heterogeneous sequence parallelism as a placement policy: every micro-batch uses
// the whole cluster, split into SP groups of mixed power-of-two degrees, with the sequences
// assigned to groups by an exact search over length buckets.
//
// Source: FlexSP (Wang et al., ASPLOS'25, arXiv 2412.01523) and its code,
// PKU-DAIR/Hetu-Galvatron branch `flexsp`, galvatron/flexsp_solver/solver.py. Notes:
// docs/baselines.md.
//  1. Sequence Blaster: M_min = ceil(batch tokens / cluster token capacity); every
//     M in [M_min, M_min + 5) is tried; for each, the length-sorted batch is cut into M
//     contiguous chunks minimising the largest chunk's tokens (memory balance).
//  2. Sequence bucketing: each micro-batch's lengths are grouped into B = 16 buckets minimising
//     the padding to each bucket's upper bound (dynamic programming; padding_optimal_buckets).
//  3. Parallelism planner: FlexSP solves a MILP (SCIP, 10 s limit) whose variables are the
//     number of bucket-q sequences in candidate group p, the groups used and the makespan C,
//     with every group's time <= C, every group's tokens / degree <= the per-GPU token capacity,
//     Σ degree = N, and a minimum SP per bucket. Times are linear in the assigned sequences
//     (FlexSP's profiled (α₁ s² + α₂ s) / d + β + all-to-all).
//  4. The plan with the smallest predicted step time over the tried M is kept.
//
// This implementation of step 3 (an exact search, not a MILP solver):
//  - Decision: which degree each bucket runs at, and how many groups each degree gets. Buckets
//    of one degree form a class; classes are contiguous in length (a longer bucket never gets a
//    smaller degree than a shorter one) — FlexSP's MILP may also split one bucket over several
//    group sizes, which this search does not.
//  - A class of degree d with g groups is predicted to take β_d + max(W/g, slowest item) where W
//    is the cost model's marginal time of its sequences at d (the MILP's linear time model, with
//    the cost model in place of FlexSP's profile) and needs g >= its tokens / (d × capacity).
//  - For a target makespan T, dynamic programming over (bucket boundary, degree) finds the
//    partition into classes that needs the fewest GPUs — exact for this model, O(B² D²);
//    bisection on T finds the smallest T whose partition fits N GPUs. Spare GPUs then go, one
//    group at a time, to the class predicted slowest (FlexSP's Σ degree = N).
//  - Within a class, sequences go longest-processing-time-first to the least-loaded group with
//    token room (the MILP assigns them exactly; here the class was sized for them).
//  - The per-GPU token capacity defaults to the most tokens one GPU holds at the recompute
//    strategy's lightest setting (FlexSP's linear activation-per-token model with its fixed
//    checkpointing); each group micro-step then runs with the recompute strategy's setting.
//  - When no tried M is feasible under the token constraint (a sequence longer than the largest
//    degree × capacity), the tried M are planned again without it: the peer would fail; here it
//    runs and may exceed the budget.
//  - Groups of a micro-batch are laid out largest first on contiguous ranks (aligned blocks).
//  - FlexSP is Ulysses-only (degree divides the head count): the allowed degrees come from the
//    cost model's training spec like every policy's.
// Memory: FlexSP is memory-aware through the token capacity only. With the default capacity
// its groups fit; a larger capacity or the fallback above gives micro-steps over the budget —
// on purpose: this policy does NOT promise placement_policy's budget requirement.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/bucketing/padding_optimal.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/placement/detail/timeline.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// What the FlexSP-like search knows of one micro-batch: per bucket (longest first) and per
/// degree index, the summed marginal seconds and the slowest sequence alone.
struct flexsp_buckets {
  std::vector<std::vector<double>> work{};  ///< [bucket][degree] Σ marginal seconds
  std::vector<std::vector<double>>
      slowest{};                 ///< [bucket][degree] slowest item alone; inf if it cannot run
  std::vector<double> tokens{};  ///< [bucket] tokens
  std::vector<std::size_t> min_degree{};  ///< [bucket] smallest degree index it may use
  std::vector<std::int64_t> degrees{};    ///< [degree] the degree
  std::vector<double> fixed{};            ///< [degree] seconds of an empty micro-step
  double tokens_per_gpu = 0;
  std::int64_t gpus = 0;
  bool enforce_tokens = true;
};

/// A run of buckets [first_bucket, end_bucket) at one degree, in `groups` groups.
struct flexsp_class {
  std::size_t first_bucket = 0;
  std::size_t end_bucket = 0;
  std::size_t degree_index = 0;
  std::int64_t groups = 0;
  friend bool operator==(const flexsp_class&, const flexsp_class&) = default;
};

namespace detail {

/// Groups a class [a, b) at degree index k needs to finish within `target`, or 0 if it cannot.
[[nodiscard]] inline std::int64_t flexsp_groups_needed(const flexsp_buckets& in, std::size_t a,
                                                       std::size_t b, std::size_t k,
                                                       double target) {
  double work = 0;
  double slowest = 0;
  double tokens = 0;
  for (std::size_t q = a; q < b; ++q) {
    if (in.min_degree[q] > k) return 0;
    work += in.work[q][k];
    slowest = std::max(slowest, in.slowest[q][k]);
    tokens += in.tokens[q];
  }
  const double room = target - in.fixed[k];
  if (!(slowest <= target) || room <= 0) return 0;
  double groups = std::max(1.0, std::ceil(work / room - 1e-12));
  if (in.enforce_tokens)
    groups = std::max(
        groups,
        std::ceil(tokens / (static_cast<double>(in.degrees[k]) * in.tokens_per_gpu) - 1e-12));
  if (groups > static_cast<double>(in.gpus)) return 0;
  return static_cast<std::int64_t>(groups);
}

}  // namespace detail

/// The partition of the buckets into classes (contiguous runs, degrees strictly decreasing from
/// the longest bucket on) that meets `target` with the fewest GPUs, if that is at most
/// in.gpus. Exact by dynamic programming over (bucket boundary, degree of the last run).
[[nodiscard]] inline std::optional<std::vector<flexsp_class>> flexsp_fewest_gpus(
    const flexsp_buckets& in, double target) {
  const std::size_t buckets = in.tokens.size();
  const std::size_t degrees = in.degrees.size();
  constexpr auto none = std::numeric_limits<std::int64_t>::max();
  // best[b][j]: fewest GPUs covering buckets [0, b) with the last run at degree j (j == degrees:
  // nothing placed yet, only for b == 0).
  std::vector<std::vector<std::int64_t>> best(buckets + 1,
                                              std::vector<std::int64_t>(degrees + 1, none));
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> from(
      buckets + 1, std::vector<std::pair<std::size_t, std::size_t>>(degrees + 1, {0, 0}));
  std::vector<std::vector<std::int64_t>> used(buckets + 1,
                                              std::vector<std::int64_t>(degrees + 1, 0));
  best[0][degrees] = 0;
  // Forward: every run [a, b) at degree k extends the best cover of [0, a) whose last run has a
  // larger degree. Work, tokens and the slowest item only grow with b, so a run that fails stays
  // failed for every longer b.
  for (std::size_t a = 0; a < buckets; ++a)
    for (std::size_t k = 0; k < degrees; ++k) {
      std::size_t prev = degrees + 1;
      for (std::size_t j = k + 1; j <= degrees; ++j)
        if (best[a][j] != none && (prev > degrees || best[a][j] < best[a][prev])) prev = j;
      if (prev > degrees) continue;
      double work = 0;
      double slowest = 0;
      double tokens = 0;
      const double room = target - in.fixed[k];
      const double holds = static_cast<double>(in.degrees[k]) * in.tokens_per_gpu;
      for (std::size_t b = a + 1; b <= buckets; ++b) {
        if (in.min_degree[b - 1] > k || room <= 0) break;
        work += in.work[b - 1][k];
        slowest = std::max(slowest, in.slowest[b - 1][k]);
        tokens += in.tokens[b - 1];
        if (!(slowest <= target)) break;
        double groups = std::max(1.0, std::ceil(work / room - 1e-12));
        if (in.enforce_tokens) groups = std::max(groups, std::ceil(tokens / holds - 1e-12));
        if (groups > static_cast<double>(in.gpus)) break;
        const auto gpus = static_cast<std::int64_t>(groups) * in.degrees[k];
        if (best[a][prev] + gpus < best[b][k]) {
          best[b][k] = best[a][prev] + gpus;
          from[b][k] = {a, prev};
          used[b][k] = static_cast<std::int64_t>(groups);
        }
      }
    }
  std::size_t last = degrees;
  for (std::size_t k = 0; k < degrees; ++k)
    if (best[buckets][k] != none && (last == degrees || best[buckets][k] < best[buckets][last]))
      last = k;
  if (buckets == 0) return std::vector<flexsp_class>{};
  if (last == degrees || best[buckets][last] > in.gpus) return std::nullopt;
  std::vector<flexsp_class> classes;
  for (std::size_t b = buckets, k = last; b > 0;) {
    const auto [a, j] = from[b][k];
    classes.push_back({a, b, k, used[b][k]});
    b = a;
    k = j;
  }
  std::reverse(classes.begin(), classes.end());
  return classes;
}

/// The smallest target (bisection to a relative 1e-9) whose fewest-GPU partition fits, with that
/// partition; nullopt when no target fits (the token constraint cannot be met on in.gpus).
[[nodiscard]] inline std::optional<std::pair<double, std::vector<flexsp_class>>>
flexsp_min_makespan(const flexsp_buckets& in) {
  if (in.tokens.empty()) return std::pair<double, std::vector<flexsp_class>>{0.0, {}};
  double low = 0;  // infeasible (a target no item can meet)
  for (std::size_t q = 0; q < in.tokens.size(); ++q) {
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = in.min_degree[q]; k < in.degrees.size(); ++k)
      fastest = std::min(fastest, in.slowest[q][k]);
    low = std::max(low, fastest);
  }
  if (!std::isfinite(low)) return std::nullopt;
  low *= 1.0 - 1e-12;
  double high = std::max(low, 1e-9) * 2.0;
  auto found = flexsp_fewest_gpus(in, high);
  for (int n = 0; n < 80 && !found; ++n) {
    low = high;
    high *= 2.0;
    found = flexsp_fewest_gpus(in, high);
  }
  if (!found) return std::nullopt;
  while (high - low > 1e-9 * high) {
    const double mid = 0.5 * (low + high);
    if (auto at = flexsp_fewest_gpus(in, mid)) {
      high = mid;
      found = std::move(at);
    } else {
      low = mid;
    }
  }
  return std::pair<double, std::vector<flexsp_class>>{high, std::move(*found)};
}

struct flexsp_like {
  /// Per-GPU token capacity; 0 derives it from the budget (see the header comment).
  std::int64_t tokens_per_gpu = 0;
  /// Sequence buckets per micro-batch (FlexSP's default 16).
  std::int32_t buckets = 16;
  /// Numbers of micro-batches tried: M in [M_min, M_min + this).
  std::int32_t micro_batch_candidates = 5;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "flexsp-like"; }
  friend bool operator==(const flexsp_like&, const flexsp_like&) = default;
};

namespace detail {

template <class Context>
class flexsp_solver {
 public:
  flexsp_solver(const Context& ctx, const flexsp_like& options) : ctx_(ctx), options_(options) {
    capacity_ = options.tokens_per_gpu > 0 ? options.tokens_per_gpu
                                           : std::max<std::int64_t>(1, per_gpu_token_capacity(ctx));
  }

  [[nodiscard]] placement solve() {
    double total = 0;
    for (std::size_t i = 0; i < ctx_.size(); ++i) total += tokens(i);
    const double cluster = static_cast<double>(capacity_) * static_cast<double>(ctx_.gpus());
    const auto m_min = static_cast<std::size_t>(std::max(1.0, std::ceil(total / cluster - 1e-12)));
    std::optional<placement> best;
    std::size_t best_m = 0;
    for (bool enforce : {true, false}) {
      for (std::size_t m = m_min;
           m < m_min + static_cast<std::size_t>(std::max(1, options_.micro_batch_candidates));
           ++m) {
        if (m > ctx_.size()) break;
        auto candidate = plan_with(m, enforce);
        if (candidate && (!best || candidate->makespan_seconds < best->makespan_seconds)) {
          best = std::move(candidate);
          best_m = m;
        }
      }
      if (best) break;
    }
    if (!best) throw error("flexsp_like: internal error, no micro-batch count gave a plan");
    best->policy = "flexsp-like (" + std::to_string(best_m) + " micro-batches, " +
                   std::to_string(capacity_) + " tokens per GPU)";
    return std::move(*best);
  }

 private:
  [[nodiscard]] double tokens(std::size_t i) const {
    return static_cast<double>(ctx_.sample(i).tokens);
  }

  // Contiguous chunks of the length-sorted batch minimising the largest chunk's tokens: the
  // smallest feasible maximum by binary search, each chunk then filled greedily.
  [[nodiscard]] std::vector<std::vector<std::size_t>> blast(std::size_t m) const {
    std::int64_t low = 0;
    std::int64_t high = 0;
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      low = std::max(low, ctx_.sample(i).tokens);
      high += ctx_.sample(i).tokens;
    }
    const auto chunks_at = [&](std::int64_t limit) {
      std::size_t chunks = 1;
      std::int64_t filled = 0;
      for (std::size_t i = 0; i < ctx_.size(); ++i) {
        const auto t = ctx_.sample(i).tokens;
        if (filled + t > limit) {
          ++chunks;
          filled = 0;
        }
        filled += t;
      }
      return chunks;
    };
    while (low < high) {
      const auto mid = low + (high - low) / 2;
      if (chunks_at(mid) <= m)
        high = mid;
      else
        low = mid + 1;
    }
    std::vector<std::vector<std::size_t>> chunks(1);
    std::int64_t filled = 0;
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      const auto t = ctx_.sample(i).tokens;
      if (filled + t > low) {
        chunks.emplace_back();
        filled = 0;
      }
      chunks.back().push_back(i);
      filled += t;
    }
    return chunks;
  }

  // Buckets of one chunk (longest first) by padding-optimal boundaries.
  [[nodiscard]] std::vector<std::vector<std::size_t>> bucketise(
      const std::vector<std::size_t>& chunk) const {
    std::vector<sample> members;
    members.reserve(chunk.size());
    for (auto i : chunk) members.push_back(ctx_.sample(i));
    const auto bounds = padding_optimal_buckets(std::max(1, options_.buckets))
                            .boundaries(std::span<const sample>(members.data(), members.size()));
    std::vector<std::vector<std::size_t>> buckets(bounds.size());
    for (auto i : chunk) {
      const auto at =
          std::lower_bound(bounds.begin(), bounds.end(), ctx_.sample(i).tokens) - bounds.begin();
      buckets[bounds.size() - 1 - static_cast<std::size_t>(at)].push_back(i);
    }
    std::erase_if(buckets, [](const auto& b) { return b.empty(); });
    return buckets;
  }

  [[nodiscard]] flexsp_buckets describe(const std::vector<std::vector<std::size_t>>& buckets,
                                        bool enforce) const {
    flexsp_buckets in;
    in.degrees = ctx_.degrees();
    for (std::size_t k = 0; k < in.degrees.size(); ++k) in.fixed.push_back(ctx_.empty_seconds(k));
    in.tokens_per_gpu = static_cast<double>(capacity_);
    in.gpus = ctx_.gpus();
    in.enforce_tokens = enforce;
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (const auto& bucket : buckets) {
      std::vector<double> work(in.degrees.size(), 0.0);
      std::vector<double> slowest(in.degrees.size(), 0.0);
      double bucket_tokens = 0;
      double longest = 0;
      for (auto i : bucket) {
        bucket_tokens += tokens(i);
        longest = std::max(longest, tokens(i));
        for (std::size_t k = 0; k < in.degrees.size(); ++k) {
          const auto& alone = ctx_.alone(i, k);
          if (!alone.feasible) {
            slowest[k] = inf;
            continue;
          }
          work[k] += ctx_.marginal_seconds(i, alone, k);
          slowest[k] = std::max(slowest[k], alone.seconds);
        }
      }
      std::size_t min_k = in.degrees.size() - 1;
      for (std::size_t k = 0; k < in.degrees.size(); ++k)
        if (std::isfinite(slowest[k]) &&
            (!enforce || longest <= static_cast<double>(in.degrees[k]) * in.tokens_per_gpu)) {
          min_k = k;
          break;
        }
      if (!std::isfinite(slowest[min_k])) ctx_.throw_does_not_fit(bucket.front());
      in.work.push_back(std::move(work));
      in.slowest.push_back(std::move(slowest));
      in.tokens.push_back(bucket_tokens);
      in.min_degree.push_back(min_k);
    }
    return in;
  }

  struct group {
    std::size_t degree_index;
    std::vector<std::size_t> items{};
    double load = 0;
    double tokens = 0;
  };

  // Groups of one micro-batch: the exact class search, spare GPUs to the slowest classes, then
  // longest-processing-time-first inside each class.
  [[nodiscard]] std::optional<std::vector<group>> groups_for(const std::vector<std::size_t>& chunk,
                                                             bool enforce) const {
    const auto buckets = bucketise(chunk);
    const auto in = describe(buckets, enforce);
    auto solved = flexsp_min_makespan(in);
    if (!solved) return std::nullopt;
    auto classes = std::move(solved->second);
    std::int64_t spare = in.gpus;
    std::vector<double> work(classes.size(), 0.0);
    std::vector<double> slowest(classes.size(), 0.0);
    for (std::size_t c = 0; c < classes.size(); ++c) {
      spare -= classes[c].groups * in.degrees[classes[c].degree_index];
      for (auto q = classes[c].first_bucket; q < classes[c].end_bucket; ++q) {
        work[c] += in.work[q][classes[c].degree_index];
        slowest[c] = std::max(slowest[c], in.slowest[q][classes[c].degree_index]);
      }
    }
    const auto predicted = [&](std::size_t c, std::int64_t groups) {
      return std::max(in.fixed[classes[c].degree_index] + work[c] / static_cast<double>(groups),
                      slowest[c]);
    };
    while (true) {
      std::size_t pick = classes.size();
      for (std::size_t c = 0; c < classes.size(); ++c) {
        const auto d = in.degrees[classes[c].degree_index];
        if (d > spare) continue;
        if (!(predicted(c, classes[c].groups + 1) < predicted(c, classes[c].groups))) continue;
        if (pick == classes.size() ||
            predicted(c, classes[c].groups) > predicted(pick, classes[pick].groups))
          pick = c;
      }
      if (pick == classes.size()) break;
      ++classes[pick].groups;
      spare -= in.degrees[classes[pick].degree_index];
    }
    std::vector<group> groups;
    for (const auto& cls : classes) {
      const auto k = cls.degree_index;
      const double room = static_cast<double>(in.degrees[k]) * in.tokens_per_gpu;
      const std::size_t base = groups.size();
      for (std::int64_t g = 0; g < cls.groups; ++g) groups.push_back({k});
      std::vector<std::pair<double, std::size_t>> items;
      for (auto q = cls.first_bucket; q < cls.end_bucket; ++q)
        for (auto i : buckets[q])
          items.emplace_back(ctx_.marginal_seconds(i, ctx_.alone(i, k), k), i);
      dcp::detail::lpt_order(items);
      // Least-loaded group with token room (ties: the lower group), from a heap of loads.
      using slot = std::pair<double, std::size_t>;
      std::priority_queue<slot, std::vector<slot>, std::greater<>> lightest;
      for (std::size_t g = base; g < groups.size(); ++g) lightest.emplace(0.0, g);
      std::vector<slot> full;
      for (const auto& [estimate, i] : items) {
        std::size_t target = groups.size();
        while (!lightest.empty()) {
          const auto [load, g] = lightest.top();
          lightest.pop();
          if (!enforce || groups[g].tokens + tokens(i) <= room) {
            target = g;
            break;
          }
          full.emplace_back(load, g);
        }
        if (target == groups.size()) {  // no room anywhere (only without enforcement)
          target = full.front().second;
          full.erase(full.begin());
        }
        groups[target].items.push_back(i);
        groups[target].load += estimate;
        groups[target].tokens += tokens(i);
        lightest.emplace(groups[target].load, target);
        for (const auto& f : full) lightest.push(f);
        full.clear();
      }
    }
    std::erase_if(groups, [](const group& g) { return g.items.empty(); });
    std::stable_sort(groups.begin(), groups.end(), [&](const group& a, const group& b) {
      return ctx_.degree(a.degree_index) > ctx_.degree(b.degree_index);
    });
    return groups;
  }

  [[nodiscard]] std::optional<placement> plan_with(std::size_t m, bool enforce) const {
    placement out;
    rank_clock clock(ctx_.gpus());
    for (const auto& chunk : blast(m)) {
      auto groups = groups_for(chunk, enforce);
      if (!groups) return std::nullopt;
      std::vector<std::int64_t> sizes;
      for (const auto& g : *groups) sizes.push_back(ctx_.degree(g.degree_index));
      const auto first = contiguous_layout(sizes);
      for (std::size_t g = 0; g < groups->size(); ++g)
        append_micro_batch(out, clock, ctx_, first[g], (*groups)[g].degree_index,
                           (*groups)[g].items);
    }
    return out;
  }

  const Context& ctx_;
  const flexsp_like& options_;
  std::int64_t capacity_ = 1;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement flexsp_like::place(const placement_input<M, R>& input) const {
  if (input.size() == 0) return placement{{}, 0, 0, 0, "flexsp-like"};
  return detail::flexsp_solver<dcp::placement_input<M, R>>(input, *this).solve();
}

static_assert(placement_policy<flexsp_like, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
