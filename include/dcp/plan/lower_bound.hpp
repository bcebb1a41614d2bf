#pragma once
// The honest bound of docs/planner.md ("The lower bound"): no plan finishes sooner than
//   max( Σ_i w_i / P ,  max_i min_d T_i(d) ),   w_i = min_d d·(m_i(d) + t_i·ρ(d))
// — all work spread perfectly at each sample's most efficient feasible config, and the longest
// sample at its fastest config. m_i(d) is the cost model's marginal time of sample i (what it
// adds to any micro-batch it joins, cost_model requirement 5), with the recomputation its memory
// forces. ρ(d) is the fixed cost per token of a micro-step at degree d: every micro-step pays at
// least T_∅(d) beyond its samples' marginal times — the time of an empty one, or the cost
// model's fixed_seconds(c) where it has one (optional member 9: a model whose time is the
// longer of two parts, such as the truth model's host and device, declares the part that adds
// to the marginals) — and holds at most C(d) tokens, the most one
// micro-batch can hold within the budget with none or every layer recomputed (whichever holds
// more), so each token carries at least ρ(d) = T_∅(d) / C(d) of it. With
// bound_options::recompute_ladder, w_i is also bounded over ranges of recomputed layers [lo, hi]
// (doubling away from none and from every layer), with selective recomputation and without — the
// marginal at lo, the capacity at hi, each with the range's selective flag — and the
// larger of the two is used. ρ is counted only for a cost model that declares
// `memory_by_tokens` (cost_model optional member 8: peak bytes depend on a micro-batch only
// through its tokens and samples, an empty micro-batch is fastest without recomputation, and
// recomputation never shortens a marginal); otherwise ρ = 0, the bound without fixed costs.
// Valid for every plan under requirement 5 (superadditive packing, no super-linear
// parallelism).
// Three options tighten it further (the truth bound, sim/truth_bound.hpp, takes all three):
// bound_options::by_bucket counts that samples of different buckets never share a micro-step,
// so a micro-step holds at most its bucket's tokens (a whole number of samples where they all
// have one length); bound_options::empty_floor that no micro-step takes less than an empty one
// with its config, E(c) >= F(c), through max(F + Σ m, E) >= λ (F + Σ m) + (1 - λ) E for the
// best of 17 weights λ per bucket; bound_options::deadline that a sample runs only where its
// micro-step, at least max(E, F + m_i), ends by the makespan: the bound is then the largest
// makespan the work of such runs overflows.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <type_traits>
#include <vector>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/detail/largest_fitting.hpp"
#include "dcp/placement/input.hpp"

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
  /// Samples of different buckets never share a micro-step (the context's buckets): each
  /// micro-step holds at most its bucket's tokens, and a whole number of samples where they all
  /// have one length. Valid for the plans that respect those buckets.
  bool by_bucket = false;
  /// Also count that no micro-step takes less than an empty one with its config (the host's
  /// issue time, where that is longer than the device's fixed cost): per room, the best of 17
  /// weightings of the two floors.
  bool empty_floor = false;
  /// Also count that a sample runs only where its micro-step ends by the makespan: the bound is
  /// the largest makespan M whose work, each sample at its cheapest run that ends by M, exceeds
  /// M on every GPU (bisection, a few dozen passes over the samples that have a menu).
  bool deadline = false;
};

