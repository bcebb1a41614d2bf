#pragma once
// verl / OpenRLHF balanced data parallelism as a placement policy: Karmarkar–Karp over the
// data-parallel ranks on the workload 24576·s + s², then micro-batches by a token cap per rank.
//
// Source: volcengine/verl, verl/utils/seqlen_balancing.py — `calculate_workload`
// (24576·s + s², the 12h²s + 2hs² FLOPs of a dense block with h = 4096), `karmarkar_karp`
// (largest differencing, with the equal_size grouping), `rearrange_micro_batches`
// (count = min(n, ceil(tokens / max_token_len)), all-reduced to the maximum over DP with
// same_micro_num_in_dp, KK on workloads, then sorted by workload and interleaved so the smallest
// sit at both ends); the trainer's `_balance_batch` (KK with equal_size over the DP ranks).
// OpenRLHF's openrlhf/utils/seqlen_balancing.py copies it. Notes: docs/baselines.md.
//
// Simplifications and adaptations:
//  - ulysses_degree = 0 (default) is upstream: one Ulysses SP size for every micro-batch, the
//    smallest power of two s whose cap s × max_token_len holds the batch's longest sample (verl
//    requires max_token_len × sp >= the longest sequence; a user sizes sp for the data, here per
//    batch, which can only help it); DP = GPUs / s.
//  - ulysses_degree = 1 is our variant (`verl-hybrid` in dcp-sim, not verl's behaviour): every
//    GPU is one DP rank at degree 1, and only a sample that alone exceeds the cap runs at the
//    smallest power-of-two degree d with tokens <= d × max_token_len, before the other
//    micro-batches, on the aligned block whose ranks carry the least such work; KK then
//    partitions the other samples over the DP ranks with that work as each rank's starting load
//    (one more differencing state that holds it). ulysses_degree = s > 1 fixes SP at s (DP =
//    GPUs / s, cap s × max_token_len per micro-batch), with the same treatment of a sample
//    above its cap.
//  - max_token_len (ppo_max_token_len_per_gpu) is the knob a verl user tunes. Set, it is used
//    as given. Left at 0, it is tuned per batch: the capacity C (the most tokens one GPU holds
//    while the recompute strategy keeps its lightest setting — no recomputation under
//    pyramid_recompute) and C/2, C/4, ... (cap_candidates values) are each planned and the
//    fastest plan by the cost model is kept. Each micro-step runs with the recompute strategy's
//    setting (every layer recomputed when it has none that fits).
//  - KK alone does not enforce the token cap (verl issue: a micro-batch may exceed
//    max_token_len). enforce_token_cap = true (default) applies the merged fix (PR #7553): one
//    more micro-batch until every one is within the cap; false reproduces the older behaviour,
//    whose micro-steps may exceed the budget.
//  - equal_size needs the batch size to be a multiple of the DP size in verl; here zero-length
//    placeholders pad it, so ranks differ by at most one sample.
//  - Ties in KK's heap, which Python leaves to heap order, are broken by insertion order.
// Memory: verl is memory-aware only through the token cap; a cap above the capacity or
// enforce_token_cap = false gives micro-steps over the budget — on purpose: this policy does NOT
// promise placement_policy's budget requirement.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/baselines/detail/common.hpp"
#include "dcp/concepts/placement_policy.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/placement/input.hpp"
#include "dcp/recompute/strategies.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::baselines {

/// verl's `calculate_workload`: 24576·s + s² (FLOPs of a 7B-sized block up to a constant), in
/// double: s² leaves int64 above 3.04e9 tokens (Python's ints never overflow). Workloads are
/// only compared and summed, and are exact integers (so ties are the same as in Python) while
/// s <= 2^26 and their sums stay below 2^53; beyond that they round, deterministically.
[[nodiscard]] constexpr double verl_workload(std::int64_t tokens) noexcept {
  const auto s = static_cast<double>(tokens);
  return 24576.0 * s + s * s;
}

