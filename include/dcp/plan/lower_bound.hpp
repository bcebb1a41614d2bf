#pragma once
// The honest bound of DESIGN §4.6: no plan finishes its micro-steps sooner than
//   max( Σ_i w_i / P ,  max_i min_d T_i(d) ),   w_i = min_d d·(m_i(d) + t_i·ρ(d))
// — all work spread perfectly at each sample's most efficient feasible config, and the longest
// sample at its fastest config. m_i(d) is the cost model's marginal time of sample i (what it
// adds to any micro-batch it joins, cost_model requirement 5), with the recomputation its memory
// forces. ρ(d) is the fixed cost per token of a micro-step at degree d: every micro-step pays at
// least T_∅(d) beyond its samples' marginal times — the time of an empty one, or the cost
// model's fixed_seconds(c) where it has one (optional member 9: a model whose time is the
// longer of two parts, such as the truth model's host and device, declares the part that adds
// to the marginals) — and holds at most C(d) tokens, the most one
// micro-batch can hold within the budget with every layer recomputed, so each token carries at
// least ρ(d) = T_∅(d) / C(d) of it. With bound_options::recompute_ladder, w_i is also bounded
// over ranges of recomputed layers [lo, hi] (doubling away from none and from every layer),
// with selective recomputation and without — the
// marginal at lo, the capacity at hi, each with the range's selective flag — and the
// larger of the two is used. ρ is counted only for a cost model that declares
// `memory_by_tokens` (cost_model optional member 8: peak bytes depend on a micro-batch only
// through its tokens and samples, an empty micro-batch is fastest without recomputation, and
// recomputation never shortens a marginal); otherwise ρ = 0, the bound without fixed costs.
// Valid for every plan under requirement 5 (superadditive packing, no super-linear
// parallelism).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/detail/largest_fitting.hpp"
#include "dcp/placement/context.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

/// What the bound may spend time on.
struct bound_options {
  /// Also bound each sample's share over a ladder of recomputation ranges (cost models with
  /// memory_by_tokens only): for recomputed layers in [lo, hi], a micro-step's samples take at
  /// least their marginal time at lo, and it holds at most the tokens that fit at hi, so a plan
  /// that avoids recomputation pays for the many micro-steps it then needs. A sample's share is
  /// the larger of this and the plain one. Costs a few thousand cost-model calls per bound: the
  /// truth bound uses it, the planner's per-plan bound does not.
  bool recompute_ladder = false;
};

namespace bound_detail {

// The marginal time of shape s under config c (cost_model requirement 5's floor).
template <class M>
[[nodiscard]] double marginal_at(const M& cost, const micro_batch_shape& s, const execution_config& c) {
  if constexpr (requires { cost.marginal_seconds(s, c); }) {
    return static_cast<double>(cost.marginal_seconds(s, c));
  } else {
    return std::max(0.0, static_cast<double>(cost.seconds(s, c)) - static_cast<double>(cost.seconds({}, c)));
  }
}

// The most tokens one sample may have at config c within the budget (peak bytes never decrease
// with tokens under memory_by_tokens); 0 when not even one token fits.
template <class M>
[[nodiscard]] std::int64_t token_capacity(const M& cost, const execution_config& c, double budget) {
  const auto fits = [&](std::int64_t tokens) {
    micro_batch_shape one;
    one.samples = 1;
    one.tokens = tokens;
    one.longest = tokens;
    return static_cast<double>(cost.peak_bytes(one, c)) <= budget;
  };
  return largest_fitting(fits, std::int64_t{1} << 62);  // no budget holds 2^62 tokens
}

// One rung of the ladder: recomputed layers in [lo, hi], with selective recomputation or
// without. rho[k][j]: the fixed cost per token at degree index k in its j-th style,
// T_∅(k, j) / C(k, j, hi, selective) (infinity when nothing fits); cheapest:
// min_{k,j} degree(k) · rho[k][j]. The plain rung [0, L] takes the larger capacity of the two
// (at every layer recomputed they are the same).
struct rung {
  std::int32_t lo = 0;
  std::int32_t hi = 0;
  bool selective = false;
  bool either = false;  ///< the plain rung: capacity with or without selective recomputation
  std::vector<std::vector<double>> rho{};
  double cheapest = std::numeric_limits<double>::infinity();
};

template <class Context>
[[nodiscard]] std::vector<rung> ladder(const Context& ctx, bool with_ranges) {
  const auto& cost = ctx.problem().cost;
  const auto layers = static_cast<std::int32_t>(cost.model().layers);
  std::vector<rung> rungs;
  if (with_ranges) {
    // Ranges that double away from both ends, [0, 0], [1, 1], [2, 3], ..., [L-2, L-2],
    // [L-1, L-1], [L, L] (capacity changes fastest near every layer recomputed, time near
    // none), each with selective recomputation and without: a micro-step's marginal is at
    // least the one at its rung's lo with its own selective flag, and it holds at most the
    // capacity at hi with it.
    std::vector<std::int32_t> starts{0, layers};
    for (std::int32_t step = 1; step < layers; step *= 2) {
      starts.push_back(step);
      starts.push_back(layers - step);
      if (step > layers / 2) break;  // the next step would pass the layers (and could overflow)
    }
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    for (const bool selective : {false, true})
      for (std::size_t i = 0; i < starts.size(); ++i)
        rungs.push_back({starts[i], i + 1 < starts.size() ? starts[i + 1] - 1 : layers, selective});
  } else {
    rungs.push_back({0, layers, false, true});  // the plain share: capacity at full recomputation
  }
  for (auto& r : rungs) {
    r.rho.resize(ctx.degrees().size());
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      r.rho[k].assign(ctx.style_count(k), std::numeric_limits<double>::infinity());
      for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
        const auto sp = ctx.style(k, j);
        const auto capacity =
            r.either ? std::max(token_capacity(cost, ctx.config(k, {r.hi, false}, sp), ctx.budget()),
                                token_capacity(cost, ctx.config(k, {r.hi, true}, sp), ctx.budget()))
                     : token_capacity(cost, ctx.config(k, {r.hi, r.selective}, sp), ctx.budget());
        if (capacity == 0) continue;
        r.rho[k][j] = std::max(0.0, dcp::detail::fixed_seconds_of(cost, ctx.config(k, {}, sp))) /
                      static_cast<double>(capacity);
        r.cheapest = std::min(r.cheapest, static_cast<double>(ctx.degree(k)) * r.rho[k][j]);
      }
    }
  }
  return rungs;
}

}  // namespace bound_detail

