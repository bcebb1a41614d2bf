#pragma once
// How the model is trained (precision, ZeRO stage, memory headroom, loss normalisation) and the
// per-micro-batch execution config the planner chooses (degree, sequence-parallel style,
// recomputation).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/detail/checked.hpp"
#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

enum class precision : std::uint8_t { bf16_mixed };
/// How a group of d GPUs shares one sequence. A micro-batch runs one of the first three; a
/// training run names one of them for every micro-batch or `automatic`, and then the planner
/// chooses per micro-batch by the cost model, as it chooses the degree.
///  - ulysses: all-to-all over attention heads (DeepSpeed-Ulysses); d divides the head count.
///  - ring: K/V chunks passed around a ring of d GPUs (ring attention / context parallelism).
///  - hybrid: Ulysses over the u GPUs of a node-local sub-group, ring attention over the d/u
///    sub-groups (USP, Fang & Zhao 2024; LoongTrain's 2D attention): u is
///    hybrid_ulysses_degree(), the largest power of two that divides the head count and fits a
///    node; valid where 2 <= u < d.
///  - automatic: a training-level choice only, never a micro-batch's.
enum class sequence_parallel : std::uint8_t { ulysses, ring, hybrid, automatic };
enum class loss_normalisation : std::uint8_t { tokens, samples };
/// Whether every rank runs the same number of micro-steps, round by round (docs/planner.md,
/// "Lockstep"). A training stack that issues collectives over the whole sharding group in every
/// micro-step (ZeRO-3 and FSDP's FULL_SHARD gather each layer's parameters in forward and
/// backward and reduce-scatter its gradients) deadlocks or idles when ranks run different counts.
///  - automatic: on with ZeRO-3, off otherwise.
///  - on: always (e.g. FSDP SHARD_GRAD_OP or ZeRO-2 reducing gradients every micro-step).
///  - off: ranks run as many micro-steps as their work needs (DDP with no_sync, ZeRO-1 and 2 that
///    reduce once per step); invalid with ZeRO-3.
enum class lockstep_mode : std::uint8_t { automatic, on, off };

[[nodiscard]] constexpr std::string_view to_string(lockstep_mode mode) noexcept {
  switch (mode) {
    case lockstep_mode::automatic:
      return "auto";
    case lockstep_mode::on:
      return "on";
    case lockstep_mode::off:
      return "off";
  }
  return "unknown";
}

/// The mode named `text` ("auto", "on", "off"), or nullopt.
[[nodiscard]] constexpr std::optional<lockstep_mode> parse_lockstep_mode(
    std::string_view text) noexcept {
  for (auto mode : {lockstep_mode::automatic, lockstep_mode::on, lockstep_mode::off})
    if (to_string(mode) == text) return mode;
  return std::nullopt;
}

[[nodiscard]] constexpr std::string_view to_string(sequence_parallel sp) noexcept {
  switch (sp) {
    case sequence_parallel::ulysses:
      return "ulysses";
    case sequence_parallel::ring:
      return "ring";
    case sequence_parallel::hybrid:
      return "hybrid";
    case sequence_parallel::automatic:
      return "auto";
  }
  return "unknown";
}

/// The style named `text` ("ulysses", "ring", "hybrid", "auto"), or nullopt.
[[nodiscard]] constexpr std::optional<sequence_parallel> parse_sequence_parallel(
    std::string_view text) noexcept {
  for (auto sp : {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid,
                  sequence_parallel::automatic})
    if (to_string(sp) == text) return sp;
  return std::nullopt;
}

[[nodiscard]] constexpr bool is_known(sequence_parallel sp) noexcept {
  return static_cast<unsigned>(sp) <= static_cast<unsigned>(sequence_parallel::automatic);
}

/// Whether a micro-batch can run `sp`: ulysses, ring or hybrid (automatic is a training run's).
[[nodiscard]] constexpr bool is_micro_batch_style(sequence_parallel sp) noexcept {
  return sp == sequence_parallel::ulysses || sp == sequence_parallel::ring ||
         sp == sequence_parallel::hybrid;
}

