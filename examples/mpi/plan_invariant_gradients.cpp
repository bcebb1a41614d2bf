// Plan-invariant gradients on a real multi-process run: `mpiexec -n 4 plan_invariant_gradients`.
//
// Trains the toy attention model of toy_attention.hpp (float64, variable-length sequences of
// 4..128 tokens) for 100 steps, once per plan, in lockstep: one copy of the weights per plan,
// the same batch for all. Every step, each plan is made by a real dcp planner over a real cost
// model (Llama-3-8B on one node of 4 H200s, each toy token standing for 256 tokens) and executed
// with dcp::run_step over dcp::mpi::communicator: sequence-parallel micro-batches are split over
// their group's members and combined through the group's MPI communicator, then the gradients
// are all-reduced with SUM over the world. The first plan is the static layout (one degree for
// every sample); the others are DataCentricScheduler plans with other recompute strategies and
// memory budgets, so degrees, accumulation counts and recompute settings differ.
//
// Checks (exit code 1 on every rank if one fails): at every step each plan's gradient is within
// 1e-9 (relative, per tensor, max norm) of the static plan's; each plan's loss printed with
// %.12g is the static plan's at every step; the plans really differ in degrees, micro-steps per
// rank and recompute settings, and the executor ran each of its three checkpointing modes.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "dcp/dcp.hpp"
#include "dcp/mpi/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"

#include "toy_dcp.hpp"

namespace {

constexpr int world_ranks = 4;
constexpr int steps = 100;
constexpr std::size_t batch_size = 24;
constexpr std::uint64_t data_seed = 2024;
constexpr std::uint64_t weight_seed = 7;
constexpr double learning_rate = 2.0;
constexpr double tolerance = 1e-9;

/// A named way to plan a batch. The first one is the static layout the others are compared with.
struct planner {
  std::string name;
  std::string description;
  std::function<dcp::step_plan(const std::vector<dcp::sample>&)> plan;
};

std::string gib_of(const dcp::analytic_cost_model& cost) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f GiB", cost.memory_budget() / dcp::gib);
  return text;
}

std::vector<planner> make_planners(std::int64_t gpus) {
  using namespace dcp;
  training_spec tight;
  tight.headroom_fraction = 0.4;  // a smaller activation budget: more micro-steps and recompute
  const auto roomy_cost = toy::llama3_8b_node(gpus);
  const auto tight_cost = toy::llama3_8b_node(gpus, tight);
  using static_scheduler =
      DataCentricScheduler<analytic_cost_model, varlen_buckets, full_recompute, static_placement>;
  using selective_scheduler =
      DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_recompute>;

  std::vector<planner> out;
  out.push_back({"static",
                 "static_placement: degree " + std::to_string(gpus) +
                     " for every sample, full recompute, budget " + gib_of(tight_cost),
                 [s = static_scheduler(tight_cost, {}, {}, static_placement{gpus})](const auto& b) {
                   return s.plan(b);
                 }});
  out.push_back(
      {"dcp",
       "DataCentricScheduler<>: balanced placement, selective-pyramid recompute, budget " +
           gib_of(roomy_cost),
       [s = DataCentricScheduler<>(roomy_cost)](const auto& b) { return s.plan(b); }});
  out.push_back(
      {"dcp-tight",
       "DataCentricScheduler<>: balanced placement, selective-pyramid recompute, budget " +
           gib_of(tight_cost),
       [s = DataCentricScheduler<>(tight_cost)](const auto& b) { return s.plan(b); }});
  out.push_back({"dcp-selective",
                 "DataCentricScheduler: balanced placement, selective recompute, budget " +
                     gib_of(roomy_cost),
                 [s = selective_scheduler(roomy_cost)](const auto& b) { return s.plan(b); }});
  return out;
}

/// What one plan of one step looks like: the multiset of degrees, the micro-steps each rank
/// runs (its gradient-accumulation count) and the multiset of recompute settings.
struct plan_shape {
  std::vector<std::int64_t> degrees;
  std::vector<std::size_t> per_rank;
  std::vector<dcp::recompute_setting> recompute;

