// Online calibration on real measurements: `mpiexec -n 4 libtorch/calibrated_training`.
//
// Trains the tiny Llama (tiny_llama.hpp, float64 on CPU, Wikipedia lengths) with two planners
// side by side, step by step on the same batches, alternating which goes first: one over
// dcp::calibrated<dcp::analytic_cost_model>, run by dcp::run_calibrated_step, which refits the
// model after every step from the micro-steps' measured CPU times (after a barrier of the group,
// see tiny::executor) and peak bytes (the counting CPU allocator); and the same analytic model
// uncalibrated, run by dcp::run_step. Both plan Llama-3-8B on one node of 4 H200s (each toy
// token planned as 256 tokens), which is what the uncalibrated model believes it runs; the
// calibrated model learns what the processes really take.
//
// Prints, once the calibrated model has seen at least 50 observations, on micro-steps it had not
// fitted on (each predicted before it ran, and the other planner's micro-steps, which it never
// sees): the mean relative error of the predicted micro-step time of the analytic model, of the
// analytic model times one factor fitted on the same first observations, and of the calibrated
// model; the measurement's noise floor (noise_of: how far repeated micro-steps of one shape
// scatter around their median, which no model of shape and configuration can beat); and the
// measured wall time of the steps of each planner (max over ranks), with their ratio. Checks
// (non-zero exit otherwise): at least 50 observations before the evaluation, every rank holds
// the same calibrated model bit for bit after every step, and calibration lowers the error of
// the analytic model. The 10 % bar and the step-time ratio are printed, not asserted: they are
// timings of a shared CPU.

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <mpi.h>

#include "dcp/dcp.hpp"
#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/torch/communicator.hpp"

#include "mpi_launch.hpp"
#include "tiny_llama_dcp.hpp"

namespace {

constexpr int world_ranks = 4;
// The warm-up lasts until the calibrated model holds observations_before_evaluation micro-steps
// (a model that learns the host decides plans few micro-steps a step, so that can take a few
// dozen steps on a loaded machine), then evaluation_steps steps are evaluated; max_steps bounds
// the whole run.
constexpr int evaluation_steps = 18;
constexpr int max_steps = 150;
constexpr std::size_t batch_size = 16;
constexpr std::size_t observations_before_evaluation = 50;
constexpr double bar = 0.10;

using calibrated_model = dcp::calibrated<dcp::analytic_cost_model>;

double max_over_ranks(double mine) {
  tiny::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                  "MPI_Allreduce");
  return mine;
}

/// One micro-step measured, with what each model predicted for it before it ran.
struct prediction {
  double measured = 0;
  double analytic = 0;
  double calibrated = 0;
  dcp::micro_batch_shape shape{};
  dcp::execution_config config{};
};

/// One planner's side of the run.
struct side {
  std::vector<double> step_seconds;  // after the warm-up
  std::int64_t micro_steps = 0;
  std::int64_t degree_sum = 0;
  std::int64_t recomputing = 0;  // micro-steps with any recompute
  void count(const dcp::step_plan& plan) {
    for (const auto& m : plan.micro_steps) {
      ++micro_steps;
      degree_sum += m.degree();
      recomputing += m.config.recompute.layers > 0 || m.config.recompute.selective;
    }
  }
  [[nodiscard]] double mean_seconds() const {
    double sum = 0;
    for (const double s : step_seconds) sum += s;
    return step_seconds.empty() ? 0 : sum / static_cast<double>(step_seconds.size());
  }
};

/// The measurement's own noise: micro-steps of the same shape and configuration (samples, tokens,
/// longest, attention pairs, degree, style, recompute) measured more than once, each compared
/// with its group's median. No model of shape and configuration can predict these micro-steps
/// better on average than this mean relative deviation (it is the error of an oracle that knows
/// each repeated shape's median). Returns {mean relative deviation, micro-steps, groups}.
struct noise_floor {
  double mean_deviation = 0;
  std::size_t micro_steps = 0;
  std::size_t groups = 0;
};
noise_floor noise_of(const std::vector<prediction>& rows) {
  std::map<
      std::tuple<std::int64_t, std::int64_t, std::int64_t, double, std::int64_t, int, int, bool>,
      std::vector<double>>
      by_shape;
  for (const auto& r : rows)
    by_shape[{r.shape.samples, r.shape.tokens, r.shape.longest, r.shape.attention_pairs,
              r.config.degree, static_cast<int>(r.config.sp), r.config.recompute.layers,
              r.config.recompute.selective}]
        .push_back(r.measured);
  noise_floor out;
  double sum = 0;
  for (auto& [shape, seconds] : by_shape) {
    if (seconds.size() < 2) continue;
    std::sort(seconds.begin(), seconds.end());
    const auto n = seconds.size();
    const double median = n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
    for (const double s : seconds) sum += std::abs(s / median - 1.0);
    out.micro_steps += n;
    ++out.groups;
  }
  out.mean_deviation = out.micro_steps ? sum / static_cast<double>(out.micro_steps) : 0.0;
  return out;
}

