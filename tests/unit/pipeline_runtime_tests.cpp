// run_pipeline_step (dcp/runtime/pipeline_step.hpp) in one process: a recording executor for
// every rank of small plans, then a replay of all ranks together in which a receive waits for
// its send and a context-parallel op for all its members. Checks the op order, that every
// message finds its match, causality between a micro-batch's chunks, and the errors.

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/pipeline.hpp"
#include "dcp/runtime/pipeline_step.hpp"

#include "../support/errors.hpp"

using namespace dcp;

namespace {

using dcp::test::contains;
using dcp::test::message_of;

enum class event_kind { forward, backward, send, receive };

/// One call the executor saw.
struct event {
  event_kind kind = event_kind::forward;
  pipeline_chunk_task task;
  pipeline_transfer transfer;
};

/// Models pipeline_executor: records every call and never waits.
struct recording_executor {
  std::vector<event> events;
  std::int64_t fail_at = -1;  ///< throws at this forward, counted from 0

  void forward(const pipeline_chunk_task& c) {
    if (fail_at == 0) throw std::runtime_error("out of memory in attention");
    --fail_at;
    events.push_back({event_kind::forward, c, {}});
  }
  void backward(const pipeline_chunk_task& c) { events.push_back({event_kind::backward, c, {}}); }
  void send(const pipeline_chunk_task& c, const pipeline_transfer& t) {
    events.push_back({event_kind::send, c, t});
  }
  void receive(const pipeline_chunk_task& c, const pipeline_transfer& t) {
    events.push_back({event_kind::receive, c, t});
  }
};
static_assert(pipeline_executor<recording_executor>);

// Near misses: each lacks one requirement.
struct without_backward {
  void forward(const pipeline_chunk_task&) {}
  void send(const pipeline_chunk_task&, const pipeline_transfer&) {}
  void receive(const pipeline_chunk_task&, const pipeline_transfer&) {}
};
struct without_receive {
  void forward(const pipeline_chunk_task&) {}
  void backward(const pipeline_chunk_task&) {}
  void send(const pipeline_chunk_task&, const pipeline_transfer&) {}
};
struct send_without_transfer {
  void forward(const pipeline_chunk_task&) {}
  void backward(const pipeline_chunk_task&) {}
  void send(const pipeline_chunk_task&) {}
  void receive(const pipeline_chunk_task&, const pipeline_transfer&) {}
};
static_assert(!pipeline_chunk_runner<without_backward>);
static_assert(pipeline_transport<without_backward>);
static_assert(!pipeline_executor<without_receive>);
static_assert(!pipeline_transport<send_without_transfer>);
static_assert(pipeline_chunk_runner<send_without_transfer>);

pipeline_micro_batch micro_batch(std::vector<std::uint64_t> ids, std::int64_t tokens,
                                 std::int64_t first, std::int64_t degree, std::int64_t slot,
                                 std::int64_t chunks) {
  pipeline_micro_batch mb;
  mb.sample_ids = std::move(ids);
  mb.shape.samples = static_cast<std::int64_t>(mb.sample_ids.size());
  mb.shape.tokens = tokens;
  mb.first_pipeline = first;
  mb.degree = degree;
  mb.slot = slot;
  mb.recompute.assign(static_cast<std::size_t>(chunks), recompute_setting{});
  return mb;
}

/// Two stages, two pipelines (4 GPUs), v chunks per stage, 3 slots (4 interleaved): a
/// micro-batch spanning both pipelines at slot 1, one per pipeline elsewhere, the last slot of
/// pipeline 1 empty.
pipeline_plan small_plan(std::int64_t virtual_stages) {
  pipeline_plan plan;
  plan.grid = {1, 2, virtual_stages};
  plan.pipelines = 2;
  plan.slots = virtual_stages > 1 ? 4 : 3;
  const auto chunks = plan.grid.chunks();
  std::uint64_t id = 0;
  for (std::int64_t slot = 0; slot < plan.slots; ++slot) {
    if (slot == 1) {
      plan.micro_batches.push_back(micro_batch({id, id + 1}, 300, 0, 2, slot, chunks));
      id += 2;
      continue;
    }
    for (std::int64_t r = 0; r < 2; ++r) {
      if (slot == plan.slots - 1 && r == 1) {
        plan.micro_batches.push_back(micro_batch({}, 0, r, 1, slot, chunks));
        continue;
      }
      plan.micro_batches.push_back(micro_batch({id}, 100 + 10 * slot + r, r, 1, slot, chunks));
      ++id;
    }
  }
  plan.micro_batches.front().recompute.back() = recompute_setting::full(4);
  return plan;
}

/// A plan from the real planner: Llama-3-8B on 8 GPUs as (tensor 2, pipeline 2) x 2 pipelines.
pipeline_plan planned(std::int64_t virtual_stages) {
  const pipeline_planner planner(pipeline_cost_model(models::llama3_8b(),
                                                     hgx_cluster(1, gpus::h100_sxm()),
                                                     training_spec{}, {2, 2, virtual_stages}));
  std::vector<sample> batch;
  for (std::uint64_t id = 0; id < 12; ++id)
    batch.push_back(text_sample(id, 1024 + 3000 * static_cast<std::int64_t>(id % 5)));
  batch.push_back(text_sample(12, 65536));
  return planner.plan(batch);
}

std::int64_t gpus_of(const pipeline_plan& plan) {
  return plan.grid.tensor * plan.grid.pipeline * plan.pipelines;
}

std::vector<recording_executor> record_every_rank(const pipeline_plan& plan) {
  std::vector<recording_executor> out(static_cast<std::size_t>(gpus_of(plan)));
  for (std::int64_t rank = 0; rank < gpus_of(plan); ++rank)
    run_pipeline_step(plan, rank, gpus_of(plan), out[static_cast<std::size_t>(rank)]);
  return out;
}

/// What the replay found: when (a count of the chunks run before it) each chunk ran, per
/// (micro-batch, virtual stage, backward, tensor, pipeline), and what went wrong.
struct replay_result {
  std::map<std::tuple<std::size_t, std::int64_t, bool, std::int64_t, std::int64_t>, std::int64_t>
      ran_at;
  std::vector<std::string> problems;
  bool finished = false;
};

/// Runs every rank's recorded calls together: a send always completes; a receive completes once
/// its message was sent (same sender, receiver and tag) and checks what it carries; a forward or
/// backward completes when every member of its group is at the same op. Stops when all are done
/// or none can move (a deadlock).
replay_result replay(const pipeline_plan& plan, const std::vector<recording_executor>& ranks) {
  replay_result out;
  const std::int64_t world = gpus_of(plan);
  std::vector<std::size_t> at(ranks.size(), 0);
  // (from, to, tag) -> the sender's task
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, event> in_flight;
  const auto done = [&](std::int64_t r) {
    return at[static_cast<std::size_t>(r)] >= ranks[static_cast<std::size_t>(r)].events.size();
  };
  const auto current = [&](std::int64_t r) -> const event& {
    return ranks[static_cast<std::size_t>(r)].events[at[static_cast<std::size_t>(r)]];
  };
  const auto problem = [&](const std::string& text) { out.problems.push_back(text); };
  std::int64_t clock = 0;
  for (std::int64_t round = 1;; ++round) {
    bool moved = false;
    for (std::int64_t r = 0; r < world; ++r) {
      while (!done(r)) {
        const auto& e = current(r);
        if (e.kind == event_kind::send) {
          const auto key = std::tuple{r, e.transfer.peer, e.transfer.tag};
          if (in_flight.contains(key))
            problem("rank " + std::to_string(r) + " sent tag " + std::to_string(e.transfer.tag) +
                    " twice");
          in_flight[key] = e;
        } else if (e.kind == event_kind::receive) {
          const auto key = std::tuple{e.transfer.peer, r, e.transfer.tag};
          const auto sent = in_flight.find(key);
          if (sent == in_flight.end()) break;  // waits
          const auto& from = sent->second;
          const bool activation = e.transfer.payload == pipeline_payload::activation;
          if (from.transfer.payload != e.transfer.payload ||
              from.task.micro_batch_index != e.task.micro_batch_index ||
              from.task.virtual_stage != e.task.virtual_stage + (activation ? -1 : 1) ||
              from.task.group.member != e.task.group.member)
            problem("rank " + std::to_string(r) + " received tag " +
                    std::to_string(e.transfer.tag) + " from a mismatched send");
          in_flight.erase(sent);
        } else {
          // A collective over the group: every member must be at the same op.
          const bool backward = e.kind == event_kind::backward;
          bool all_here = true;
          for (const auto member : e.task.group.ranks) {
            if (done(member)) {
              all_here = false;
              break;
            }
            const auto& theirs = current(member);
            all_here = all_here && theirs.kind == e.kind &&
                       theirs.task.micro_batch_index == e.task.micro_batch_index &&
                       theirs.task.virtual_stage == e.task.virtual_stage;
          }
          if (!all_here) break;
          ++clock;
          for (const auto member : e.task.group.ranks) {
            const auto where = plan.schedule_of(member).at;
            out.ran_at[{e.task.micro_batch_index, e.task.virtual_stage, backward, where.tensor,
                        where.pipeline}] = clock;
            if (member != r) ++at[static_cast<std::size_t>(member)];
          }
        }
        ++at[static_cast<std::size_t>(r)];
        moved = true;
      }
    }
    bool all_done = true;
    for (std::int64_t r = 0; r < world; ++r) all_done = all_done && done(r);
    if (all_done) {
      out.finished = true;
      break;
    }
    if (!moved) {
      problem("deadlock in round " + std::to_string(round));
      break;
    }
  }
  if (!in_flight.empty())
    problem(std::to_string(in_flight.size()) + " messages were sent and never received");
  return out;
}

/// Every rank's forwards and backwards are its stage's order, and each task describes its op.
void check_orders(const pipeline_plan& plan, const std::vector<recording_executor>& ranks) {
  const auto scales = pipeline_loss_scales(plan);
  for (std::int64_t rank = 0; rank < gpus_of(plan); ++rank) {
    const auto mine = plan.schedule_of(rank);
    std::vector<pipeline_op> ops;
    for (const auto& e : ranks[static_cast<std::size_t>(rank)].events) {
      if (e.kind != event_kind::forward && e.kind != event_kind::backward) continue;
      ops.push_back({e.task.slot, e.task.chunk, e.kind == event_kind::backward});
      const auto& t = e.task;
      CAPTURE(rank);
      CHECK(t.micro_batch == &plan.micro_batches[t.micro_batch_index]);
      CHECK(t.micro_batch->slot == t.slot);
      CHECK(t.virtual_stage == t.chunk * plan.grid.pipeline + mine.at.stage);
      CHECK(t.first == (t.virtual_stage == 0));
      CHECK(t.last == (t.virtual_stage == plan.grid.chunks() - 1));
      CHECK(t.recompute == t.micro_batch->recompute[static_cast<std::size_t>(t.virtual_stage)]);
      CHECK(t.loss_scale == scales[t.micro_batch_index]);
      CHECK(t.group.degree == t.micro_batch->degree);
      REQUIRE(t.group.ranks.size() == static_cast<std::size_t>(t.group.degree));
      CHECK(t.group.ranks[static_cast<std::size_t>(t.group.member)] == rank);
    }
    CAPTURE(rank);
    CHECK(ops ==
          stage_order(plan.grid.pipeline, plan.grid.virtual_stages, plan.slots, mine.at.stage));
  }
}

/// A micro-batch's forward at virtual stage k ran after its forward at k - 1 on the same
/// (tensor, pipeline); its backward at k after the backward at k + 1, the last after the forward.
void check_causality(const pipeline_plan& plan, const replay_result& result) {
  const std::int64_t chunks = plan.grid.chunks();
  std::int64_t chunk_runs = 0;
  for (std::size_t k = 0; k < plan.micro_batches.size(); ++k) {
    const auto& mb = plan.micro_batches[k];
    for (std::int64_t tensor = 0; tensor < plan.grid.tensor; ++tensor)
      for (std::int64_t r = mb.first_pipeline; r < mb.first_pipeline + mb.degree; ++r) {
        const auto when = [&](std::int64_t vs, bool backward) {
          const auto found = result.ran_at.find({k, vs, backward, tensor, r});
          return found == result.ran_at.end() ? std::int64_t{-1} : found->second;
        };
        CAPTURE(k);
        CAPTURE(r);
        for (std::int64_t vs = 0; vs < chunks; ++vs) {
          CAPTURE(vs);
          REQUIRE(when(vs, false) > 0);
          REQUIRE(when(vs, true) > 0);
          if (vs > 0) CHECK(when(vs, false) > when(vs - 1, false));
          if (vs + 1 < chunks) CHECK(when(vs, true) > when(vs + 1, true));
          chunk_runs += 2;
        }
        CHECK(when(chunks - 1, true) > when(chunks - 1, false));
      }
  }
  CHECK(static_cast<std::size_t>(chunk_runs) == result.ran_at.size());
}

void check_step(const pipeline_plan& plan) {
  const auto ranks = record_every_rank(plan);
  check_orders(plan, ranks);
  const auto result = replay(plan, ranks);
  for (const auto& p : result.problems) FAIL_CHECK(p);
  REQUIRE(result.finished);
  check_causality(plan, result);
}

}  // namespace

