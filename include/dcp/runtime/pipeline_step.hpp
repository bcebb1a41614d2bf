#pragma once
// dcp::pipeline_executor — what a framework supplies to run a pipeline plan — and
// dcp::run_pipeline_step, which walks one rank's ops of a pipeline_plan (Megatron-LM's 1F1B or
// interleaved order, pipeline/schedule.hpp) and hands each chunk, its context-parallel group and
// its neighbours' ranks to the executor. docs/runtime.md ("Pipelines").

#include <cstddef>
#include <cstdint>
#include <exception>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/pipeline/planner.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/spec/model_parallel.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The context-parallel group of one micro-batch at one stage: the ranks of pipelines
/// [first_pipeline, first_pipeline + degree) at (tensor, stage), t apart in Megatron's order.
/// Each member runs the chunk on its share of every sequence's positions.
struct pipeline_group {
  std::int64_t tensor = 0;
  std::int64_t stage = 0;
  std::int64_t first_pipeline = 0;
  std::int64_t degree = 1;
  std::int64_t member = 0;          ///< this rank's index: its pipeline - first_pipeline
  std::vector<std::int64_t> ranks;  ///< world ranks, member order

  friend bool operator==(const pipeline_group&, const pipeline_group&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const pipeline_group& g) {
  os << "pipeline_group{stage=" << g.stage << ", tensor=" << g.tensor << ", pipelines=["
     << g.first_pipeline << ", " << g.first_pipeline + g.degree << "), member=" << g.member
     << ", ranks=";
  for (std::size_t k = 0; k < g.ranks.size(); ++k) os << (k == 0 ? "" : ",") << g.ranks[k];
  return os << '}';
}

/// One op's chunk: micro-batch `micro_batch` (the plan's micro_batches[micro_batch_index]) through
/// model chunk `chunk` of this stage, which is virtual stage chunk p + stage of the model.
struct pipeline_chunk_task {
  const pipeline_micro_batch* micro_batch = nullptr;  ///< never null; points into the plan
  std::size_t micro_batch_index = 0;
  std::int64_t slot = 0;
  std::int64_t chunk = 0;          ///< on this stage, 0 .. v - 1
  std::int64_t virtual_stage = 0;  ///< chunk p + stage, 0 .. p v - 1
  bool first = false;              ///< virtual stage 0: embeds the samples' tokens
  bool last = false;               ///< virtual stage p v - 1: computes the loss
  recompute_setting recompute;     ///< the plan's setting for this virtual stage
  double loss_scale = 0;           ///< pipeline_loss_scales(); used where `last`
  pipeline_group group;
};

enum class pipeline_payload : std::uint8_t { activation, gradient };

/// One point-to-point message between neighbouring virtual stages. Both ends compute the same
/// tag, 2 (slot p v + boundary) + payload with boundary the lower virtual stage of the hop, so it
/// is unique among the step's messages between two ranks and below 2 m p v (MPI_TAG_UB is at
/// least 32767).
struct pipeline_transfer {
  pipeline_payload payload = pipeline_payload::activation;
  std::int64_t peer = 0;  ///< the rank sent to or received from
  std::int64_t tag = 0;