/// Whether `ulysses` splits a hybrid group of `degree` GPUs: a power of two in [2, degree), so
/// it divides the degree and the ring has at least 2 members.
[[nodiscard]] constexpr bool valid_hybrid_split(std::int64_t ulysses,
                                                std::int64_t degree) noexcept {
  return ulysses >= 2 && (ulysses & (ulysses - 1)) == 0 && ulysses < degree;
}
[[nodiscard]] constexpr std::string_view to_string(loss_normalisation n) noexcept {
  return n == loss_normalisation::tokens ? "tokens" : "samples";
}
inline std::ostream& operator<<(std::ostream& os, sequence_parallel sp) {
  return os << to_string(sp);
}
inline std::ostream& operator<<(std::ostream& os, loss_normalisation n) {
  return os << to_string(n);
}

struct training_spec {
  precision mixed_precision = precision::bf16_mixed;
  int zero_stage = 1;  ///< ZeRO stage over the whole data-parallel world
  /// Memory kept free on every GPU for allocator fragmentation and what the model does not
  /// count: the larger of headroom_bytes and headroom_fraction of the capacity. The default is
  /// the top of the 5-10 % that docs/cost-sources.md §8 recommends ("reserved > allocated").
  double headroom_bytes = 0;
  double headroom_fraction = 0.10;
  double runtime_reserve_bytes = 3.0 * gib;  ///< CUDA context, NCCL (docs/cost-sources.md §4.1)
  sequence_parallel sp = sequence_parallel::ulysses;
  loss_normalisation normalise_by = loss_normalisation::tokens;
  bool chunked_cross_entropy = false;  ///< fused/chunked CE: no full logits tensor
  lockstep_mode lockstep = lockstep_mode::automatic;

  /// Whether plans must be in lockstep (lockstep_mode): on, or automatic under ZeRO-3.
  [[nodiscard]] bool runs_in_lockstep() const noexcept {
    return lockstep == lockstep_mode::on ||
           (lockstep == lockstep_mode::automatic && zero_stage == 3);
  }

  /// Bytes kept free per GPU on this cluster.
  [[nodiscard]] double headroom(const cluster_spec& cluster) const noexcept {
    return std::max(headroom_bytes, headroom_fraction * cluster.gpu.memory_bytes);
  }

  /// Throws invalid_spec naming the first bad field, its value and the limit: an unknown
  /// precision, sequence-parallel style, loss normalisation or lockstep mode; a ZeRO stage outside
  /// [0, 3]; lockstep off under ZeRO-3;
  /// headroom_bytes or runtime_reserve_bytes not finite and >= 0; headroom_fraction outside
  /// [0, 1); a headroom that leaves nothing of the capacity, or a runtime reserve that leaves
  /// nothing of the memory budget.
  void validate(const cluster_spec& cluster) const {
    if (mixed_precision != precision::bf16_mixed)
      throw invalid_spec(
          "training: mixed_precision = " + std::to_string(static_cast<unsigned>(mixed_precision)) +
          ", must be bf16_mixed");
    if (!is_known(sp))
      throw invalid_spec("training: sp = " + std::to_string(static_cast<unsigned>(sp)) +
                         ", must be ulysses, ring, hybrid or auto");
    if (normalise_by != loss_normalisation::tokens && normalise_by != loss_normalisation::samples)
      throw invalid_spec(
          "training: normalise_by = " + std::to_string(static_cast<unsigned>(normalise_by)) +
          ", must be tokens or samples");
    if (zero_stage < 0 || zero_stage > 3)
      throw invalid_spec("training: zero_stage = " + std::to_string(zero_stage) +
                         ", must be in [0, 3]");
    if (static_cast<unsigned>(lockstep) > static_cast<unsigned>(lockstep_mode::off))
      throw invalid_spec("training: lockstep = " + std::to_string(static_cast<unsigned>(lockstep)) +
                         ", must be auto, on or off");
    if (lockstep == lockstep_mode::off && zero_stage == 3)
      throw invalid_spec(
          "training: lockstep = off with zero_stage = 3: ZeRO-3 gathers every layer's parameters "
          "over the whole world in every micro-step, so every rank must run the same number of "
          "micro-steps (use auto or on)");
    detail::require_finite_non_negative(headroom_bytes, "training: ", "headroom_bytes");
    if (!(headroom_fraction >= 0) || headroom_fraction >= 1)
      throw invalid_spec("training: headroom_fraction = " + detail::number_text(headroom_fraction) +
                         ", must be in [0, 1)");
    detail::require_finite_non_negative(runtime_reserve_bytes,
                                        "training: ", "runtime_reserve_bytes");
    if (headroom(cluster) >= cluster.gpu.memory_bytes)
      throw invalid_spec("training: headroom_bytes = " + std::to_string(headroom(cluster)) +
                         " must be below the GPU capacity " +
                         std::to_string(cluster.gpu.memory_bytes) + " bytes");
    if (runtime_reserve_bytes >= memory_budget(cluster))
      throw invalid_spec(
          "training: runtime_reserve_bytes = " + detail::bytes_text(runtime_reserve_bytes) +
          " must be below the memory budget of " + detail::bytes_text(memory_budget(cluster)) +
          " bytes (GPU capacity less headroom)");
  }

