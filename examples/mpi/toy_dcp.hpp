#pragma once
// The toy framework's adapter to dcp, written once per framework: its micro-batch executor over
// dcp::mpi::communicator, the samples dcp plans for a toy batch, and the cost model the MPI
// examples plan with (Llama-3-8B on one node of H200s).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "dcp/dcp.hpp"
#include "dcp/mpi/communicator.hpp"
#include "dcp/runtime/executor.hpp"

#include "toy_attention.hpp"

namespace toy {

/// Each toy token stands for this many tokens of the model dcp plans for, so that the longest
/// toy sequences (128 tokens: 32K planned tokens) need sequence parallelism on Llama-3-8B.
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

/// The toy's checkpointing for a dcp recompute setting: any recomputed layers (the toy has one)
/// recompute the whole layer; selective recomputation drops the attention probabilities.
inline checkpointing checkpointing_for(dcp::recompute_setting recompute) noexcept {
  if (recompute.layers > 0) return checkpointing::keep_input_only;
  if (recompute.selective) return checkpointing::drop_probabilities;
  return checkpointing::keep_all;
}

/// Runs dcp's micro-steps with the toy model; models dcp::micro_batch_executor over
/// dcp::mpi::communicator. The micro-batch's mean loss per token, times the step's loss scale,
/// is what it differentiates, so the SUM all-reduce after the step gives the batch's gradient.
class executor {
 public:
  executor(model& trained, const batch& data) : model_(&trained), data_(&data) {}

  dcp::execution_report run(const dcp::micro_step& step, dcp::mpi::communicator& group,
                            dcp::recompute_setting recompute, double loss_scale) {
    const auto start = std::chrono::steady_clock::now();
    const auto tokens = tokens_of(*data_, step.sample_ids);
    if (tokens * planned_tokens_per_token != step.tokens)
      throw dcp::error("toy executor: micro-step " + std::to_string(step.sequence) +
                       " was planned for " + std::to_string(step.tokens) +
                       " tokens, its samples have " +
                       std::to_string(tokens * planned_tokens_per_token));
    const double scale = loss_scale / static_cast<double>(tokens);
    const auto peak = model_->forward_backward(*data_, step.sample_ids, group.native(), scale,
                                               checkpointing_for(recompute));
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    return {seconds.count(), static_cast<double>(peak), false};
  }

 private:
  model* model_;
  const batch* data_;
};
static_assert(dcp::micro_batch_executor<executor, dcp::mpi::communicator>);

/// "name xN, ..." of a count per key: degrees as "degree d", strings as they are, other keys by
/// dcp::to_string.
template <class Key>
std::string histogram(const std::map<Key, std::int64_t>& counts) {
  std::string out;
  for (const auto& [key, n] : counts) {
    std::string name;
    if constexpr (std::is_same_v<Key, std::int64_t>)
      name = "degree " + std::to_string(key);
    else if constexpr (std::is_same_v<Key, std::string>)
      name = key;
    else
      name = dcp::to_string(key);
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  }
  return out;
}

}  // namespace toy
