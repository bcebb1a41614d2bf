#pragma once
// The discrete-event simulator: executes any step_plan on the truth model. Every rank runs its
// micro-steps in increasing sequence number; a group's micro-step starts when all its members
// are free; its duration is the truth model's for the micro-batch's actual samples times seeded
// lognormal noise; cross-node transfers running at the same time share their nodes' NICs
// (durations are recomputed whenever that set changes); the gradient synchronisation follows
// the last micro-step. Per-GPU timelines, idle time, true peak memory and OOM events (counted,
// never hidden: the step still completes) come back in a step_result.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <queue>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/plan/lockstep.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/plan/validate_batch.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/workload/random.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::sim {

struct sim_options {
  std::uint64_t seed = 0;
  /// Sigma of each micro-step's lognormal duration multiplier exp(sigma z - sigma^2/2) (mean
  /// 1); one more draw scales the gradient synchronisation. 0 turns noise off; finite, in
  /// [0, max_noise_sigma].
  double noise_sigma = 0.03;
  /// Above it the median multiplier exp(-sigma^2/2) is below 2e-22 (almost every micro-step
  /// takes no time, one draw decides the step), and by sigma ~ 30 the multiplier underflows to 0.
  static constexpr double max_noise_sigma = 10;
  /// Fill step_result::timelines (one interval per rank per micro-step).
  bool record_timelines = true;
  /// Require the plan to hold every sample of the batch exactly once (a plan that drops a
  /// sample would otherwise look fast).
  bool require_every_sample = true;

  friend bool operator==(const sim_options&, const sim_options&) = default;
};

/// What one GPU did in one micro-step.
struct rank_interval {
  double start = 0;
  double end = 0;
  std::int64_t sequence = 0;
  std::int64_t degree = 1;
  recompute_setting recompute{};
  bool oom = false;      ///< the micro-step's true peak exceeded the GPU's capacity
  std::size_t step = 0;  ///< index into step_plan::micro_steps

  friend bool operator==(const rank_interval&, const rank_interval&) = default;
};

/// One micro-step as simulated (indexed like step_plan::micro_steps).
struct simulated_micro_step {
  double start_seconds = 0;
  double end_seconds = 0;
  double alone_seconds = 0;  ///< truth time with the NICs to itself, noise included
  double peak_bytes = 0;     ///< true peak per GPU of the group
  double noise = 1;          ///< the duration multiplier drawn for it
  bool crosses_nodes = false;
  bool oom = false;

  [[nodiscard]] double seconds() const noexcept { return end_seconds - start_seconds; }
  friend bool operator==(const simulated_micro_step&, const simulated_micro_step&) = default;
};

struct step_result {
  double step_seconds = 0;      ///< makespan + gradient synchronisation
  double makespan_seconds = 0;  ///< until the last micro-step ends
  double gradient_sync_seconds = 0;
  double idle_fraction = 0;         ///< GPU time idle before the makespan
  double peak_bytes = 0;            ///< max over ranks of the true peak
  std::int64_t oom_events = 0;      ///< micro-steps whose true peak exceeds capacity
  std::int64_t oom_gpu_events = 0;  ///< the same counted once per GPU of the group
  double capacity_bytes = 0;
  /// Seconds micro-steps lost to NIC sharing (sum over micro-steps of actual - alone).
  double nic_contention_seconds = 0;
  std::int64_t tokens = 0;
  std::vector<std::vector<rank_interval>> timelines{};  ///< per rank, in execution order
  std::vector<double> rank_busy_seconds{};
  std::vector<double> rank_peak_bytes{};  ///< static bytes for a rank with no work
  std::vector<simulated_micro_step> micro_steps{};

