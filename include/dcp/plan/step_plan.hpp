#pragma once
// The step plan: every micro-step of one training step, with its group, samples, recompute
// setting and loss scale, the predicted makespan, the lower bound and a fingerprint that ranks
// all-gather to prove they agree.

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "dcp/spec/hardware.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// One micro-batch run by one group of GPUs. Every rank runs the micro-steps that include it in
/// increasing `sequence`; all members of a group hold the same number, so no cycle of waits can
/// form (the smallest unfinished number can always run).
struct micro_step {
  std::int64_t sequence = 0;    ///< global sequence number, 0..n-1
  std::int64_t first_rank = 0;  ///< the group is ranks [first_rank, first_rank + degree)
  execution_config config{};    ///< degree, sequence-parallel style, recompute setting
  std::vector<std::uint64_t> sample_ids{};
  std::int64_t tokens = 0;
  std::int64_t loss_units = 0;  ///< tokens or samples counted by the loss normalisation
  double loss_scale = 0;        ///< multiply this micro-batch's mean loss by it (docs/planner.md)
  double start_seconds = 0;     ///< predicted start within the step
  double seconds = 0;           ///< predicted duration
  double peak_bytes = 0;        ///< predicted peak bytes on each GPU of the group

  [[nodiscard]] std::int64_t degree() const noexcept { return config.degree; }
  /// first_rank + degree - 1, saturated at the int64 limit (a micro-step read from elsewhere
  /// may hold any values until validate_plan has checked it; nothing here overflows).
  [[nodiscard]] std::int64_t last_rank() const noexcept {
    if (config.degree < 1) return first_rank;
    const std::int64_t span = config.degree - 1;
    return first_rank > std::numeric_limits<std::int64_t>::max() - span
               ? std::numeric_limits<std::int64_t>::max()
               : first_rank + span;
  }
  /// Whether `rank` is in [first_rank, first_rank + degree), without computing the end.
  [[nodiscard]] bool includes(std::int64_t rank) const noexcept {
    return config.degree > 0 && rank >= first_rank &&
           static_cast<std::uint64_t>(rank) - static_cast<std::uint64_t>(first_rank) <
               static_cast<std::uint64_t>(config.degree);
  }
  [[nodiscard]] double end_seconds() const noexcept { return start_seconds + seconds; }

  friend bool operator==(const micro_step&, const micro_step&) = default;
};

struct step_plan {
  std::vector<micro_step> micro_steps{};  ///< ordered by sequence number
  std::int64_t gpus = 0;
  std::int64_t gpus_per_node = 0;
  double makespan_seconds = 0;     ///< predicted time until the last micro-step ends
  double lower_bound_seconds = 0;  ///< no plan can finish the micro-steps sooner
  double memory_budget_bytes = 0;
  double gradient_sync_seconds = 0;  ///< predicted tail after the last micro-step
  /// Makespan of the best static layout (one degree for every sample; in lockstep rounds when
  /// the plan is in lockstep), when the placement computed it; 0 when it proved every static
  /// layout slower without laying them all out.
  double best_static_seconds = 0;
  std::int64_t best_static_degree = 0;
  /// World barriers, as sequence numbers in increasing order: for each b, no micro-step with
  /// sequence >= b starts before every micro-step with sequence < b has ended, on every rank
  /// (a policy that synchronises the world between iterations, e.g. an optimizer step each).
  /// Empty for dcp's own policies: groups start as soon as their ranks are free.
  std::vector<std::int64_t> barriers{};
  /// The Ulysses degree u inside every hybrid micro-step's group (hybrid_ulysses_degree of the
  /// model and cluster; the ring runs over degree / u sub-groups): 0 when none is hybrid.
  std::int64_t hybrid_ulysses_degree = 0;
  /// Every rank runs the same number of micro-steps, one per round, the barriers opening the
  /// rounds; ranks without work in a round run an empty micro-step (no samples), which still
  /// runs the collectives of every micro-step (ZeRO-3's parameter gathers). make_lockstep
  /// (plan/lockstep.hpp) makes a plan so; check_lockstep checks the claim.
  bool lockstep = false;
  std::string policy{};  ///< the placement that produced it
  std::uint64_t fingerprint = 0;

