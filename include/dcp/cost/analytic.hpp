#pragma once
// The analytic transformer cost model: FLOPs and bytes over peak x efficiency, an alpha-beta
// model for collectives, and a per-GPU memory model. Every formula cites its source in
// docs/cost-sources.md (section numbers below).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/cost/activation_memory.hpp"
#include "dcp/cost/caption_work.hpp"
#include "dcp/cost/gemm_waves.hpp"
#include "dcp/cost/host_cost.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Achieved fractions and fixed costs. Defaults are planning values; calibrate on the target.
struct analytic_constants {
  double dense_efficiency = 0.70;  ///< large BF16 GEMMs, 0.65-0.80 of peak (§1.2 [R])
  /// FlashAttention's efficiency saturates with the length s of the rows a kernel runs:
  /// eta(s) = eta_max s / (s + s_half), the least-squares fit (in time per FLOP) to the FA3
  /// table, hd128 BF16 on H100 (§1.2 [S]: forward 467-648, backward 316-561 TFLOP/s at 512-16K
  /// tokens, over the 989.4 TFLOP/s peak). In this form a sequence of s tokens with P (query,
  /// key) pairs takes (P + s_half s) / (eta_max R) per unit of 4h, additive over a packed
  /// micro-batch; ring attention runs each GPU's rows against r key chunks, r times the per-row
  /// term. attention_*_half_rows = 0 gives a constant efficiency.
  double attention_forward_efficiency = 0.677;   ///< eta_max, forward
  double attention_backward_efficiency = 0.598;  ///< eta_max, backward
  double attention_forward_half_rows = 209;      ///< s_half, forward (tokens)
  double attention_backward_half_rows = 427;     ///< s_half, backward (tokens)
  double hbm_efficiency = 0.90;                  ///< sustained HBM fraction (§1.2 [R])
  double kernel_launch_seconds = 5e-6;           ///< per kernel without CUDA graphs (§1.3)
  double kernels_per_layer = 30;                 ///< forward + backward kernels of one block; a
                                                 ///< recomputed block launches a third again
  double ring_forward_kernels_per_step = 8;      ///< ring attention, per layer and attention step
  double ring_backward_kernels_per_step = 10;    ///< (Transformer Engine's P2P context
                                                 ///< parallelism, docs/simulator.md)
  double step_overhead_seconds = 2e-3;           ///< framework work per micro-step (data, hooks)
  /// Host (CPU) time to issue one kernel in an eager framework; a micro-step takes the longer of
  /// its device time and kernels x this. The x86 host's by default; dcp/cost/host_cost.hpp has
  /// the presets (grace_host for GH200/GB200, graphs_host = 0 for CUDA graphs).
  double host_seconds_per_kernel = x86_host.seconds_per_kernel;
  double logits_bytes_per_entry = 6;      ///< BF16 logits + FP32 upcast for the loss (§4.2)
  std::int64_t loss_chunk_tokens = 8192;  ///< with chunked cross-entropy

  friend bool operator==(const analytic_constants&, const analytic_constants&) = default;

  /// Throws invalid_spec naming the first bad field, its value and the limit: efficiencies
  /// outside (0, 1] (a fraction of a peak; 0, negative or NaN would make time 0 or negative),
  /// fixed costs and logits bytes not finite and >= 0, loss_chunk_tokens < 1.
  void validate() const {
    constexpr const char* where = "analytic constants: ";
    detail::require_fraction(dense_efficiency, where, "dense_efficiency");
    detail::require_fraction(attention_forward_efficiency, where, "attention_forward_efficiency");
    detail::require_fraction(attention_backward_efficiency, where, "attention_backward_efficiency");
    detail::require_finite_non_negative(attention_forward_half_rows, where,
                                        "attention_forward_half_rows");
    detail::require_finite_non_negative(attention_backward_half_rows, where,
                                        "attention_backward_half_rows");
    detail::require_fraction(hbm_efficiency, where, "hbm_efficiency");
    detail::require_finite_non_negative(kernel_launch_seconds, where, "kernel_launch_seconds");
    detail::require_finite_non_negative(kernels_per_layer, where, "kernels_per_layer");
    detail::require_finite_non_negative(ring_forward_kernels_per_step, where,
                                        "ring_forward_kernels_per_step");
    detail::require_finite_non_negative(ring_backward_kernels_per_step, where,
                                        "ring_backward_kernels_per_step");
    detail::require_finite_non_negative(step_overhead_seconds, where, "step_overhead_seconds");
    detail::require_finite_non_negative(host_seconds_per_kernel, where, "host_seconds_per_kernel");
    detail::require_finite_non_negative(logits_bytes_per_entry, where, "logits_bytes_per_entry");
    if (loss_chunk_tokens < 1)
      throw invalid_spec(std::string(where) + "loss_chunk_tokens = " +
                         std::to_string(loss_chunk_tokens) + ", must be >= 1");
  }
};