  [[nodiscard]] double tokens_per_second() const noexcept {
    return step_seconds > 0 ? static_cast<double>(tokens) / step_seconds : 0.0;
  }
  friend bool operator==(const step_result&, const step_result&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const step_result& r) {
  return os << "step_result{step " << r.step_seconds << " s = makespan " << r.makespan_seconds
            << " + sync " << r.gradient_sync_seconds << ", idle " << r.idle_fraction * 100.0
            << "%, peak " << r.peak_bytes / gib << " GiB, OOM " << r.oom_events
            << ", NIC contention " << r.nic_contention_seconds << " s}";
}

namespace detail {

[[nodiscard]] inline std::string describe(const micro_step& m, std::size_t index) {
  return "micro-step #" + std::to_string(m.sequence) + " (entry " + std::to_string(index) +
         ", ranks " + std::to_string(m.first_rank) + ".." + std::to_string(m.last_rank()) + ")";
}

/// A sample's grid, "frames x height x width", or "text".
[[nodiscard]] inline std::string grid_text(const sample& s) {
  if (!s.video) return "text";
  return "video grid " + std::to_string(s.video->frames) + " x " + std::to_string(s.video->height) +
         " x " + std::to_string(s.video->width);
}

/// Lognormal multiplier with mean 1.
[[nodiscard]] inline double noise_factor(workload::rng& random, double sigma) {
  if (sigma <= 0) return 1.0;
  return std::exp(sigma * workload::standard_normal(random) - 0.5 * sigma * sigma);
}

/// Throws unless `plan` runs on `truth`'s cluster: its size, its node size, each micro-step's
/// config, group and (hybrid) split. Also checks the noise and the batch.
inline void check_plan(const step_plan& plan, std::span<const sample> batch,
                       const truth_model& truth, const sim_options& options) {
  const auto& cluster = truth.cluster();
  const std::int64_t gpus = cluster.gpus;
  if (plan.gpus != gpus)
    throw invalid_spec("simulate: the plan is for " + std::to_string(plan.gpus) +
                       " GPUs, the truth model's cluster has " + std::to_string(gpus));
  if (plan.gpus_per_node != 0 && plan.gpus_per_node != cluster.gpus_per_node)
    throw invalid_spec("simulate: the plan has " + std::to_string(plan.gpus_per_node) +
                       " GPUs per node, the truth model's cluster " +
                       std::to_string(cluster.gpus_per_node));
  dcp::detail::require_finite_non_negative(options.noise_sigma, "simulate: ", "noise_sigma");
  if (options.noise_sigma > sim_options::max_noise_sigma)
    throw invalid_spec("simulate: noise_sigma = " + dcp::detail::number_text(options.noise_sigma) +
                       ", must be at most " +
                       dcp::detail::number_text(sim_options::max_noise_sigma));
  validate_batch(batch);
  const auto& steps = plan.micro_steps;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i];
    try {
      validate(m.config, truth.model(), cluster);
    } catch (const invalid_spec& e) {
      throw invalid_spec("simulate: " + describe(m, i) + ": " + e.what());
    }
    if (m.first_rank < 0 || m.last_rank() >= gpus)
      throw invalid_spec("simulate: " + describe(m, i) + " lies outside the cluster's ranks 0.." +
                         std::to_string(gpus - 1));
    // The truth model runs a hybrid group with the split the planner chooses; a plan that states
    // another (run_step would build those sub-groups) is not what it would simulate.
    if (m.config.sp == sequence_parallel::hybrid) {
      const auto u = hybrid_ulysses_degree(m.config.degree, truth.model(), cluster);
      if (plan.hybrid_ulysses_degree != u)
        throw invalid_spec(
            "simulate: " + describe(m, i) + " is hybrid with plan.hybrid_ulysses_degree = " +
            std::to_string(plan.hybrid_ulysses_degree) + ", but the truth model runs degree " +
            std::to_string(m.config.degree) + " as Ulysses groups of " + std::to_string(u) +
            " (the largest power of two dividing the " + std::to_string(truth.model().heads) +
            " heads within a node): it simulates only that split");
    }
  }
  // ZeRO-3's gathers synchronise the world in every micro-step: a rank with fewer micro-steps
  // than another would leave it waiting in a gather forever.
  if (plan.lockstep || truth.training().runs_in_lockstep()) {
    const auto why = lockstep_violation(plan);
    if (!why.empty())
      throw invalid_spec(std::string("simulate: ") +
                         (plan.lockstep ? "plan.lockstep is set, but "
                                        : "the training runs in lockstep (ZeRO-3 or lockstep on), "
                                          "and the plan is not: ") +
                         why + " (dcp::make_lockstep puts a plan in rounds)");
  }
}