  /// Relative distance to the lower bound: makespan / bound - 1 (0 for an empty plan).
  [[nodiscard]] double gap() const noexcept {
    return lower_bound_seconds > 0 ? makespan_seconds / lower_bound_seconds - 1.0 : 0.0;
  }
  [[nodiscard]] double step_seconds() const noexcept {
    return makespan_seconds + gradient_sync_seconds;
  }

  /// Indices into micro_steps of the steps rank `rank` runs, in execution order.
  [[nodiscard]] std::vector<std::size_t> steps_of(std::int64_t rank) const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < micro_steps.size(); ++i)
      if (micro_steps[i].includes(rank)) out.push_back(i);
    return out;
  }

  /// Predicted busy seconds of each rank.
  [[nodiscard]] std::vector<double> busy_seconds() const {
    std::vector<double> busy(static_cast<std::size_t>(gpus), 0.0);
    for (const auto& m : micro_steps)
      for (auto r = m.first_rank; r <= m.last_rank(); ++r)
        busy[static_cast<std::size_t>(r)] += m.seconds;
    return busy;
  }

  /// Fraction of GPU time idle before the makespan.
  [[nodiscard]] double idle_fraction() const {
    if (makespan_seconds <= 0 || gpus == 0) return 0.0;
    double busy = 0;
    for (const auto& m : micro_steps) busy += m.seconds * static_cast<double>(m.degree());
    return 1.0 - busy / (makespan_seconds * static_cast<double>(gpus));
  }

  [[nodiscard]] std::int64_t total_tokens() const noexcept {
    std::int64_t t = 0;
    for (const auto& m : micro_steps) t += m.tokens;
    return t;
  }

  friend bool operator==(const step_plan&, const step_plan&) = default;
};

namespace detail {
/// FNV-1a, 64 bit: enough to detect ranks that planned differently, not a cryptographic hash.
class fnv1a {
 public:
  void bytes(const void* data, std::size_t size) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash_ ^= p[i];
      hash_ *= 1099511628211ull;
    }
  }
  void u64(std::uint64_t v) noexcept { bytes(&v, sizeof v); }
  void i64(std::int64_t v) noexcept { u64(static_cast<std::uint64_t>(v)); }
  void f64(double v) noexcept { u64(std::bit_cast<std::uint64_t>(v)); }
  [[nodiscard]] std::uint64_t value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 1469598103934665603ull;
};
}  // namespace detail

/// Hash of what ranks must agree on: the order, groups, samples, settings and loss scales.
[[nodiscard]] inline std::uint64_t compute_fingerprint(const step_plan& plan) noexcept {
  detail::fnv1a h;
  h.i64(plan.gpus);
  for (const auto& m : plan.micro_steps) {
    h.i64(m.sequence);
    h.i64(m.first_rank);
    h.i64(m.config.degree);
    h.i64(static_cast<std::int64_t>(m.config.sp));
    h.i64(m.config.recompute.layers);
    h.i64(m.config.recompute.selective ? 1 : 0);
    h.f64(m.loss_scale);
    h.u64(m.sample_ids.size());
    for (auto id : m.sample_ids) h.u64(id);
  }
  // Ranks that disagree on a barrier would wait in different collectives; a plan without
  // barriers hashes as before they existed.
  for (auto b : plan.barriers) h.i64(b);
  if (plan.hybrid_ulysses_degree != 0) h.i64(plan.hybrid_ulysses_degree);  // likewise
  if (plan.lockstep) h.i64(-1);  // likewise: ranks must agree to pad
  return h.value();
}

inline std::ostream& operator<<(std::ostream& os, const micro_step& m) {
  os << "micro_step{#" << m.sequence << ", ranks " << m.first_rank << ".." << m.last_rank() << ", "
     << m.config << ", samples=" << m.sample_ids.size() << ", tokens=" << m.tokens
     << ", loss_scale=" << m.loss_scale << ", " << m.start_seconds << "+" << m.seconds << " s, "
     << m.peak_bytes / gib << " GiB}";
  return os;
}

inline std::ostream& operator<<(std::ostream& os, const step_plan& p) {
  return os << "step_plan{" << p.micro_steps.size() << " micro-steps on " << p.gpus
            << " GPUs, makespan " << p.makespan_seconds << " s, bound " << p.lower_bound_seconds
            << " s, gap " << p.gap() * 100.0 << "%, policy " << p.policy << ", fingerprint "
            << p.fingerprint << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