TEST_CASE("PipelineRuntime.Order.one_f_one_b_is_stage_order_and_every_message_matches") {
  check_step(small_plan(1));
}

TEST_CASE("PipelineRuntime.Order.interleaved_hands_the_last_stage_to_stage_zero") {
  const auto plan = small_plan(2);
  check_step(plan);
  // Stage 1's chunk 0 (virtual stage 1) sends its activation to stage 0's chunk 1.
  const auto ranks = record_every_rank(plan);
  bool found = false;
  for (const auto& e : ranks[2].events)  // rank 2: pipeline 0 of stage 1
    if (e.kind == event_kind::send && e.task.virtual_stage == 1 &&
        e.transfer.payload == pipeline_payload::activation) {
      CHECK(e.transfer.peer == 0);
      found = true;
    }
  CHECK(found);
}

TEST_CASE("PipelineRuntime.Order.planner_plans_with_tensor_ranks_replay_without_deadlock") {
  for (const std::int64_t v : {1, 2}) {
    CAPTURE(v);
    const auto plan = planned(v);
    bool spans = false;
    for (const auto& mb : plan.micro_batches) spans = spans || mb.degree > 1;
    CHECK(spans);  // the 64K sample runs over both pipelines
    check_step(plan);
  }
}

TEST_CASE("PipelineRuntime.Transfer.tags_are_unique_per_pair_and_below_the_bound") {
  const auto plan = small_plan(2);
  const auto ranks = record_every_rank(plan);
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int> seen;
  for (std::int64_t r = 0; r < gpus_of(plan); ++r)
    for (const auto& e : ranks[static_cast<std::size_t>(r)].events)
      if (e.kind == event_kind::send) {
        CHECK(e.transfer.tag >= 0);
        CHECK(e.transfer.tag < 2 * plan.slots * plan.grid.chunks());
        CHECK(++seen[{r, e.transfer.peer, e.transfer.tag}] == 1);
      }
  // Per micro-batch and pipeline: p v - 1 hops, each an activation and a gradient.
  std::int64_t cells = 0;
  for (const auto& mb : plan.micro_batches) cells += mb.degree;
  CHECK(static_cast<std::int64_t>(seen.size()) == cells * 2 * (plan.grid.chunks() - 1));
}

