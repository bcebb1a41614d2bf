#pragma once
// The simulator's hardware truth model: a second, more detailed model of an HGX cluster that
// judges plans the planner made with its own (analytic) cost model. It models dcp::cost_model,
// so the library's lower bound and recompute strategies run on it unchanged, and it exposes the
// pieces the event simulator needs (compute, NVLink time, bytes through the NIC, latencies).
//
// Every constant names its source in docs/cost-sources.md (section numbers below;
// [S] sourced, [D] derived there or here, [R] recalled planning value). docs/simulator.md lists
// them and the approximations. Nothing here is fitted to the planner or to our plans.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>

#include "dcp/concepts/cost_model.hpp"
#include "dcp/cost/activation_memory.hpp"
#include "dcp/cost/caption_work.hpp"
#include "dcp/cost/host_cost.hpp"
#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::sim {

/// The truth model's constants. Link bandwidths and the GPU's peak, HBM capacity and bandwidth
/// come from the cluster_spec (datasheets and nccl-tests, see dcp/spec/hardware.hpp).
struct truth_constants {
  // ---- matrix multiplies ----------------------------------------------------------------
  /// Large BF16 GEMMs reach 0.80 of peak on H100: torch square GEMMs 4096^3 0.797 and 8192^3
  /// 0.806, MAMF 0.801 on H100 SXM and 0.803 on H200 (§1.4 [S]).
  double gemm_efficiency_max = 0.80;
  /// Per-GPU tokens at which GEMMs reach half of gemm_efficiency_max: eta(n) = eta_max n/(n+n½)
  /// (§5 "eta_g saturates with n"). [D] the least-squares fit (relative time error, eta_max
  /// held) to skinny torch BF16 GEMMs on H100: 0.185 / 0.356 / 0.550 of peak at 64 / 128 / 256
  /// tokens (§1.4 [S] vllm#49363, vllm#17126).
  double gemm_half_tokens = 171.4;
  /// Bytes of HBM traffic per weight per micro-step to accumulate its gradient into the FP32
  /// main gradient (read 4 + write 4, §1.4 [D]: Megatron's main_grad and DeepSpeed's accumulation
  /// buffers are FP32); under ZeRO-3 each GPU accumulates its shard only.
  double gradient_accumulation_bytes_per_weight = 8;

  // ---- attention: FlashAttention-3, BF16, head dim 128, H100 (§1.2 [S] FA3 paper charts) --
  std::array<double, 6> fa3_lengths{512, 1024, 2048, 4096, 8192, 16384};
  /// Non-causal (full) attention: diffusion transformers.
  std::array<double, 6> fa3_forward_tflops{467, 565, 625, 638, 646, 648};
  std::array<double, 6> fa3_backward_tflops{316, 424, 501, 542, 559, 561};
  /// Causal attention, TFLOP/s over the causal FLOPs (half the pairs): decoder LMs. Forward is
  /// the paper's causal panel (§1.4 [S]); backward has no published panel and is the
  /// non-causal backward scaled by the forward's causal/non-causal ratio per length (§1.4 [D]).
  std::array<double, 6> fa3_causal_forward_tflops{292, 423, 521, 579, 602, 616};
  std::array<double, 6> fa3_causal_backward_tflops{198, 317, 418, 492, 521, 533};
  /// The peak the FA3 table was measured against: H100 SXM dense BF16 (§1.1 [S]); the table's
  /// fractions of it carry over to a GPU with the same tensor cores (H200).
  double fa3_reference_peak_flops = 989.4e12;

  /// Sustained fraction of HBM bandwidth for memory-bound kernels (§1.2 [R]).
  double hbm_efficiency = 0.90;

  // ---- collectives -----------------------------------------------------------------------
  /// NCCL latency = baseLat + steps x hwLat, Ring algorithm, Simple protocol (§1.3 [S]
  /// src/graph/tuning.cc): base 8.4 us, per NVLink step 3.4 us, per network step 9.6 us.
  double nccl_base_latency = 8.4e-6;
  double nccl_nvlink_step_latency = 3.4e-6;
  double nccl_network_step_latency = 9.6e-6;
  /// NVLink SHARP all-reduce bus bandwidth inside a node: 475 GB/s measured on 8x H200
  /// (§1.2 [S] nccl-tests#272; 480 on H100, nccl-tests#212).
  double nvls_allreduce_bandwidth = 475e9;
  /// All-to-all bus bandwidth as a fraction of the NVLink bus bandwidth: 335 GB/s measured by
  /// alltoall_perf on 4x H100 at 500 MB against 370 (§1.4 [S] nccl#2169).
  double all_to_all_bandwidth_fraction = 335.0 / 370.0;
  /// A small all-to-all inside a Hopper NVLink node: ~10.6 us at 128 bytes (§1.4 [S]
  /// DeepEP#303); each network step adds nccl_network_step_latency.
  double all_to_all_nvlink_latency = 10.6e-6;
  /// Ulysses' permute copies before and after its all-to-alls (memory-bound): ~38 % of the
  /// all-to-all time on H100 (§1.4 [S] pytorch#178066).
  double ulysses_permute_fraction = 0.38;
  /// NICs per node; 0 = one per GPU (HGX: 8x ConnectX-7 400G per node, §1.1 [S]). A GPU's
  /// cross-node traffic uses at most one NIC (all-to-all cannot aggregate NICs, §1.2 [S]
  /// nccl-tests#267); the NICs of a node are shared by the cross-node transfers running on it.
  std::int64_t nics_per_node = 0;