namespace bound_detail {

// The marginal time of shape s under config c (cost_model requirement 5's floor).
template <class M>
[[nodiscard]] double marginal_at(const M& cost, const micro_batch_shape& s,
                                 const execution_config& c) {
  if constexpr (requires { cost.marginal_seconds(s, c); }) {
    return static_cast<double>(cost.marginal_seconds(s, c));
  } else {
    return std::max(
        0.0, static_cast<double>(cost.seconds(s, c)) - static_cast<double>(cost.seconds({}, c)));
  }
}

// The most tokens one sample may have at config c within the budget (peak bytes never decrease
// with tokens under memory_by_tokens); 0 when not even one token fits.
template <class M>
[[nodiscard]] bool token_fits(const M& cost, const execution_config& c, double budget,
                              std::int64_t tokens) {
  micro_batch_shape one;
  one.samples = 1;
  one.tokens = tokens;
  one.longest = tokens;
  return static_cast<double>(cost.peak_bytes(one, c)) <= budget;
}
template <class M>
[[nodiscard]] std::int64_t token_capacity(const M& cost, const execution_config& c, double budget) {
  const auto fits = [&](std::int64_t tokens) { return token_fits(cost, c, budget, tokens); };
  return largest_fitting(fits, std::int64_t{1} << 62);  // no budget holds 2^62 tokens
}

// One rung of the ladder: recomputed layers in [lo, hi], with selective recomputation or
// without. capacity[k][j]: the most tokens one micro-step at degree index k in its j-th style
// holds with the rung's recomputation at hi, C(k, j, hi, selective) (0 when nothing fits). The
// plain rung [0, L] takes the larger capacity of the two (at every layer recomputed they are
// the same).
struct rung {
  std::int32_t lo = 0;
  std::int32_t hi = 0;
  bool selective = false;
  bool either = false;  ///< the plain rung: capacity with or without selective recomputation
  std::vector<std::vector<std::int64_t>> capacity{};
};

template <class Context>
[[nodiscard]] std::vector<rung> ladder(const Context& ctx, bool with_ranges) {
  const auto& cost = ctx.cost();
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
    rungs.push_back({0, layers, false, true});  // the plain share: the most any setting holds
  }
  for (auto& r : rungs) {
    r.capacity.resize(ctx.degrees().size());
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      r.capacity[k].assign(ctx.style_count(k), 0);
      for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
        const auto sp = ctx.style(k, j);
        const auto holds = [&](std::int32_t recomputed, bool selective) {
          return token_capacity(cost, ctx.config(k, {recomputed, selective}, sp), ctx.budget());
        };
        // Peak bytes never grow with the recomputed layers from one on (memory_by_tokens), so a
        // rung holds the most at hi; the plain rung [0, L] at none or at every layer, whichever
        // holds more (with one layer, recomputing it keeps its input and its working set). One
        // evaluation says whether none holds more; only then is its capacity searched.
        if (!r.either) {
          r.capacity[k][j] = holds(r.hi, r.selective);
          continue;
        }
        auto most = std::max(holds(r.hi, false), holds(r.hi, true));
        for (const bool selective : {false, true})
          if (token_fits(cost, ctx.config(k, {r.lo, selective}, sp), ctx.budget(), most + 1))
            most = std::max(most, holds(r.lo, selective));
        r.capacity[k][j] = most;
      }
    }
  }
  return rungs;
}

// What every micro-step at degree index k in its j-th style takes without recomputation (the
// least, under memory_by_tokens): F, beyond its samples' marginals, and E, the time of an
// empty one (F, or more where the host's issue time is longer), which no micro-step with the
// config undercuts.
struct fixed_cost {
  double beyond_marginals = 0;  ///< F(c): fixed_seconds, else an empty micro-step's time
  double empty = 0;             ///< E(c): an empty micro-step's time
};

template <class Context>
[[nodiscard]] std::vector<std::vector<fixed_cost>> fixed_costs(const Context& ctx, bool shares) {
  std::vector<std::vector<fixed_cost>> out(ctx.degrees().size());
  if (!shares) return out;
  for (std::size_t k = 0; k < ctx.degrees().size(); ++k)
    for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
      const double f = std::max(0.0, ctx.fixed_seconds(k, j));
      out[k].push_back({f, std::max(f, ctx.empty_seconds(k, j))});
    }
  return out;
}

// Samples that may share a micro-step: all of them, or those of one bucket. A micro-step of a
// room holds at most its tokens, and where all its samples have one length (a video bucket's
// clips), a whole number of them.
struct room {
  double tokens = 0;        ///< the room's tokens (infinite for the one room of all samples)
  std::int64_t length = 0;  ///< its samples' common length; 0 where lengths differ
};

struct room_map {
  std::vector<room> rooms{};
  std::vector<std::uint32_t> room_of{};  ///< per sample; empty where there is one room
  [[nodiscard]] std::size_t of(std::size_t i) const noexcept {
    return room_of.empty() ? 0 : room_of[i];
  }
};

