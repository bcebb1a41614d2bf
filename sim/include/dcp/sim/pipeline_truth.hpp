#pragma once
// The simulator's truth model inside a tensor x pipeline grid: one chunk of one micro-batch on
// one GPU of its (d pipelines x t tensor ranks) group, judged with the truth model's constants
// and curves (truth_model.hpp) rather than the planner's (pipeline/stage_cost.hpp). It has the
// members pipeline_instance_of and pipeline_batch_lower_bound call, so any plan — dcp's or a
// peer's — is timed by the same executor (simulate_pipeline) on it.
//
// What it adds over the planner's model (docs/pipeline.md, "The truth model"): GEMM efficiency
// that falls with the tokens per GPU (eta(n) = eta_max n/(n + n_half)), FlashAttention-3's
// efficiency by length, memory-bound kernels (norms, RoPE, residuals, activation, loss) over
// HBM, NCCL's latency per ring step, the host's kernel issue time (an op takes the longer of
// its device and host time), FP32 gradient accumulation in every micro-batch, allocator
// fragmentation, the CUDA context and NCCL buffers; Megatron's backward re-gathers of the
// sequence-parallel input overlap the weight-gradient GEMMs (the planner charges them).

#include <algorithm>
#include <cstdint>
#include <string>

#include "dcp/cost/activation_memory.hpp"
#include "dcp/error.hpp"
#include "dcp/pipeline/stage_cost.hpp"
#include "dcp/sim/truth_model.hpp"
#include "dcp/spec/model_parallel.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::sim {

class pipeline_truth_model : public dcp::detail::stage_model_base<pipeline_truth_model> {
  friend class dcp::detail::stage_model_base<pipeline_truth_model>;

 public:
  pipeline_truth_model(const model_spec& model, const cluster_spec& cluster,
                       const training_spec& training, model_parallel_grid grid,
                       truth_constants constants = {})
      : stage_model_base(truth_model(model, cluster, training, constants).model(), cluster,
                         training, grid),
        whole_(model, cluster, training, constants) {
    derive();
  }