  // ---- fixed costs -----------------------------------------------------------------------
  /// Launch overhead per kernel without CUDA graphs (§1.3 [D/R]).
  double kernel_launch_seconds = 5e-6;
  /// Kernels of one block's forward: 2 norms, QKV, RoPE, attention, O, 2 residual adds,
  /// gate/up, activation, down = 11 [D]; backward twice that; a recomputed block one more
  /// forward; the loss 6 [D]; plus one kernel per Ulysses all-to-all.
  double forward_kernels_per_layer = 11;
  double loss_kernels = 6;
  /// Ring attention (Transformer Engine's AttnFuncWithCPAndKVP2P, THD, causal) runs d steps
  /// per layer and pass, each with its own kernels [D, read in TE's context_parallel.py, see
  /// docs/simulator.md]: forward an isend and an irecv, 2 cu_seqlens divisions, about 1 half
  /// read, the attention, the LSE merge and the output correction (8); backward the isend and
  /// irecv, about 2 half reads, 3 FlashAttention backward kernels, the dq and the dk/dv
  /// accumulations (10).
  double ring_forward_kernels_per_step = 8;
  double ring_backward_kernels_per_step = 10;
  /// Framework work per micro-step (data to device, hooks). [R] unmeasured: the planner's value.
  double framework_seconds = 2e-3;
  /// Host (CPU) time to issue one counted kernel in an eager framework: Python module calls,
  /// the dispatcher, allocations and the launch. A micro-step takes the longer of its device
  /// time and its host time (kernels x this): launches are asynchronous, so the host hides
  /// behind large kernels and decides small micro-steps. 0 = launches never limit. The x86
  /// host's by default (§1.5 [S] a torch Linear on an x86 H100 DGX); dcp/cost/host_cost.hpp
  /// has the Grace preset fitted to Megatron's benchmark (docs/fidelity.md "The host cost").
  double host_seconds_per_kernel = x86_host.seconds_per_kernel;

  // ---- memory ----------------------------------------------------------------------------
  /// Allocator fragmentation on the dynamic allocations (activations, transients, buffers):
  /// reserved exceeds allocated by 5-10% (§4.1 and §8 [R]); the midpoint. Model states are
  /// allocated once, in large blocks, and are not inflated.
  double fragmentation = 0.075;
  /// CUDA context ~0.5 GB and NCCL buffers 0.5-2 GB (§4.1 [R]; the upper end).
  double cuda_context_bytes = 0.5e9;
  double nccl_buffer_bytes = 2.0e9;
  /// BF16 logits + FP32 upcast per vocabulary entry (§4.2 [D]).
  double logits_bytes_per_entry = 6;
  std::int64_t loss_chunk_tokens = 8192;

  friend bool operator==(const truth_constants&, const truth_constants&) = default;
};

/// A saturating efficiency curve eta(x) = eta_max * x / (x + x_half).
struct saturating_curve {
  double max = 0;
  double half = 0;
  [[nodiscard]] double operator()(double x) const noexcept {
    return x > 0 ? max * x / (x + half) : 0.0;
  }
  friend bool operator==(const saturating_curve&, const saturating_curve&) = default;
};

/// The least-squares fit of eta(s) = eta_max s / (s + s_half) to a table of (length, efficiency)
/// points, in time per FLOP (1/eta = 1/eta_max + (s_half/eta_max)/s is linear in 1/s),
/// minimising relative time error. This form makes a packed micro-batch's attention time a sum
/// over its sequences computable from the additive shape: the time of a sequence of s tokens
/// with P (query, key) pairs is (P + s_half * s) / (eta_max * R).
template <std::size_t N>
[[nodiscard]] saturating_curve fit_saturating(const std::array<double, N>& lengths,
                                              const std::array<double, N>& efficiency) {
  // Minimise sum_k (e_k * (u + v / s_k) - 1)^2 over u = 1/eta_max, v = s_half/eta_max.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (std::size_t k = 0; k < N; ++k) {
    const double x1 = efficiency[k];
    const double x2 = efficiency[k] / lengths[k];
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    r1 += x1;
    r2 += x2;
  }
  const double det = s11 * s22 - s12 * s12;
  const double u = (r1 * s22 - r2 * s12) / det;
  const double v = (s11 * r2 - s12 * r1) / det;
  return {1.0 / u, v / u};
}

/// How a group of GPUs sits on the nodes.
struct group_layout {
  std::int64_t nodes = 1;         ///< nodes the group touches
  std::int64_t min_per_node = 1;  ///< fewest members on one of those nodes
  [[nodiscard]] bool crosses_nodes() const noexcept { return nodes > 1; }
};

[[nodiscard]] inline group_layout layout_of(std::int64_t first_rank, std::int64_t degree,
                                            std::int64_t gpus_per_node) noexcept {
  const std::int64_t last = first_rank + degree - 1;
  const std::int64_t first_node = first_rank / gpus_per_node;
  const std::int64_t last_node = last / gpus_per_node;
  group_layout out;
  out.nodes = last_node - first_node + 1;
  if (out.nodes == 1) {
    out.min_per_node = degree;
    return out;
  }
  const std::int64_t head = (first_node + 1) * gpus_per_node - first_rank;
  const std::int64_t tail = last - last_node * gpus_per_node + 1;
  out.min_per_node = std::min(head, tail);
  if (out.nodes > 2) out.min_per_node = std::min(out.min_per_node, gpus_per_node);
  return out;
}