/// Each micro-step's micro-batch shape, from the samples it names; every id must be in the
/// batch, in one micro-step at most (in exactly one with `require_every_sample`), and a
/// micro-step holds video clips of one grid or text only. Adds the tokens to `result`.
[[nodiscard]] inline std::vector<micro_batch_shape> shapes_of(const std::vector<micro_step>& steps,
                                                              std::span<const sample> batch,
                                                              bool require_every_sample,
                                                              step_result& result) {
  std::vector<std::pair<std::uint64_t, std::size_t>> by_id;
  by_id.reserve(batch.size());
  for (std::size_t k = 0; k < batch.size(); ++k) by_id.emplace_back(batch[k].id, k);
  std::sort(by_id.begin(), by_id.end());
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> owner(batch.size(), none);
  std::vector<micro_batch_shape> shapes(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::size_t first = none;  // the micro-step's first sample, whose grid the others share
    for (auto id : steps[i].sample_ids) {
      const auto it =
          std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(id, std::size_t{0}));
      if (it == by_id.end() || it->first != id)
        throw invalid_sample("simulate: " + describe(steps[i], i) + " names sample id " +
                             std::to_string(id) + ", which is not in the batch");
      const std::size_t k = it->second;
      if (owner[k] != none)
        throw invalid_sample("simulate: sample id " + std::to_string(id) + " is in " +
                             describe(steps[owner[k]], owner[k]) + " and in " +
                             describe(steps[i], i) + "; each sample must run once");
      owner[k] = i;
      // Video clips are batched as dense tensors of one latent grid (varlen_buckets): a
      // micro-step holds clips of one grid, or text only. The truth bound counts on it.
      if (first == none)
        first = k;
      else if (batch[first].video != batch[k].video)
        throw invalid_sample("simulate: " + describe(steps[i], i) + " holds sample id " +
                             std::to_string(id) + " (" + grid_text(batch[k]) +
                             ") beside sample id " + std::to_string(batch[first].id) + " (" +
                             grid_text(batch[first]) +
                             "); a micro-step holds video clips of one grid, or text only");
      shapes[i] += micro_batch_shape::of(batch[k]);
    }
    // validate_batch bounds the batch's total and each sample runs once, so this cannot
    // overflow; checked all the same, as every sum of user values.
    const auto tokens = dcp::detail::checked_add(result.tokens, shapes[i].tokens);
    if (!tokens)
      throw invalid_sample("simulate: step_result tokens = " + std::to_string(result.tokens) +
                           " + " + std::to_string(shapes[i].tokens) + " of " +
                           describe(steps[i], i) + " exceeds " +
                           std::to_string(dcp::detail::int64_max));
    result.tokens = *tokens;
  }
  if (require_every_sample) {
    std::size_t missing = 0, first_missing = none;
    for (std::size_t k = 0; k < batch.size(); ++k)
      if (owner[k] == none && missing++ == 0) first_missing = k;
    if (missing > 0)
      throw invalid_sample("simulate: sample id " + std::to_string(batch[first_missing].id) +
                           " of the batch is in no micro-step (" + std::to_string(missing) +
                           " samples missing); the plan must cover the batch");
  }
  return shapes;
}