template <class Context>
[[nodiscard]] room_map rooms_of(const Context& ctx, bool by_bucket) {
  room_map out;
  const std::size_t n = ctx.size();
  if (!by_bucket) {
    out.rooms.push_back({std::numeric_limits<double>::infinity(), 0});
    return out;
  }
  std::vector<std::int32_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = ctx.bucket(i);
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  out.rooms.assign(labels.size(), room{0, -1});
  out.room_of.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto b = static_cast<std::size_t>(
        std::lower_bound(labels.begin(), labels.end(), ctx.bucket(i)) - labels.begin());
    out.room_of[i] = static_cast<std::uint32_t>(b);
    auto& r = out.rooms[b];
    const auto tokens = ctx.shape(i).tokens;
    r.tokens += static_cast<double>(tokens);
    r.length = r.length == -1 || r.length == tokens ? tokens : 0;
  }
  return out;
}

// The weights λ the bound tries per room: 1 alone (the fixed cost F only), or 0, 1/16, ..., 1.
[[nodiscard]] inline std::vector<double> empty_weights(bool with_empty_floor) {
  if (!with_empty_floor) return {1.0};
  constexpr int steps = 16;
  std::vector<double> out;
  for (int w = 0; w <= steps; ++w) out.push_back(static_cast<double>(w) / steps);
  return out;
}

// The fixed time per token at weight λ of a micro-step whose capacity is `capacity` tokens in
// room `r`: (λ F + (1 - λ) E) / n, n the most tokens such a micro-step holds there; infinity
// where nothing fits.
[[nodiscard]] inline double share_per_token(const fixed_cost& f, std::int64_t capacity,
                                            const room& r, double lambda) {
  if (r.length > 0) capacity -= capacity % r.length;  // whole samples of the room's length
  const double most = std::min(static_cast<double>(capacity), r.tokens);
  if (most <= 0) return std::numeric_limits<double>::infinity();
  return (lambda * f.beyond_marginals + (1.0 - lambda) * f.empty) / most;
}

// One way sample i may run in the bound: on `gpus` GPUs (a degree and style, at a rung of the
// ladder or the plain share) with marginal `marginal`, in a micro-step that takes at least
// `floor` (what no micro-step holding the sample there undercuts).
struct run_candidate {
  double floor = 0;
  double gpus = 1;
  double marginal = 0;
  std::uint32_t rung = 0;  // index into the rungs, the plain one first
  std::uint32_t k = 0;
  std::uint32_t j = 0;
  bool plain = true;
};

// Sample i's least share among `candidates` that end by `deadline`: the larger of the plain
// share's and the ladder's (both bound the same share of the same micro-step), infinity when
// none does. `value(c)`: the candidate's share.
template <class Value>
[[nodiscard]] double least_share(std::span<const run_candidate> candidates, bool with_ladder,
                                 double deadline, const Value& value) {
  const auto inf = std::numeric_limits<double>::infinity();
  double plain = inf;
  double ladder = with_ladder ? inf : 0.0;
  for (const auto& c : candidates) {
    if (c.floor > deadline) continue;
    (c.plain ? plain : ladder) = std::min(c.plain ? plain : ladder, value(c));
  }
  return std::max(plain, ladder);
}

}  // namespace bound_detail