  [[nodiscard]] const model_spec& model() const noexcept { return whole_.model(); }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return whole_.cluster(); }
  [[nodiscard]] const training_spec& training() const noexcept { return whole_.training(); }
  [[nodiscard]] const truth_constants& constants() const noexcept { return whole_.constants(); }
  [[nodiscard]] double memory_budget() const noexcept { return whole_.memory_budget(); }
  /// Physical HBM: a device whose true peak exceeds it runs out of memory.
  [[nodiscard]] double capacity_bytes() const noexcept { return whole_.capacity_bytes(); }

  [[nodiscard]] double p2p_seconds(const micro_batch_shape& s, std::int64_t degree) const noexcept {
    if (grid().pipeline < 2) return 0.0;
    const double n =
        dcp::detail::ceil_whole(static_cast<double>(s.tokens) / static_cast<double>(degree));
    const bool across =
        t_ * static_cast<double>(pipelines()) >= static_cast<double>(cluster().gpus_per_node);
    return whole_.collective_latency(across ? 0.0 : 1.0, across ? 1.0 : 0.0) +
           2.0 * n * h_ / t_ / (across ? whole_.gpu_nic_cap() : cluster().nvlink_bandwidth);
  }

  /// Model states under ZeRO over the stage's D data ranks, the CUDA context and NCCL's
  /// buffers.
  [[nodiscard]] double state_bytes(std::int64_t stage) const noexcept {
    return zero_states(stage, training().zero_stage) + constants().cuda_context_bytes +
           constants().nccl_buffer_bytes;
  }

  /// Reduce-scatter of the gradients and all-gather of the weights over the D data ranks, ring
  /// passes with NCCL's per-step latency, on the GPUs' NICs where the ranks span nodes.
  [[nodiscard]] double sync_seconds(std::int64_t stage) const noexcept {
    const std::int64_t d = pipelines();
    if (d <= 1) return 0.0;
    const double n = static_cast<double>(d);
    const bool across = t_ * n > static_cast<double>(cluster().gpus_per_node);
    const double latency =
        across ? whole_.collective_latency(0, n - 1.0) : whole_.collective_latency(n - 1.0, 0);
    return 2.0 * (latency + (n - 1.0) / n * 2.0 * stage_params(stage) /
                                (across ? whole_.gpu_nic_cap() : cluster().nvlink_bandwidth));
  }

 private:
  void derive() {
    const auto& m = whole_.model();
    t_ = static_cast<double>(grid().tensor);
    block_params_ = static_cast<double>(m.block_params());
    vocab_ = static_cast<double>(m.vocab);
    h_ = static_cast<double>(m.hidden);
    h_q_ = static_cast<double>(m.q_hidden());
    h_kv_ = static_cast<double>(m.kv_hidden());
    row_share_ = m.attention == attention_kind::causal ? 0.5 : 1.0;
    elementwise_ = static_cast<double>(20 * m.hidden + 4 * m.q_hidden() + 4 * m.kv_hidden() +
                                       (m.mlp == mlp_kind::swiglu ? 6 * m.ffn : 4 * m.ffn));
    full_ = static_cast<double>(dcp::detail::activation_bytes_per_token_layer(m));
    selective_saving_ = static_cast<double>(dcp::detail::bytes_saved_by_selective(m));
    flash_ = 4.0 * h_q_ + 2.0 * (h_q_ + 2.0 * h_kv_);
  }

  [[nodiscard]] chunk_cost cost(const micro_batch_shape& s, std::int64_t degree,
                                recompute_setting recompute, std::int64_t chunk,
                                cost_part part) const noexcept {
    const bool marginal = part == cost_part::marginal;
    const bool fixed_only = part == cost_part::fixed;
    const auto& k = constants();
    const auto& cl = cluster();
    const double peak = cl.gpu.peak_flops;
    const double d = static_cast<double>(degree);
    const double tokens = static_cast<double>(s.tokens);
    const double n = marginal ? tokens / d : dcp::detail::ceil_whole(tokens / d);  // per pipeline
    const auto layers = layers_per_chunk();
    const double l = static_cast<double>(layers);
    const double redo = static_cast<double>(std::min<std::int64_t>(recompute.layers, layers));
    const bool last = chunk == grid().chunks() - 1 && vocab_ > 0;
    const double fixed = marginal ? 0.0 : 1.0;
    // GEMMs on n tokens (sequence-parallel input gathered) and 1/t of the weights.
    const double gemm_token = 2.0 * block_params_ / t_ * (n + fixed * k.gemm_half_tokens) /
                              (k.gemm_efficiency_max * peak);
    double forward = l * gemm_token;
    double backward = (2.0 * l + redo) * gemm_token;
    if (last) {
      const double head = 2.0 * h_ * vocab_ / t_ * (n + fixed * k.gemm_half_tokens) /
                          (k.gemm_efficiency_max * peak);
      forward += head;
      backward += 2.0 * head;
    }
    // FlashAttention-3 on 1/t of the heads, the ring's per-row term d times.
    const auto& fc = whole_.attention_forward_curve();
    const auto& bc = whole_.attention_backward_curve();
    const double rows = tokens * (degree > 1 ? d : 1.0) * row_share_;
    const double attn_f =
        4.0 * h_q_ / t_ * (s.attention_pairs + fc.half * rows) / (fc.max * peak) / d;
    const double attn_b =
        4.0 * h_q_ / t_ * (s.attention_pairs + bc.half * rows) / (bc.max * peak) / d;
    forward += l * attn_f;
    backward += 2.5 * l * attn_b + redo * attn_f;
    // Memory-bound kernels over HBM; every micro-batch accumulates its FP32 gradients.
    const double hbm = k.hbm_efficiency * cl.gpu.hbm_bandwidth;
    forward += n * elementwise_ / t_ * l / hbm;
    backward += n * elementwise_ / t_ * (2.0 * l + redo) / hbm;
    if (recompute.selective) backward += n * (l - redo) * 2.0 * selective_saving_ / t_ / hbm;
    if (last) backward += n * 4.0 * k.logits_bytes_per_entry * vocab_ / t_ / hbm;
    backward += fixed * k.gradient_accumulation_bytes_per_weight * chunk_params(chunk) / hbm;
    // Tensor-parallel all-gathers and reduce-scatters on NVLink: 4 per layer forward, 4 in
    // backward plus 2 re-gathers hidden behind the weight-gradient GEMMs, 4 per recomputed
    // layer; the LM head one each way.
    if (grid().tensor > 1) {
      const double one = fixed * whole_.collective_latency(t_ - 1.0, 0) +
                         (t_ - 1.0) / t_ * 2.0 * n * h_ / cl.nvlink_bandwidth;
      forward += (4.0 * l + (last ? 1.0 : 0.0)) * one;
      backward += (4.0 * l + 4.0 * redo + (last ? 1.0 : 0.0)) * one;
    }
    // Context parallelism over d pipelines (Transformer Engine's P2P ring): d - 1 K/V chunks per
    // layer forward, K/V and their gradients backward, hidden behind the attention they feed.
    double ring_kernels_f = 0;
    double ring_kernels_b = 0;
    if (degree > 1 && !marginal) {
      const bool in_node = t_ * d <= static_cast<double>(cl.gpus_per_node);
      const double bw = in_node ? cl.nvlink_bandwidth : whole_.gpu_nic_cap();
      const double step =
          in_node ? whole_.collective_latency(1, 0) : whole_.collective_latency(0, 1);
      const double bytes = (d - 1.0) * 4.0 * n * h_kv_ / t_;
      forward += l * (std::max(0.0, bytes / bw - attn_f) + (d - 1.0) * step);
      backward += l * (std::max(0.0, 2.0 * bytes / bw - 2.5 * attn_b) + 2.0 * (d - 1.0) * step) +
                  redo * (std::max(0.0, bytes / bw - attn_f) + (d - 1.0) * step);
      ring_kernels_f = d * k.ring_forward_kernels_per_step;
      ring_kernels_b = d * k.ring_backward_kernels_per_step;
    }
    chunk_cost out;
    if (fixed_only) {
      // An empty micro-batch's device time: what every micro-batch pays.
      out.forward = forward;
      out.backward = backward;
      if (chunk == 0) out.forward += k.framework_seconds;
      return out;
    }
    if (!marginal) {
      // The host issues every kernel; an op takes the longer of its device and host time.
      const double per_kernel = k.host_seconds_per_kernel;
      const double kernels_f =
          l * (k.forward_kernels_per_layer + ring_kernels_f) + (last ? k.loss_kernels : 0.0);
      const double kernels_b = l * (2.0 * k.forward_kernels_per_layer + ring_kernels_b) +
                               redo * (k.forward_kernels_per_layer + ring_kernels_f);
      forward = std::max(forward + kernels_f * k.kernel_launch_seconds, kernels_f * per_kernel);
      backward = std::max(backward + kernels_b * k.kernel_launch_seconds, kernels_b * per_kernel);
      if (chunk == 0) forward += k.framework_seconds;
    }
    out.forward = forward;
    out.backward = backward;
    const double grow = 1.0 + k.fragmentation;
    const double kept = recompute.selective ? full_ - selective_saving_ : full_;
    out.stored_bytes = grow * n / t_ * ((l - redo) * kept + redo * 2.0 * h_);
    out.working_bytes =
        grow * (n / t_ * (full_ + flash_) + (degree > 1 ? 8.0 * n * h_kv_ / t_ : 0.0));
    if (last) {
      const double logit_tokens = training().chunked_cross_entropy
                                      ? std::min(n, static_cast<double>(k.loss_chunk_tokens))
                                      : n;
      out.working_bytes += grow * logit_tokens * vocab_ / t_ * k.logits_bytes_per_entry;
    }
    return out;
  }

  truth_model whole_;
  double t_ = 1, block_params_ = 0, vocab_ = 0, h_ = 0, h_q_ = 0, h_kv_ = 0, row_share_ = 1,
         elementwise_ = 0, full_ = 0, selective_saving_ = 0, flash_ = 0;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::sim