  explicit plan_shape(const dcp::step_plan& plan) {
    for (const auto& m : plan.micro_steps) {
      degrees.push_back(m.degree());
      recompute.push_back(m.config.recompute);
    }
    std::sort(degrees.begin(), degrees.end());
    std::sort(recompute.begin(), recompute.end());
    for (std::int64_t r = 0; r < plan.gpus; ++r) per_rank.push_back(plan.steps_of(r).size());
  }
};

/// What a plan did over the whole run.
struct plan_record {
  std::map<std::int64_t, std::int64_t> degrees;              // degree -> micro-steps
  std::map<dcp::recompute_setting, std::int64_t> recompute;  // setting -> micro-steps
  std::map<std::string, std::int64_t> checkpointing;         // toy mode -> micro-steps
  std::size_t fewest_per_rank = SIZE_MAX;  // accumulation counts over ranks and steps
  std::size_t most_per_rank = 0;
  std::int64_t micro_steps = 0;
  std::int64_t steps_mixing_degrees = 0;  // steps with two or more degrees
  std::int64_t steps_other_degrees = 0;   // steps that differ from the static plan
  std::int64_t steps_other_accumulation = 0;
  std::int64_t steps_other_recompute = 0;
  double worst_gradient_difference = 0;
  int worst_step = 0;
  std::map<std::string, double> peak_bytes;  // toy mode -> most bytes held (this rank)
  double executor_seconds = 0;               // this rank's measured seconds
};

/// Max over the parameter tensors of |g - reference|_max / |reference|_max.
double relative_difference(std::span<const double> g, std::span<const double> reference) {
  double worst = 0;
  for (std::size_t k = 0; k < std::size(toy::layout::tensor_begin); ++k) {
    double scale = 0;
    double difference = 0;
    for (auto i = toy::layout::tensor_begin[k]; i < toy::layout::tensor_end[k]; ++i) {
      scale = std::max(scale, std::abs(reference[i]));
      difference = std::max(difference, std::abs(g[i] - reference[i]));
    }
    if (difference > 0) worst = std::max(worst, scale > 0 ? difference / scale : INFINITY);
  }
  return worst;
}

std::string format_loss(double loss) {
  char text[40];
  std::snprintf(text, sizeof text, "%.12g", loss);
  return text;
}

/// True on every rank if `mine` is true on any (collective).
bool any_rank(bool mine) {
  int flag = mine ? 1 : 0;
  toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                 "MPI_Allreduce");
  return flag != 0;
}

/// What the self-check found.
struct self_check_result {
  double finite_difference_error = 0;  ///< max relative error of the backward pass
  std::vector<std::string> problems;
};

/// Before training, on a small batch run by each rank alone (MPI_COMM_SELF): the hand-written
/// backward pass agrees with central finite differences of the loss (each rank checks every
/// ranks-th parameter; the worst error is all-reduced), and the three checkpointing modes give
/// the same gradient bit for bit (recomputation repeats the same arithmetic). Collective.
self_check_result self_check(int rank, int ranks) {
  self_check_result out;
  const toy::batch data = toy::make_batch(data_seed + 1, 0, 4, 4, 16);
  const std::vector<std::uint64_t> ids = {0, 1, 2, 3};
  const double scale = 1.0 / static_cast<double>(toy::tokens_of(data));
  const auto gradient = [&](toy::model m, toy::checkpointing mode) {
    m.zero_grad();
    m.forward_backward(data, ids, MPI_COMM_SELF, scale, mode);
    return std::vector<double>(m.gradients().begin(), m.gradients().end());
  };
  const auto loss = [&](toy::model m) {
    m.zero_grad();
    m.forward_backward(data, ids, MPI_COMM_SELF, scale);
    return m.loss();
  };
  const toy::model base(weight_seed);
  const auto analytic = gradient(base, toy::checkpointing::keep_all);
  for (const auto mode :
       {toy::checkpointing::drop_probabilities, toy::checkpointing::keep_input_only})
    if (gradient(base, mode) != analytic)
      out.problems.push_back(std::string("self-check: checkpointing ") + toy::to_string(mode) +
                             " changed the gradient");
  // Every parameter of the matrices, and the embedding rows of the tokens in the batch.
  for (auto i = static_cast<std::size_t>(rank); i < toy::layout::parameters;
       i += static_cast<std::size_t>(ranks)) {
    if (analytic[i] == 0 && i < toy::layout::query) continue;
    const double step = 1e-5;
    toy::model plus = base;
    toy::model minus = base;
    plus.weights()[i] += step;
    minus.weights()[i] -= step;
    const double numeric = (loss(plus) - loss(minus)) / (2 * step);
    out.finite_difference_error =
        std::max(out.finite_difference_error,
                 std::abs(numeric - analytic[i]) / std::max(std::abs(analytic[i]), 1e-3));
  }
  toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &out.finite_difference_error, 1, MPI_DOUBLE, MPI_MAX,
                               MPI_COMM_WORLD),
                 "MPI_Allreduce");
  if (!(out.finite_difference_error <= 1e-6)) {
    char text[120];
    std::snprintf(
        text, sizeof text,
        "self-check: the backward pass differs from finite differences by %.3g (relative)",
        out.finite_difference_error);
    out.problems.push_back(text);
  }
  return out;
}