double mean_error(const std::vector<prediction>& rows, double prediction::*field,
                  double factor = 1.0) {
  double sum = 0;
  for (const auto& r : rows) sum += std::abs(factor * (r.*field) / r.measured - 1.0);
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

int train(tiny::launch& job) {
  const int rank = job.rank();
  const bool root = rank == 0;
  if (job.size() != world_ranks) {
    if (root)
      std::fprintf(stderr, "calibrated_training needs %d ranks, got %d\n", world_ranks, job.size());
    return 1;
  }
  const auto lengths = tiny::read_lengths(DCP_SHARED_DATA_DIR "/wikipedia-lengths.txt");
  dcp::c10d_communicator world(job.store(), rank, job.size());
  dcp::group_cache<dcp::c10d_communicator> cache(world);
  const auto cost = tiny::llama3_8b_node(world.size());
  dcp::DataCentricScheduler<calibrated_model> calibrated{calibrated_model(cost)};
  const dcp::DataCentricScheduler<> analytic(cost);
  tiny::model calibrated_weights(7);
  tiny::model analytic_weights(7);

  std::vector<std::string> problems;
  std::vector<prediction> held_out;      // predicted, then measured, after the warm-up
  std::vector<prediction> warm_up_rows;  // what the single factor is fitted on
  side calibrated_side, analytic_side;
  std::size_t evaluated_from = 0;  // observations seen when the evaluation began
  if (root)
    std::printf(
        "calibration on measured CPU micro-steps (libtorch, c10d Gloo, %d ranks, steps of %zu "
        "sequences: "
        "warm-up to %zu observations, then %d steps)\n"
        "%4s %12s %12s %12s %14s %14s\n",
        world.size(), batch_size, observations_before_evaluation, evaluation_steps, "step",
        "observed", "calib. ms", "analytic ms", "err calibrated", "err analytic");

  int evaluated_steps = 0;
  for (int step = 0; step < max_steps && evaluated_steps < evaluation_steps; ++step) {
    const auto data = tiny::make_batch(lengths, 4242, step, batch_size);
    const auto samples = tiny::planner_samples(data);
    const auto seen = calibrated.cost().observations().size();
    const bool evaluating = seen >= observations_before_evaluation;
    if (evaluating && evaluated_from == 0) evaluated_from = seen;
    const calibrated_model before = calibrated.cost();  // predicts this step before it runs
    std::vector<prediction> rows;
    const auto predict = [&](const std::vector<dcp::observation>& observed) {
      for (const auto& o : observed)
        rows.push_back({o.report.seconds, before.base().seconds(o.shape, o.config),
                        before.seconds(o.shape, o.config), o.shape, o.config});
    };
    double step_seconds[2] = {0, 0};
    for (int turn = 0; turn < 2; ++turn) {
      const bool calibrated_turn = (turn + step) % 2 == 0;  // alternate who goes first
      (void)tiny::launch::any_rank(false);                  // start together
      const auto start = std::chrono::steady_clock::now();
      if (calibrated_turn) {
        calibrated_weights.zero_grad();
        tiny::executor executor(calibrated_weights, data);
        const auto result = dcp::run_calibrated_step(world, cache, calibrated, samples, executor);
        calibrated_weights.all_reduce(world.process_group());
        calibrated_weights.sgd(0.5);
        step_seconds[0] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        calibrated_side.count(result.plan);
        predict(result.observations);
      } else {
        analytic_weights.zero_grad();
        tiny::executor executor(analytic_weights, data);
        const auto plan = analytic.plan(samples);
        const auto reports = dcp::run_step(world, cache, plan, executor);
        analytic_weights.all_reduce(world.process_group());
        analytic_weights.sgd(0.5);
        step_seconds[1] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        analytic_side.count(plan);
        predict(dcp::share_observations(world, plan, samples, reports));  // never fitted on
      }
    }
    step_seconds[0] = max_over_ranks(step_seconds[0]);
    step_seconds[1] = max_over_ranks(step_seconds[1]);
    if (evaluating) {
      ++evaluated_steps;
      held_out.insert(held_out.end(), rows.begin(), rows.end());
      calibrated_side.step_seconds.push_back(step_seconds[0]);
      analytic_side.step_seconds.push_back(step_seconds[1]);
    } else {
      warm_up_rows.insert(warm_up_rows.end(), rows.begin(), rows.end());
    }

    // Every rank must hold the same model, or the next plans would disagree.
    std::vector<std::int64_t> bits;
    for (const double w : calibrated.cost().time_weights())
      bits.push_back(std::bit_cast<std::int64_t>(w));
    for (const double w : calibrated.cost().memory_weights())
      bits.push_back(std::bit_cast<std::int64_t>(w));
    const auto all = world.all_gather(bits);
    for (std::size_t r = 1; r < static_cast<std::size_t>(world.size()); ++r)
      if (!std::equal(bits.begin(), bits.end(),
                      all.begin() + static_cast<std::ptrdiff_t>(r * bits.size())))
        problems.push_back("step " + std::to_string(step) + ": rank " + std::to_string(r) +
                           " holds another model");
    if (root)
      std::printf("%4d %12zu %12.1f %12.1f %13.1f%% %13.0f%%%s\n", step, seen,
                  1e3 * step_seconds[0], 1e3 * step_seconds[1],
                  100 * mean_error(rows, &prediction::calibrated),
                  100 * mean_error(rows, &prediction::analytic), evaluating ? "" : "  (warm-up)");
  }

  // The single factor that best scales the analytic model onto the warm-up measurements
  // (geometric mean of measured / predicted): what calibration would be with one weight.
  double log_sum = 0;
  for (const auto& r : warm_up_rows) log_sum += std::log(r.measured / r.analytic);
  const double factor =
      warm_up_rows.empty() ? 1.0 : std::exp(log_sum / static_cast<double>(warm_up_rows.size()));
  const double error_analytic = mean_error(held_out, &prediction::analytic);
  const double error_scaled = mean_error(held_out, &prediction::analytic, factor);
  const double error_calibrated = mean_error(held_out, &prediction::calibrated);
  if (evaluated_from < observations_before_evaluation)
    problems.push_back("the evaluation began after " + std::to_string(evaluated_from) +
                       " observations");
  if (held_out.empty()) problems.push_back("no held-out micro-steps were measured");
  if (!(error_calibrated < error_analytic))
    problems.push_back("calibration did not lower the prediction error (" +
                       std::to_string(error_calibrated) + " against " +
                       std::to_string(error_analytic) + ")");

  if (root) {
    const auto report = calibrated.cost().report();
    std::printf("\nheld-out micro-steps (predicted before they ran, after %zu observations): %zu\n",
                evaluated_from, held_out.size());
    std::printf(
        "mean relative error of the predicted micro-step time:\n"
        "  analytic (Llama-3-8B on H200, uncalibrated)  %10.1f %%\n"
        "  analytic x %.3g (one factor, warm-up fit)   %10.1f %%\n"
        "  calibrated<analytic_cost_model>              %10.1f %%   (bar %.0f %%: %s)\n",
        100 * error_analytic, factor, 100 * error_scaled, 100 * error_calibrated, 100 * bar,
        error_calibrated <= bar ? "met" : "not met");
    const auto noise = noise_of(held_out);
    std::printf(
        "  noise floor (repeated shapes vs their median) %10.1f %%   (%zu held-out micro-steps, "
        "%zu shapes)\n",
        100 * noise.mean_deviation, noise.micro_steps, noise.groups);
    std::printf(
        "calibration window: %zu observations, fit rms error %.1f %%, memory safety factor %.3g\n",
        report.observations, 100 * report.time_rms_error, report.memory_safety);
    std::printf(
        "measured step wall time (max over ranks, mean of %zu steps each, alternating):\n"
        "  planned with the calibrated model  %8.1f ms  (%lld micro-steps, mean degree %.2f, %lld "
        "recomputing)\n"
        "  planned with the analytic model    %8.1f ms  (%lld micro-steps, mean degree %.2f, %lld "
        "recomputing)\n"
        "  ratio calibrated / analytic        %8.3f\n",
        calibrated_side.step_seconds.size(), 1e3 * calibrated_side.mean_seconds(),
        static_cast<long long>(calibrated_side.micro_steps),
        static_cast<double>(calibrated_side.degree_sum) /
            static_cast<double>(std::max<std::int64_t>(1, calibrated_side.micro_steps)),
        static_cast<long long>(calibrated_side.recomputing), 1e3 * analytic_side.mean_seconds(),
        static_cast<long long>(analytic_side.micro_steps),
        static_cast<double>(analytic_side.degree_sum) /
            static_cast<double>(std::max<std::int64_t>(1, analytic_side.micro_steps)),
        static_cast<long long>(analytic_side.recomputing),
        analytic_side.mean_seconds() > 0
            ? calibrated_side.mean_seconds() / analytic_side.mean_seconds()
            : 0.0);
  }
  const bool failed = tiny::launch::any_rank(!problems.empty());
  if (root) {
    for (const auto& p : problems) std::fprintf(stderr, "FAILED: %s\n", p.c_str());
    if (!failed) std::printf("calibrated training: passed\n");
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return tiny::launch::run(argc, argv, train); }
