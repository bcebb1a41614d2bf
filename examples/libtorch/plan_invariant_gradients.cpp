// Plan-invariant gradients of a libtorch trainer: `mpiexec -n 4 libtorch/plan_invariant_gradients`.
//
// Trains the tiny Llama of tiny_llama.hpp (float64, CPU, sequence lengths from the Wikipedia
// profile) for 50 steps, once per plan, in lockstep: one copy of the weights per plan, the same
// batch for all. Every step each plan is made by a real dcp planner over Llama-3-8B on one node
// of 4 H200s (each toy token planned as 256 tokens) and executed by dcp::run_step over
// dcp::c10d_communicator (ProcessGroupGloo): sequence-parallel micro-batches all-gather keys and
// values over their group, checkpointing follows the plan's recompute setting, the loss is
// scaled by the plan's loss scale, and the gradients are all-reduced with SUM over the world.
// The first plan is the static layout (degree 4 for every sample, full recompute); the others
// are DataCentricScheduler plans with other recompute strategies and memory budgets.
//
// Checks (non-zero exit if one fails): the hand-written attention backward agrees with
// libtorch's autograd and the three checkpointing modes give the same gradient bit for bit; at
// every step each plan's gradient is within 1e-9 (relative, per tensor, max norm) of the static
// plan's and its loss printed with %.12g is the static plan's; the plans really differ in
// degrees, micro-steps per rank and recompute settings. Prints the max relative gradient
// difference of each plan over all steps.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <torch/version.h>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/torch/communicator.hpp"

#include "mpi_launch.hpp"
#include "tiny_llama_dcp.hpp"