TEST_CASE("PipelineRuntime.Transfer.group_and_transfer_print") {
  std::ostringstream text;
  text << pipeline_group{0, 1, 2, 2, 1, {6, 7}} << ' '
       << pipeline_transfer{pipeline_payload::gradient, 3, 9};
  CHECK(text.str() ==
        "pipeline_group{stage=1, tensor=0, pipelines=[2, 4), member=1, ranks=6,7} "
        "pipeline_transfer{gradient, peer=3, tag=9}");
}

TEST_CASE("PipelineRuntime.LossScale.units_over_the_batch") {
  const auto plan = small_plan(1);
  const auto by_tokens = pipeline_loss_scales(plan);
  const auto by_samples = pipeline_loss_scales(plan, loss_normalisation::samples);
  double tokens_total = 0;
  double samples_total = 0;
  std::int64_t all_tokens = 0;
  for (const auto& mb : plan.micro_batches) all_tokens += mb.shape.tokens;
  for (std::size_t k = 0; k < plan.micro_batches.size(); ++k) {
    const auto& mb = plan.micro_batches[k];
    CHECK(by_tokens[k] ==
          doctest::Approx(static_cast<double>(mb.shape.tokens) / static_cast<double>(all_tokens)));
    CHECK(by_samples[k] ==
          doctest::Approx(static_cast<double>(mb.sample_ids.size()) / 5.0));  // 5 samples
    if (mb.sample_ids.empty()) CHECK(by_tokens[k] == 0.0);
    tokens_total += by_tokens[k];
    samples_total += by_samples[k];
  }
  CHECK(tokens_total == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(samples_total == doctest::Approx(1.0).epsilon(1e-12));
}

TEST_CASE("PipelineRuntime.Errors.world_size_and_rank_are_named") {
  const auto plan = small_plan(1);  // 4 GPUs
  recording_executor executor;
  auto message = message_of([&] { run_pipeline_step(plan, 0, 3, executor); });
  CAPTURE(message);
  CHECK(contains(message, "the plan is for 4 GPUs"));
  CHECK(contains(message, "tensor 1 x pipeline 2 x pipelines 2"));
  CHECK(contains(message, "the world has 3 ranks"));
  message = message_of([&] { run_pipeline_step(plan, 4, 4, executor); });
  CHECK(contains(message, "rank 4 is outside the world of 4 ranks"));
  message = message_of([&] { run_pipeline_step(plan, -1, 4, executor); });
  CHECK(contains(message, "rank -1"));
  CHECK_THROWS_AS(run_pipeline_step(plan, 0, 8, executor), invalid_plan);
  CHECK(executor.events.empty());  // nothing ran
}

TEST_CASE("PipelineRuntime.Errors.a_bad_plan_is_refused_before_any_op") {
  recording_executor executor;
  auto plan = small_plan(1);
  plan.micro_batches.pop_back();  // pipeline 1's last slot uncovered
  auto message = message_of([&] { run_pipeline_step(plan, 0, 4, executor); });
  CAPTURE(message);
  CHECK(contains(message, "pipeline 1 slot 2 is covered by 0 micro-batches"));
  plan = small_plan(1);
  plan.micro_batches[0].recompute.pop_back();
  message = message_of([&] { run_pipeline_step(plan, 0, 4, executor); });
  CHECK(contains(message, "micro-batch 0 has 1 recompute settings"));
  plan = small_plan(2);
  plan.slots = 3;
  message = message_of([&] { run_pipeline_step(plan, 0, 4, executor); });
  CHECK(contains(message, "slots = 3"));
  CHECK(contains(message, "multiple of pipeline = 2"));
  CHECK(executor.events.empty());
}

TEST_CASE("PipelineRuntime.Errors.an_executor_failure_names_rank_op_and_micro_batch") {
  const auto plan = small_plan(1);
  recording_executor executor;
  executor.fail_at = 1;  // rank 0's second forward: slot 1, the spanning micro-batch
  try {
    run_pipeline_step(plan, 0, 4, executor);
    FAIL("no step_error");
  } catch (const step_error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.rank() == 0);
    CHECK(e.sequence() == 1);
    CHECK(contains(message, "rank 0 failed in op 1, the forward of micro-batch 2 (slot 1)"));
    CHECK(contains(message, "out of memory in attention"));
  }
}