class analytic_cost_model {
 public:
  analytic_cost_model(model_spec model, cluster_spec cluster, training_spec training = {},
                      analytic_constants constants = {})
      : model_(std::move(model)),
        cluster_(std::move(cluster)),
        training_(training),
        constants_(constants) {
    model_.validate();
    cluster_.validate();
    training_.validate(cluster_);
    constants_.validate();
    derive();
  }

  [[nodiscard]] const model_spec& model() const noexcept { return model_; }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return cluster_; }
  [[nodiscard]] const training_spec& training() const noexcept { return training_; }
  [[nodiscard]] const analytic_constants& constants() const noexcept { return constants_; }
  [[nodiscard]] double memory_budget() const noexcept { return training_.memory_budget(cluster_); }

  // ---- time -------------------------------------------------------------------------------

  /// The longest of the device's time, the host's time to issue the micro-step's kernels and,
  /// under ZeRO-3, the parameter gathers that prefetching hides behind them.
  [[nodiscard]] double seconds(const micro_batch_shape& s,
                               const execution_config& c) const noexcept {
    return std::max({host_seconds(c), device_seconds(s, c), parameter_gather_seconds()});
  }

  /// The device's time: compute, communication, launch gaps and the fixed GEMM cost.
  [[nodiscard]] double device_seconds(const micro_batch_shape& s,
                                      const execution_config& c) const noexcept {
    return compute_seconds(s, c) + communication_seconds(s, c) + overhead_seconds(c) +
           recompute_launch_seconds(c) + gemm_fixed_seconds(c);
  }

  /// The host's time to issue the micro-step's kernels (an eager framework's per-kernel work);
  /// the kernels do not depend on the micro-batch, so large micro-steps hide it.
  [[nodiscard]] double host_seconds(const execution_config& c) const noexcept {
    return constants_.host_seconds_per_kernel * kernels(c);
  }

  /// cost_model optional member 9: the device time of an empty micro-step, which every
  /// micro-step pays beyond its samples' marginal times (the host's time is the other part of
  /// the maximum, not added to them).
  [[nodiscard]] double fixed_seconds(const execution_config& c) const noexcept {
    return device_seconds(micro_batch_shape{}, c);
  }

  /// Fixed cost of a micro-step: framework work, and a launch per kernel of every block's
  /// forward and backward and per collective or ring step (§1.3).
  [[nodiscard]] double overhead_seconds(const execution_config& c) const noexcept {
    const double kernels =
        constants_.kernels_per_layer * static_cast<double>(model_.layers) + collective_kernels(c);
    return constants_.step_overhead_seconds + constants_.kernel_launch_seconds * kernels;
  }

  /// Kernels a micro-step launches: every block's forward and backward, a third again per
  /// recomputed block, and the collectives (Ulysses) or ring attention steps.
  [[nodiscard]] double kernels(const execution_config& c) const noexcept {
    return constants_.kernels_per_layer * (static_cast<double>(model_.layers) +
                                           static_cast<double>(c.recompute.layers) / 3.0) +
           collective_kernels(c);
  }

  /// The launches of the recomputed blocks' forward: a third of a block's kernels each.
  [[nodiscard]] double recompute_launch_seconds(const execution_config& c) const noexcept {
    return static_cast<double>(c.recompute.layers) * constants_.kernels_per_layer / 3.0 *
           constants_.kernel_launch_seconds;
  }

  /// The fixed GEMM cost of a micro-step from wave quantisation on this GPU's SMs
  /// (dcp/cost/gemm_waves.hpp): each GPU's GEMMs take F (n + n_half) / (eta R) at n tokens per
  /// GPU, so an empty micro-step pays the GEMM time of n_half tokens (recomputed forwards
  /// included). 0 when the GPU does not declare its SM count.
  [[nodiscard]] double gemm_fixed_seconds(const execution_config& c) const noexcept {
    return dense_compute_seconds(gemm_half_tokens_, c);
  }
  /// n_half of this model's GEMMs on this GPU (tokens per GPU; 0 = SM count unknown).
  [[nodiscard]] double gemm_half_tokens() const noexcept { return gemm_half_tokens_; }

  /// Dense, attention and recompute FLOPs over peak x efficiency, split over the group, plus
  /// the caption GEMMs every GPU of the group runs whole.
  [[nodiscard]] double compute_seconds(const micro_batch_shape& s,
                                       const execution_config& c) const noexcept {
    const double d = static_cast<double>(c.degree);
    return (dense_compute_seconds(static_cast<double>(s.tokens), c) +
            attention_compute_seconds(s, c)) /
               d +
           selective_seconds(s, c) + caption_seconds(s, c);
  }

  /// Dense GEMM FLOPs of `tokens` tokens over peak x efficiency (one GPU's share is this over
  /// the degree): 6 N per token, LM head included (§2.1); full recompute repeats the forward
  /// (2 N per token) of the recomputed layers (§2.2), less the cross-attention k/v weights,
  /// which act on the caption (caption_seconds), not on sample tokens.
  [[nodiscard]] double dense_compute_seconds(double tokens,
                                             const execution_config& c) const noexcept {
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double dense_flops = 6.0 * per_token_params_ * tokens;
    const double recompute_flops =
        2.0 * per_token_params_ * block_share_ * tokens * (recomputed / layers);
    return (dense_flops + recompute_flops) / dense_rate_;
  }

  /// Attention FLOPs of the whole micro-batch over peak x efficiency (one GPU's share is this
  /// over the degree): forward 4 h_q per (query, key) pair per layer (h_q = heads x head width,
  /// model_spec::q_hidden), backward 2.5x forward in the
  /// FlashAttention convention (§1.2, §2.1), recomputed layers one more forward;
  /// cross-attention pairs = tokens x text tokens. Each pass also pays the saturating curve's
  /// per-row term (analytic_constants): s_half per row, each row run against the ring part r of
  /// the degree's key chunks (1 for Ulysses), twice with cross-attention.
  [[nodiscard]] double attention_compute_seconds(const micro_batch_shape& s,
                                                 const execution_config& c) const noexcept {
    const double peak = cluster_.gpu.peak_flops;
    const double layers = static_cast<double>(model_.layers);
    const double h_q = static_cast<double>(model_.q_hidden());
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double pairs =
        s.attention_pairs + static_cast<double>(s.tokens) * static_cast<double>(model_.text_tokens);
    const double rows = attention_row_passes(s, c);
    const double forward = 4.0 * h_q * (pairs + constants_.attention_forward_half_rows * rows) /
                           (constants_.attention_forward_efficiency * peak);
    const double backward = 4.0 * h_q * (pairs + constants_.attention_backward_half_rows * rows) /
                            (constants_.attention_backward_efficiency * peak);
    return (layers + recomputed) * forward + 2.5 * layers * backward;
  }

  /// Rows the attention kernels of one layer's pass run: every token, once per key chunk of
  /// the ring part of the degree, twice with cross-attention.
  [[nodiscard]] double attention_row_passes(const micro_batch_shape& s,
                                            const execution_config& c) const noexcept {
    const double chunks = c.degree > 1 ? static_cast<double>(ring_degree(c)) : 1.0;
    return (model_.has_cross_attention() ? 2.0 : 1.0) * static_cast<double>(s.tokens) * chunks;
  }

  /// The caption's GEMMs, which sequence parallelism does not split: every GPU of the group
  /// runs them for every sample of the micro-batch, so they are not divided by the degree (one
  /// sample at degree d costs d times this in GPU-seconds). samples x text_tokens rows at the
  /// dense efficiency; 0 without cross-attention (decoder LMs).
  [[nodiscard]] double caption_seconds(const micro_batch_shape& s,
                                       const execution_config& c) const noexcept {
    if (!model_.has_cross_attention()) return 0.0;
    const double rows = static_cast<double>(s.samples) * static_cast<double>(model_.text_tokens);
    return rows * detail::caption_flops_per_text_token(model_, c.recompute.layers) / dense_rate_;
  }

  /// Selective recomputation re-runs norms and the MLP activation: memory-bound, so its cost is
  /// the bytes it re-reads and re-writes over HBM bandwidth (§2.2, "partial options").
  [[nodiscard]] double selective_seconds(const micro_batch_shape& s,
                                         const execution_config& c) const noexcept {
    if (!c.recompute.selective) return 0.0;
    const double layers = static_cast<double>(model_.layers - c.recompute.layers);
    const double bytes_per_token = 2.0 * selective_saving_;
    return static_cast<double>(s.tokens) / static_cast<double>(c.degree) * layers *
           bytes_per_token / (constants_.hbm_efficiency * cluster_.gpu.hbm_bandwidth);
  }

  /// Sequence-parallel communication, alpha-beta per collective (§3.1-3.3): the Ulysses
  /// all-to-alls and the ring's exposed transfers and latencies; a hybrid micro-step has both
  /// (all-to-alls over its node-local Ulysses group, a ring over the groups).
  [[nodiscard]] double communication_seconds(const micro_batch_shape& s,
                                             const execution_config& c) const noexcept {
    if (c.degree <= 1) return 0.0;
    double t = ulysses_seconds(s, c);
    if (ring_degree(c) > 1) t += ring_exposed_seconds(s, c) + ring_latency_seconds(c);
    return t;
  }

  /// The floor of cost_model requirement 5 (the optional member the lower bound uses): each
  /// sample's compute, and its Ulysses all-to-all bytes; fixed costs and ring transfers are
  /// left out. A ring micro-step never hides its compute — its attention hides transfers, so
  /// what is exposed is max(0, transfers - overlap) >= 0 — so each sample's whole compute
  /// counts, whatever the other samples of the micro-batch.
  [[nodiscard]] double marginal_seconds(const micro_batch_shape& s,
                                        const execution_config& c) const noexcept {
    return compute_seconds(s, c) + ulysses_seconds(s, c) - ulysses_seconds(micro_batch_shape{}, c);
  }

  /// The Ulysses part u and ring part r of a micro-step's degree, d = u r: (d, 1) for Ulysses,
  /// (1, d) for ring, (hybrid_ulysses_degree, d / u) for hybrid.
  [[nodiscard]] std::int64_t ulysses_degree(const execution_config& c) const noexcept {
    return ulysses_part(c, model_, cluster_);
  }
  [[nodiscard]] std::int64_t ring_degree(const execution_config& c) const noexcept {
    const auto u = ulysses_degree(c);
    if (u == 1) return c.degree;  // ring (or no sequence parallelism)
    return u == c.degree ? 1 : c.degree / u;
  }

 private:
  /// The Ulysses all-to-alls of a micro-step over its Ulysses group of u GPUs (the whole group,
  /// or a hybrid's node-local part): bytes and latencies, 0 without one.
  [[nodiscard]] double ulysses_seconds(const micro_batch_shape& s,
                                       const execution_config& c) const noexcept {
    const auto u_members = ulysses_degree(c);
    if (u_members <= 1) return 0.0;
    const double u = static_cast<double>(u_members);
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double per_gpu_tokens = static_cast<double>(s.tokens) / static_cast<double>(c.degree);
    const double h_q = static_cast<double>(model_.q_hidden());
    const double h_kv = static_cast<double>(model_.kv_hidden());
    const bool crosses_nodes = u_members > cluster_.gpus_per_node;
    const double alpha = crosses_nodes ? cluster_.inter_node_latency : cluster_.intra_node_latency;
    // Per layer forward: (u-1)/u x (s/d) x (2h_q + 2h_kv) x 2 bytes per GPU (q and the output
    // are h_q wide), backward the same, full recompute one more forward set; 4 all-to-alls per
    // pass (§3.2).
    const double per_layer_bytes = per_gpu_tokens * (2.0 * h_q + 2.0 * h_kv) * 2.0;
    const double passes = 2.0 * layers + recomputed;
    const double in_node = static_cast<double>(std::min(u_members, cluster_.gpus_per_node));
    // All-to-all: the share bound for other nodes goes through this GPU's NIC (§3.1).
    const double local_share = (in_node - 1.0) / u;
    const double remote_share = (u - in_node) / u;
    const double beta =
        local_share / cluster_.nvlink_bandwidth + remote_share / cluster_.nic_bandwidth;
    return passes * (per_layer_bytes * beta + 4.0 * alpha);
  }

  /// Kernels of the sequence-parallel communication: one per Ulysses all-to-all; ring
  /// attention r steps per layer, each with its own attention, P2P and correction kernels.
  [[nodiscard]] double collective_kernels(const execution_config& c) const noexcept {
    if (c.degree <= 1) return 0.0;
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    double kernels = ulysses_degree(c) > 1 ? 4.0 * (2.0 * layers + recomputed) : 0.0;
    // r steps per layer and pass; a recomputed forward runs its steps again.
    if (const auto r = ring_degree(c); r > 1)
      kernels += static_cast<double>(r) *
                 (constants_.ring_forward_kernels_per_step * (layers + recomputed) +
                  constants_.ring_backward_kernels_per_step * layers);
    return kernels;
  }

  /// Collectives of one micro-step: Ulysses 4 all-to-alls per pass, ring (r-1) steps per layer
  /// pass (§3.2, §3.3).
  [[nodiscard]] double collectives(const execution_config& c) const noexcept {
    if (c.degree <= 1) return 0.0;
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    double n = ulysses_degree(c) > 1 ? 4.0 * (2.0 * layers + recomputed) : 0.0;
    if (const auto r = ring_degree(c); r > 1)
      n += (static_cast<double>(r) - 1.0) * (3.0 * layers + recomputed);
    return n;
  }

  [[nodiscard]] double ring_latency_seconds(const execution_config& c) const noexcept {
    const double r = static_cast<double>(ring_degree(c));
    if (r <= 1) return 0.0;
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const bool crosses_nodes = c.degree > cluster_.gpus_per_node;
    const double alpha = crosses_nodes ? cluster_.inter_node_latency : cluster_.intra_node_latency;
    return (r - 1.0) * (3.0 * layers + recomputed) * alpha;
  }

  [[nodiscard]] double ring_exposed_seconds(const micro_batch_shape& s,
                                            const execution_config& c) const noexcept {
    const double r = static_cast<double>(ring_degree(c));
    if (r <= 1) return 0.0;
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double per_gpu_tokens = static_cast<double>(s.tokens) / static_cast<double>(c.degree);
    const double h_kv = static_cast<double>(model_.kv_hidden());
    const bool crosses_nodes = c.degree > cluster_.gpus_per_node;
    // Ring: (r-1) steps passing K and V chunks forward, twice that backward (§3.3), overlapped
    // with the attention compute of the same pass; the exposed part and the per-step latency
    // remain. A hybrid's chunk is s/r tokens of h_kv/u: the same s/d x h_kv bytes per step.
    const double bandwidth = crosses_nodes ? cluster_.nic_bandwidth : cluster_.nvlink_bandwidth;
    const double forward_bytes = (r - 1.0) * per_gpu_tokens * 2.0 * h_kv * 2.0;
    const double total_bytes = forward_bytes * (3.0 * layers + recomputed);
    const double transfer = total_bytes / bandwidth;
    return std::max(0.0, transfer - ring_overlap_seconds(s, c));
  }

  /// The attention a ring micro-step's transfers hide behind (§3.3): every pass's — forward,
  /// backward, and the recomputed blocks' forward, whose ring steps are among the transfers —
  /// each at its own efficiency: one GPU's share of attention_compute_seconds. (Before
  /// 2026-12-03 it counted 3.5 layer passes at the backward efficiency, leaving out the
  /// recomputed forward's attention while counting its transfers.)
  [[nodiscard]] double ring_overlap_seconds(const micro_batch_shape& s,
                                            const execution_config& c) const noexcept {
    return attention_compute_seconds(s, c) / static_cast<double>(c.degree);
  }

 public:
  /// Gradient synchronisation at the end of the step: all-reduce (ZeRO 0-2) or reduce-scatter +
  /// all-gather over the whole world (§3.7). Not overlapped with compute here: an upper estimate
  /// of the step's tail. 0 under ZeRO-3, whose collectives run in every micro-step
  /// (parameter_gather_seconds).
  [[nodiscard]] double gradient_sync_seconds() const noexcept {
    return training_.zero_stage == 3 ? 0.0 : world_collectives_seconds(2.0);
  }
  /// ZeRO-3's collectives in every micro-step: each layer's parameters all-gathered over the
  /// world in forward and again in backward, its gradients reduce-scattered (three passes of the
  /// BF16 parameters; 0 under ZeRO 0-2). Prefetching hides them behind the layers' compute, so a
  /// micro-step lasts at least this long (plan/lockstep.hpp), not this much longer.
  [[nodiscard]] double parameter_gather_seconds() const noexcept {
    return training_.zero_stage == 3 ? world_collectives_seconds(3.0) : 0.0;
  }

 private:
  /// `passes` ring collectives of the BF16 parameters over the whole world: one latency, then
  /// (n - 1) / n of the bytes per pass at the node's NICs (or NVLink within one node).
  [[nodiscard]] double world_collectives_seconds(double passes) const noexcept {
    const double n = static_cast<double>(cluster_.gpus);
    if (n <= 1) return 0.0;
    const double gradient_bytes = 2.0 * static_cast<double>(model_.total_params());
    const bool multi_node = cluster_.gpus > cluster_.gpus_per_node;
    const double bus = multi_node
                           ? cluster_.nic_bandwidth * static_cast<double>(cluster_.gpus_per_node)
                           : cluster_.nvlink_bandwidth;
    const double alpha = multi_node ? cluster_.inter_node_latency : cluster_.intra_node_latency;
    return alpha + passes * (n - 1.0) / n * gradient_bytes / bus;
  }

 public:
  // ---- the time split into terms (for dcp::calibrated) -----------------------------------

  /// Basis functions of time, in seconds at this model's constants. device_seconds(s, c) equals
  /// sum_k time_term_priors[k] * time_terms(s, c)[k]; seconds is the larger of it and
  /// host_seconds(c), which calibrated<M> keeps as it is. Two have prior weight 0: effects this
  /// model leaves out that a calibration against measurements may find — memory-bound passes
  /// over the hidden state (norms, RoPE, residuals, activations) and per-hop latency of the
  /// collectives. gemm_wave is the fixed GEMM cost of wave quantisation (gemm_fixed_seconds;
  /// 0 without the GPU's SM count), recompute_launches the recomputed blocks' launches.
  static constexpr std::size_t time_term_count = 11;
  static constexpr std::array<std::string_view, time_term_count> time_term_names{
      "dense",    "attention",   "selective", "all_to_all",      "ring_exposed",      "latency",
      "overhead", "elementwise", "gemm_wave", "collective_hops", "recompute_launches"};
  static constexpr std::array<double, time_term_count> time_term_priors{1, 1, 1, 1, 1, 1,
                                                                        1, 0, 1, 0, 1};

  [[nodiscard]] std::array<double, time_term_count> time_terms(
      const micro_batch_shape& s, const execution_config& c) const noexcept {
    std::array<double, time_term_count> t{};
    const double d = static_cast<double>(c.degree);
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double tokens = static_cast<double>(s.tokens);
    t[0] = dense_compute_seconds(tokens, c) / d + caption_seconds(s, c);  // all dense GEMMs
    t[1] = attention_compute_seconds(s, c) / d;
    t[2] = selective_seconds(s, c);
    if (c.degree > 1) {
      const double latency = ulysses_seconds(micro_batch_shape{}, c);  // no bytes
      t[3] = ulysses_seconds(s, c) - latency;
      t[4] = ring_exposed_seconds(s, c);
      t[5] = latency + ring_latency_seconds(c);
    }
    t[6] = overhead_seconds(c);
    // Basis terms with prior 0, each at a plain physical scale: one BF16 read and write of the
    // hidden state per token per layer pass (forward, backward twice, recomputed forward) over
    // HBM; one intra-node latency per member per collective.
    const double passes = 3.0 * layers + recomputed;
    t[7] = tokens / d * passes * 4.0 * static_cast<double>(model_.hidden) /
           (constants_.hbm_efficiency * cluster_.gpu.hbm_bandwidth);
    t[8] = gemm_fixed_seconds(c);
    t[9] = collectives(c) * (d - 1.0) * cluster_.intra_node_latency;
    t[10] = recompute_launch_seconds(c);
    return t;
  }

  /// Each term's floor on what `s` contributes to any micro-batch with config `c`, in the terms
  /// of time_terms: sum_k priors[k] * marginal_time_terms(s, c)[k] == marginal_seconds(s, c).
  /// Every term is additive in the samples or at least 0 for any micro-batch (the ring's
  /// exposed transfers), so each weighted sum keeps requirement 5.
  [[nodiscard]] std::array<double, time_term_count> marginal_time_terms(
      const micro_batch_shape& s, const execution_config& c) const noexcept {
    auto t = time_terms(s, c);
    t[4] = t[5] = t[6] = t[8] = t[9] = t[10] = 0.0;
    return t;
  }

  // ---- memory -----------------------------------------------------------------------------

  /// cost_model optional member 8: peak bytes depend on a micro-batch only through its tokens
  /// and samples (detail::activation_footprint), never decreasing in either, and
  /// recomputation only adds to an empty micro-batch's time (launches, latencies, fixed GEMM
  /// costs of the recomputed layers), so the bounds may charge each token its share of the
  /// fixed per-micro-step cost. Tested in Cost.MemoryByTokens.*.
  static constexpr bool memory_by_tokens = true;

  [[nodiscard]] double peak_bytes(const micro_batch_shape& s,
                                  const execution_config& c) const noexcept {
    return state_bytes() + training_.runtime_reserve_bytes + activation_bytes(s, c);
  }

  /// Peak bytes split into terms (for dcp::calibrated): what stays for the whole step (model
  /// states and the runtime reserve) and what the micro-batch adds. peak_bytes == their sum.
  static constexpr std::size_t memory_term_count = 2;
  static constexpr std::array<std::string_view, memory_term_count> memory_term_names{"static",
                                                                                     "activations"};
  [[nodiscard]] std::array<double, memory_term_count> memory_terms(
      const micro_batch_shape& s, const execution_config& c) const noexcept {
    return {state_bytes() + training_.runtime_reserve_bytes, activation_bytes(s, c)};
  }

  /// Parameters, gradients and Adam state per GPU under the ZeRO stage over the world (§4.1),
  /// plus ZeRO-3's gather buffers (two blocks in flight).
  [[nodiscard]] double state_bytes() const noexcept { return states_; }

 private:
  [[nodiscard]] double compute_state_bytes() const noexcept {
    const double states = detail::zero_state_bytes(model_, training_.zero_stage, cluster_.gpus);
    if (training_.zero_stage < 3) return states;
    return states + 2.0 * 2.0 * static_cast<double>(model_.block_params());
  }

 public:
  /// Bytes kept per token per layer for backward (dcp/cost/activation_memory.hpp).
  [[nodiscard]] std::int64_t activation_bytes_per_token_layer() const noexcept {
    return detail::activation_bytes_per_token_layer(model_);
  }

  /// Bytes per token per layer that selective recomputation saves.
  [[nodiscard]] std::int64_t saved_by_selective() const noexcept {
    return detail::bytes_saved_by_selective(model_);
  }

  /// Activations, transients, logits and SP buffers per GPU (§4.2, §4.3).
  [[nodiscard]] double activation_bytes(const micro_batch_shape& s,
                                        const execution_config& c) const noexcept {
    return activations_(s, c);
  }

  friend bool operator==(const analytic_cost_model& a, const analytic_cost_model& b) noexcept {
    return a.model_ == b.model_ && a.cluster_ == b.cluster_ && a.training_ == b.training_ &&
           a.constants_ == b.constants_;
  }

 private:
  // Quantities every call needs, computed once: the planner evaluates the model millions of
  // times per second.
  void derive() noexcept {
    per_token_params_ = static_cast<double>(model_.per_token_params());
    block_share_ =
        static_cast<double>(model_.layers * detail::recomputed_params_per_token_block(model_)) /
        per_token_params_;
    selective_saving_ = static_cast<double>(saved_by_selective());
    states_ = compute_state_bytes();
    dense_rate_ = constants_.dense_efficiency * cluster_.gpu.peak_flops;
    gemm_half_tokens_ = detail::gemm_half_tokens(model_, cluster_.gpu.streaming_multiprocessors);
    activations_ = detail::activation_footprint(
        model_, {training_.chunked_cross_entropy, constants_.loss_chunk_tokens,
                 constants_.logits_bytes_per_entry});
  }

  double per_token_params_ = 0;
  double gemm_half_tokens_ = 0;
  double block_share_ = 0;
  double selective_saving_ = 0;
  double states_ = 0;
  double dense_rate_ = 0;  // FLOP/s of dense GEMMs: efficiency x peak
  detail::activation_footprint activations_{};

  model_spec model_;
  cluster_spec cluster_;
  training_spec training_;
  analytic_constants constants_;
};

static_assert(cost_model<analytic_cost_model>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
