#pragma once
// Pipeline schedules with unequal micro-batches: Megatron-LM's per-stage op order for 1F1B and
// interleaved 1F1B, an executor that times D pipelines whose micro-batches may span several of
// them (a micro-batch of degree d runs its ops on d pipelines at once), each stage's peak memory
// from the activations it holds, and a lower bound that holds for every order.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// One op of a stage: the forward or backward of micro-batch `slot` through model chunk `chunk`.
struct pipeline_op {
  std::int64_t slot = 0;
  std::int64_t chunk = 0;
  bool backward = false;

  friend constexpr bool operator==(const pipeline_op&, const pipeline_op&) = default;
};

/// The order stage `stage` of `stages` runs the ops of `micro_batches` micro-batches in, as
/// Megatron-LM's schedules do. One chunk (1F1B): min(p - s - 1, m) warm-up forwards, then one
/// forward and one backward in turn, then the remaining backwards. v > 1 chunks (interleaved,
/// micro-batch groups of G = p): 2 (p - s - 1) + (v - 1) G warm-up chunk-forwards, capped at m v;
/// forwards run a group's micro-batches through chunk 0, then chunk 1, ...; backwards through the
/// chunks in reverse. Interleaving needs m to be a multiple of p (Megatron refuses m < G and a
/// remainder m mod G below p).
[[nodiscard]] inline std::vector<pipeline_op> stage_order(std::int64_t stages, std::int64_t chunks,
                                                          std::int64_t micro_batches,
                                                          std::int64_t stage) {
  if (stages < 1 || chunks < 1 || micro_batches < 0 || stage < 0 || stage >= stages)
    throw invalid_spec("stage_order: stage " + std::to_string(stage) + " of " +
                       std::to_string(stages) + " stages, " + std::to_string(chunks) + " chunks, " +
                       std::to_string(micro_batches) + " micro-batches");
  if (chunks > 1 && micro_batches % stages != 0)
    throw invalid_spec(
        "stage_order: interleaved 1F1B needs micro-batches = " + std::to_string(micro_batches) +
        " to be a multiple of the stages = " + std::to_string(stages));
  const std::int64_t m = micro_batches;
  const std::int64_t total = m * chunks;
  const std::int64_t group = chunks > 1 ? stages : 1;
  const auto nth = [&](std::int64_t k, bool backward) {
    const std::int64_t in_group = k % (group * chunks);
    std::int64_t chunk = in_group / group;
    if (backward) chunk = chunks - 1 - chunk;
    return pipeline_op{(k / (group * chunks)) * group + in_group % group, chunk, backward};
  };
  const std::int64_t warm_up =
      chunks > 1 ? std::min(2 * (stages - stage - 1) + (chunks - 1) * group, total)
                 : std::min(stages - stage - 1, m);
  std::vector<pipeline_op> order;
  order.reserve(static_cast<std::size_t>(2 * total));
  for (std::int64_t k = 0; k < warm_up; ++k) order.push_back(nth(k, false));
  for (std::int64_t k = 0; k < total - warm_up; ++k) {
    order.push_back(nth(warm_up + k, false));
    order.push_back(nth(k, true));
  }
  for (std::int64_t k = total - warm_up; k < total; ++k) order.push_back(nth(k, true));
  return order;
}

/// One micro-batch's work: per chunk (virtual stage c p + s for chunk c on stage s) its forward
/// and backward seconds, the bytes it keeps from that chunk's forward until its backward and
/// the bytes the running op adds on top; the seconds of one activation (or gradient) send
/// between consecutive chunks. It runs at slot `slot` of pipelines [first_pipeline,
/// first_pipeline + degree).
struct pipeline_work {
  std::int64_t first_pipeline = 0;
  std::int64_t degree = 1;
  std::int64_t slot = 0;
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> stored_bytes;
  std::vector<double> working_bytes;
  double p2p_seconds = 0;
};