  /// Bytes a micro-batch may use at its peak on one GPU: capacity minus headroom.
  [[nodiscard]] double memory_budget(const cluster_spec& cluster) const noexcept {
    return cluster.gpu.memory_bytes - headroom(cluster);
  }

  friend bool operator==(const training_spec&, const training_spec&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const training_spec& t) {
  return os << "training{bf16 mixed, zero=" << t.zero_stage << ", headroom max("
            << t.headroom_bytes / gib << " GiB, " << t.headroom_fraction * 100 << " %), sp=" << t.sp
            << ", normalise by " << t.normalise_by << ", lockstep " << to_string(t.lockstep) << '}';
}

/// How much activation recomputation a micro-batch uses: `layers` of the model's blocks are
/// fully recomputed (checkpointed at their input); `selective` recomputes the cheap,
/// memory-heavy parts (norms, MLP activation) of the others.
struct recompute_setting {
  std::int32_t layers = 0;
  bool selective = false;

  [[nodiscard]] static constexpr recompute_setting none() noexcept { return {}; }
  [[nodiscard]] static constexpr recompute_setting selective_only() noexcept { return {0, true}; }
  [[nodiscard]] static constexpr recompute_setting full(std::int64_t model_layers) noexcept {
    return {static_cast<std::int32_t>(model_layers), false};
  }
  [[nodiscard]] static constexpr recompute_setting partial(
      std::int64_t recomputed_layers) noexcept {
    return {static_cast<std::int32_t>(recomputed_layers), false};
  }
  [[nodiscard]] constexpr bool is_none() const noexcept { return layers == 0 && !selective; }

  friend constexpr auto operator<=>(const recompute_setting&, const recompute_setting&) = default;
};

[[nodiscard]] inline std::string to_string(const recompute_setting& r) {
  if (r.is_none()) return "none";
  std::string out;
  if (r.selective) out = "selective";
  if (r.layers > 0)
    out += (out.empty() ? "" : "+") + std::string("layers:") + std::to_string(r.layers);
  return out;
}
inline std::ostream& operator<<(std::ostream& os, const recompute_setting& r) {
  return os << to_string(r);
}

/// The Ulysses degree inside a hybrid group: the largest power of two that divides the head
/// count, is at most the GPUs of a node and at most `degree` (1 when the heads are odd).
[[nodiscard]] constexpr std::int64_t hybrid_ulysses_degree(std::int64_t degree,
                                                           const model_spec& model,
                                                           const cluster_spec& cluster) noexcept {
  std::int64_t u = 1;
  while (u * 2 <= degree && u * 2 <= cluster.gpus_per_node && model.heads % (u * 2) == 0) u *= 2;
  return u;
}

/// The styles a micro-batch of `degree` GPUs may run when the training run names `sp`: that one
/// style where it is valid at the degree (for `hybrid`: Ulysses where the degree fits a node's
/// Ulysses group, hybrid beyond), or under `automatic` every valid one (ulysses, ring, hybrid in
/// that order); at degree 1 one entry, the style being moot. Empty when none is valid (a
/// Ulysses degree that does not divide the heads).
[[nodiscard]] inline std::vector<sequence_parallel> styles_at(sequence_parallel sp,
                                                              std::int64_t degree,
                                                              const model_spec& model,
                                                              const cluster_spec& cluster) {
  if (degree <= 1)
    return {sp == sequence_parallel::automatic || sp == sequence_parallel::hybrid
                ? sequence_parallel::ulysses
                : sp};
  const bool ulysses = model.heads % degree == 0;
  const auto u = hybrid_ulysses_degree(degree, model, cluster);
  const bool hybrid = valid_hybrid_split(u, degree);
  switch (sp) {
    case sequence_parallel::ulysses:
      if (ulysses) return {sp};
      return {};
    case sequence_parallel::ring:
      return {sp};
    case sequence_parallel::hybrid:
      if (hybrid) return {sp};
      if (u == degree) return {sequence_parallel::ulysses};
      return {sequence_parallel::ring};  // heads too few for any Ulysses split
    case sequence_parallel::automatic: {
      std::vector<sequence_parallel> out;
      if (ulysses) out.push_back(sequence_parallel::ulysses);
      out.push_back(sequence_parallel::ring);
      if (hybrid) out.push_back(sequence_parallel::hybrid);
      return out;
    }
  }
  return {};
}

/// The first of styles_at(sp, degree, ...), or `sp` itself where none is valid (so that
/// validate(execution_config) names the reason); degree < 1 gives `sp`.
[[nodiscard]] inline sequence_parallel default_style(sequence_parallel sp, std::int64_t degree,
                                                     const model_spec& model,
                                                     const cluster_spec& cluster) {
  if (degree < 1) return sp;
  const auto styles = styles_at(sp, degree, model, cluster);
  return styles.empty() ? sp : styles.front();
}

/// What a micro-batch runs with: a group of `degree` GPUs sharing each sequence.
struct execution_config {
  std::int64_t degree = 1;
  sequence_parallel sp = sequence_parallel::ulysses;
  recompute_setting recompute{};