namespace detail {

// One set of the differencing. Its items (index, value) are a chain through kk_items::next, so
// that merging two sets, which Python does by concatenating their lists, takes O(1), and a set
// moves as four words.
struct kk_set {
  double sum = 0;
  std::size_t size = 0;
  std::size_t head = 0;  // first and last item; meaningful when size > 0
  std::size_t tail = 0;
};

// Every item of one karmarkar_karp call, chained into sets.
struct kk_items {
  std::vector<std::size_t> index{};
  std::vector<double> value{};
  std::vector<std::size_t> next{};

  [[nodiscard]] std::size_t add(std::size_t i, double v) {
    index.push_back(i);
    value.push_back(v);
    next.push_back(0);
    return index.size() - 1;
  }

  // Python's Set.__lt__: by sum, then item count, then the item lists ((index, value) pairs,
  // lexicographically).
  [[nodiscard]] bool less(const kk_set& a, const kk_set& b) const {
    if (a.sum != b.sum) return a.sum < b.sum;
    if (a.size != b.size) return a.size < b.size;
    std::size_t x = a.head;
    std::size_t y = b.head;
    for (std::size_t n = 0; n < a.size; ++n, x = next[x], y = next[y]) {
      if (index[x] != index[y]) return index[x] < index[y];
      if (value[x] != value[y]) return value[x] < value[y];
    }
    return false;
  }

  // Appends `from`'s items to `into`'s (Python: into.items + from.items) and adds the sums;
  // both non-empty (a state stores only those).
  void merge(kk_set& into, const kk_set& from) {
    into.sum += from.sum;
    next[into.tail] = from.head;
    into.tail = from.tail;
    into.size += from.size;
  }
};

// A state of the differencing: k sets, decreasing, of which only the `count` non-empty ones are
// stored, at sets[first, first + count) of one shared array with room for `room`; the rest are
// empty (an empty set is below every other, so they sort last, in place). Its spread (largest
// sum - smallest) is kept beside, so the heap mostly compares without visiting the sets.
struct kk_state {
  double spread = 0;
  std::size_t first = 0;
  std::size_t count = 0;
  std::size_t room = 0;
  std::uint64_t order = 0;  // insertion, for ties
};

}  // namespace detail

