#pragma once
// The libtorch framework's adapter to dcp, written once per framework: its micro-batch executor
// over dcp::c10d_communicator, the samples dcp plans for a batch, the cost model the examples
// plan with (Llama-3-8B on one node of H200s) and the mapping of dcp's recompute setting onto
// the tiny model's layers.

#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/torch/communicator.hpp"

#include "tiny_llama.hpp"

namespace tiny {

/// Each toy token stands for this many tokens of the model dcp plans for, so that the longest
/// toy sequences (160 tokens: 40K planned tokens) need sequence parallelism on Llama-3-8B.
inline constexpr std::int64_t planned_tokens_per_token = 256;

/// What dcp plans: one text sample per sequence, id = its index in the batch.
inline std::vector<dcp::sample> planner_samples(const batch& data) {
  std::vector<dcp::sample> out;
  out.reserve(data.size());
  for (std::size_t id = 0; id < data.size(); ++id)
    out.push_back(dcp::text_sample(id, data[id].length() * planned_tokens_per_token));
  return out;
}

/// Llama-3-8B trained on one node of `gpus` H200s (one NVSwitch domain), one GPU per rank.
inline dcp::analytic_cost_model llama3_8b_node(std::int64_t gpus,
                                               dcp::training_spec training = {}) {
  dcp::cluster_spec cluster;
  cluster.gpus = gpus;
  cluster.gpus_per_node = gpus;
  cluster.gpu = dcp::gpus::h200_sxm();
  return dcp::analytic_cost_model(dcp::models::llama3_8b(), std::move(cluster), training);
}

/// The tiny model's checkpointing for a dcp recompute setting planned for a model of
/// `planned_layers` layers: recompute.layers of them map proportionally, rounded up, onto the
/// first ceil(layers x recompute.layers / planned_layers) of the tiny model's `layers` (so any
/// recomputation recomputes at least one layer and full recomputation all of them; with 2 tiny
/// layers, 1-16 of Llama-3-8B's 32 layers -> the first, 17-32 -> both); those keep only their
/// input. A selective setting makes the other layers drop their attention probabilities.
inline std::vector<checkpointing> checkpointing_for(dcp::recompute_setting recompute,
                                                    std::int64_t planned_layers) {
  const auto recomputed =
      planned_layers <= 0 || recompute.layers <= 0
          ? 0
          : (static_cast<std::int64_t>(recompute.layers) * layers + planned_layers - 1) /
                planned_layers;
  std::vector<checkpointing> out(
      layers, recompute.selective ? checkpointing::drop_probabilities : checkpointing::keep_all);
  for (std::int64_t l = 0; l < std::min<std::int64_t>(recomputed, layers); ++l)
    out[static_cast<std::size_t>(l)] = checkpointing::keep_input_only;
  return out;
}

/// Runs dcp's micro-steps with the tiny model; models dcp::micro_batch_executor over
/// dcp::c10d_communicator. It differentiates loss_scale times the micro-batch's mean loss per
/// token, so the SUM all-reduce after the step gives the batch's gradient. Each report carries
/// the micro-step's time and the most bytes the process's CPU allocator held during it
/// (counting_allocator: weights, gradients, activations and communication buffers). The time is
/// the process's CPU time (CLOCK_PROCESS_CPUTIME_ID: this thread and Gloo's), measured after
/// the group's members have met in a barrier: four ranks share two cores in CI, so wall time
/// would also count the time the OS gave to other ranks, and a member that arrives first would
/// count its wait for the others' earlier micro-steps. Neither is the micro-step's own cost.
class executor {
 public:
  executor(model& trained, const batch& data,
           std::int64_t planned_layers = dcp::models::llama3_8b().layers)
      : model_(&trained),
        data_(&data),
        planned_layers_(planned_layers),
        memory_(&counting_allocator::install()) {}

  dcp::execution_report run(const dcp::micro_step& step, dcp::c10d_communicator& group,
                            dcp::recompute_setting recompute, double loss_scale) {
    if (group.size() > 1) group.process_group()->barrier()->wait();
    const double start = cpu_seconds();
    memory_->reset_peak();
    const auto tokens = tokens_of(*data_, step.sample_ids);
    if (tokens * planned_tokens_per_token != step.tokens)
      throw dcp::error("tiny executor: micro-step " + std::to_string(step.sequence) +
                       " was planned for " + std::to_string(step.tokens) +
                       " tokens, its samples have " +
                       std::to_string(tokens * planned_tokens_per_token));
    const auto modes = checkpointing_for(recompute, planned_layers_);
    model_->forward_backward(*data_, step.sample_ids,
                             group.size() > 1 ? group.process_group() : process_group(),
                             loss_scale / static_cast<double>(tokens), modes);
    return {cpu_seconds() - start, static_cast<double>(memory_->peak_bytes()), false};
  }

  /// After a micro-step ran out of memory (never on CPU here, but run_calibrated_step asks for
  /// it): the step's partial gradients are dropped so that the re-planned step starts clean.
  void discard_gradients() { model_->zero_grad(); }

 private:
  static double cpu_seconds() noexcept {
    std::timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }

  model* model_;
  const batch* data_;
  std::int64_t planned_layers_;
  counting_allocator* memory_;
};
static_assert(dcp::micro_batch_executor<executor, dcp::c10d_communicator>);

}  // namespace tiny
