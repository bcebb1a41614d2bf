#pragma once
// The analytic cost of one micro-batch inside a tensor x pipeline grid: per model chunk, its
// forward and backward seconds and its bytes on one GPU of its (d pipelines x t tensor ranks)
// group, the send between chunks, each stage's model states and its gradient sync. The terms
// and their sources are in docs/pipeline.md ("The stage cost model").

#include <algorithm>
#include <cstdint>
#include <string>

#include "dcp/cost/activation_memory.hpp"
#include "dcp/cost/analytic.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/model_parallel.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// One chunk of one micro-batch on one GPU of its group.
struct chunk_cost {
  double forward = 0;        ///< seconds
  double backward = 0;       ///< seconds, the recomputed forward included
  double stored_bytes = 0;   ///< kept from this chunk's forward until its backward
  double working_bytes = 0;  ///< what the running op adds: one layer whole, attention buffers
};

/// Which part of a chunk's cost a stage model returns: all of it, a sample's marginal share
/// (what it adds to any micro-batch of its degree), or what every micro-batch pays whatever it
/// holds.
enum class cost_part : std::uint8_t { whole, marginal, fixed };

namespace detail {

/// What the planner's stage model and the simulator's truth share: which parameters each stage
/// holds, its model states under ZeRO over the D pipelines, and the three entry points over
/// Derived::cost(shape, degree, recompute, chunk, part).
template <class Derived>
class stage_model_base {
 public:
  [[nodiscard]] const model_parallel_grid& grid() const noexcept { return grid_; }
  [[nodiscard]] std::int64_t pipelines() const noexcept { return pipelines_; }
  [[nodiscard]] std::int64_t layers_per_chunk() const noexcept { return layers_; }

  /// Chunk `chunk` (0 .. p v - 1) of a micro-batch of shape `s` run by `degree` pipelines
  /// (context parallelism over them, ring attention), `recompute.layers` of the chunk's layers
  /// recomputed whole and, with `recompute.selective`, the others selectively.
  [[nodiscard]] chunk_cost chunk(const micro_batch_shape& s, std::int64_t degree,
                                 recompute_setting recompute, std::int64_t chunk) const noexcept {
    return self().cost(s, degree, recompute, chunk, cost_part::whole);
  }
  /// The seconds `s` adds to any micro-batch of its degree that holds it; tokens per pipeline
  /// unrounded. For samples b_1..b_k: chunk(b_1 + ... + b_k) >= chunk_fixed + sum marginal(b_i)
  /// (pipeline_batch_lower_bound relies on it).
  [[nodiscard]] chunk_cost marginal(const micro_batch_shape& s, std::int64_t degree,
                                    recompute_setting recompute,
                                    std::int64_t chunk) const noexcept {
    return self().cost(s, degree, recompute, chunk, cost_part::marginal);
  }
  /// What every micro-batch pays in `chunk` whatever it holds (at most that).
  [[nodiscard]] chunk_cost chunk_fixed(std::int64_t chunk) const noexcept {
    return self().cost(micro_batch_shape{}, 1, recompute_setting{}, chunk, cost_part::fixed);
  }

  /// Parameters one GPU of stage `stage` holds: its blocks over t, the embedding on the first
  /// stage and the rest of the outer parameters (LM head, final norm) on the last.
  [[nodiscard]] double stage_params(std::int64_t stage) const noexcept {
    double psi = block_params_ * static_cast<double>(layers_ * grid_.virtual_stages);
    if (stage == 0) psi += embedding_;
    if (stage == grid_.pipeline - 1) psi += outer_ - embedding_;
    return psi / static_cast<double>(grid_.tensor);
  }

  /// Weights, gradients and Adam state under ZeRO `zero_stage` over the stage's D data ranks.
  [[nodiscard]] double zero_states(std::int64_t stage, int zero_stage) const noexcept {
    const double psi = stage_params(stage);
    const double n = static_cast<double>(pipelines_);
    return zero_stage == 0   ? 16.0 * psi
           : zero_stage == 1 ? 4.0 * psi + 12.0 * psi / n
                             : 2.0 * psi + 14.0 * psi / n;
  }

 protected:
  stage_model_base(const model_spec& model, const cluster_spec& cluster,
                   const training_spec& training, model_parallel_grid grid)
      : grid_(grid) {
    grid_.validate(model, cluster);
    if (model.has_cross_attention())
      throw invalid_spec("grid: the model has cross-attention (text_tokens = " +
                         std::to_string(model.text_tokens) +
                         "); tensor x pipeline planning models decoder LMs");
    if (training.zero_stage == 3)
      throw invalid_spec(
          "grid: zero_stage = 3 with a tensor x pipeline grid: per-micro-batch parameter "
          "gathers inside a pipeline are not modelled; use zero_stage 0, 1 or 2");
    pipelines_ = grid_.pipelines(cluster);
    layers_ = grid_.layers_per_chunk(model);
    block_params_ = static_cast<double>(model.block_params());
    outer_ = static_cast<double>(model.outer_params());
    embedding_ =
        std::min(outer_, static_cast<double>(model.vocab) * static_cast<double>(model.hidden));
  }