template <class Context>
[[nodiscard]] double lower_bound_seconds(const Context& ctx, bound_options options = {}) {
  const std::size_t n = ctx.size();
  if (n == 0) return 0.0;
  const auto relaxed = ctx.evaluate(micro_batch_shape{}, 0).recompute;
  const auto& cost = ctx.problem().cost;
  using model_t = std::remove_cvref_t<decltype(cost)>;
  constexpr bool shares = memory_by_tokens<model_t>;
  // The plain share (capacity at full recomputation) and, if asked, the ladder.
  std::vector<bound_detail::rung> plain;
  std::vector<bound_detail::rung> rungs;
  if constexpr (shares) {
    plain = bound_detail::ladder(ctx, false);
    if (options.recompute_ladder) rungs = bound_detail::ladder(ctx, true);
  }
  const double plain_cheapest = shares ? plain[0].cheapest : 0.0;
  const auto plain_rho = [&](std::size_t k, std::size_t j) { return shares ? plain[0].rho[k][j] : 0.0; };
  // Sample i's least GPU-seconds over the ladder, at every degree or (a sample without a menu)
  // at degree 1 with the cheapest share any degree gives; a sample too large for a rung at a
  // degree is never run there with that recomputation.
  const auto ladder_work = [&](std::size_t i, bool degree_one_only) {
    double best = std::numeric_limits<double>::infinity();
    const auto& shape = ctx.shape(i);
    const auto tokens = static_cast<double>(shape.tokens);
    for (const auto& r : rungs) {
      if (degree_one_only) {
        best = std::min(best, bound_detail::marginal_at(cost, shape, ctx.config(0, {r.lo, r.selective})) +
                                  tokens * r.cheapest);
        continue;
      }
      for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
        for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
          if (r.rho[k][j] == std::numeric_limits<double>::infinity()) continue;
          const auto sp = ctx.style(k, j);
          if (static_cast<double>(cost.peak_bytes(shape, ctx.config(k, {r.hi, r.selective}, sp))) > ctx.budget())
            continue;
          best = std::min(best, static_cast<double>(ctx.degree(k)) *
                                    (bound_detail::marginal_at(cost, shape, ctx.config(k, {r.lo, r.selective}, sp)) +
                                     tokens * r.rho[k][j]));
        }
      }
    }
    return best;
  };
  // Menus for every sample that is not relaxed at degree 1 and for the longest few (samples
  // are in canonical order, longest first); the others are cheapest at degree 1.
  constexpr std::size_t always_menu = 64;
  double work = 0;
  double critical = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& single = ctx.alone(i, 0);
    const bool relaxed_single = single.feasible && single.recompute == relaxed;
    const auto tokens = static_cast<double>(ctx.shape(i).tokens);
    if (relaxed_single && i >= always_menu) {
      double w = ctx.marginal_seconds(i, single, 0) + tokens * plain_cheapest;
      if (!rungs.empty()) w = std::max(w, ladder_work(i, true));
      work += w;
      continue;
    }
    double cheapest = std::numeric_limits<double>::infinity();
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      // Every style the degree allows (one unless automatic): the cheapest of them need not be
      // the fastest, which is what alone() keeps.
      for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
        const auto o = ctx.style_count(k) == 1 ? ctx.alone(i, k) : ctx.evaluate(ctx.shape(i), k, ctx.style(k, j));
        if (!o.feasible) continue;
        cheapest = std::min(cheapest, static_cast<double>(ctx.degree(k)) *
                                          (ctx.marginal_seconds(i, o, k) + tokens * plain_rho(k, j)));
        fastest = std::min(fastest, o.seconds);
      }
    }
    if (fastest == std::numeric_limits<double>::infinity()) ctx.throw_does_not_fit(i);
    if (!rungs.empty()) cheapest = std::max(cheapest, ladder_work(i, false));
    work += cheapest;
    critical = std::max(critical, fastest);
  }
  return std::max(work / static_cast<double>(ctx.gpus()), critical);
}

}  // namespace dcp::detail