/// The micro-steps' indices in sequence order (then index). Throws where two micro-steps with
/// the same sequence number share a rank: the ranks could take them in opposite orders and wait
/// on each other forever.
[[nodiscard]] inline std::vector<std::size_t> sequence_order(const std::vector<micro_step>& steps) {
  const std::size_t count = steps.size();
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (steps[a].sequence != steps[b].sequence) return steps[a].sequence < steps[b].sequence;
    return a < b;
  });
  for (std::size_t lo = 0; lo < count;) {
    std::size_t hi = lo + 1;
    while (hi < count && steps[order[hi]].sequence == steps[order[lo]].sequence) ++hi;
    if (hi - lo > 1) {
      std::vector<std::size_t> run(order.begin() + static_cast<std::ptrdiff_t>(lo),
                                   order.begin() + static_cast<std::ptrdiff_t>(hi));
      std::sort(run.begin(), run.end(), [&](std::size_t a, std::size_t b) {
        return steps[a].first_rank < steps[b].first_rank;
      });
      std::size_t widest = run[0];
      for (std::size_t j = 1; j < run.size(); ++j) {
        const auto& a = steps[widest];
        const auto& b = steps[run[j]];
        if (b.first_rank <= a.last_rank()) {
          const auto shared_last = std::min(a.last_rank(), b.last_rank());
          throw error("simulate: deadlock: " + describe(a, widest) + " and " + describe(b, run[j]) +
                      " carry the same sequence number and share ranks " +
                      std::to_string(b.first_rank) + ".." + std::to_string(shared_last) +
                      "; every rank runs its micro-steps in sequence order, so these ranks may "
                      "take the two in opposite orders and wait on each other forever");
        }
        if (b.last_rank() > a.last_rank()) widest = run[j];
      }
    }
    lo = hi;
  }
  return order;
}

/// Each rank's micro-steps in sequence order, as compressed rows: rank r's are
/// steps[begin[r] .. begin[r + 1]).
struct rank_rows {
  std::vector<std::size_t> begin{};
  std::vector<std::size_t> steps{};

  rank_rows(const std::vector<micro_step>& plan_steps, std::span<const std::size_t> order,
            std::int64_t gpus)
      : begin(static_cast<std::size_t>(gpus) + 1, 0) {
    for (const auto& m : plan_steps)
      for (auto r = m.first_rank; r <= m.last_rank(); ++r) ++begin[static_cast<std::size_t>(r) + 1];
    for (std::size_t r = 0; r < static_cast<std::size_t>(gpus); ++r) begin[r + 1] += begin[r];
    steps.resize(begin.back());
    std::vector<std::size_t> fill(begin.begin(), begin.end() - 1);
    for (auto i : order)
      for (auto r = plan_steps[i].first_rank; r <= plan_steps[i].last_rank(); ++r)
        steps[fill[static_cast<std::size_t>(r)]++] = i;
  }
};

/// The truth model's parts of every micro-step, with its noise drawn in sequence order, its
/// time alone, its true peak and whether it runs out of memory, into `result`.
[[nodiscard]] inline std::vector<micro_step_parts> price(const std::vector<micro_step>& steps,
                                                         std::span<const micro_batch_shape> shapes,
                                                         std::span<const std::size_t> order,
                                                         const truth_model& truth,
                                                         workload::rng& random, double noise_sigma,
                                                         step_result& result) {
  std::vector<micro_step_parts> parts(steps.size());
  result.micro_steps.resize(steps.size());
  result.capacity_bytes = truth.capacity_bytes();
  for (auto i : order) {
    const auto& m = steps[i];
    parts[i] = truth.micro_step_parts_at(shapes[i], m.config, m.first_rank);
    auto& out = result.micro_steps[i];
    out.noise = noise_factor(random, noise_sigma);
    out.alone_seconds = out.noise * parts[i].seconds();
    out.peak_bytes = truth.peak_bytes(shapes[i], m.config);
    out.crosses_nodes = parts[i].crosses_nodes && parts[i].inter_node_bytes > 0;
    out.oom = out.peak_bytes > result.capacity_bytes;
    if (out.oom) {
      ++result.oom_events;
      result.oom_gpu_events += m.degree();
    }
  }
  return parts;
}