  /// Parameters of the chunk's own layers on one GPU, with the embedding on chunk 0 and the
  /// outer rest on the last chunk: what a micro-batch's backward accumulates in that chunk.
  [[nodiscard]] double chunk_params(std::int64_t chunk) const noexcept {
    double psi = block_params_ * static_cast<double>(layers_);
    if (chunk == 0) psi += embedding_;
    if (chunk == grid_.chunks() - 1) psi += outer_ - embedding_;
    return psi / static_cast<double>(grid_.tensor);
  }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

  model_parallel_grid grid_;
  std::int64_t pipelines_ = 1;
  std::int64_t layers_ = 1;
  double block_params_ = 0, outer_ = 0, embedding_ = 0;
};

}  // namespace detail

class pipeline_cost_model : public detail::stage_model_base<pipeline_cost_model> {
  friend class detail::stage_model_base<pipeline_cost_model>;

 public:
  pipeline_cost_model(model_spec model, cluster_spec cluster, training_spec training,
                      model_parallel_grid grid, analytic_constants constants = {})
      : stage_model_base(validated(model, cluster, training, constants), cluster, training, grid),
        model_(std::move(model)),
        cluster_(std::move(cluster)),
        training_(training),
        constants_(constants) {
    derive();
  }

  [[nodiscard]] const model_spec& model() const noexcept { return model_; }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return cluster_; }
  [[nodiscard]] const training_spec& training() const noexcept { return training_; }
  [[nodiscard]] const analytic_constants& constants() const noexcept { return constants_; }
  /// Capacity less headroom: what a stage may peak at.
  [[nodiscard]] double memory_budget() const noexcept { return training_.memory_budget(cluster_); }

  /// One activation (or its gradient) sent between consecutive chunks: [n/d/t, h] in BF16 per
  /// tensor rank (sequence parallelism shards it), across nodes where a stage fills one.
  [[nodiscard]] double p2p_seconds(const micro_batch_shape& s, std::int64_t degree) const noexcept {
    if (grid().pipeline < 2) return 0.0;
    const double n =
        detail::ceil_whole(static_cast<double>(s.tokens) / static_cast<double>(degree));
    const bool across =
        t_ * static_cast<double>(pipelines()) >= static_cast<double>(cluster_.gpus_per_node);
    return (across ? cluster_.inter_node_latency : cluster_.intra_node_latency) +
           2.0 * n * h_ / t_ / (across ? cluster_.nic_bandwidth : cluster_.nvlink_bandwidth);
  }

  /// Model states under ZeRO over the stage's D data ranks, and the runtime's reserve.
  [[nodiscard]] double state_bytes(std::int64_t stage) const noexcept {
    return zero_states(stage, training_.zero_stage) + training_.runtime_reserve_bytes;
  }

  /// The stage's gradient sync over its D data ranks after its last backward: reduce-scatter of
  /// the BF16 gradients and all-gather of the updated weights (an all-reduce under ZeRO-0), two
  /// ring passes of (D - 1)/D of the bytes, on the NICs where the D ranks span nodes.
  [[nodiscard]] double sync_seconds(std::int64_t stage) const noexcept {
    const std::int64_t d = pipelines();
    if (d <= 1) return 0.0;
    const bool across = t_ * static_cast<double>(d) > static_cast<double>(cluster_.gpus_per_node);
    const double n = static_cast<double>(d);
    return 2.0 * ((across ? cluster_.inter_node_latency : cluster_.intra_node_latency) +
                  (n - 1.0) / n * 2.0 * stage_params(stage) /
                      (across ? cluster_.nic_bandwidth : cluster_.nvlink_bandwidth));
  }

 private:
  static const model_spec& validated(const model_spec& model, const cluster_spec& cluster,
                                     const training_spec& training,
                                     const analytic_constants& constants) {
    model.validate();
    cluster.validate();
    training.validate(cluster);
    constants.validate();
    return model;
  }

  [[nodiscard]] chunk_cost cost(const micro_batch_shape& s, std::int64_t degree,
                                recompute_setting recompute, std::int64_t chunk,
                                cost_part part) const noexcept {
    const bool marginal = part == cost_part::marginal;
    const double d = static_cast<double>(degree);
    const double n = marginal ? static_cast<double>(s.tokens) / d
                              : detail::ceil_whole(static_cast<double>(s.tokens) / d);
    const double share = 1.0 / (d * t_);  // of the FLOPs
    const auto layers = layers_per_chunk();
    const double l = static_cast<double>(layers);
    const double redo = static_cast<double>(std::min<std::int64_t>(recompute.layers, layers));
    const double rows = static_cast<double>(s.tokens) * (degree > 1 ? d : 1.0);
    const double dense = 2.0 * block_params_ * static_cast<double>(s.tokens) * share / dense_rate_;
    const double attn_f = 4.0 * h_q_ *
                          (s.attention_pairs + constants_.attention_forward_half_rows * rows) *
                          share / (constants_.attention_forward_efficiency * peak_);
    const double attn_b = 2.5 * 4.0 * h_q_ *
                          (s.attention_pairs + constants_.attention_backward_half_rows * rows) *
                          share / (constants_.attention_backward_efficiency * peak_);
    const double tp = tp_collective_seconds(n, marginal);
    const double ring_bytes = degree > 1 ? (d - 1.0) * 4.0 * n * h_kv_ / t_ : 0.0;
    const bool ring = degree > 1 && !marginal;
    const double ring_f = ring ? std::max(0.0, ring_bytes / cp_bandwidth(degree) - attn_f) +
                                     (d - 1.0) * cp_latency(degree)
                               : 0.0;
    const double ring_b = ring ? std::max(0.0, 2.0 * ring_bytes / cp_bandwidth(degree) - attn_b) +
                                     2.0 * (d - 1.0) * cp_latency(degree)
                               : 0.0;
    const double launch =
        marginal ? 0.0 : constants_.kernel_launch_seconds * constants_.kernels_per_layer / 3.0;
    const double layer_forward = dense + attn_f + 4.0 * tp + ring_f + launch;
    chunk_cost out;
    out.forward = l * layer_forward;
    out.backward =
        l * (2.0 * dense + attn_b + 6.0 * tp + ring_b + 2.0 * launch) + redo * layer_forward;
    if (recompute.selective)
      out.backward += (l - redo) * n / t_ * 2.0 * selective_saving_ /
                      (constants_.hbm_efficiency * cluster_.gpu.hbm_bandwidth);
    const double kept = recompute.selective ? kept_selective_ : full_;
    out.stored_bytes = n / t_ * ((l - redo) * kept + redo * 2.0 * h_);
    out.working_bytes = n / t_ * (full_ + flash_) + (degree > 1 ? 2.0 * 4.0 * n * h_kv_ / t_ : 0.0);
    if (chunk == 0 && !marginal) out.forward += constants_.step_overhead_seconds;
    if (chunk == grid().chunks() - 1 && vocab_ > 0) {
      // The LM head (vocabulary split over the tensor ranks) and its loss.
      const double head = 2.0 * h_ * vocab_ * static_cast<double>(s.tokens) * share / dense_rate_;
      out.forward += head + tp;
      out.backward += 2.0 * head + tp;
      const double logit_tokens =
          training_.chunked_cross_entropy
              ? std::min(n, static_cast<double>(constants_.loss_chunk_tokens))
              : n;
      out.working_bytes += logit_tokens * vocab_ / t_ * constants_.logits_bytes_per_entry;
    }
    return out;
  }

  void derive() {
    t_ = static_cast<double>(grid().tensor);
    peak_ = cluster_.gpu.peak_flops;
    dense_rate_ = peak_ * constants_.dense_efficiency;
    block_params_ = static_cast<double>(model_.block_params());
    vocab_ = static_cast<double>(model_.vocab);
    h_ = static_cast<double>(model_.hidden);
    h_q_ = static_cast<double>(model_.q_hidden());
    h_kv_ = static_cast<double>(model_.kv_hidden());
    full_ = static_cast<double>(detail::activation_bytes_per_token_layer(model_));
    selective_saving_ = static_cast<double>(detail::bytes_saved_by_selective(model_));
    kept_selective_ = full_ - selective_saving_;
    flash_ = 4.0 * h_q_ + 2.0 * (h_q_ + 2.0 * h_kv_);
  }

  /// One all-gather or reduce-scatter of the tensor group over an [n, h] BF16 tensor on NVLink:
  /// (t - 1)/t of its bytes and one latency (not in a marginal); 0 without tensor parallelism.
  [[nodiscard]] double tp_collective_seconds(double n, bool marginal) const noexcept {
    if (grid().tensor < 2) return 0.0;
    return (marginal ? 0.0 : cluster_.intra_node_latency) +
           (t_ - 1.0) / t_ * 2.0 * n * h_ / cluster_.nvlink_bandwidth;
  }

  /// The context-parallel ring of `degree` pipelines at one stage: its ranks are t apart, so it
  /// stays on NVLink while t x degree GPUs fit in a node.
  [[nodiscard]] bool ring_in_node(std::int64_t degree) const noexcept {
    return t_ * static_cast<double>(degree) <= static_cast<double>(cluster_.gpus_per_node);
  }
  [[nodiscard]] double cp_bandwidth(std::int64_t degree) const noexcept {
    return ring_in_node(degree) ? cluster_.nvlink_bandwidth : cluster_.nic_bandwidth;
  }
  [[nodiscard]] double cp_latency(std::int64_t degree) const noexcept {
    return ring_in_node(degree) ? cluster_.intra_node_latency : cluster_.inter_node_latency;
  }

  model_spec model_;
  cluster_spec cluster_;
  training_spec training_;
  analytic_constants constants_;
  double t_ = 1, peak_ = 0, dense_rate_ = 0, block_params_ = 0, vocab_ = 0, h_ = 0, h_q_ = 0,
         h_kv_ = 0, full_ = 0, selective_saving_ = 0, kept_selective_ = 0, flash_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
