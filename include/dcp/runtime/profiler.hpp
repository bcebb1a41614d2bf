#pragma once
// dcp::profile: measures a framework's executor on a grid of (length, degree, recompute) points
// and builds the profiled cost model — a calibrated<M> fitted to those measurements, term by
// term — before training starts. Collective: every rank calls it with the same arguments.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dcp/cost/calibrated.hpp"
#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The points to measure: every length x degree x recompute setting, each `repetitions` times
/// after `warmups` unmeasured runs.
struct profile_grid {
  std::vector<std::int64_t> lengths{1024, 4096, 16384, 65536};
  std::vector<std::int64_t> degrees{1, 2, 4, 8};
  std::vector<recompute_setting> recompute{recompute_setting::none()};
  sequence_parallel sp = sequence_parallel::ulysses;
  attention_kind attention = attention_kind::causal;
  int warmups = 1;
  int repetitions = 1;
};

/// One grid point's step: every aligned group of `degree` ranks runs one sample of `length`
/// tokens. Sample ids are `first_id`, `first_id + 1`, ... by group; `samples` holds them.
struct profile_point {
  std::int64_t length = 0;
  execution_config config{};
  std::vector<sample> samples;
  step_plan plan;
};

/// The grid's points that fit the cluster (degrees above its size, or that do not divide the
/// world or, for Ulysses, the model's heads, are left out), in grid order — what profile() runs.
/// The framework's executor looks a micro-step's sample ids up in point.samples.
template <cost_model M>
[[nodiscard]] std::vector<profile_point> profile_points(const M& model, const profile_grid& grid) {
  const auto& cluster = model.cluster();
  if (grid.lengths.empty() || grid.degrees.empty() || grid.recompute.empty())
    throw invalid_spec(
        "profile_grid: lengths, degrees and recompute must each hold at least one value");
  if (grid.warmups < 0 || grid.repetitions < 1)
    throw invalid_spec("profile_grid: warmups = " + std::to_string(grid.warmups) +
                       " (must be >= 0), repetitions = " + std::to_string(grid.repetitions) +
                       " (must be >= 1)");
  std::vector<profile_point> out;
  std::uint64_t next_id = 0;
  for (const auto length : grid.lengths) {
    if (length < 1)
      throw invalid_spec("profile_grid: length = " + std::to_string(length) + ", must be >= 1");
    for (const auto degree : grid.degrees) {
      for (const auto& recompute : grid.recompute) {
        const execution_config config{degree, grid.sp, recompute};
        try {
          validate(config, model.model(), cluster);
        } catch (const invalid_spec&) {
          continue;
        }
        if (cluster.gpus % degree != 0) continue;
        profile_point point;
        point.length = length;
        point.config = config;
        point.plan.gpus = cluster.gpus;
        point.plan.gpus_per_node = cluster.gpus_per_node;
        point.plan.memory_budget_bytes = model.memory_budget();
        point.plan.policy = "profile";
        const std::int64_t groups = cluster.gpus / degree;
        for (std::int64_t g = 0; g < groups; ++g) {
          sample s;
          s.id = next_id++;
          s.tokens = length;
          s.attention = grid.attention;
          point.samples.push_back(s);
          micro_step m;
          m.sequence = g;
          m.first_rank = g * degree;
          m.config = config;
          m.sample_ids = {s.id};
          m.tokens = length;
          m.loss_units = length;
          m.loss_scale = 1.0 / static_cast<double>(groups);
          m.seconds = static_cast<double>(model.seconds(micro_batch_shape::of(s), config));
          m.peak_bytes = static_cast<double>(model.peak_bytes(micro_batch_shape::of(s), config));
          point.plan.makespan_seconds = std::max(point.plan.makespan_seconds, m.seconds);
          point.plan.micro_steps.push_back(std::move(m));
        }
        point.plan.fingerprint = compute_fingerprint(point.plan);
        out.push_back(std::move(point));
      }
    }
  }
  return out;
}

/// What profile() measured and the model it built.
template <cost_model M>
struct profile_result {
  calibrated<M> model;                    ///< the profiled cost model
  std::vector<observation> observations;  ///< every measured micro-step, in run order
};

/// Runs every point of profile_points(base, grid) — warm-ups, then repetitions — through
/// run_step on this rank, shares the measurements (every rank gets the same), and fits
/// calibrated<M>(base, options) to them. Points whose micro-steps ran out of memory are kept as
/// out-of-memory observations (they tighten that configuration). Collective over `comm`.
template <communicator C, cost_model M, class E>
  requires micro_batch_executor<E, typename group_cache<C>::group_type>
[[nodiscard]] profile_result<M> profile(C& comm, group_cache<C>& cache, const M& base,
                                        const profile_grid& grid, E& executor,
                                        const calibration_options& options = {}) {
  const auto points = profile_points(base, grid);
  std::size_t measured_steps = 0;
  for (const auto& point : points)
    measured_steps += point.plan.micro_steps.size() * static_cast<std::size_t>(grid.repetitions);
  auto fit = options;
  fit.window = std::max(fit.window, measured_steps);  // keep every measurement of the grid
  profile_result<M> result{calibrated<M>(base, fit), {}};
  result.observations.reserve(measured_steps);
  for (const auto& point : points) {
    for (int run = 0; run < grid.warmups + grid.repetitions; ++run) {
      const auto reports = run_step(comm, cache, point.plan, executor);
      auto measured = share_observations(comm, point.plan, point.samples, reports);
      if (run < grid.warmups) continue;
      for (auto& o : measured) result.observations.push_back(std::move(o));
    }
  }
  result.model.observe(result.observations);
  return result;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