/// The event loop: runs every micro-step once all its members are free and every world barrier
/// before it has passed. Cross-node micro-steps progress at 1 / duration(rate), rate = the
/// smallest per-GPU share of the NICs over the nodes the group touches: min(one NIC, node NICs
/// / GPUs sending across on that node). Every GPU of a cross-node group counts as sending across
/// for its whole duration (conservative: real transfers come in bursts between compute).
class execution {
 public:
  execution(const step_plan& plan, const truth_model& truth, const rank_rows& rows,
            const std::vector<micro_step_parts>& parts, step_result& result)
      : steps_(plan.micro_steps),
        barriers_(plan.barriers),
        rows_(rows),
        parts_(parts),
        result_(result),
        gpus_(truth.cluster().gpus),
        gpn_(truth.cluster().gpus_per_node),
        node_bandwidth_(truth.node_nic_bandwidth()),
        gpu_cap_(truth.gpu_nic_cap()),
        flows_(steps_.size()),
        version_(steps_.size(), 0),
        senders_(static_cast<std::size_t>(gpus_ / gpn_), 0),
        gate_(steps_.size(), 0),
        below_(barriers_.size(), 0),
        head_(static_cast<std::size_t>(gpus_), 0),
        arrived_(steps_.size(), 0) {
    count_barriers();
  }

  /// Runs every micro-step; fills their start and end, each rank's busy time and the NIC
  /// contention. Throws if some never start (unreachable after sequence_order's check).
  void run() {
    pass_barriers(0.0);
    for (std::int64_t r = 0; r < gpus_; ++r) arrive(r, 0.0);
    result_.rank_busy_seconds.assign(static_cast<std::size_t>(gpus_), 0.0);
    while (!events_.empty()) {
      const auto [now, sequence, i, stamp] = events_.top();
      events_.pop();
      (void)sequence;
      if (stamp != version_[i]) continue;  // superseded by a re-rate
      finish(i, now);
    }
    if (finished_ < steps_.size()) throw_never_started();
  }

 private:
  struct flow {
    double progress = 0;
    double last = 0;
    double rate = 0;
  };
  using event =
      std::tuple<double, std::int64_t, std::size_t, std::uint64_t>;  // time, seq, step, version