namespace {

constexpr int world_ranks = 4;
constexpr int steps = 50;
constexpr std::size_t batch_size = 16;
constexpr std::uint64_t data_seed = 2024;
constexpr std::uint64_t weight_seed = 7;
constexpr double learning_rate = 0.5;
constexpr double tolerance = 1e-9;

struct planner {
  std::string name;
  std::string description;
  std::function<dcp::step_plan(const std::vector<dcp::sample>&)> plan;
};

std::vector<planner> make_planners(std::int64_t gpus) {
  using namespace dcp;
  training_spec tight;
  tight.headroom_fraction = 0.4;  // a smaller activation budget: more micro-steps and recompute
  const auto roomy = tiny::llama3_8b_node(gpus);
  const auto narrow = tiny::llama3_8b_node(gpus, tight);
  using static_scheduler =
      DataCentricScheduler<analytic_cost_model, varlen_buckets, full_recompute, static_placement>;
  using selective_scheduler =
      DataCentricScheduler<analytic_cost_model, varlen_buckets, selective_recompute>;
  std::vector<planner> out;
  out.push_back({"static",
                 "static_placement: degree " + std::to_string(gpus) +
                     " for every sample, full recompute, 84 GiB",
                 [s = static_scheduler(narrow, {}, {}, static_placement{gpus})](const auto& b) {
                   return s.plan(b);
                 }});
  out.push_back({"dcp",
                 "DataCentricScheduler<>: balanced placement, selective-pyramid recompute, 126 GiB",
                 [s = DataCentricScheduler<>(roomy)](const auto& b) { return s.plan(b); }});
  out.push_back({"dcp-tight",
                 "DataCentricScheduler<>: balanced placement, selective-pyramid recompute, 84 GiB",
                 [s = DataCentricScheduler<>(narrow)](const auto& b) { return s.plan(b); }});
  out.push_back({"dcp-selective",
                 "DataCentricScheduler: balanced placement, selective recompute, 126 GiB",
                 [s = selective_scheduler(roomy)](const auto& b) { return s.plan(b); }});
  return out;
}

/// Degrees, micro-steps per rank and recompute settings of one plan, for comparing plans.
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

struct plan_record {
  std::map<std::int64_t, std::int64_t> degrees;       // degree -> micro-steps
  std::map<std::string, std::int64_t> checkpointing;  // tiny mode -> layer runs
  std::size_t fewest_per_rank = SIZE_MAX;
  std::size_t most_per_rank = 0;
  std::int64_t steps_other_degrees = 0;
  std::int64_t steps_other_accumulation = 0;
  std::int64_t steps_other_recompute = 0;
  double worst = 0;
  int worst_step = 0;
  double executor_seconds = 0;                                                // this rank's
  std::map<std::int64_t, std::pair<double, std::int64_t>> seconds_by_degree;  // this rank's
};

/// Max over the parameter tensors of |g - reference|_max / |reference|_max.
double relative_difference(const tiny::model& m, const tiny::model& reference) {
  double worst = 0;
  for (std::size_t k = 0; k < m.parameters().size(); ++k) {
    const auto& g = m.parameters()[k].grad();
    const auto& r = reference.parameters()[k].grad();
    const double scale = r.abs().max().item<double>();
    const double difference = (g - r).abs().max().item<double>();
    if (difference > 0) worst = std::max(worst, scale > 0 ? difference / scale : INFINITY);
  }
  return worst;
}

std::string format_loss(double loss) {
  char text[40];
  std::snprintf(text, sizeof text, "%.12g", loss);
  return text;
}

/// On a small batch run by this rank alone: the hand-written attention backward against
/// libtorch's autograd (relative difference), and whether the three checkpointing modes give
/// the same gradient bit for bit.
std::pair<double, bool> self_check(const std::vector<std::int64_t>& lengths) {
  const auto data = tiny::make_batch(lengths, data_seed + 1, 0, 4);
  const std::vector<std::uint64_t> ids = {0, 1, 2, 3};
  const double scale = 1.0 / static_cast<double>(tiny::tokens_of(data));
  const tiny::model base(weight_seed);
  const auto run = [&](bool reference, tiny::checkpointing mode) {
    tiny::model m(base);
    m.use_reference_attention(reference);
    const std::vector<tiny::checkpointing> modes(tiny::layers, mode);
    m.forward_backward(data, ids, {}, scale, modes);
    return m;
  };
  const auto kept = run(false, tiny::checkpointing::keep_all);
  const double against_autograd =
      relative_difference(kept, run(true, tiny::checkpointing::keep_all));
  bool identical = true;
  for (const auto mode :
       {tiny::checkpointing::drop_probabilities, tiny::checkpointing::keep_input_only}) {
    const auto other = run(false, mode);
    for (std::size_t k = 0; k < kept.parameters().size(); ++k)
      identical = identical && at::equal(kept.parameters()[k].grad(), other.parameters()[k].grad());
  }
  return {against_autograd, identical};
}

int train_and_compare(tiny::launch& job) {
  const int rank = job.rank();
  const bool root = rank == 0;
  if (job.size() != world_ranks) {
    if (root)
      std::fprintf(stderr, "plan_invariant_gradients needs %d ranks, got %d\n", world_ranks,
                   job.size());
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  const auto lengths = tiny::read_lengths(DCP_SHARED_DATA_DIR "/wikipedia-lengths.txt");
  dcp::c10d_communicator world(job.store(), rank, job.size());
  dcp::group_cache<dcp::c10d_communicator> cache(world);  // one per world, shared by every plan
  const auto planners = make_planners(world.size());
  const std::size_t plans = planners.size();
  std::vector<tiny::model> models;
  for (std::size_t p = 0; p < plans; ++p) models.emplace_back(weight_seed);
  std::vector<plan_record> records(plans);

  std::vector<std::string> problems;
  const auto [against_autograd, identical] = self_check(lengths);
  if (!(against_autograd <= 1e-12))
    problems.push_back("self-check: the attention backward differs from autograd by " +
                       std::to_string(against_autograd));
  if (!identical) problems.push_back("self-check: the checkpointing modes changed the gradient");
  if (root) {
    std::printf(
        "plan-invariant gradients (libtorch %s, c10d Gloo): %d ranks, %d steps of %zu sequences, "
        "float64\n",
        TORCH_VERSION, world.size(), steps, batch_size);
    std::printf(
        "tiny Llama: %d layers, hidden %lld, %lld heads, SwiGLU %lld, vocab %lld; lengths: "
        "Wikipedia / 16, 2..160 tokens\n",
        tiny::layers, static_cast<long long>(tiny::dim), static_cast<long long>(tiny::heads),
        static_cast<long long>(tiny::ffn), static_cast<long long>(tiny::vocab));
    std::printf(
        "self-check: attention backward vs autograd %.2e (relative); checkpointing modes "
        "bit-identical: %s\n",
        against_autograd, identical ? "yes" : "no");
    for (const auto& p : planners)
      std::printf("  %-14s %s\n", p.name.c_str(), p.description.c_str());
    std::printf("\n%4s", "step");
    for (const auto& p : planners) std::printf("  %-18s", ("loss[" + p.name + "]").c_str());
    std::printf("  max rel. grad. diff vs static\n");
  }

  std::string failure;
  int identical_loss_steps = 0;
  int steps_run = 0;
  for (int step = 0; step < steps && failure.empty(); ++step, ++steps_run) {
    const auto data = tiny::make_batch(lengths, data_seed, step, batch_size);
    const auto samples = tiny::planner_samples(data);
    std::vector<plan_shape> shapes;
    for (std::size_t p = 0; p < plans; ++p) {
      const auto plan = planners[p].plan(samples);
      const auto& shape = shapes.emplace_back(plan);
      auto& record = records[p];
      for (const auto& m : plan.micro_steps) {
        ++record.degrees[m.degree()];
        for (const auto mode :
             tiny::checkpointing_for(m.config.recompute, dcp::models::llama3_8b().layers))
          ++record.checkpointing[tiny::to_string(mode)];
      }
      record.fewest_per_rank = std::min(
          record.fewest_per_rank, *std::min_element(shape.per_rank.begin(), shape.per_rank.end()));
      record.most_per_rank = std::max(
          record.most_per_rank, *std::max_element(shape.per_rank.begin(), shape.per_rank.end()));
      record.steps_other_degrees += shape.degrees != shapes[0].degrees;
      record.steps_other_accumulation += shape.per_rank != shapes[0].per_rank;
      record.steps_other_recompute += shape.recompute != shapes[0].recompute;

      auto& model = models[p];
      model.zero_grad();
      tiny::executor executor(model, data);
      const auto reports = dcp::run_step(world, cache, plan, executor);
      const auto mine = plan.steps_of(rank);
      for (std::size_t i = 0; i < reports.size(); ++i) {
        record.executor_seconds += reports[i].seconds;
        auto& [seconds, count] = record.seconds_by_degree[plan.micro_steps[mine[i]].degree()];
        seconds += reports[i].seconds;
        ++count;
      }
      model.all_reduce(world.process_group());
    }

    double worst = 0;
    bool same_loss = true;
    const auto reference_loss = format_loss(models[0].loss());
    for (std::size_t p = 1; p < plans; ++p) {
      const double difference = relative_difference(models[p], models[0]);
      worst = std::max(worst, difference);
      if (difference > records[p].worst) {
        records[p].worst = difference;
        records[p].worst_step = step;
      }
      if (!(difference <= tolerance) && failure.empty())
        failure = "step " + std::to_string(step) + ": the gradient of plan " + planners[p].name +
                  " differs from the static plan's by " + std::to_string(difference) +
                  " (relative)";
      if (format_loss(models[p].loss()) != reference_loss) {
        same_loss = false;
        if (failure.empty())
          failure = "step " + std::to_string(step) + ": plan " + planners[p].name +
                    " printed loss " + format_loss(models[p].loss()) + ", the static plan " +
                    reference_loss;
      }
    }
    identical_loss_steps += same_loss;
    if (tiny::launch::any_rank(!failure.empty()) && failure.empty())
      failure = "another rank found a difference at step " + std::to_string(step);
    if (root && (step % 10 == 0 || step == steps - 1 || !failure.empty())) {
      std::printf("%4d", step);
      for (const auto& m : models) std::printf("  %-18s", format_loss(m.loss()).c_str());
      std::printf("  %.2e\n", worst);
    }
    for (auto& m : models) m.sgd(learning_rate);
  }

  // The dynamic plans must differ from the static one, and each checkpointing mode must have run.
  if (failure.empty()) {
    std::set<std::int64_t> degrees;
    std::set<std::string> modes;
    for (std::size_t p = 0; p < plans; ++p) {
      for (const auto& [d, n] : records[p].degrees) degrees.insert(d);
      for (const auto& [mode, n] : records[p].checkpointing) modes.insert(mode);
      if (p == 0) continue;
      if (records[p].steps_other_degrees == 0)
        problems.push_back(planners[p].name + " used the static plan's degrees at every step");
      if (records[p].steps_other_accumulation == 0)
        problems.push_back(planners[p].name +
                           " had the static plan's micro-steps per rank at every step");
      if (records[p].steps_other_recompute == 0)
        problems.push_back(planners[p].name +
                           " had the static plan's recompute settings at every step");
    }
    if (records[0].degrees.size() != 1)
      problems.push_back("the static plan used more than one degree");
    if (degrees != std::set<std::int64_t>{1, 2, 4})
      problems.push_back("the plans did not use each of degrees 1, 2 and 4");
    if (modes.size() != 3) problems.push_back("not every checkpointing mode ran");
  }

  if (root) {
    std::printf(
        "\nwhat each plan did over %d steps (micro-steps by degree; layer runs by checkpointing "
        "mode):\n",
        steps_run);
    for (std::size_t p = 0; p < plans; ++p) {
      const auto& r = records[p];
      std::printf("  %s: %zu..%zu micro-steps per rank and step;", planners[p].name.c_str(),
                  r.fewest_per_rank, r.most_per_rank);
      for (const auto& [d, n] : r.degrees)
        std::printf(" degree %lld x%lld", static_cast<long long>(d), static_cast<long long>(n));
      std::printf(";");
      for (const auto& [mode, n] : r.checkpointing)
        std::printf(" %s x%lld", mode.c_str(), static_cast<long long>(n));
      if (p > 0)
        std::printf("; steps unlike static: degrees %lld, per rank %lld, recompute %lld",
                    static_cast<long long>(r.steps_other_degrees),
                    static_cast<long long>(r.steps_other_accumulation),
                    static_cast<long long>(r.steps_other_recompute));
      std::printf("; rank 0 executor %.2f s (mean ms per micro-step:", r.executor_seconds);
      for (const auto& [d, sc] : r.seconds_by_degree)
        std::printf(" degree %lld %.1f", static_cast<long long>(d),
                    1e3 * sc.first / static_cast<double>(sc.second));
      std::printf(")\n");
    }
    std::printf("\nmax relative gradient difference vs static over %d steps (tolerance %.0e):",
                steps_run, tolerance);
    for (std::size_t p = 1; p < plans; ++p)
      std::printf(" %s %.2e (step %d)%s", planners[p].name.c_str(), records[p].worst,
                  records[p].worst_step, p + 1 < plans ? "," : "\n");
    std::printf("loss curves identical at %%.12g: %d of %d steps\n", identical_loss_steps,
                steps_run);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    std::printf("wall time %.2f s\n", elapsed.count());
  }
  const bool failed = tiny::launch::any_rank(!failure.empty() || !problems.empty());
  if (root) {
    if (!failure.empty()) std::fprintf(stderr, "FAILED: %s\n", failure.c_str());
    for (const auto& problem : problems) std::fprintf(stderr, "FAILED: %s\n", problem.c_str());
    if (!failed) std::printf("plan-invariant gradients: passed\n");
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tiny::launch::run(argc, argv, [](tiny::launch& job) { return train_and_compare(job); });
}