  friend constexpr bool operator==(const pipeline_transfer&, const pipeline_transfer&) = default;
};

[[nodiscard]] constexpr std::string_view to_string(pipeline_payload p) noexcept {
  return p == pipeline_payload::activation ? "activation" : "gradient";
}

inline std::ostream& operator<<(std::ostream& os, const pipeline_transfer& t) {
  return os << "pipeline_transfer{" << to_string(t.payload) << ", peer=" << t.peer
            << ", tag=" << t.tag << '}';
}

/// A framework's runner of model chunks.
///
/// Requirements on `E& e`, `const pipeline_chunk_task& c`:
///  1. `e.forward(c)`: the forward of c.micro_batch through chunk c.chunk on c.group
///     (collective over it), from the activations of the receive just before it, or from the
///     tokens where c.first; where c.last, the loss: the micro-batch's mean loss over its loss
///     units (all members together) times c.loss_scale. Keeps what c.recompute says.
///  2. `e.backward(c)`: the backward of that chunk, from the gradient of the receive just before
///     it, or from the loss where c.last; accumulates the parameters' gradients.
/// Models: toy's executor in examples/mpi/pipeline_toy.cpp, the recording executors of
/// tests/unit/pipeline_runtime_tests.cpp.
template <class E>
concept pipeline_chunk_runner = requires(E& e, const pipeline_chunk_task& c) {
  e.forward(c);
  e.backward(c);
};

/// A framework's mover of activations and gradients between stages.
///
/// Requirements on `E& e`, `const pipeline_chunk_task& c`, `const pipeline_transfer& t`:
///  1. `e.send(c, t)`: sends the activation c's forward made (t.payload activation) or the input
///     gradient c's backward made (gradient) to rank t.peer with tag t.tag. Must not wait for the
///     receive (post it non-blocking, complete it by the step's end): the ops of neighbouring
///     stages interleave so that a blocking send may wait on a peer that waits on this rank.
///  2. `e.receive(c, t)`: receives what rank t.peer sent with tag t.tag, for the forward or
///     backward of c that follows; may wait.
/// Each member of a context-parallel group exchanges its own positions with the same member
/// of the neighbouring stage's group (the same pipeline), so shapes agree at both ends.
template <class E>
concept pipeline_transport =
    requires(E& e, const pipeline_chunk_task& c, const pipeline_transfer& t) {
      e.send(c, t);
      e.receive(c, t);
    };

/// Both: what run_pipeline_step drives.
template <class E>
concept pipeline_executor = pipeline_chunk_runner<E> && pipeline_transport<E>;

/// Each micro-batch's loss scale: its loss units (tokens or samples) over the batch's, as
/// scheduler.hpp sets micro_step::loss_scale. With each micro-batch's mean loss times its scale,
/// the gradients summed over every rank (the stages' data-parallel sync with SUM, not AVG) are
/// the batch-mean gradient whatever the plan. An empty micro-batch gets 0.
[[nodiscard]] inline std::vector<double> pipeline_loss_scales(
    const pipeline_plan& plan, loss_normalisation normalise_by = loss_normalisation::tokens) {
  const auto units = [&](const pipeline_micro_batch& mb) {
    return normalise_by == loss_normalisation::tokens
               ? mb.shape.tokens
               : static_cast<std::int64_t>(mb.sample_ids.size());
  };
  std::int64_t total = 0;
  for (const auto& mb : plan.micro_batches) total += units(mb);
  std::vector<double> out;
  out.reserve(plan.micro_batches.size());
  for (const auto& mb : plan.micro_batches)
    out.push_back(total > 0 ? static_cast<double>(units(mb)) / static_cast<double>(total) : 0.0);
  return out;
}

namespace detail {

/// Throws invalid_plan unless `plan` is for `world_size` GPUs and `rank` is one of them.
inline void check_pipeline_world(const pipeline_plan& plan, std::int64_t rank,
                                 std::int64_t world_size) {
  const auto& g = plan.grid;
  const std::int64_t gpus = g.tensor * g.pipeline * plan.pipelines;
  if (gpus != world_size)
    throw invalid_plan("run_pipeline_step: the plan is for " + std::to_string(gpus) +
                       " GPUs (tensor " + std::to_string(g.tensor) + " x pipeline " +
                       std::to_string(g.pipeline) + " x pipelines " +
                       std::to_string(plan.pipelines) + "), the world has " +
                       std::to_string(world_size) + " ranks");
  if (rank < 0 || rank >= world_size)
    throw invalid_plan("run_pipeline_step: rank " + std::to_string(rank) +
                       " is outside the world of " + std::to_string(world_size) + " ranks");
}

/// Throws invalid_plan naming the micro-batch or cell that would leave a rank without its
/// micro-batch, or a setting missing: every (pipeline, slot) covered once, one recompute
/// setting per virtual stage, a slot count interleaving can run. The same on every rank.
inline void check_pipeline_cells(const pipeline_plan& plan) {
  const auto& g = plan.grid;
  const auto bad = [](const std::string& text) {
    throw invalid_plan("run_pipeline_step: " + text);
  };
  if (g.tensor < 1 || g.pipeline < 1 || g.virtual_stages < 1 || plan.pipelines < 1 ||
      plan.slots < 0)
    bad("the grid's degrees and the pipelines must be >= 1, the slots >= 0");
  if (g.virtual_stages > 1 && plan.slots % g.pipeline != 0)
    bad("slots = " + std::to_string(plan.slots) +
        " with virtual_stages = " + std::to_string(g.virtual_stages) +
        ": interleaving needs a multiple of pipeline = " + std::to_string(g.pipeline));
  for (std::size_t k = 0; k < plan.micro_batches.size(); ++k)
    if (plan.micro_batches[k].recompute.size() != static_cast<std::size_t>(g.chunks()))
      bad("micro-batch " + std::to_string(k) + " has " +
          std::to_string(plan.micro_batches[k].recompute.size()) +
          " recompute settings, one per virtual stage needs " + std::to_string(g.chunks()));
  (void)cover_cells("run_pipeline_step", plan.pipelines, plan.slots,
                    std::span<const pipeline_micro_batch>(plan.micro_batches), "micro-batch",
                    "micro-batches");
}

[[nodiscard]] inline pipeline_chunk_task pipeline_task_of(const pipeline_plan& plan,
                                                          const rank_pipeline_schedule& mine,
                                                          const std::vector<double>& loss_scales,
                                                          const pipeline_op& op) {
  const auto& g = plan.grid;
  const auto index = mine.micro_batch_at_slot[static_cast<std::size_t>(op.slot)];
  const auto& mb = plan.micro_batches[index];
  pipeline_chunk_task task;
  task.micro_batch = &mb;
  task.micro_batch_index = index;
  task.slot = op.slot;
  task.chunk = op.chunk;
  task.virtual_stage = op.chunk * g.pipeline + mine.at.stage;
  task.first = task.virtual_stage == 0;
  task.last = task.virtual_stage == g.chunks() - 1;
  task.recompute = mb.recompute[static_cast<std::size_t>(task.virtual_stage)];
  task.loss_scale = loss_scales[index];
  task.group = {mine.at.tensor,
                mine.at.stage,
                mb.first_pipeline,
                mb.degree,
                mine.at.pipeline - mb.first_pipeline,
                {}};
  for (std::int64_t r = mb.first_pipeline; r < mb.first_pipeline + mb.degree; ++r)
    task.group.ranks.push_back(g.rank_of({mine.at.tensor, r, mine.at.stage}, plan.pipelines));
  return task;
}

/// The message across the hop between virtual stages `boundary` and `boundary + 1` of `slot`,
/// seen from the rank at `at` whose peer holds virtual stage `peer_virtual_stage`.
[[nodiscard]] inline pipeline_transfer pipeline_transfer_of(
    const pipeline_plan& plan, const grid_coordinates& at, std::int64_t slot,
    std::int64_t peer_virtual_stage, std::int64_t boundary, pipeline_payload payload) {
  const auto peer_stage = peer_virtual_stage % plan.grid.pipeline;
  return {
      payload, plan.grid.rank_of({at.tensor, at.pipeline, peer_stage}, plan.pipelines),
      2 * (slot * plan.grid.chunks() + boundary) + (payload == pipeline_payload::gradient ? 1 : 0)};
}

/// One op: a forward receives the previous virtual stage's activation, runs and sends its own
/// to the next; a backward receives the next one's gradient, runs and sends its own back.
template <pipeline_executor E>
void run_pipeline_op(const pipeline_plan& plan, const grid_coordinates& at,
                     const pipeline_chunk_task& task, bool backward, E& executor) {
  const std::int64_t vs = task.virtual_stage;
  if (!backward) {
    if (!task.first)
      executor.receive(task, pipeline_transfer_of(plan, at, task.slot, vs - 1, vs - 1,
                                                  pipeline_payload::activation));
    executor.forward(task);
    if (!task.last)
      executor.send(task, pipeline_transfer_of(plan, at, task.slot, vs + 1, vs,
                                               pipeline_payload::activation));
    return;
  }
  if (!task.last)
    executor.receive(
        task, pipeline_transfer_of(plan, at, task.slot, vs + 1, vs, pipeline_payload::gradient));
  executor.backward(task);
  if (!task.first)
    executor.send(task, pipeline_transfer_of(plan, at, task.slot, vs - 1, vs - 1,
                                             pipeline_payload::gradient));
}

}  // namespace detail

/// One training step of a pipeline plan on rank `rank` of `world_size`: checks that the plan is
/// for this world and covers every (pipeline, slot) once (invalid_plan naming the values, on
/// every rank before any op runs), then runs the rank's ops (plan.schedule_of(rank).ops) in
/// order, each with its receive before and its send after (detail::run_pipeline_op). Gradients
/// are only summed over ranks after the step, by the framework (SUM over each stage's
/// pipelines; pipeline_loss_scales says why SUM). An executor exception becomes step_error
/// naming the rank, the op and the micro-batch, with the op's index as sequence().
template <pipeline_executor E>
void run_pipeline_step(const pipeline_plan& plan, std::int64_t rank, std::int64_t world_size,
                       E& executor, loss_normalisation normalise_by = loss_normalisation::tokens) {
  detail::check_pipeline_world(plan, rank, world_size);
  detail::check_pipeline_cells(plan);
  const auto mine = plan.schedule_of(rank);
  const auto loss_scales = pipeline_loss_scales(plan, normalise_by);
  for (std::size_t k = 0; k < mine.ops.size(); ++k) {
    const auto& op = mine.ops[k];
    const auto task = detail::pipeline_task_of(plan, mine, loss_scales, op);
    const auto where = [&] {
      return "rank " + std::to_string(rank) + " failed in op " + std::to_string(k) + ", the " +
             (op.backward ? "backward" : "forward") + " of micro-batch " +
             std::to_string(task.micro_batch_index) + " (slot " + std::to_string(op.slot) +
             ") through virtual stage " + std::to_string(task.virtual_stage) + ": ";
    };
    try {
      detail::run_pipeline_op(plan, mine.at, task, op.backward, executor);
    } catch (const std::exception& e) {
      throw step_error(rank, static_cast<std::int64_t>(k), where() + e.what());
    } catch (...) {
      throw step_error(rank, static_cast<std::int64_t>(k), where() + "unknown exception");
    }
  }
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