/// verl's `karmarkar_karp` (largest differencing method): partitions of the indices of `values`
/// into k parts with balanced sums; with `equal_size`, every part gets the same number of items
/// (here: padded with zero-valued placeholders when the count is not a multiple of k, so parts
/// differ by at most one). Each part's indices ascending, as get_seqlen_balanced_partitions
/// returns them. `preload`, if given (k values), is work the parts already carry: it enters the
/// differencing as one more state whose k sets hold it, and part j is the one holding preload j
/// (sets of one state never merge, so each final part holds exactly one). verl has no preload.
/// Values are workloads (verl_workload), finite and >= 0.
[[nodiscard]] inline std::vector<std::vector<std::size_t>> karmarkar_karp(
    const std::vector<double>& values, std::size_t k, bool equal_size,
    const std::vector<double>& preload = {}) {
  if (k == 0) return {};
  const std::size_t n = values.size();
  std::vector<std::pair<double, std::size_t>> sorted;
  const std::size_t pad = equal_size && n % k != 0 ? k - n % k : 0;
  sorted.reserve(n + pad);
  for (std::size_t p = 0; p < pad; ++p) sorted.emplace_back(0, n + p);
  for (std::size_t i = 0; i < n; ++i) sorted.emplace_back(values[i], i);
  std::sort(sorted.begin(), sorted.end());
  const std::size_t pinned = n + pad;  // indices of preload placeholders start here
  const bool preloaded = preload.size() == k;
  const std::size_t step = equal_size ? k : 1;

  detail::kk_items items;
  const std::size_t item_count = sorted.size() + (preloaded ? k : 0);
  items.index.reserve(item_count);
  items.value.reserve(item_count);
  items.next.reserve(item_count);
  // Every state's non-empty sets, at most one per item. A state's room is 1, k, or a power of
  // two below k (a state that outgrows its room moves to the next); the ranges of states merged
  // away are reused for the same room, so the array stays within a small multiple of the items.
  std::vector<detail::kk_set> sets;
  sets.reserve(item_count + item_count / 2);
  std::array<std::vector<std::size_t>, 65> released;  // by room: log2, or 64 for k
  const auto room_class = [&](std::size_t room) {
    return room == k ? std::size_t{64} : static_cast<std::size_t>(std::countr_zero(room));
  };
  const auto allocate = [&](std::size_t room) {
    auto& spare = released[room_class(room)];
    if (!spare.empty()) {
      const std::size_t first = spare.back();
      spare.pop_back();
      return first;
    }
    const std::size_t first = sets.size();
    sets.resize(first + room);
    return first;
  };
  const auto release = [&](const detail::kk_state& s) {
    released[room_class(s.room)].push_back(s.first);
  };

  const auto sort = [&](const detail::kk_state& s) {  // decreasing, ties in place
    const auto begin = sets.begin() + static_cast<std::ptrdiff_t>(s.first);
    std::stable_sort(
        begin, begin + static_cast<std::ptrdiff_t>(s.count),
        [&](const detail::kk_set& a, const detail::kk_set& b) { return items.less(b, a); });
  };
  // Heap order: the state with the largest spread first, then the one with the largest set,
  // then the earliest inserted. Whether `a` comes after `b`.
  const auto after = [&](const detail::kk_state& a, const detail::kk_state& b) {
    if (a.spread != b.spread) return a.spread < b.spread;
    const auto& fa = sets[a.first];
    const auto& fb = sets[b.first];
    if (items.less(fa, fb)) return true;
    if (items.less(fb, fa)) return false;
    return a.order > b.order;
  };
  std::vector<detail::kk_state> heap;
  heap.reserve(sorted.size() / step + 1);
  std::uint64_t order = 0;
  const auto push = [&](detail::kk_state s) {  // s's sets sorted
    s.spread = sets[s.first].sum - (s.count < k ? 0.0 : sets[s.first + k - 1].sum);
    s.order = order++;
    heap.push_back(s);
    std::push_heap(heap.begin(), heap.end(), after);
  };
  const auto pop = [&] {
    std::pop_heap(heap.begin(), heap.end(), after);
    const auto s = heap.back();
    heap.pop_back();
    return s;
  };
  // A new state whose `count` sets hold one item each, made by `item(j)`.
  const auto add_state = [&](std::size_t count, auto item) {
    detail::kk_state s;
    s.first = allocate(count);
    s.count = s.room = count;
    for (std::size_t j = 0; j < count; ++j) {
      const auto [index, value] = item(j);
      const std::size_t added = items.add(index, value);
      sets[s.first + j] = {value, 1, added, added};
    }
    sort(s);
    push(s);
  };

  for (std::size_t offset = 0; offset < sorted.size(); offset += step)
    add_state(step, [&](std::size_t j) {
      return std::pair{sorted[offset + j].second, sorted[offset + j].first};
    });
  if (preloaded) add_state(k, [&](std::size_t j) { return std::pair{pinned + j, preload[j]}; });
  if (heap.empty()) return std::vector<std::vector<std::size_t>>(k);
  while (heap.size() > 1) {
    // Set j of the first takes set k - 1 - j of the second. Of the k sets, the first's a stored
    // ones take the second's where it has them; positions a and above hold the second's own
    // stored sets (a + b of them in all, or k), in the same order.
    auto first = pop();
    const auto second = pop();
    const std::size_t a = first.count;
    const std::size_t b = second.count;
    const std::size_t count = std::min(k, a + b);
    if (count > first.room) {
      const std::size_t room = std::min(k, std::bit_ceil(count));
      const std::size_t moved = allocate(room);
      std::copy_n(sets.begin() + static_cast<std::ptrdiff_t>(first.first), a,
                  sets.begin() + static_cast<std::ptrdiff_t>(moved));
      release(first);
      first.first = moved;
      first.room = room;
    }
    for (std::size_t j = 0; j < a; ++j)
      if (k - 1 - j < b) items.merge(sets[first.first + j], sets[second.first + (k - 1 - j)]);
    for (std::size_t j = a; j < count; ++j)  // positions max(a, k - b) .. k - 1
      sets[first.first + j] = sets[second.first + (k - 1 - (k - count + j))];
    release(second);
    first.count = count;
    sort(first);
    push(first);
  }
  std::vector<std::vector<std::size_t>> parts(k);  // empty sets: the last parts, empty
  const auto& last = heap.front();
  for (std::size_t j = 0; j < last.count; ++j) {
    const auto& set = sets[last.first + j];
    std::vector<std::size_t> part;
    std::size_t slot = k;
    for (std::size_t m = 0, x = set.head; m < set.size; ++m, x = items.next[x]) {
      const std::size_t index = items.index[x];
      if (index < n)
        part.push_back(index);
      else if (index >= pinned)
        slot = index - pinned;
    }
    std::sort(part.begin(), part.end());
    parts[preloaded ? slot : j] = std::move(part);
  }
  return parts;
}