  // World barriers (step_plan::barriers): a micro-step behind k barriers starts only after the
  // k-th has passed, i.e. once every micro-step numbered below it has ended. No micro-step
  // behind an unpassed barrier has started, so barrier k passes when `finished_` reaches the
  // number of micro-steps numbered below it.
  void count_barriers() {
    for (std::size_t k = 1; k < barriers_.size(); ++k)
      if (barriers_[k] <= barriers_[k - 1])
        throw error("simulate: plan.barriers[" + std::to_string(k) +
                    "] = " + std::to_string(barriers_[k]) + ", must be greater than barriers[" +
                    std::to_string(k - 1) + "] = " + std::to_string(barriers_[k - 1]) +
                    " (increasing)");
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      gate_[i] = static_cast<std::size_t>(
          std::upper_bound(barriers_.begin(), barriers_.end(), steps_[i].sequence) -
          barriers_.begin());
      if (gate_[i] < barriers_.size()) ++below_[gate_[i]];
    }
    for (std::size_t k = 1; k < barriers_.size(); ++k) below_[k] += below_[k - 1];
  }

  [[nodiscard]] std::int64_t members_on(std::size_t i, std::int64_t node) const {
    const auto first = std::max(steps_[i].first_rank, node * gpn_);
    const auto last = std::min(steps_[i].last_rank(), (node + 1) * gpn_ - 1);
    return last - first + 1;
  }
  [[nodiscard]] double rate_of(std::size_t i) const {
    double rate = gpu_cap_;
    for (auto n = steps_[i].first_rank / gpn_; n <= steps_[i].last_rank() / gpn_; ++n)
      rate = std::min(rate,
                      node_bandwidth_ / static_cast<double>(senders_[static_cast<std::size_t>(n)]));
    return rate;
  }
  [[nodiscard]] double duration_at(std::size_t i, double rate) const {
    return result_.micro_steps[i].noise * parts_[i].seconds_at(rate);
  }
  void schedule(std::size_t i, double at) {
    events_.emplace(at, steps_[i].sequence, i, ++version_[i]);
  }
  void add_senders(std::size_t i, std::int64_t sign) {
    for (auto n = steps_[i].first_rank / gpn_; n <= steps_[i].last_rank() / gpn_; ++n)
      senders_[static_cast<std::size_t>(n)] += sign * members_on(i, n);
  }

  // Re-rates every running cross-node micro-step after the senders changed at time `now`.
  void rerate(double now) {
    for (auto j : active_) {
      auto& f = flows_[j];
      const double rate = rate_of(j);
      if (rate == f.rate) continue;
      f.progress = std::min(1.0, f.progress + (now - f.last) / duration_at(j, f.rate));
      f.last = now;
      f.rate = rate;
      schedule(j, now + (1.0 - f.progress) * duration_at(j, rate));
    }
  }

  void start(std::size_t i, double now) {
    result_.micro_steps[i].start_seconds = now;
    if (!result_.micro_steps[i].crosses_nodes) {
      schedule(i, now + result_.micro_steps[i].alone_seconds);
      return;
    }
    add_senders(i, 1);
    rerate(now);
    flows_[i] = {0.0, now, rate_of(i)};
    active_.push_back(i);
    schedule(i, now + duration_at(i, flows_[i].rate));
  }

  void pass_barriers(double now) {
    const auto before = passed_;
    while (passed_ < barriers_.size() && finished_ == below_[passed_]) ++passed_;
    if (passed_ == before) return;
    std::vector<std::size_t> still;
    for (auto i : held_) {
      if (gate_[i] <= passed_)
        start(i, now);
      else
        still.push_back(i);
    }
    held_ = std::move(still);
  }

  // Rank `rank` is free at `now`: its next micro-step starts if it was the last member missing.
  void arrive(std::int64_t rank, double now) {
    const auto r = static_cast<std::size_t>(rank);
    if (rows_.begin[r] + head_[r] >= rows_.begin[r + 1]) return;
    const std::size_t i = rows_.steps[rows_.begin[r] + head_[r]];
    if (++arrived_[i] != steps_[i].degree()) return;
    if (gate_[i] <= passed_)
      start(i, now);
    else
      held_.push_back(i);  // every member arrived, behind an unpassed barrier
  }

  void finish(std::size_t i, double now) {
    auto& out = result_.micro_steps[i];
    out.end_seconds = now;
    // Only cross-node micro-steps can lose time to sharing; below 1e-9 relative is rounding.
    if (out.crosses_nodes && out.seconds() - out.alone_seconds > 1e-9 * out.alone_seconds)
      result_.nic_contention_seconds += out.seconds() - out.alone_seconds;
    ++finished_;
    if (out.crosses_nodes) {
      add_senders(i, -1);
      active_.erase(std::find(active_.begin(), active_.end(), i));
      rerate(now);
    }
    for (auto r = steps_[i].first_rank; r <= steps_[i].last_rank(); ++r) {
      result_.rank_busy_seconds[static_cast<std::size_t>(r)] += out.seconds();
      ++head_[static_cast<std::size_t>(r)];
      arrive(r, now);
    }
    pass_barriers(now);
  }

  [[noreturn]] void throw_never_started() const {
    std::string waits;
    int shown = 0;
    for (std::int64_t r = 0; r < gpus_ && shown < 4; ++r) {
      const auto rr = static_cast<std::size_t>(r);
      if (rows_.begin[rr] + head_[rr] >= rows_.begin[rr + 1]) continue;
      const std::size_t i = rows_.steps[rows_.begin[rr] + head_[rr]];
      waits += (shown++ ? "; rank " : "rank ") + std::to_string(r) + " waits in " +
               describe(steps_[i], i);
    }
    throw error("simulate: deadlock: " + std::to_string(steps_.size() - finished_) +
                " micro-steps never started (" + waits + ")");
  }

  const std::vector<micro_step>& steps_;
  const std::vector<std::int64_t>& barriers_;
  const rank_rows& rows_;
  const std::vector<micro_step_parts>& parts_;
  step_result& result_;
  std::int64_t gpus_;
  std::int64_t gpn_;
  double node_bandwidth_;
  double gpu_cap_;
  std::vector<flow> flows_;
  std::vector<std::uint64_t> version_;
  std::vector<std::size_t> active_{};  // cross-node micro-steps running now
  std::vector<std::int64_t> senders_;
  std::priority_queue<event, std::vector<event>, std::greater<>> events_{};
  std::vector<std::size_t> gate_;   // barriers at or below each micro-step's number
  std::vector<std::size_t> below_;  // micro-steps numbered below each barrier
  std::size_t passed_ = 0;
  std::size_t finished_ = 0;
  std::vector<std::size_t> held_{};
  std::vector<std::size_t> head_;
  std::vector<std::int64_t> arrived_;
};

