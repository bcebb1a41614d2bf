#pragma once
// The model-parallel grid: tensor degree t inside a node and p pipeline stages of v virtual
// stages (model chunks) each, fixed for the run and laid out as Megatron-LM lays them out. dcp
// plans over the remaining D = GPUs / (t p) data x context ranks: a micro-batch of degree d runs
// on d aligned pipelines at every stage.

#include <cstdint>
#include <ostream>
#include <string>

#include "dcp/error.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Where a rank sits in the grid: its tensor rank, its pipeline (the data x context index dcp
/// plans over) and its pipeline stage.
struct grid_coordinates {
  std::int64_t tensor = 0;
  std::int64_t pipeline = 0;
  std::int64_t stage = 0;

  friend constexpr bool operator==(const grid_coordinates&, const grid_coordinates&) = default;
};

struct model_parallel_grid {
  std::int64_t tensor = 1;          ///< t: tensor-parallel degree (with sequence parallelism)
  std::int64_t pipeline = 1;        ///< p: pipeline stages
  std::int64_t virtual_stages = 1;  ///< v: model chunks per stage (interleaved 1F1B when > 1)

  friend constexpr bool operator==(const model_parallel_grid&,
                                   const model_parallel_grid&) = default;

  /// Virtual stages of the whole pipeline, p v: the chunks a micro-batch crosses.
  [[nodiscard]] constexpr std::int64_t chunks() const noexcept { return pipeline * virtual_stages; }
  /// Transformer layers in one chunk.
  [[nodiscard]] constexpr std::int64_t layers_per_chunk(const model_spec& model) const noexcept {
    return model.layers / chunks();
  }
  /// D: the pipelines, that is the data x context ranks at each (tensor rank, stage).
  [[nodiscard]] constexpr std::int64_t pipelines(const cluster_spec& cluster) const noexcept {
    return cluster.gpus / (tensor * pipeline);
  }

  /// Megatron-LM's default order tp-cp-dp-pp, first fastest: rank = tp + t (r + D stage), the
  /// pipeline index r running over context ranks first, so an aligned block of pipelines is a
  /// context-parallel group. Stage s owns the ranks [s t D, (s + 1) t D).
  [[nodiscard]] constexpr std::int64_t rank_of(const grid_coordinates& at,
                                               std::int64_t pipelines) const noexcept {
    return at.tensor + tensor * (at.pipeline + pipelines * at.stage);
  }
  [[nodiscard]] constexpr grid_coordinates coordinates_of(std::int64_t rank,
                                                          std::int64_t pipelines) const noexcept {
    return {rank % tensor, (rank / tensor) % pipelines, rank / (tensor * pipelines)};
  }
  [[nodiscard]] constexpr std::int64_t rank_of(const grid_coordinates& at,
                                               const cluster_spec& cluster) const noexcept {
    return rank_of(at, pipelines(cluster));
  }
  [[nodiscard]] constexpr grid_coordinates coordinates_of(
      std::int64_t rank, const cluster_spec& cluster) const noexcept {
    return coordinates_of(rank, pipelines(cluster));
  }

  /// Throws invalid_spec naming the field, its value and the limit: t that does not divide the
  /// heads, the KV heads or the GPUs of a node; p v that does not divide the layers; v > 1 with
  /// a single stage; t p that does not divide the GPUs.
  void validate(const model_spec& model, const cluster_spec& cluster) const {
    const auto fail = [](const std::string& text) { throw invalid_spec("grid: " + text); };
    const auto text = [](std::int64_t v) { return std::to_string(v); };
    if (tensor < 1) fail("tensor = " + text(tensor) + ", must be >= 1");
    if (pipeline < 1) fail("pipeline = " + text(pipeline) + ", must be >= 1");
    if (virtual_stages < 1) fail("virtual_stages = " + text(virtual_stages) + ", must be >= 1");
    if (model.heads % tensor != 0)
      fail("tensor = " + text(tensor) +
           " does not divide the model's heads = " + text(model.heads));
    if (model.kv_heads % tensor != 0)
      fail("tensor = " + text(tensor) + " does not divide the model's kv_heads = " +
           text(model.kv_heads) + " (each tensor rank holds whole KV heads)");
    if (tensor > cluster.gpus_per_node || cluster.gpus_per_node % tensor != 0)
      fail("tensor = " + text(tensor) + " must divide the GPUs of a node, gpus_per_node = " +
           text(cluster.gpus_per_node) + " (tensor parallelism stays on NVLink)");
    if (virtual_stages > 1 && pipeline < 2)
      fail("virtual_stages = " + text(virtual_stages) + " needs pipeline >= 2, not " +
           text(pipeline));
    if (model.layers % (pipeline * virtual_stages) != 0)
      fail("pipeline x virtual_stages = " + text(pipeline) + " x " + text(virtual_stages) +
           " does not divide the model's layers = " + text(model.layers));
    if (cluster.gpus % (tensor * pipeline) != 0)
      fail("tensor x pipeline = " + text(tensor * pipeline) +
           " does not divide the GPUs = " + text(cluster.gpus));
  }
};

inline std::ostream& operator<<(std::ostream& os, const model_parallel_grid& g) {
  os << "grid{tensor=" << g.tensor << ", pipeline=" << g.pipeline;
  if (g.virtual_stages > 1) os << ", virtual_stages=" << g.virtual_stages;
  return os << '}';
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