/// karmarkar_karp for integer workloads: the same partition of them as doubles (exact below
/// 2^53, where every realistic workload and sum lies).
[[nodiscard]] inline std::vector<std::vector<std::size_t>> karmarkar_karp(
    const std::vector<std::int64_t>& values, std::size_t k, bool equal_size,
    const std::vector<std::int64_t>& preload = {}) {
  return karmarkar_karp(std::vector<double>(values.begin(), values.end()), k, equal_size,
                        std::vector<double>(preload.begin(), preload.end()));
}

struct verl_balanced_dp {
  /// ppo_max_token_len_per_gpu; 0 tunes it (see the header comment); >= 0.
  std::int64_t max_token_len = 0;
  /// With max_token_len = 0: the caps tried are capacity / 2^j, j < this; in [1, 64].
  std::int32_t cap_candidates = 5;
  /// ulysses_sequence_parallel_size of every micro-batch. 0 (default, upstream): the smallest
  /// allowed degree whose cap holds the longest sample (how a verl user sizes it for the data);
  /// 1 (our hybrid): data parallelism over every GPU, a sample above the cap alone at a larger
  /// degree; s > 1: fixed at s, a sample above the cap alone at a larger degree.
  std::int64_t ulysses_degree = 0;
  /// `_balance_batch`: KK with equal_size over the DP ranks.
  bool equal_size = true;
  /// rearrange_micro_batches: every DP rank runs the largest count any rank needs.
  bool same_micro_num_in_dp = true;
  /// PR #7553: more micro-batches until each is within the cap.
  bool enforce_token_cap = true;
  /// use_dynamic_bsz_balance: order micro-batches with the lightest at both ends.
  bool dynamic_bsz_balance = true;

  template <cost_model M, recompute_strategy<M> R>
  [[nodiscard]] placement place(const placement_input<M, R>& input) const;

  [[nodiscard]] std::string_view name() const noexcept { return "verl-balanced-dp"; }
  friend bool operator==(const verl_balanced_dp&, const verl_balanced_dp&) = default;
};

namespace detail {

template <class Context>
class verl_solver {
 public:
  verl_solver(const Context& ctx, const verl_balanced_dp& options) : ctx_(ctx), options_(options) {
    per_gpu_ = options.max_token_len > 0 ? options.max_token_len
                                         : std::max<std::int64_t>(1, per_gpu_token_capacity(ctx));
    if (options.ulysses_degree < 0)
      throw invalid_spec("verl_balanced_dp: ulysses_degree = " +
                         std::to_string(options.ulysses_degree) + ", must be >= 0");
    if (options.ulysses_degree > 0) {
      validate(execution_config{options.ulysses_degree,
                                default_style(ctx.sp(), options.ulysses_degree, ctx.cost().model(),
                                              ctx.cost().cluster()),
                                {}},
               ctx.cost().model(), ctx.cost().cluster());
      base_ = degree_index_of(ctx, options.ulysses_degree);
    } else {
      base_ = degree_index_at_least(ctx, ceil_div(tokens(0), per_gpu_));
    }
    // A cap beyond int64 holds any micro-batch a valid batch can form: saturate.
    cap_ = dcp::detail::checked_mul(ctx.degree(base_), per_gpu_).value_or(dcp::detail::int64_max);
  }