/// cell[r slots + j]: the index of the item that runs at slot j of pipeline r, for items with
/// first_pipeline, degree and slot (pipeline_work, pipeline_micro_batch), named `item_name` k
/// (`items_name` in the plural). Throws invalid_plan, prefixed with `who`, naming an item outside
/// the pipelines x slots, or a cell covered twice or not at all (every cell must be covered exactly
/// once).
template <class Item>
[[nodiscard]] std::vector<std::int64_t> cover_cells(std::string_view who, std::int64_t pipelines,
                                                    std::int64_t slots, std::span<const Item> items,
                                                    std::string_view item_name,
                                                    std::string_view items_name) {
  const auto bad = [&](const std::string& text) {
    throw invalid_plan(std::string(who) + ": " + text);
  };
  const auto cell_name = [&](std::int64_t r, std::int64_t j) {
    return "pipeline " + std::to_string(r) + " slot " + std::to_string(j);
  };
  std::vector<std::int64_t> cell(static_cast<std::size_t>(pipelines * slots), -1);
  for (std::size_t k = 0; k < items.size(); ++k) {
    const auto& item = items[k];
    const auto name = std::string(item_name) + " " + std::to_string(k);
    if (item.degree < 1 || item.first_pipeline < 0 ||
        item.first_pipeline > pipelines - item.degree || item.slot < 0 || item.slot >= slots)
      bad(name + " runs on pipelines [" + std::to_string(item.first_pipeline) + ", " +
          std::to_string(item.first_pipeline + item.degree) + ") at slot " +
          std::to_string(item.slot) + ", outside " + std::to_string(pipelines) + " pipelines x " +
          std::to_string(slots) + " slots");
    for (std::int64_t r = item.first_pipeline; r < item.first_pipeline + item.degree; ++r) {
      auto& at = cell[static_cast<std::size_t>(r * slots + item.slot)];
      if (at >= 0)
        bad(cell_name(r, item.slot) + " is covered by more than one of the " +
            std::string(items_name) + ", must be 1 (" + std::string(item_name) + " " +
            std::to_string(at) + " and " + std::to_string(k) + ")");
      at = static_cast<std::int64_t>(k);
    }
  }
  for (std::size_t c = 0; c < cell.size(); ++c)
    if (cell[c] < 0)
      bad(cell_name(static_cast<std::int64_t>(c) / slots, static_cast<std::int64_t>(c) % slots) +
          " is covered by 0 " + std::string(items_name) + ", must be 1 (no work)");
  return cell;
}

/// D pipelines of p stages and v chunks, each running `slots` micro-batches in the same slot
/// order (one micro-batch count for every pipeline, as Megatron-LM's schedules need); every
/// (pipeline, slot) is covered by exactly one work item. Each stage then syncs its gradients
/// over the pipelines (sync_seconds) and holds state_bytes besides activations.
struct pipeline_instance {
  std::int64_t stages = 1;
  std::int64_t virtual_stages = 1;
  std::int64_t pipelines = 1;
  std::int64_t slots = 0;
  std::vector<pipeline_work> work;
  std::vector<double> state_bytes;   ///< per stage
  std::vector<double> sync_seconds;  ///< per stage, after its last op on every pipeline

  [[nodiscard]] std::int64_t chunks() const noexcept { return stages * virtual_stages; }

  /// The work item at (pipeline, slot), or throws invalid_plan naming a cell that is covered
  /// twice or not at all, or a work item out of range.
  [[nodiscard]] std::vector<std::int64_t> cells() const {
    const auto bad = [](const std::string& text) { throw invalid_plan("pipeline: " + text); };
    if (stages < 1 || virtual_stages < 1 || pipelines < 1 || slots < 0)
      bad("stages, virtual_stages and pipelines must be >= 1 and slots >= 0");
    if (state_bytes.size() != static_cast<std::size_t>(stages) ||
        sync_seconds.size() != static_cast<std::size_t>(stages))
      bad("state_bytes and sync_seconds need one entry per stage");
    const auto n = static_cast<std::size_t>(chunks());
    for (std::size_t w = 0; w < work.size(); ++w) {
      const auto& item = work[w];
      if (item.forward.size() != n || item.backward.size() != n || item.stored_bytes.size() != n ||
          item.working_bytes.size() != n)
        bad("work " + std::to_string(w) + " needs one entry per chunk (" + std::to_string(n) + ")");
    }
    return cover_cells("pipeline", pipelines, slots, std::span<const pipeline_work>(work), "work",
                       "work items");
  }
};

/// One op as the executor ran it on one device (pipeline r, stage s at index r p + s): the work
/// item (pipeline_instance::work), its chunk (virtual stage) and direction, start and end.
struct pipeline_op_record {
  std::int64_t device = 0;
  std::int64_t work = 0;
  std::int64_t virtual_stage = 0;
  bool backward = false;
  double start = 0;
  double end = 0;
};