/// The dynamic plans must differ from the static one in degrees, micro-steps per rank and
/// recompute settings, together use degrees 1, 2 and 4 (some step mixing them), and run each of
/// the toy's checkpointing modes. Plans are the same on every rank, and so is the verdict.
std::vector<std::string> check_plans_differ(const std::vector<planner>& planners,
                                            const std::vector<plan_record>& records) {
  std::vector<std::string> problems;
  if (records[0].degrees.size() != 1)
    problems.push_back("the static plan used more than one degree");
  std::set<std::int64_t> degrees_used;
  std::set<std::string> modes_used;
  bool some_plan_mixes = false;
  for (std::size_t p = 0; p < records.size(); ++p) {
    for (const auto& [degree, n] : records[p].degrees) degrees_used.insert(degree);
    for (const auto& [mode, n] : records[p].checkpointing) modes_used.insert(mode);
    if (p == 0) continue;
    some_plan_mixes = some_plan_mixes || records[p].steps_mixing_degrees > 0;
    const auto& name = planners[p].name;
    if (records[p].steps_other_degrees == 0)
      problems.push_back(name + " used the static plan's degrees at every step");
    if (records[p].steps_other_accumulation == 0)
      problems.push_back(name + " had the static plan's micro-steps per rank at every step");
    if (records[p].steps_other_recompute == 0)
      problems.push_back(name + " had the static plan's recompute settings at every step");
  }
  if (degrees_used != std::set<std::int64_t>{1, 2, 4})
    problems.push_back("the plans did not use each of degrees 1, 2 and 4");
  if (!some_plan_mixes) problems.push_back("no dynamic plan mixed degrees within a step");
  for (const auto mode : {toy::checkpointing::keep_all, toy::checkpointing::drop_probabilities,
                          toy::checkpointing::keep_input_only})
    if (!modes_used.contains(toy::to_string(mode)))
      problems.push_back(std::string("no micro-step ran with checkpointing ") +
                         toy::to_string(mode));
  return problems;
}