/// One micro-step broken into what the event simulator treats differently. Its duration at a
/// per-GPU NIC rate r is serial + max(overlapped, intra-node transfer, inter-node bytes / r):
/// ring attention hides ring transfers; an all-to-all's NVLink and network parts run at once and
/// the slower one decides (§1.2 [S] nccl-tests#130); everything else is serial.
struct micro_step_parts {
  double gemm_seconds = 0;          ///< dense, LM-head and caption GEMMs, recomputation included
  double attention_seconds = 0;     ///< FlashAttention forward, backward, recomputed forward
  double memory_bound_seconds = 0;  ///< norms, RoPE, activations, residuals, loss, selective
  double latency_seconds = 0;       ///< collectives x NCCL latency
  double overhead_seconds = 0;      ///< kernel launches and framework work
  double overlapped_seconds = 0;    ///< compute that hides transfers (ring attention), else 0
  double exposed_transfer_seconds = 0;  ///< NVLink transfers nothing hides (a hybrid's all-to-alls)
  double intra_node_bytes = 0;          ///< per GPU over NVLink
  double intra_node_seconds = 0;        ///< their transfer time
  double host_seconds = 0;              ///< the host's time to issue the kernels
  double inter_node_bytes = 0;          ///< per GPU through its NIC
  double nic_bandwidth = 0;             ///< the uncontended per-GPU NIC rate
  /// ZeRO-3's parameter all-gathers (forward, backward) and gradient reduce-scatter over the
  /// world, in every micro-step (0 under ZeRO 0-2). Prefetched one layer ahead, they hide behind
  /// the layers' compute: the micro-step lasts at least this long, plus the first layer's gather,
  /// which nothing hides (exposed_gather_seconds, a 1 / layers share).
  double gather_seconds = 0;
  double exposed_gather_seconds = 0;
  std::int64_t collectives = 0;
  bool crosses_nodes = false;

  /// Everything that does not overlap with transfers.
  [[nodiscard]] double serial_seconds() const noexcept {
    return gemm_seconds + attention_seconds + memory_bound_seconds + latency_seconds +
           overhead_seconds + exposed_transfer_seconds - overlapped_seconds;
  }
  [[nodiscard]] double compute_seconds() const noexcept {
    return gemm_seconds + attention_seconds + memory_bound_seconds;
  }
  /// The device's time when this GPU's share of its node's NICs is `nic_rate` bytes/s.
  [[nodiscard]] double device_seconds_at(double nic_rate) const noexcept {
    const double network = inter_node_bytes > 0 ? inter_node_bytes / nic_rate : 0.0;
    return serial_seconds() + std::max({overlapped_seconds, intra_node_seconds, network});
  }
  /// Duration when this GPU's share of its node's NICs is `nic_rate` bytes/s: the device's
  /// time, or the host's where issuing the kernels takes longer.
  [[nodiscard]] double seconds_at(double nic_rate) const noexcept {
    return std::max({host_seconds, device_seconds_at(nic_rate), gather_seconds}) +
           exposed_gather_seconds;
  }
  /// Duration with the NIC to itself.
  [[nodiscard]] double seconds() const noexcept { return seconds_at(nic_bandwidth); }
};

class truth_model {
 public:
  truth_model(model_spec model, cluster_spec cluster, training_spec training = {},
              truth_constants constants = {})
      : model_(std::move(model)),
        cluster_(std::move(cluster)),
        training_(training),
        constants_(constants) {
    model_.validate();
    cluster_.validate();
    training_.validate(cluster_);
    validate_constants();
    derive();
  }