  friend constexpr bool operator==(const execution_config&, const execution_config&) = default;
};

/// The Ulysses part u of a micro-step's degree d = u r (r the ring part): d for Ulysses, 1 for
/// ring, hybrid_ulysses_degree for hybrid; 1 at degree 1.
[[nodiscard]] constexpr std::int64_t ulysses_part(const execution_config& c,
                                                  const model_spec& model,
                                                  const cluster_spec& cluster) noexcept {
  if (c.degree <= 1) return 1;
  switch (c.sp) {
    case sequence_parallel::ulysses:
      return c.degree;
    case sequence_parallel::hybrid:
      return hybrid_ulysses_degree(c.degree, model, cluster);
    default:
      return 1;
  }
}

inline std::ostream& operator<<(std::ostream& os, const execution_config& c) {
  return os << "config{degree=" << c.degree << ", " << c.sp << ", recompute=" << c.recompute << '}';
}

/// Throws invalid_spec if `config` cannot run `model` on `cluster`: degree not a power of two or
/// beyond the cluster, a Ulysses degree that does not divide the head count, recomputing more
/// layers than the model has.
inline void validate(const execution_config& config, const model_spec& model,
                     const cluster_spec& cluster) {
  const auto d = config.degree;
  if (d < 1 || (d & (d - 1)) != 0)
    throw invalid_spec("execution config: degree = " + std::to_string(d) +
                       ", must be a power of two >= 1");
  if (d > cluster.gpus)
    throw invalid_spec("execution config: degree = " + std::to_string(d) +
                       " exceeds the cluster's " + std::to_string(cluster.gpus) + " GPUs");
  if (config.sp == sequence_parallel::ulysses && model.heads % d != 0)
    throw invalid_spec("execution config: Ulysses degree = " + std::to_string(d) +
                       " does not divide the " + std::to_string(model.heads) +
                       " attention heads of " + model.name);
  if (!is_micro_batch_style(config.sp))
    throw invalid_spec(
        "execution config: sp = " + std::to_string(static_cast<unsigned>(config.sp)) +
        ", must be ulysses, ring or hybrid (auto is a training-level choice)");
  if (config.sp == sequence_parallel::hybrid) {
    const auto u = hybrid_ulysses_degree(d, model, cluster);
    if (!valid_hybrid_split(u, d))
      throw invalid_spec(
          "execution config: hybrid degree = " + std::to_string(d) + " splits into Ulysses " +
          std::to_string(u) + " x ring " + std::to_string(d / u) + " (" + model.name + ", " +
          std::to_string(model.heads) + " heads, " + std::to_string(cluster.gpus_per_node) +
          " GPUs per node): hybrid needs both parts >= 2");
  }
  if (config.recompute.layers < 0 || config.recompute.layers > model.layers)
    throw invalid_spec(
        "execution config: recompute layers = " + std::to_string(config.recompute.layers) +
        ", must be in [0, " + std::to_string(model.layers) + "]");
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