int train_and_compare() {
  auto world = dcp::mpi::communicator::world();
  const int rank = world.rank();
  const bool root = rank == 0;
  if (world.size() != world_ranks) {
    if (root)
      std::cerr << "plan_invariant_gradients needs " << world_ranks << " ranks (mpiexec -n "
                << world_ranks << "), got " << world.size() << std::endl;
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  const auto planners = make_planners(world.size());
  const std::size_t plans = planners.size();
  std::vector<toy::model> models(plans, toy::model(weight_seed));
  std::vector<plan_record> records(plans);
  for (auto& record : records)  // every mode on every rank, so the reductions below line up
    for (const auto mode : {toy::checkpointing::keep_all, toy::checkpointing::drop_probabilities,
                            toy::checkpointing::keep_input_only})
      record.peak_bytes[toy::to_string(mode)] = 0;
  dcp::group_cache<dcp::mpi::communicator> cache(world);  // one per world, shared by every plan

  const auto checked = self_check(rank, world.size());
  if (root) {
    std::printf(
        "plan-invariant gradients: %d ranks, %d steps of %zu sequences (4..128 tokens), float64\n",
        world.size(), steps, batch_size);
    std::printf(
        "self-check: backward vs finite differences, max relative error %.2e; the three "
        "checkpointing\n"
        "modes give the same gradient bit for bit: %s\n",
        checked.finite_difference_error, checked.problems.empty() ? "yes" : "no");
    std::printf(
        "plans for Llama-3-8B on one node of %d H200s, each toy token planned as %lld tokens:\n",
        world.size(), static_cast<long long>(toy::planned_tokens_per_token));
    for (const auto& p : planners)
      std::printf("  %-14s %s\n", p.name.c_str(), p.description.c_str());
    std::printf("\n%4s", "step");
    for (const auto& p : planners) std::printf("  %-18s", ("loss[" + p.name + "]").c_str());
    std::printf("  %s\n", "max rel. grad. diff vs static");
  }

  std::string failure;
  int identical_loss_steps = 0;
  int steps_run = 0;
  for (int step = 0; step < steps && failure.empty(); ++step, ++steps_run) {
    const toy::batch data = toy::make_batch(data_seed, step, batch_size);
    const auto samples = toy::planner_samples(data);
    std::vector<plan_shape> shapes;
    for (std::size_t p = 0; p < plans; ++p) {
      const dcp::step_plan plan = planners[p].plan(samples);
      const auto& shape = shapes.emplace_back(plan);
      auto& record = records[p];
      for (const auto& m : plan.micro_steps) {
        ++record.degrees[m.degree()];
        ++record.recompute[m.config.recompute];
        ++record.checkpointing[toy::to_string(toy::checkpointing_for(m.config.recompute))];
      }
      record.micro_steps += static_cast<std::int64_t>(plan.micro_steps.size());
      record.fewest_per_rank = std::min(
          record.fewest_per_rank, *std::min_element(shape.per_rank.begin(), shape.per_rank.end()));
      record.most_per_rank = std::max(
          record.most_per_rank, *std::max_element(shape.per_rank.begin(), shape.per_rank.end()));
      if (std::set<std::int64_t>(shape.degrees.begin(), shape.degrees.end()).size() > 1)
        ++record.steps_mixing_degrees;
      record.steps_other_degrees += shape.degrees != shapes[0].degrees;
      record.steps_other_accumulation += shape.per_rank != shapes[0].per_rank;
      record.steps_other_recompute += shape.recompute != shapes[0].recompute;

      // The training step: this rank's micro-steps, then the SUM all-reduce over the world.
      auto& model = models[p];
      model.zero_grad();
      toy::executor executor(model, data);
      const auto reports = dcp::run_step(world, cache, plan, executor);
      model.all_reduce(world.native());

      const auto mine = plan.steps_of(rank);
      for (std::size_t i = 0; i < reports.size(); ++i) {
        const auto mode =
            toy::to_string(toy::checkpointing_for(plan.micro_steps[mine[i]].config.recompute));
        record.peak_bytes[mode] = std::max(record.peak_bytes[mode], reports[i].peak_bytes);
        record.executor_seconds += reports[i].seconds;
      }
    }

    // Compare with the static plan: gradients to 1e-9, losses to print precision.
    double worst = 0;
    bool same_loss = true;
    const auto reference_loss = format_loss(models[0].loss());
    for (std::size_t p = 1; p < plans; ++p) {
      const double difference = relative_difference(models[p].gradients(), models[0].gradients());
      worst = std::max(worst, difference);
      if (difference > records[p].worst_gradient_difference) {
        records[p].worst_gradient_difference = difference;
        records[p].worst_step = step;
      }
      if (!(difference <= tolerance) && failure.empty()) {
        char text[160];
        std::snprintf(text, sizeof text,
                      "step %d: the gradient of plan %s differs from the static plan's by %.3g "
                      "(relative), more than %.0e",
                      step, planners[p].name.c_str(), difference, tolerance);
        failure = text;
      }
      if (format_loss(models[p].loss()) != reference_loss) {
        same_loss = false;
        if (failure.empty())
          failure = "step " + std::to_string(step) + ": plan " + planners[p].name +
                    " printed loss " + format_loss(models[p].loss()) + ", the static plan " +
                    reference_loss;
      }
    }
    identical_loss_steps += same_loss;
    if (any_rank(!failure.empty()) && failure.empty())
      failure = "another rank found a difference at step " + std::to_string(step);

    if (root && (step % 10 == 0 || step == steps - 1 || !failure.empty())) {
      std::printf("%4d", step);
      for (const auto& m : models) std::printf("  %-18s", format_loss(m.loss()).c_str());
      std::printf("  %.2e\n", worst);
    }
    for (auto& m : models) m.sgd(learning_rate);
  }

  // Peak bytes and executor seconds over the ranks.
  for (auto& record : records) {
    for (auto& [mode, bytes] : record.peak_bytes)
      toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                     "MPI_Allreduce");
    toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &record.executor_seconds, 1, MPI_DOUBLE, MPI_MAX,
                                 MPI_COMM_WORLD),
                   "MPI_Allreduce");
  }

  // The plans must really differ from the static one, and each checkpointing mode must have run.
  // (Plans are the same on every rank, so every rank reaches the same verdict.)
  std::vector<std::string> problems = checked.problems;
  if (failure.empty()) {  // over the whole run only
    const auto differences = check_plans_differ(planners, records);
    problems.insert(problems.end(), differences.begin(), differences.end());
  }

  if (root) {
    std::printf(
        "\nwhat each plan did over %d steps (micro-steps by degree and by recompute setting; "
        "micro-steps per rank\n"
        "and step = its gradient-accumulation count; executor peak bytes per checkpointing mode, "
        "max over ranks):\n",
        steps_run);
    for (std::size_t p = 0; p < plans; ++p) {
      const auto& r = records[p];
      std::printf("  %s: %lld micro-steps; %zu..%zu per rank and step", planners[p].name.c_str(),
                  static_cast<long long>(r.micro_steps), r.fewest_per_rank, r.most_per_rank);
      if (p > 0)
        std::printf(
            "; steps unlike static in degrees %lld, in micro-steps per rank %lld, in recompute "
            "%lld",
            static_cast<long long>(r.steps_other_degrees),
            static_cast<long long>(r.steps_other_accumulation),
            static_cast<long long>(r.steps_other_recompute));
      std::printf("\n    %s\n    recompute: %s\n    toy checkpointing: %s\n    peak bytes:",
                  toy::histogram(r.degrees).c_str(), toy::histogram(r.recompute).c_str(),
                  toy::histogram(r.checkpointing).c_str());
      for (const auto& [mode, bytes] : r.peak_bytes)
        if (bytes > 0) std::printf(" %s %.0f", mode.c_str(), bytes);
      std::printf("; executor time (busiest rank) %.3f s\n", r.executor_seconds);
    }
    std::printf("\nmax relative gradient difference vs static (tolerance %.0e):", tolerance);
    for (std::size_t p = 1; p < plans; ++p)
      std::printf(" %s %.2e (step %d)%s", planners[p].name.c_str(),
                  records[p].worst_gradient_difference, records[p].worst_step,
                  p + 1 < plans ? "," : "\n");
    std::printf("loss curves identical at %%.12g: %d of %d steps\n", identical_loss_steps,
                steps_run);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    std::printf("wall time %.2f s\n", elapsed.count());
  }
  if (!failure.empty() || !problems.empty()) {
    if (root) {
      if (!failure.empty()) std::fprintf(stderr, "FAILED: %s\n", failure.c_str());
      for (const auto& problem : problems) std::fprintf(stderr, "FAILED: %s\n", problem.c_str());
    }
    return 1;
  }
  if (root) std::printf("plan-invariant gradients: passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI_Init, then train_and_compare(); an exception or a non-zero return on any rank aborts the
  // whole job (the other ranks may wait in a collective this rank will never reach).
  return dcp::mpi::environment::run(argc, argv, [] { return train_and_compare(); });
}