/// What the executor found: when the last op and the last gradient sync end, each device's
/// (pipeline r, stage s at index r p + s) busy seconds, last-op end and peak bytes, and every
/// op it ran.
struct pipeline_timeline {
  double makespan = 0;          ///< the last stage's gradient sync ends
  double pipeline_seconds = 0;  ///< the last op ends
  std::vector<double> busy;
  std::vector<double> finish;
  std::vector<double> peak_bytes;
  std::vector<pipeline_op_record> ops;

  /// Idle share of the devices until the last op ends: warm-up, cool-down and the stalls that
  /// unequal micro-batches make.
  [[nodiscard]] double bubble_fraction() const noexcept {
    double total = 0;
    for (const double b : busy) total += b;
    const double span = pipeline_seconds * static_cast<double>(busy.size());
    return span > 0 ? 1.0 - total / span : 0.0;
  }
  [[nodiscard]] double peak() const noexcept {
    return peak_bytes.empty() ? 0.0 : *std::max_element(peak_bytes.begin(), peak_bytes.end());
  }
};

/// Times the instance: every device runs stage_order's ops in turn; a forward starts once the
/// previous chunk's forward of its micro-batch has arrived (p2p_seconds later), a backward once
/// the next chunk's backward has (the last chunk's backward follows its own forward); an op of
/// a micro-batch of degree d starts when all d of its devices are free. Peak bytes per device:
/// its state, plus the stored bytes of the micro-batches it holds and the running op's.
[[nodiscard]] inline pipeline_timeline simulate_pipeline(const pipeline_instance& in) {
  const auto cell = in.cells();
  const std::int64_t p = in.stages;
  const std::int64_t chunks = in.chunks();
  const std::int64_t d = in.pipelines;
  const std::int64_t m = in.slots;
  std::vector<std::vector<pipeline_op>> order;
  for (std::int64_t s = 0; s < p; ++s) order.push_back(stage_order(p, in.virtual_stages, m, s));
  const auto index = [&](std::int64_t w, std::int64_t vs) {
    return static_cast<std::size_t>(w * chunks + vs);
  };
  constexpr double not_yet = -1;
  std::vector<double> forward_end(in.work.size() * static_cast<std::size_t>(chunks), not_yet);
  std::vector<double> backward_end(forward_end.size(), not_yet);
  const auto devices = static_cast<std::size_t>(d * p);
  std::vector<std::size_t> position(devices, 0);
  pipeline_timeline out;
  out.ops.reserve(devices * static_cast<std::size_t>(2 * m * in.virtual_stages));
  out.busy.assign(devices, 0.0);
  out.finish.assign(devices, 0.0);
  out.peak_bytes.assign(devices, 0.0);
  const std::size_t ops_per_device = static_cast<std::size_t>(2 * m * in.virtual_stages);
  std::size_t remaining = devices * ops_per_device;
  while (remaining > 0) {
    bool progress = false;
    for (std::int64_t s = 0; s < p; ++s) {
      const auto& ops = order[static_cast<std::size_t>(s)];
      for (std::int64_t r = 0; r < d; ++r) {
        auto& at = position[static_cast<std::size_t>(r * p + s)];
        while (at < ops.size()) {
          const auto& op = ops[at];
          const auto w = cell[static_cast<std::size_t>(r * m + op.slot)];
          const auto& item = in.work[static_cast<std::size_t>(w)];
          if (r != item.first_pipeline) break;  // the first pipeline runs the shared op
          bool members_here = true;
          for (std::int64_t q = r + 1; q < r + item.degree; ++q)
            members_here = members_here && position[static_cast<std::size_t>(q * p + s)] == at;
          if (!members_here) break;
          const std::int64_t vs = op.chunk * p + s;
          double ready = 0;
          if (!op.backward && vs > 0) {
            const double before = forward_end[index(w, vs - 1)];
            if (before == not_yet) break;
            ready = before + item.p2p_seconds;
          } else if (op.backward) {
            const double after =
                vs == chunks - 1 ? forward_end[index(w, vs)] : backward_end[index(w, vs + 1)];
            if (after == not_yet) break;
            ready = after + (vs == chunks - 1 ? 0.0 : item.p2p_seconds);
          }
          double start = ready;
          for (std::int64_t q = r; q < r + item.degree; ++q)
            start = std::max(start, out.finish[static_cast<std::size_t>(q * p + s)]);
          const auto v = static_cast<std::size_t>(vs);
          const double seconds = op.backward ? item.backward[v] : item.forward[v];
          (op.backward ? backward_end : forward_end)[index(w, vs)] = start + seconds;
          for (std::int64_t q = r; q < r + item.degree; ++q) {
            const auto device = static_cast<std::size_t>(q * p + s);
            out.finish[device] = start + seconds;
            out.busy[device] += seconds;
            if (q > r) ++position[device];
            out.ops.push_back({q * p + s, w, vs, op.backward, start, start + seconds});
          }
          ++at;
          remaining -= static_cast<std::size_t>(item.degree);
          progress = true;
        }
      }
    }
    if (!progress)
      throw invalid_plan("pipeline: the schedule deadlocks with " + std::to_string(remaining) +
                         " ops left (micro-batches spanning pipelines in different slots?)");
  }
  for (std::int64_t s = 0; s < p; ++s) {
    double last = 0;
    for (std::int64_t r = 0; r < d; ++r) {
      const auto device = static_cast<std::size_t>(r * p + s);
      last = std::max(last, out.finish[device]);
      double held = 0;
      double peak = 0;
      for (const auto& op : order[static_cast<std::size_t>(s)]) {
        const auto w = cell[static_cast<std::size_t>(r * m + op.slot)];
        const auto& item = in.work[static_cast<std::size_t>(w)];
        const auto v = static_cast<std::size_t>(op.chunk * p + s);
        if (!op.backward) held += item.stored_bytes[v];
        peak = std::max(peak, held + item.working_bytes[v]);
        if (op.backward) held -= item.stored_bytes[v];
      }
      out.peak_bytes[device] = in.state_bytes[static_cast<std::size_t>(s)] + peak;
    }
    out.pipeline_seconds = std::max(out.pipeline_seconds, last);
    out.makespan = std::max(out.makespan, last + in.sync_seconds[static_cast<std::size_t>(s)]);
  }
  return out;
}