  [[nodiscard]] const model_spec& model() const noexcept { return model_; }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return cluster_; }
  [[nodiscard]] const training_spec& training() const noexcept { return training_; }
  [[nodiscard]] const truth_constants& constants() const noexcept { return constants_; }

  /// The budget the planner plans against: capacity minus the training spec's headroom.
  [[nodiscard]] double memory_budget() const noexcept { return training_.memory_budget(cluster_); }
  /// Physical HBM: a micro-step whose true peak exceeds it runs out of memory.
  [[nodiscard]] double capacity_bytes() const noexcept { return cluster_.gpu.memory_bytes; }

  // ---- efficiency curves -------------------------------------------------------------------

  /// GEMM efficiency at n tokens per GPU.
  [[nodiscard]] double gemm_efficiency(double tokens_per_gpu) const noexcept {
    return saturating_curve{constants_.gemm_efficiency_max,
                            constants_.gemm_half_tokens}(tokens_per_gpu);
  }
  /// FlashAttention efficiency (fraction of peak) for sequences of `length` tokens, as fitted.
  [[nodiscard]] double attention_forward_efficiency(double length) const noexcept {
    return forward_(length);
  }
  [[nodiscard]] double attention_backward_efficiency(double length) const noexcept {
    return backward_(length);
  }
  [[nodiscard]] const saturating_curve& attention_forward_curve() const noexcept {
    return forward_;
  }
  [[nodiscard]] const saturating_curve& attention_backward_curve() const noexcept {
    return backward_;
  }

  /// NCCL's predicted latency of a collective with `intra_steps` NVLink and `network_steps`
  /// network steps (§1.3, tuning.cc).
  [[nodiscard]] double collective_latency(double intra_steps, double network_steps) const noexcept {
    return constants_.nccl_base_latency + intra_steps * constants_.nccl_nvlink_step_latency +
           network_steps * constants_.nccl_network_step_latency;
  }
  /// The latency of one all-to-all with `network_steps` of its steps to other nodes: the
  /// measured small-message all-to-all of an NVLink node (§1.4) plus NCCL's per network step
  /// (§1.3).
  [[nodiscard]] double all_to_all_latency(double network_steps) const noexcept {
    return constants_.all_to_all_nvlink_latency +
           network_steps * constants_.nccl_network_step_latency;
  }
  /// The bus bandwidth a large all-to-all reaches inside a node (§1.4 [S] nccl#2169).
  [[nodiscard]] double all_to_all_bandwidth() const noexcept {
    return constants_.all_to_all_bandwidth_fraction * cluster_.nvlink_bandwidth;
  }
  /// Seconds of one all-to-all of `bytes` per rank among `ranks` GPUs of one node.
  [[nodiscard]] double all_to_all_seconds(double bytes, std::int64_t ranks) const noexcept {
    if (ranks <= 1 || bytes <= 0) return 0.0;
    const double n = static_cast<double>(ranks);
    return all_to_all_latency(0) + (n - 1.0) / n * bytes / all_to_all_bandwidth();
  }
  /// Bus bandwidth a collective of `bytes` per rank achieves: t = latency + k S / B_max is
  /// busbw(S) = B_max S / (S + S_half) with S_half = latency B_max / k, the nccl-tests shape
  /// (§3.1); returned for a k = (n-1)/n all-to-all inside one node.
  [[nodiscard]] double all_to_all_bus_bandwidth(double bytes, std::int64_t ranks) const noexcept {
    if (ranks <= 1 || bytes <= 0) return 0.0;
    const double n = static_cast<double>(ranks);
    return (n - 1.0) / n * bytes / all_to_all_seconds(bytes, ranks);
  }

  /// Cross-node NIC bandwidth of one node, shared by the transfers running on it.
  [[nodiscard]] double node_nic_bandwidth() const noexcept {
    return static_cast<double>(nics_per_node()) * cluster_.nic_bandwidth;
  }
  [[nodiscard]] std::int64_t nics_per_node() const noexcept {
    return constants_.nics_per_node > 0 ? constants_.nics_per_node : cluster_.gpus_per_node;
  }
  /// The most one GPU's cross-node traffic gets: one NIC (§1.2 [S] nccl-tests#267).
  [[nodiscard]] double gpu_nic_cap() const noexcept { return cluster_.nic_bandwidth; }

  // ---- time --------------------------------------------------------------------------------

  /// The parts of one micro-step run by the group [first_rank, first_rank + degree).
  [[nodiscard]] dcp::sim::micro_step_parts micro_step_parts_at(
      const micro_batch_shape& s, const execution_config& c,
      std::int64_t first_rank) const noexcept {
    return parts(s, c, layout_of(first_rank, c.degree, cluster_.gpus_per_node));
  }
  /// The parts of one micro-step on an aligned group (first rank a multiple of the degree).
  [[nodiscard]] dcp::sim::micro_step_parts micro_step_parts(
      const micro_batch_shape& s, const execution_config& c) const noexcept {
    return parts(s, c, layout_of(0, c.degree, cluster_.gpus_per_node));
  }

  /// The caption's GEMMs (dcp/cost/caption_work.hpp), part of micro_step_parts::gemm_seconds:
  /// every GPU of the group runs them whole, for every sample of the micro-batch, so they are
  /// not divided by the degree. They are GEMMs of samples x text_tokens rows (upstream batches
  /// the micro-batch's captions into one GEMM per projection), so they saturate like the other
  /// GEMMs but on those rows: time = F (rows + n_half) / (eta_max R), affine in the samples. Its
  /// n_half part is a fixed cost of the micro-step (as for the sample tokens' GEMMs), which the
  /// floor leaves out. 0 without cross-attention (decoder LMs).
  [[nodiscard]] double caption_seconds(const micro_batch_shape& s,
                                       const execution_config& c) const noexcept {
    if (!model_.has_cross_attention()) return 0.0;
    const double rows = static_cast<double>(s.samples) * static_cast<double>(model_.text_tokens);
    return detail::caption_flops_per_text_token(model_, c.recompute.layers) *
           (rows + constants_.gemm_half_tokens) /
           (constants_.gemm_efficiency_max * cluster_.gpu.peak_flops);
  }

  /// cost_model requirement 1: the micro-step's time on an aligned group with the NICs to itself.
  [[nodiscard]] double seconds(const micro_batch_shape& s,
                               const execution_config& c) const noexcept {
    return micro_step_parts(s, c).seconds();
  }

  /// A floor on the time `s` contributes to any micro-batch with config `c` (cost_model
  /// requirement 5): every term is affine in the shape's additive fields, so `s` adds its slopes;
  /// fixed costs (GEMM half-saturation, latencies, launches) are left out; of NVLink and NIC
  /// transfers, which run side by side and scale together, the longer; and under ring attention,
  /// which hides transfers but is never hidden, the attention.
  [[nodiscard]] double marginal_seconds(const micro_batch_shape& s,
                                        const execution_config& c) const noexcept {
    const auto with = micro_step_parts(s, c);
    const auto without = micro_step_parts(micro_batch_shape{}, c);
    const double serial = with.serial_seconds() - without.serial_seconds();
    const double network =
        with.inter_node_bytes > 0 ? with.inter_node_bytes / with.nic_bandwidth : 0;
    const double transfer = std::max(with.intra_node_seconds, network);
    // Transfers have no fixed part (latency is serial), so they are linear in the shape; the
    // host's time does not depend on the shape, so a micro-step takes at least its device time,
    // fixed_seconds + these marginals. Ring:
    // the micro-step takes max(attention, transfers) beyond its serial part, so each sample's
    // attention counts in full (compute is never hidden; the transfers may be).
    if (with.overlapped_seconds > 0) return serial + with.overlapped_seconds;
    return serial + transfer;
  }

  /// cost_model optional member 9: the device's time of the micro-step (aligned group, the NICs
  /// to itself), without the host's issue time.
  [[nodiscard]] double device_seconds(const micro_batch_shape& s,
                                      const execution_config& c) const noexcept {
    const auto p = micro_step_parts(s, c);
    return p.device_seconds_at(p.nic_bandwidth);
  }

  /// cost_model optional member 9: what every micro-step with config `c` takes beyond its
  /// samples' marginal times — the device time of an empty micro-step (launch gaps, framework
  /// work, latencies, the GEMMs' fixed part), without the host's issue time, which a large
  /// micro-step hides. seconds(s, c) >= fixed_seconds(c) + sum of marginal_seconds.
  [[nodiscard]] double fixed_seconds(const execution_config& c) const noexcept {
    return micro_step_parts(micro_batch_shape{}, c).serial_seconds();
  }

  /// Gradient synchronisation at the end of the step over `gpus` ranks (§3.7): all-reduce for
  /// ZeRO 0 (NVLink SHARP inside a node, ring across nodes), reduce-scatter + all-gather for
  /// ZeRO 1-2; 0 for ZeRO 3, whose gathers and reduce-scatters run in every micro-step
  /// (parameter_gather_seconds, micro_step_parts::gather_seconds). Not overlapped with the
  /// backward pass.
  [[nodiscard]] double gradient_sync_seconds(std::int64_t gpus) const noexcept {
    if (gpus <= 1) return 0.0;
    if (training_.zero_stage == 0) {
      const double n = static_cast<double>(gpus);
      const bool multi_node = gpus > cluster_.gpus_per_node;
      const double bandwidth =
          multi_node ? node_nic_bandwidth() : constants_.nvls_allreduce_bandwidth;
      return world_latency(gpus, 2.0 * (n - 1.0)) +
             2.0 * (n - 1.0) / n * parameter_bytes() / bandwidth;
    }
    if (training_.zero_stage == 3) return 0.0;  // in every micro-step: parameter_gather_seconds
    return 2.0 * ring_pass_seconds(gpus);
  }
  [[nodiscard]] double gradient_sync_seconds() const noexcept {
    return gradient_sync_seconds(cluster_.gpus);
  }
  /// ZeRO-3's collectives in every micro-step on `gpus` GPUs: each layer's parameters
  /// all-gathered in forward and in backward, its gradients reduce-scattered (three ring passes
  /// of the BF16 parameters); 0 under ZeRO 0-2.
  [[nodiscard]] double parameter_gather_seconds(std::int64_t gpus) const noexcept {
    return training_.zero_stage == 3 && gpus > 1 ? 3.0 * ring_pass_seconds(gpus) : 0.0;
  }
  [[nodiscard]] double parameter_gather_seconds() const noexcept {
    return parameter_gather_seconds(cluster_.gpus);
  }

  // ---- memory ------------------------------------------------------------------------------

  /// cost_model optional member 8: peak bytes depend on a micro-batch only through its tokens
  /// and samples (detail::activation_footprint), never decreasing in either, and
  /// recomputation only adds to an empty micro-batch's time (launches, latencies, fixed GEMM
  /// costs of the recomputed layers), so the bounds may charge each token its share of the
  /// fixed per-micro-step cost. Tested in Cost.MemoryByTokens.*.
  static constexpr bool memory_by_tokens = true;

  /// cost_model requirement 2: the true peak per GPU — static bytes plus the dynamic bytes
  /// inflated by fragmentation.
  [[nodiscard]] double peak_bytes(const micro_batch_shape& s,
                                  const execution_config& c) const noexcept {
    return static_bytes() + dynamic_bytes(s, c) * (1.0 + constants_.fragmentation);
  }
  /// The same peak before fragmentation.
  [[nodiscard]] double allocated_peak_bytes(const micro_batch_shape& s,
                                            const execution_config& c) const noexcept {
    return static_bytes() + dynamic_bytes(s, c);
  }
  /// Model states under the ZeRO stage (§4.1 [S]) plus CUDA context and NCCL buffers.
  [[nodiscard]] double static_bytes() const noexcept {
    return states_ + constants_.cuda_context_bytes + constants_.nccl_buffer_bytes;
  }

  /// Activations, FlashAttention backward transients, logits, communication buffers and ZeRO-3
  /// gather buffers per GPU (§4.2, §4.3; Korthikanti et al. accounting, FlashAttention).
  [[nodiscard]] double dynamic_bytes(const micro_batch_shape& s,
                                     const execution_config& c) const noexcept {
    double bytes = activations_(s, c);
    if (training_.zero_stage == 3) bytes += 2.0 * 2.0 * static_cast<double>(model_.block_params());
    return bytes;
  }

  friend bool operator==(const truth_model& a, const truth_model& b) noexcept {
    return a.model_ == b.model_ && a.cluster_ == b.cluster_ && a.training_ == b.training_ &&
           a.constants_ == b.constants_;
  }

 private:
  /// Throws invalid_spec naming the first bad field, its value and the limit: efficiencies
  /// (gemm_efficiency_max, hbm_efficiency, each FA3 table point as a fraction of
  /// fa3_reference_peak_flops) outside (0, 1]; lengths, peaks and bandwidths not finite and > 0;
  /// half-saturation tokens, latencies, kernel counts, fixed seconds, fragmentation and bytes not
  /// finite and >= 0; nics_per_node < 0; loss_chunk_tokens < 1. NaN fails every check.
  void validate_constants() const {
    constexpr const char* where = "truth constants: ";
    const auto& k = constants_;
    dcp::detail::require_fraction(k.gemm_efficiency_max, where, "gemm_efficiency_max");
    dcp::detail::require_finite_non_negative(k.gemm_half_tokens, where, "gemm_half_tokens");
    dcp::detail::require_finite_positive(k.fa3_reference_peak_flops, where,
                                         "fa3_reference_peak_flops");
    for (std::size_t j = 0; j < k.fa3_lengths.size(); ++j) {
      const std::string at = "[" + std::to_string(j) + "]";
      dcp::detail::require_finite_positive(k.fa3_lengths[j], where, "fa3_lengths" + at);
      // A table point is an achieved rate: above the peak it was measured against, it is not.
      const auto require_rate = [&](double tflops, const char* table) {
        const std::string field = table + at;
        dcp::detail::require_finite_positive(tflops, where, field);
        if (!(tflops * 1e12 <= k.fa3_reference_peak_flops))
          throw invalid_spec(std::string(where) + field + " = " + dcp::detail::number_text(tflops) +
                             " TFLOP/s, must be at most fa3_reference_peak_flops = " +
                             dcp::detail::number_text(k.fa3_reference_peak_flops / 1e12) +
                             " TFLOP/s (an efficiency in (0, 1])");
      };
      require_rate(k.fa3_forward_tflops[j], "fa3_forward_tflops");
      require_rate(k.fa3_backward_tflops[j], "fa3_backward_tflops");
      require_rate(k.fa3_causal_forward_tflops[j], "fa3_causal_forward_tflops");
      require_rate(k.fa3_causal_backward_tflops[j], "fa3_causal_backward_tflops");
    }
    dcp::detail::require_finite_non_negative(k.gradient_accumulation_bytes_per_weight, where,
                                             "gradient_accumulation_bytes_per_weight");
    dcp::detail::require_fraction(k.all_to_all_bandwidth_fraction, where,
                                  "all_to_all_bandwidth_fraction");
    dcp::detail::require_finite_non_negative(k.all_to_all_nvlink_latency, where,
                                             "all_to_all_nvlink_latency");
    dcp::detail::require_finite_non_negative(k.ulysses_permute_fraction, where,
                                             "ulysses_permute_fraction");
    dcp::detail::require_fraction(k.hbm_efficiency, where, "hbm_efficiency");
    dcp::detail::require_finite_non_negative(k.nccl_base_latency, where, "nccl_base_latency");
    dcp::detail::require_finite_non_negative(k.nccl_nvlink_step_latency, where,
                                             "nccl_nvlink_step_latency");
    dcp::detail::require_finite_non_negative(k.nccl_network_step_latency, where,
                                             "nccl_network_step_latency");
    dcp::detail::require_finite_positive(k.nvls_allreduce_bandwidth, where,
                                         "nvls_allreduce_bandwidth");
    if (k.nics_per_node < 0)
      throw invalid_spec(std::string(where) + "nics_per_node = " + std::to_string(k.nics_per_node) +
                         ", must be >= 0 (0 = one per GPU)");
    dcp::detail::require_finite_non_negative(k.kernel_launch_seconds, where,
                                             "kernel_launch_seconds");
    dcp::detail::require_finite_non_negative(k.forward_kernels_per_layer, where,
                                             "forward_kernels_per_layer");
    dcp::detail::require_finite_non_negative(k.loss_kernels, where, "loss_kernels");
    dcp::detail::require_finite_non_negative(k.framework_seconds, where, "framework_seconds");
    dcp::detail::require_finite_non_negative(k.ring_forward_kernels_per_step, where,
                                             "ring_forward_kernels_per_step");
    dcp::detail::require_finite_non_negative(k.ring_backward_kernels_per_step, where,
                                             "ring_backward_kernels_per_step");
    dcp::detail::require_finite_non_negative(k.host_seconds_per_kernel, where,
                                             "host_seconds_per_kernel");
    dcp::detail::require_finite_non_negative(k.fragmentation, where, "fragmentation");
    dcp::detail::require_finite_non_negative(k.cuda_context_bytes, where, "cuda_context_bytes");
    dcp::detail::require_finite_non_negative(k.nccl_buffer_bytes, where, "nccl_buffer_bytes");
    dcp::detail::require_finite_non_negative(k.logits_bytes_per_entry, where,
                                             "logits_bytes_per_entry");
    if (k.loss_chunk_tokens < 1)
      throw invalid_spec(std::string(where) + "loss_chunk_tokens = " +
                         std::to_string(k.loss_chunk_tokens) + ", must be >= 1");
  }

  void derive() {
    // A causal model runs the causal kernels: their rates count the causal FLOPs (s^2/2 pairs),
    // so a row of s tokens carries s/2 pairs and the per-row term of the fit is halved.
    const bool causal = model_.attention == attention_kind::causal;
    const auto& forward_table =
        causal ? constants_.fa3_causal_forward_tflops : constants_.fa3_forward_tflops;
    const auto& backward_table =
        causal ? constants_.fa3_causal_backward_tflops : constants_.fa3_backward_tflops;
    row_share_ = causal ? 0.5 : 1.0;
    std::array<double, 6> forward{}, backward{};
    for (std::size_t k = 0; k < forward.size(); ++k) {
      forward[k] = forward_table[k] * 1e12 / constants_.fa3_reference_peak_flops;
      backward[k] = backward_table[k] * 1e12 / constants_.fa3_reference_peak_flops;
    }
    forward_ = fit_saturating(constants_.fa3_lengths, forward);
    backward_ = fit_saturating(constants_.fa3_lengths, backward);
    // The fit extrapolates to eta_max as s grows: it must be an efficiency, in (0, 1].
    const auto require_fit = [](const saturating_curve& curve, const char* table) {
      if (!(curve.max > 0 && curve.max <= 1) || !(curve.half >= 0) || !std::isfinite(curve.half))
        throw invalid_spec(
            std::string("truth constants: ") + table +
            " fits eta_max s/(s + s_half) "
            "with eta_max = " +
            dcp::detail::number_text(curve.max) +
            " and s_half = " + dcp::detail::number_text(curve.half) +
            ", must be eta_max in (0, 1] and "
            "s_half finite and >= 0 (efficiency must rise with length, below the peak)");
    };
    require_fit(forward_, causal ? "fa3_causal_forward_tflops" : "fa3_forward_tflops");
    require_fit(backward_, causal ? "fa3_causal_backward_tflops" : "fa3_backward_tflops");

    const std::int64_t h = model_.hidden;
    const std::int64_t f = model_.ffn;
    per_token_params_ = static_cast<double>(model_.per_token_params());
    recomputed_params_ = static_cast<double>(detail::recomputed_params_per_token_block(model_));
    selective_saving_ = static_cast<double>(detail::bytes_saved_by_selective(model_));
    // Memory-bound bytes per token per layer, forward [D]: two norms (read + write 2h each:
    // 8h), RoPE on Q and K (4h_q + 4h_kv, h_q = heads x head width), two residual adds (read
    // 4h, write 2h each: 12h), the MLP activation (SwiGLU reads 4f, writes 2f; GELU 4f).
    elementwise_bytes_ =
        static_cast<double>(20 * h + 4 * model_.q_hidden() + 4 * model_.kv_hidden() +
                            (model_.mlp == mlp_kind::swiglu ? 6 * f : 4 * f));
    // Loss: about four passes over BF16 logits and their FP32 upcast [D].
    loss_bytes_ = model_.vocab > 0
                      ? 4.0 * constants_.logits_bytes_per_entry * static_cast<double>(model_.vocab)
                      : 0.0;
    states_ = detail::zero_state_bytes(model_, training_.zero_stage, cluster_.gpus);
    gradient_accumulation_bytes_ =
        constants_.gradient_accumulation_bytes_per_weight *
        static_cast<double>(model_.total_params()) /
        (training_.zero_stage == 3 ? static_cast<double>(cluster_.gpus) : 1.0);
    activations_ = detail::activation_footprint(
        model_, {training_.chunked_cross_entropy, constants_.loss_chunk_tokens,
                 constants_.logits_bytes_per_entry});
  }

  [[nodiscard]] double parameter_bytes() const noexcept {
    return 2.0 * static_cast<double>(model_.total_params());  // BF16
  }
  /// NCCL latency of `steps` ring steps over `gpus` GPUs: a fraction nodes / gpus of the hops
  /// leave a node.
  [[nodiscard]] double world_latency(std::int64_t gpus, double steps) const noexcept {
    const auto gpn = cluster_.gpus_per_node;
    const double nodes = static_cast<double>((gpus + gpn - 1) / gpn);
    const double network_share = nodes > 1 ? nodes / static_cast<double>(gpus) : 0.0;
    return collective_latency(steps * (1.0 - network_share), steps * network_share);
  }
  /// One ring pass (all-gather or reduce-scatter) of the BF16 parameters over `gpus` GPUs.
  /// Across nodes every ring leaves through a different NIC: busbw = NICs x per-NIC (§1.2 [D]).
  [[nodiscard]] double ring_pass_seconds(std::int64_t gpus) const noexcept {
    const double n = static_cast<double>(gpus);
    const bool multi_node = gpus > cluster_.gpus_per_node;
    const double ring_bandwidth = multi_node ? node_nic_bandwidth() : cluster_.nvlink_bandwidth;
    return world_latency(gpus, n - 1.0) + (n - 1.0) / n * parameter_bytes() / ring_bandwidth;
  }

  [[nodiscard]] dcp::sim::micro_step_parts parts(const micro_batch_shape& s,
                                                 const execution_config& c,
                                                 const group_layout& layout) const noexcept {
    dcp::sim::micro_step_parts out;
    const double peak = cluster_.gpu.peak_flops;
    const double d = static_cast<double>(c.degree);
    const double layers = static_cast<double>(model_.layers);
    const double recomputed = static_cast<double>(c.recompute.layers);
    const double h_q = static_cast<double>(model_.q_hidden());  // heads x head width
    const double h_kv = static_cast<double>(model_.kv_hidden());
    const double tokens = static_cast<double>(s.tokens);
    const double per_gpu = tokens / d;
    // The Ulysses part u and ring part r of the degree (d = u r): (d, 1) Ulysses, (1, d) ring,
    // a hybrid's node-local Ulysses group and the ring over those groups.
    const std::int64_t u_members = ulysses_part(c, model_, cluster_);
    const double u = static_cast<double>(u_members);
    const double r = d / u;

    // GEMMs: 6 N per token, full recompute one more forward of the recomputed blocks (§2.1,
    // §2.2; cross-attention k/v act on the caption, not on these tokens), at
    // eta(n) = eta_max n/(n + n_half): time = F_token (n + n_half) / (eta_max R); plus the
    // caption's GEMMs, whole on every GPU.
    const double flops_per_token = 6.0 * per_token_params_ + 2.0 * recomputed_params_ * recomputed;
    out.gemm_seconds = flops_per_token * (per_gpu + constants_.gemm_half_tokens) /
                       (constants_.gemm_efficiency_max * peak);
    if (model_.has_cross_attention()) out.gemm_seconds += caption_seconds(s, c);

    // Attention: 4h_q FLOPs per (query, key) pair per layer forward, backward 2.5x (§1.2,
    // §2.1), recomputed blocks one more forward; the fitted FA3 curves make a sequence of s
    // tokens cost (pairs + s_half * rows) / (eta_max R) per unit of 4h_q. Ulysses runs whole
    // sequences on 1/d of the heads (rows = s); ring runs s/d query rows against d key chunks, so
    // each GPU pays the per-row cost d times (§3.3: lower efficiency on (s/d) tiles); a hybrid runs
    // s/r rows of 1/u of the heads against r chunks, r times the per-row cost.
    const double text = static_cast<double>(model_.text_tokens);
    const double pairs = s.attention_pairs + tokens * text;
    const double row_passes = (model_.has_cross_attention() ? 2.0 : 1.0) * tokens * r * row_share_;
    const double forward_per_layer =
        4.0 * h_q * (pairs + forward_.half * row_passes) / (forward_.max * peak);
    const double backward_per_layer =
        4.0 * h_q * (pairs + backward_.half * row_passes) / (backward_.max * peak);
    out.attention_seconds =
        ((layers + recomputed) * forward_per_layer + 2.5 * layers * backward_per_layer) / d;

    // Memory-bound kernels: forward once, backward about twice, recomputed blocks once more;
    // the loss; selective recomputation re-reads and re-writes what it dropped (§2.2, §5).
    const double hbm = constants_.hbm_efficiency * cluster_.gpu.hbm_bandwidth;
    double memory_bytes =
        per_gpu * ((3.0 * layers + recomputed) * elementwise_bytes_ + loss_bytes_);
    if (c.recompute.selective)
      memory_bytes += per_gpu * (layers - recomputed) * 2.0 * selective_saving_;
    // Every micro-step adds its weight gradients into the FP32 main gradients.
    memory_bytes += gradient_accumulation_bytes_;
    out.memory_bound_seconds = memory_bytes / hbm;

    // Kernel launches and framework work.
    double kernels = constants_.forward_kernels_per_layer * (3.0 * layers + recomputed) +
                     constants_.loss_kernels;

    out.crosses_nodes = layout.crosses_nodes();
    out.nic_bandwidth = cluster_.nic_bandwidth;
    if (u_members > 1) {
      // Ulysses: 4 all-to-alls per pass (Q, K, V, O), passes = forward + backward + recompute;
      // per GPU (s/d)(2h_q + 2h_kv) 2 bytes per pass (§3.2). A share (g-1)/u stays on NVLink, the
      // share (u-g)/u leaves through the NIC; both run at once (§1.2 [S] nccl-tests#130). A
      // hybrid's Ulysses group is node-local (u divides the node), its all-to-alls serial
      // before and after the ring, which hides nothing of them.
      const bool whole = u_members == c.degree;
      const double passes = 2.0 * layers + recomputed;
      const double per_pass = per_gpu * (2.0 * h_q + 2.0 * h_kv) * 2.0;
      const bool spans = whole && layout.crosses_nodes();
      const double in_node = spans ? static_cast<double>(layout.min_per_node) : u;
      const double remote = spans ? u - in_node : 0.0;
      const double local = in_node - 1.0;
      const double intra = passes * per_pass * local / u;
      out.intra_node_bytes += intra;
      out.inter_node_bytes += passes * per_pass * remote / u;
      if (whole)
        out.intra_node_seconds += intra / all_to_all_bandwidth();
      else
        out.exposed_transfer_seconds += intra / all_to_all_bandwidth();
      // The permute copies around each all-to-all: a share of its time at NVLink rate, in HBM.
      out.memory_bound_seconds += constants_.ulysses_permute_fraction * passes * per_pass *
                                  (u - 1.0) / u / all_to_all_bandwidth();
      out.collectives += static_cast<std::int64_t>(4.0 * passes);
      // An all-to-all of n ranks takes n steps; those to other nodes are network steps.
      out.latency_seconds += 4.0 * passes * all_to_all_latency(remote);
      kernels += 4.0 * passes;
    }
    if (r > 1) {
      // Ring: (r-1) steps per layer forward passing K and V chunks, twice that backward, the
      // recomputed forward once more (§3.3); hidden behind the attention of the same pass. A
      // ring step waits for its slowest hop: the NIC when the group crosses nodes (every hop of
      // a hybrid's ring, whose members sit u ranks apart, when it does).
      const double steps = (r - 1.0) * (3.0 * layers + recomputed);
      const double bytes = steps * per_gpu * 2.0 * h_kv * 2.0;
      const bool hybrid = u_members > 1;
      if (!hybrid || !layout.crosses_nodes()) {
        out.intra_node_bytes += bytes;
        out.intra_node_seconds += bytes / cluster_.nvlink_bandwidth;
      }
      if (layout.crosses_nodes()) out.inter_node_bytes += bytes;
      out.overlapped_seconds = out.attention_seconds;
      out.collectives += static_cast<std::int64_t>(steps);
      out.latency_seconds += steps * collective_latency(layout.crosses_nodes() ? 0.0 : 1.0,
                                                        layout.crosses_nodes() ? 1.0 : 0.0);
      // r attention steps per layer and pass, each with its own kernels (the P2P pair included).
      kernels += r * (constants_.ring_forward_kernels_per_step * (layers + recomputed) +
                      constants_.ring_backward_kernels_per_step * layers);
    }
    out.overhead_seconds =
        kernels * constants_.kernel_launch_seconds + constants_.framework_seconds;
    out.host_seconds = kernels * constants_.host_seconds_per_kernel;
    out.gather_seconds = parameter_gather_seconds(cluster_.gpus);
    out.exposed_gather_seconds = out.gather_seconds / layers;
    return out;
  }

  saturating_curve forward_{};
  saturating_curve backward_{};
  double row_share_ = 1.0;  ///< pairs per row of a sequence over its length: 1/2 when causal
  double gradient_accumulation_bytes_ = 0;  ///< per GPU per micro-step
  double per_token_params_ = 0;
  double recomputed_params_ = 0;  ///< per token per recomputed block
  double selective_saving_ = 0;
  double elementwise_bytes_ = 0;
  double loss_bytes_ = 0;
  double states_ = 0;
  detail::activation_footprint activations_{};

  model_spec model_;
  cluster_spec cluster_;
  training_spec training_;
  truth_constants constants_;
};

static_assert(cost_model<truth_model>);

inline std::ostream& operator<<(std::ostream& os, const truth_model& t) {
  return os << "truth_model{" << t.model().name << ", " << t.cluster().gpus << " x "
            << t.cluster().gpu.name << ", fragmentation " << t.constants().fragmentation
            << ", GEMM eta_max " << t.constants().gemm_efficiency_max << " n_half "
            << t.constants().gemm_half_tokens << ", FA3 fwd eta_max "
            << t.attention_forward_curve().max << " s_half " << t.attention_forward_curve().half
            << ", bwd eta_max " << t.attention_backward_curve().max << " s_half "
            << t.attention_backward_curve().half << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::sim