  [[nodiscard]] placement solve() {
    const std::int64_t sp = ctx_.degree(base_);
    const auto units = static_cast<std::size_t>(ctx_.gpus() / sp);
    placement out;
    rank_clock clock(ctx_.gpus());

    // Samples above the cap run alone at a larger degree, each on the aligned block whose
    // DP ranks carry the least of them so far; their workload is shared by the block's ranks.
    std::vector<double> preload(units, 0.0);
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      if (tokens(i) <= cap_) {
        rest.push_back(i);
        continue;
      }
      const auto k = degree_index_at_least(ctx_, ceil_div(tokens(i), per_gpu_));
      const auto d = ctx_.degree(k);
      const auto span = static_cast<std::size_t>(d / sp);
      std::size_t best = 0;
      double best_load = std::numeric_limits<double>::infinity();
      for (std::size_t u = 0; u + span <= units; u += span) {
        const double load =
            *std::max_element(preload.begin() + static_cast<std::ptrdiff_t>(u),
                              preload.begin() + static_cast<std::ptrdiff_t>(u + span));
        if (load < best_load) {
          best_load = load;
          best = u;
        }
      }
      for (std::size_t u = best; u < best + span; ++u)
        preload[u] += verl_workload(tokens(i)) / static_cast<double>(span);
      append_micro_batch(out, clock, ctx_, static_cast<std::int64_t>(best) * sp, k, {i});
    }

    // KK over the DP ranks, the oversized samples' shares entering as preload.
    std::vector<double> workloads;
    for (auto i : rest) workloads.push_back(verl_workload(tokens(i)));
    // Whole workload units, as the int64 preload this replaced (which was undefined >= 2^63).
    std::vector<double> carried;
    if (std::any_of(preload.begin(), preload.end(), [](double w) { return w > 0; }))
      for (auto w : preload) carried.push_back(std::trunc(w));
    auto per_unit = karmarkar_karp(workloads, units, options_.equal_size, carried);
    for (auto& part : per_unit)
      for (auto& p : part) p = rest[p];

    // Micro-batch counts: ceil(tokens / cap) (at most one per sample), raised until KK's parts
    // respect the cap when enforced, then the maximum over the DP ranks.
    std::size_t most = 0;
    std::vector<std::size_t> counts(units, 0);
    for (std::size_t u = 0; u < units; ++u) {
      counts[u] = count_for(per_unit[u], 0);
      most = std::max(most, counts[u]);
    }
    for (std::size_t u = 0; u < units; ++u) {
      if (per_unit[u].empty()) continue;
      const auto wanted = options_.same_micro_num_in_dp ? most : counts[u];
      for (auto& batch : micro_batches(per_unit[u], count_for(per_unit[u], wanted)))
        append_micro_batch(out, clock, ctx_, static_cast<std::int64_t>(u) * sp, base_, batch);
    }
    out.policy = "verl-balanced-dp (Ulysses degree " + std::to_string(sp) + ", " +
                 std::to_string(per_gpu_) + " tokens per GPU)";
    return out;
  }