/// A lower bound on the makespan of the instance's micro-batches under any slot order and any
/// per-stage op order (and so any 1F1B, interleaved or other schedule that keeps a micro-batch's
/// chunks in sequence): for every pipeline, the longest micro-batch's path through every chunk
/// forward and back, then stage 0's sync; and for every stage s the flow-shop machine bound
/// (Taillard 1993) — the cheapest forward path to chunk s, the stage's total work, then either
/// its own sync or the cheapest backward path from chunk s down to chunk 0 and stage 0's sync.
/// Pipelines that a micro-batch couples only wait longer, so the largest over pipelines holds.
[[nodiscard]] inline double pipeline_lower_bound(const pipeline_instance& in) {
  const auto cell = in.cells();
  const std::int64_t p = in.stages;
  const std::int64_t chunks = in.chunks();
  double bound = 0;
  for (std::int64_t r = 0; r < in.pipelines; ++r) {
    std::vector<double> load(static_cast<std::size_t>(p), 0.0);
    std::vector<double> head(static_cast<std::size_t>(p), std::numeric_limits<double>::infinity());
    std::vector<double> tail(head);
    for (std::int64_t j = 0; j < in.slots; ++j) {
      const auto& item =
          in.work[static_cast<std::size_t>(cell[static_cast<std::size_t>(r * in.slots + j)])];
      double path = 2.0 * static_cast<double>(chunks - 1) * item.p2p_seconds;
      double forward = 0;
      double backward = 0;
      for (std::int64_t vs = 0; vs < chunks; ++vs) {
        const auto v = static_cast<std::size_t>(vs);
        path += item.forward[v] + item.backward[v];
        load[static_cast<std::size_t>(vs % p)] += item.forward[v] + item.backward[v];
        if (vs < p) {
          const double hops = static_cast<double>(vs) * item.p2p_seconds;
          head[v] = std::min(head[v], forward + hops);
          tail[v] = std::min(tail[v], backward + hops);
          forward += item.forward[v];
          backward += item.backward[v];
        }
      }
      bound = std::max(bound, path + in.sync_seconds[0]);
    }
    if (in.slots == 0) continue;
    for (std::int64_t s = 0; s < p; ++s) {
      const auto k = static_cast<std::size_t>(s);
      bound = std::max(
          bound, head[k] + load[k] + std::max(in.sync_seconds[k], tail[k] + in.sync_seconds[0]));
    }
  }
  return bound;
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