template <class Context>
[[nodiscard]] double lower_bound_seconds(const Context& ctx, bound_options options = {}) {
  const std::size_t n = ctx.size();
  if (n == 0) return 0.0;
  const auto relaxed = ctx.evaluate(micro_batch_shape{}, 0).recompute;
  const auto& cost = ctx.cost();
  using model_t = std::remove_cvref_t<decltype(cost)>;
  constexpr bool shares = memory_by_tokens<model_t>;
  const auto inf = std::numeric_limits<double>::infinity();
  // The rungs: the plain share (capacity at full recomputation) first, then, if asked, the
  // ladder's.
  std::vector<bound_detail::rung> rungs;
  if constexpr (shares) {
    rungs = bound_detail::ladder(ctx, false);
    if (options.recompute_ladder)
      for (auto& r : bound_detail::ladder(ctx, true)) rungs.push_back(std::move(r));
  }
  const bool with_ladder = rungs.size() > 1;
  // The rooms samples share micro-steps in: one, or one per bucket with options.by_bucket.
  const auto rooms = bound_detail::rooms_of(ctx, options.by_bucket);
  // The weights λ of the fixed cost against the empty micro-step's time (1 only: the fixed
  // cost alone, as without options.empty_floor).
  const auto weights = bound_detail::empty_weights(shares && options.empty_floor);
  const auto fixed = bound_detail::fixed_costs(ctx, shares);
  const auto rho = [&](std::size_t r, std::size_t room, double lambda, std::size_t k,
                       std::size_t j) {
    if (!shares) return 0.0;
    return bound_detail::share_per_token(fixed[k][j], rungs[r].capacity[k][j], rooms.rooms[room],
                                         lambda);
  };
  // cheapest[r][room][w]: min over degrees and styles of degree · ρ at rung r.
  std::vector<std::vector<std::vector<double>>> cheapest(
      rungs.size(), std::vector<std::vector<double>>(rooms.rooms.size(),
                                                     std::vector<double>(weights.size(), inf)));
  for (std::size_t r = 0; r < rungs.size(); ++r)
    for (std::size_t b = 0; b < rooms.rooms.size(); ++b)
      for (std::size_t w = 0; w < weights.size(); ++w)
        for (std::size_t k = 0; k < ctx.degrees().size(); ++k)
          for (std::size_t j = 0; j < ctx.style_count(k); ++j)
            cheapest[r][b][w] = std::min(cheapest[r][b][w], static_cast<double>(ctx.degree(k)) *
                                                                rho(r, b, weights[w], k, j));
  // A micro-step with config c and n tokens takes at least max(F(c) + Σ m_i, E(c)) >=
  // λ (F(c) + Σ m_i) + (1 - λ) E(c) for every λ in [0, 1], so sample i's share
  // d (λ m_i + t_i (λ F + (1 - λ) E) / n) bounds it, n at most the room's capacity at c; one λ
  // per room holds for every plan. short_work[room][w]: the shares of the samples cheapest at
  // degree 1 (at degree 1, with the cheapest share of the fixed cost any degree gives); the
  // others (menu samples) keep their candidates, each degree and style, plain and on the
  // ladder's rungs.
  std::vector<std::vector<double>> short_work(rooms.rooms.size(),
                                              std::vector<double>(weights.size(), 0.0));
  std::vector<std::size_t> menu;           // samples with candidates
  std::vector<std::size_t> menu_begin{0};  // their candidates' offsets
  std::vector<bound_detail::run_candidate> candidates;
  constexpr std::size_t always_menu = 64;  // samples are in canonical order, longest first
  std::vector<double> rung_marginals;      // a short sample's marginal at each rung's lo,
  std::size_t rung_marginals_of = n;       // for this sample's run of equal shapes
  double critical = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& single = ctx.alone(i, 0);
    const auto& shape = ctx.shape(i);
    const auto tokens = static_cast<double>(shape.tokens);
    const std::size_t room = rooms.of(i);
    if (single.feasible && single.recompute == relaxed && i >= always_menu) {
      const double m = ctx.alone_marginal(i, 0);
      if (rung_marginals_of != ctx.first_alike(i)) {  // equal shapes have equal marginals
        rung_marginals_of = ctx.first_alike(i);
        rung_marginals.clear();
        for (std::size_t r = 1; r < rungs.size(); ++r)
          rung_marginals.push_back(bound_detail::marginal_at(
              cost, shape, ctx.config(0, {rungs[r].lo, rungs[r].selective})));
      }
      for (std::size_t w = 0; w < weights.size(); ++w) {
        double ladder = with_ladder ? inf : 0.0;
        for (std::size_t r = 1; r < rungs.size(); ++r)
          ladder =
              std::min(ladder, weights[w] * rung_marginals[r - 1] + tokens * cheapest[r][room][w]);
        short_work[room][w] +=
            std::max(weights[w] * m + tokens * (shares ? cheapest[0][room][w] : 0.0), ladder);
      }
      continue;
    }
    double fastest = inf;
    for (std::size_t k = 0; k < ctx.degrees().size(); ++k) {
      const auto d = static_cast<double>(ctx.degree(k));
      // Every style the degree allows (one unless automatic): the cheapest of them need not be
      // the fastest, which is what alone() keeps.
      for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
        const bool alone = ctx.style_count(k) == 1;
        const auto o = alone ? ctx.alone(i, k) : ctx.evaluate(shape, k, ctx.style(k, j));
        if (!o.feasible) continue;
        const double m = alone ? ctx.alone_marginal(i, k) : ctx.marginal_seconds(i, o, k);
        const double floor =
            shares ? std::max(fixed[k][j].empty, fixed[k][j].beyond_marginals + m) : m;
        candidates.push_back(
            {floor, d, m, 0, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(j), true});
        fastest = std::min(fastest, o.seconds);
      }
    }
    if (fastest == inf) ctx.throw_does_not_fit(i);
    critical = std::max(critical, fastest);
    // A sample too large for a rung at a degree is never run there with that recomputation.
    for (std::size_t r = 1; r < rungs.size(); ++r)
      for (std::size_t k = 0; k < ctx.degrees().size(); ++k)
        for (std::size_t j = 0; j < ctx.style_count(k); ++j) {
          if (rungs[r].capacity[k][j] == 0) continue;
          const auto sp = ctx.style(k, j);
          if (static_cast<double>(cost.peak_bytes(
                  shape, ctx.config(k, {rungs[r].hi, rungs[r].selective}, sp))) > ctx.budget())
            continue;
          const double m = bound_detail::marginal_at(
              cost, shape, ctx.config(k, {rungs[r].lo, rungs[r].selective}, sp));
          candidates.push_back({std::max(fixed[k][j].empty, fixed[k][j].beyond_marginals + m),
                                static_cast<double>(ctx.degree(k)), m,
                                static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(k),
                                static_cast<std::uint32_t>(j), false});
        }
    menu.push_back(i);
    menu_begin.push_back(candidates.size());
  }
  // The work of every room at weight index w_of(room), each menu sample running only where its
  // micro-step ends by `deadline`.
  const auto work_by = [&](double deadline, const auto& w_of) {
    std::vector<double> work(rooms.rooms.size(), 0.0);
    for (std::size_t b = 0; b < rooms.rooms.size(); ++b) work[b] = short_work[b][w_of(b)];
    for (std::size_t x = 0; x < menu.size(); ++x) {
      const auto i = menu[x];
      const auto room = rooms.of(i);
      const double lambda = weights[w_of(room)];
      const auto tokens = static_cast<double>(ctx.shape(i).tokens);
      work[room] += bound_detail::least_share(
          std::span(candidates).subspan(menu_begin[x], menu_begin[x + 1] - menu_begin[x]),
          with_ladder, deadline, [&](const bound_detail::run_candidate& c) {
            return c.gpus * (lambda * c.marginal + tokens * rho(c.rung, room, lambda, c.k, c.j));
          });
    }
    return work;
  };
  // Per room, the weight whose work is largest with no deadline.
  std::vector<std::size_t> weight_of(rooms.rooms.size(), 0);
  std::vector<double> heaviest(rooms.rooms.size(), -inf);
  for (std::size_t w = 0; w < weights.size(); ++w) {
    const auto work = work_by(inf, [&](std::size_t) { return w; });
    for (std::size_t b = 0; b < rooms.rooms.size(); ++b)
      if (work[b] > heaviest[b]) {
        heaviest[b] = work[b];
        weight_of[b] = w;
      }
  }
  const auto total_by = [&](double deadline) {
    const auto work = work_by(deadline, [&](std::size_t b) { return weight_of[b]; });
    return std::accumulate(work.begin(), work.end(), 0.0) / static_cast<double>(ctx.gpus());
  };
  const double bound = std::max(total_by(inf), critical);
  if (!options.deadline || menu.empty()) return bound;
  // No plan ends by a makespan M whose work, every sample run only where it ends by M, is
  // above M on every GPU: the bound is the largest such M (bisection between the bound without
  // deadlines, which ends by none that its work exceeds, and a makespan that holds its work).
  double lo = bound;
  double hi = bound;
  for (int doubling = 0; doubling < 64 && total_by(hi) > hi; ++doubling) hi *= 2;
  if (!(total_by(hi) <= hi)) return bound;
  for (int step = 0; step < 60 && hi - lo > 1e-9 * hi; ++step) {
    const double mid = 0.5 * (lo + hi);
    (total_by(mid) > mid ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