 private:
  [[nodiscard]] std::int64_t tokens(std::size_t i) const { return ctx_.sample(i).tokens; }
  // ceil(a / b) for a >= 0, b >= 1, without the a + b - 1 that overflows.
  [[nodiscard]] static std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return a / b + (a % b != 0 ? 1 : 0);
  }

  // The number of micro-batches for these samples: at least `at_least` and ceil(tokens / cap),
  // at most one per sample; with enforcement, raised until every KK part is within the cap.
  [[nodiscard]] std::size_t count_for(const std::vector<std::size_t>& items,
                                      std::size_t at_least) const {
    if (items.empty()) return 0;
    // Saturated: a total beyond int64 needs as many micro-batches as samples anyway.
    std::int64_t total = 0;
    for (auto i : items)
      total = dcp::detail::checked_add(total, tokens(i)).value_or(dcp::detail::int64_max);
    auto count = static_cast<std::size_t>(ceil_div(total, cap_));
    count = std::min(std::max(count, at_least), items.size());
    if (!options_.enforce_token_cap) return count;
    while (count < items.size() && !within_cap(partition(items, count))) ++count;
    return count;
  }

  [[nodiscard]] std::vector<std::vector<std::size_t>> partition(
      const std::vector<std::size_t>& items, std::size_t count) const {
    std::vector<double> values;
    for (auto i : items) values.push_back(verl_workload(tokens(i)));
    auto parts = karmarkar_karp(values, count, false);
    for (auto& part : parts)
      for (auto& p : part) p = items[p];
    return parts;
  }

  [[nodiscard]] bool within_cap(const std::vector<std::vector<std::size_t>>& parts) const {
    for (const auto& part : parts) {
      std::int64_t t = 0;  // <= cap_ throughout, so the sum cannot overflow
      for (auto i : part) {
        if (tokens(i) > cap_ - t) return false;
        t += tokens(i);
      }
    }
    return true;
  }

  // KK into `count` micro-batches, then verl's order: by workload descending, the even positions
  // reversed in front of the odd ones (lightest at both ends).
  [[nodiscard]] std::vector<std::vector<std::size_t>> micro_batches(
      const std::vector<std::size_t>& items, std::size_t count) const {
    auto parts = partition(items, count);
    std::erase_if(parts, [](const auto& p) { return p.empty(); });
    if (!options_.dynamic_bsz_balance || parts.empty()) return parts;
    const auto load = [&](const std::vector<std::size_t>& part) {
      double w = 0;
      for (auto i : part) w += verl_workload(tokens(i));
      return w;
    };
    std::stable_sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) {
      const auto la = load(a);
      const auto lb = load(b);
      if (la != lb) return la > lb;
      return a.front() > b.front();
    });
    std::vector<std::vector<std::size_t>> ordered;
    for (std::size_t j = (parts.size() - 1) / 2 * 2 + 2; j >= 2; j -= 2)
      ordered.push_back(parts[j - 2]);
    for (std::size_t j = 1; j < parts.size(); j += 2) ordered.push_back(parts[j]);
    return ordered;
  }

  const Context& ctx_;
  const verl_balanced_dp& options_;
  std::int64_t per_gpu_ = 1;
  std::size_t base_ = 0;
  std::int64_t cap_ = 1;
};

}  // namespace detail

template <cost_model M, recompute_strategy<M> R>
[[nodiscard]] placement verl_balanced_dp::place(const placement_input<M, R>& input) const {
  if (max_token_len < 0)
    throw invalid_spec("verl_balanced_dp: max_token_len = " + std::to_string(max_token_len) +
                       ", must be >= 0 (0 tunes it)");
  detail::check_cap_candidates("verl_balanced_dp", cap_candidates);
  if (input.size() == 0) return placement{{}, 0, 0, 0, "verl-balanced-dp"};
  using solver = detail::verl_solver<dcp::placement_input<M, R>>;
  if (max_token_len > 0) return solver(input, *this).solve();
  std::optional<placement> best;
  for (auto cap : detail::cap_candidates(detail::per_gpu_token_capacity(input), cap_candidates)) {
    auto tuned = *this;
    tuned.max_token_len = cap;
    auto candidate = solver(input, tuned).solve();
    if (!best || candidate.makespan_seconds < best->makespan_seconds) best = std::move(candidate);
  }
  return std::move(*best);
}

static_assert(placement_policy<verl_balanced_dp, analytic_cost_model, pyramid_recompute>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE::baselines