/// The step's figures once every micro-step has run: makespan, gradient synchronisation (scaled
/// by `sync_noise`), idle fraction, each rank's peak and, with `record_timelines`, timelines.
inline void summarise(const std::vector<micro_step>& steps, const rank_rows& rows,
                      const truth_model& truth, double sync_noise, bool record_timelines,
                      step_result& result) {
  const std::int64_t gpus = truth.cluster().gpus;
  for (const auto& out : result.micro_steps)
    result.makespan_seconds = std::max(result.makespan_seconds, out.end_seconds);
  result.gradient_sync_seconds =
      steps.empty() ? 0.0 : sync_noise * truth.gradient_sync_seconds(gpus);
  result.step_seconds = result.makespan_seconds + result.gradient_sync_seconds;
  double busy = 0;
  for (double b : result.rank_busy_seconds) busy += b;
  result.idle_fraction = result.makespan_seconds > 0
                             ? 1.0 - busy / (result.makespan_seconds * static_cast<double>(gpus))
                             : 0.0;
  result.rank_peak_bytes.assign(static_cast<std::size_t>(gpus), truth.static_bytes());
  if (record_timelines) result.timelines.resize(static_cast<std::size_t>(gpus));
  for (std::size_t r = 0; r < static_cast<std::size_t>(gpus); ++r) {
    if (record_timelines) result.timelines[r].reserve(rows.begin[r + 1] - rows.begin[r]);
    for (std::size_t k = rows.begin[r]; k < rows.begin[r + 1]; ++k) {
      const std::size_t i = rows.steps[k];
      const auto& out = result.micro_steps[i];
      result.rank_peak_bytes[r] = std::max(result.rank_peak_bytes[r], out.peak_bytes);
      if (record_timelines)
        result.timelines[r].push_back({out.start_seconds, out.end_seconds, steps[i].sequence,
                                       steps[i].degree(), steps[i].config.recompute, out.oom, i});
    }
    result.peak_bytes = std::max(result.peak_bytes, result.rank_peak_bytes[r]);
  }
}

}  // namespace detail

/// Executes `plan` for `batch` on `truth`. Throws dcp::error (invalid_spec / invalid_sample)
/// naming the micro-step, sample or field for: a plan for another cluster size, a group outside
/// the cluster or with an invalid config, a sample id not in the batch, a sample in two
/// micro-steps or in none (require_every_sample), a hybrid micro-step whose plan states a split
/// other than the one the truth model runs, a micro-step holding video clips of two grids
/// or video beside text, and two micro-steps with the same sequence number sharing a rank
/// (ranks could take them in opposite orders and deadlock).
[[nodiscard]] inline step_result simulate(const step_plan& plan, std::span<const sample> batch,
                                          const truth_model& truth,
                                          const sim_options& options = {}) {
  detail::check_plan(plan, batch, truth, options);
  step_result result;
  const auto shapes =
      detail::shapes_of(plan.micro_steps, batch, options.require_every_sample, result);
  const auto order = detail::sequence_order(plan.micro_steps);
  const detail::rank_rows rows(plan.micro_steps, order, truth.cluster().gpus);
  workload::rng random(options.seed);
  const auto parts =
      detail::price(plan.micro_steps, shapes, order, truth, random, options.noise_sigma, result);
  const double sync_noise = detail::noise_factor(random, options.noise_sigma);
  detail::execution(plan, truth, rows, parts, result).run();
  detail::summarise(plan.micro_steps, rows, truth, sync_noise, options.record_timelines, result);
  return result;
}

[[nodiscard]] inline step_result simulate(const step_plan& plan, const std::vector<sample>& batch,
                                          const truth_model& truth,
                                          const sim_options& options = {}) {
  return simulate(plan, std::span<const sample>(batch.data(), batch.size()), truth, options);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::sim
