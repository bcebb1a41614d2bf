#pragma once
// Checks of the promises of docs/planner.md on one plan (doctest assertions).

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

namespace dcp::test {

/// Promise 1: the plan's micro-steps hold every sample of the batch exactly once.
inline void check_every_sample_once(const step_plan& plan, const std::vector<sample>& batch) {
  std::vector<std::uint64_t> planned;
  for (const auto& m : plan.micro_steps)
    planned.insert(planned.end(), m.sample_ids.begin(), m.sample_ids.end());
  std::vector<std::uint64_t> expected;
  for (const auto& s : batch) expected.push_back(s.id);
  std::sort(planned.begin(), planned.end());
  std::sort(expected.begin(), expected.end());
  REQUIRE(planned == expected);
}

/// Every promise a plan of `batch` made with `cost` must keep. `best_static` is the makespan of
/// the best static layout computed independently (0 if none is feasible).
template <class Cost>
void check_promises(const step_plan& plan, const std::vector<sample>& batch, const Cost& cost,
                    double best_static) {
  // 1. Every sample exactly once.
  check_every_sample_once(plan, batch);

  std::map<std::uint64_t, sample> by_id;
  for (const auto& s : batch) by_id[s.id] = s;
  const double budget = cost.memory_budget();
  const bool by_tokens = cost.training().normalise_by == loss_normalisation::tokens;
  double total_units = 0;
  for (const auto& s : batch) total_units += by_tokens ? static_cast<double>(s.tokens) : 1.0;

  double scale_sum = 0;
  double makespan = 0;
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    const auto& m = plan.micro_steps[n];
    micro_batch_shape shape;
    double units = 0;
    for (auto id : m.sample_ids) {
      shape += micro_batch_shape::of(by_id[id]);
      units += by_tokens ? static_cast<double>(by_id[id].tokens) : 1.0;
    }
    // 2. Memory safe, re-derived from the cost model rather than trusted from the plan.
    CHECK(cost.peak_bytes(shape, m.config) <= budget);
    CHECK(m.peak_bytes == doctest::Approx(cost.peak_bytes(shape, m.config)).epsilon(1e-12));
    CHECK(m.seconds == doctest::Approx(cost.seconds(shape, m.config)).epsilon(1e-12));
    // 7. Aligned groups inside the cluster.
    CHECK(m.first_rank % m.degree() == 0);
    CHECK(m.first_rank + m.degree() <= plan.gpus);
    CHECK(m.sequence == static_cast<std::int64_t>(n));
    // 5. Loss scale: this micro-batch's share of the global normalisation.
    CHECK(m.loss_scale == doctest::Approx(units / total_units).epsilon(1e-12));
    scale_sum += m.loss_scale;
    makespan = std::max(makespan, m.end_seconds());
  }
  if (!batch.empty()) CHECK(scale_sum == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(plan.makespan_seconds == doctest::Approx(makespan).epsilon(1e-12));

  // 4. Deadlock free: per rank, sequence numbers increase and runs do not overlap; executing
  // the plan with blocking groups (a step runs when every member has reached it) finishes.
  std::vector<std::vector<std::size_t>> per_rank(static_cast<std::size_t>(plan.gpus));
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n)
    for (auto r = plan.micro_steps[n].first_rank; r <= plan.micro_steps[n].last_rank(); ++r)
      per_rank[static_cast<std::size_t>(r)].push_back(n);
  for (const auto& steps : per_rank)
    for (std::size_t k = 1; k < steps.size(); ++k) {
      const auto& before = plan.micro_steps[steps[k - 1]];
      const auto& after = plan.micro_steps[steps[k]];
      CHECK(before.sequence < after.sequence);
      CHECK(after.start_seconds >= before.end_seconds() - 1e-9 * (1.0 + before.end_seconds()));
    }
  std::vector<std::size_t> next(per_rank.size(), 0);
  std::size_t done = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
      const auto& m = plan.micro_steps[n];
      bool ready = true;
      for (auto r = m.first_rank; r <= m.last_rank() && ready; ++r) {
        const auto& q = per_rank[static_cast<std::size_t>(r)];
        const auto at = next[static_cast<std::size_t>(r)];
        ready = at < q.size() && q[at] == n;
      }
      if (!ready) continue;
      for (auto r = m.first_rank; r <= m.last_rank(); ++r) ++next[static_cast<std::size_t>(r)];
      ++done;
      progress = true;
    }
  }
  CHECK(done == plan.micro_steps.size());

  // 6. Honest bound.
  CHECK(plan.lower_bound_seconds <= plan.makespan_seconds * (1.0 + 1e-12));
  // Never slower than the best static layout.
  if (best_static > 0) CHECK(plan.makespan_seconds <= best_static * (1.0 + 1e-12));
  CHECK(plan.fingerprint == compute_fingerprint(plan));
}

}  // namespace dcp::test
