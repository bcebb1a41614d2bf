"""dcp.torch.run_step on 4 Gloo processes: the plan's checks, every sample once, loss scaling,
lockstep plans whose every micro-step runs a world collective (as FSDP and ZeRO-3 do), errors
and out-of-memory re-planning."""

import unittest

try:
    import torch
except ImportError:  # dcp.torch is tested where PyTorch is installed
    raise unittest.SkipTest("PyTorch is not installed")
import torch.distributed as dist

import dcp
import dcp.torch
from _processes import run_on_ranks

RANKS = 4


def scheduler(world: int, model=None, gpus_per_node: int = 0, **training) -> dcp.Scheduler:
    cluster = dcp.ClusterSpec(gpus=world, gpus_per_node=gpus_per_node or world, gpu=dcp.gpus.h200_sxm())
    return dcp.Scheduler(model or dcp.models.llama3_8b(), cluster, dcp.TrainingSpec(**training))


#: Three long documents and many short ones: sequence-parallel groups of every degree and
#: several micro-steps on every rank.
BATCH = [131_072, 65_536, 40_000] + [3_000 + 1_000 * i for i in range(40)]
#: A batch whose Qwen2.5-7B plan on 4 H200 gives ranks different micro-step counts without
#: lockstep (1, 1, 2 and 2), and whose ZeRO-3 plan pads ranks 0 and 1 with empty micro-steps.
UNEQUAL = [8_000, 4_000, 2_000, 2_000, 4_000, 4_000, 1_000, 16_000, 30_000, 8_000]


def counts(plan) -> list:
    return [len(plan.steps_of(r)) for r in range(plan.gpus)]


def weight_loss(weight: torch.Tensor):
    """A micro-step whose loss is weight x (tokens this rank holds): summed over the world, the
    scaled gradient is the sum of the micro-steps' loss scales."""
    return lambda context: weight * float(context.layout.local_tokens)


def body_sums_loss_scales(rank: int, ranks: int, reduction: str) -> None:
    cache = dcp.torch.GroupCache().warm_up()
    plan = scheduler(ranks).plan(BATCH)
    weight = torch.zeros((), dtype=torch.float64, requires_grad=True)
    seen = []
    record = weight_loss(weight)

    def micro_step(context):
        seen.append((context.index, context.sample_ids, context.layout.local_tokens, context.groups.member))
        return record(context)

    report = dcp.torch.run_step(plan, micro_step, batch=BATCH, cache=cache, gradient_reduction=reduction)
    assert report.indices == list(plan.steps_of(rank)), (report.indices, plan.steps_of(rank))
    gradient = weight.grad.clone()
    dist.all_reduce(gradient)
    expected = float(ranks) if reduction == "mean" else 1.0
    assert abs(float(gradient) - expected) < 1e-12, f"summed gradient {float(gradient)}, expected {expected}"

    every = [None] * ranks
    dist.all_gather_object(every, seen)
    by_step = {}
    for records in every:
        for index, ids, tokens, member in records:
            by_step.setdefault(index, []).append((ids, tokens, member))
    assert sorted(by_step) == list(range(len(plan.micro_steps))), "a micro-step ran on no rank"
    trained = []
    for index, members in by_step.items():
        step = plan.micro_steps[index]
        assert sorted(m for _, _, m in members) == list(range(step.degree)), (index, members)
        assert sum(t for _, t, _ in members) == step.tokens, (index, members, step.tokens)
        trained += list(members[0][0])
    assert sorted(trained) == list(range(len(BATCH))), "a sample was not trained exactly once"


def body_lockstep_collectives(rank: int, ranks: int, zero_stage: int, lockstep: str) -> None:
    """Every micro-step all-reduces over the world, as ZeRO-3 and FSDP gather parameters."""
    cache = dcp.torch.GroupCache().warm_up()
    plan = scheduler(ranks, dcp.models.qwen25_7b(), zero_stage=zero_stage, lockstep=lockstep).plan(UNEQUAL)
    weight = torch.zeros((), dtype=torch.float64, requires_grad=True)
    loss = weight_loss(weight)

    def gathering(context):
        gathered = weight * 1.0
        dist.all_reduce(gathered.detach())
        return loss(context)

    ran = []

    def recording(context):
        ran.append(context.empty)
        return gathering(context)

    report = dcp.torch.run_step(plan, recording, batch=UNEQUAL, cache=cache)
    assert len(ran) == len(report.indices) == len(plan.steps_of(rank)), (ran, report.indices)
    empty = [plan.micro_steps[i] for i in report.indices if not plan.micro_steps[i].sample_ids]
    assert all(m.loss_scale == 0 for m in empty), "an empty micro-step with a loss scale"
    if plan.lockstep:
        assert len(set(counts(plan))) == 1, f"lockstep plan with micro-step counts {counts(plan)}"
        every = [None] * ranks
        dist.all_gather_object(every, sum(ran))
        assert sum(every) > 0, "the lockstep plan has no empty micro-step: the test would prove less"


def body_refuses_other_world(rank: int, ranks: int) -> None:
    cache = dcp.torch.GroupCache()
    plan = scheduler(2 * ranks).plan(BATCH)
    try:
        dcp.torch.run_step(plan, lambda c: None, batch=BATCH, cache=cache)
    except dcp.InvalidPlan as e:
        assert f"for {2 * ranks} GPUs" in str(e) and f"{ranks} ranks" in str(e), str(e)
    else:
        raise AssertionError("a plan for another world ran")


def body_names_failing_micro_step(rank: int, ranks: int) -> None:
    cache = dcp.torch.GroupCache()
    plan = scheduler(ranks).plan([1_000] * ranks)  # one degree-1 micro-step per rank
    failing = plan.micro_steps[plan.steps_of(rank)[0]]

    def broken(context):
        raise KeyError("no such token")

    try:
        dcp.torch.run_step(plan, broken, batch=[1_000] * ranks, cache=cache)
    except dcp.Error as e:
        assert f"rank {rank} failed in micro-step {failing.sequence}" in str(e), str(e)
        assert "no such token" in str(e), str(e)
    else:
        raise AssertionError("the micro-step's error was lost")


def body_replans_out_of_memory(rank: int, ranks: int) -> None:
    cache = dcp.torch.GroupCache()
    cluster = dcp.ClusterSpec(gpus=ranks, gpus_per_node=ranks, gpu=dcp.gpus.h200_sxm())
    calibrated = dcp.CalibratedScheduler(dcp.models.llama3_8b(), cluster)
    batch = [20_000] * (2 * ranks)
    weight = torch.zeros((), dtype=torch.float64, requires_grad=True)
    attempts, discarded = [0], [0]
    loss = weight_loss(weight)

    def first_plan_runs_out(context):
        if attempts[0] == 0 and context.index == 0:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (raised by the test)")
        return loss(context)

    def discard():
        discarded[0] += 1
        attempts[0] += 1
        weight.grad = None

    result = dcp.torch.run_calibrated_step(calibrated, batch, first_plan_runs_out, cache=cache,
                                           discard_gradients=discard)
    assert result.attempts == 2 and result.out_of_memory == 1, (result.attempts, result.out_of_memory)
    assert discarded[0] == 1, discarded
    assert len(result.observations) == len(result.plan.micro_steps)
    assert all(o.report.seconds > 0 for o in result.observations), "a micro-step was not measured"


def body_bf16_attention(rank: int, ranks: int, style: str) -> None:
    """bf16 micro-steps of every degree in `style` against the same attention in float64, with
    a cache that was not warmed up (run_step makes the groups the plan needs)."""
    cache = dcp.torch.GroupCache()
    batch = [70_000, 40_000, 9_000, 3_000]
    # Hybrid needs node-local Ulysses blocks smaller than the group: nodes of 2 GPUs.
    plan = scheduler(ranks, gpus_per_node=2 if style == "hybrid" else 0, sp=style).plan(batch)
    tokens_of = {i: n // 1_000 for i, n in enumerate(batch)}  # 70, 40, 9 and 3 tokens
    generator = torch.Generator().manual_seed(11)
    packed = {i: torch.randn(tokens_of[i], 3, 4, 8, generator=generator, dtype=torch.float64) for i in tokens_of}
    worst = [0.0]

    def compare(context):
        qkv = torch.cat([packed[i] for i in context.sample_ids])[context.layout.local_indices]
        exact = dcp.torch.attend(*(qkv[:, j] for j in range(3)))
        low = qkv.to(torch.bfloat16).requires_grad_()
        out = dcp.torch.attend(*(low[:, j] for j in range(3)))
        assert out.dtype == torch.bfloat16, out.dtype
        out.float().sum().backward()
        if exact.numel():
            worst[0] = max(worst[0], float((out.double() - exact).abs().max() / exact.abs().max()))
        return torch.zeros(())

    dcp.torch.run_step(plan, compare, batch=batch, cache=cache, tokens_of=tokens_of)
    assert any(m.degree > 1 and m.config.sp.name == style for m in plan.micro_steps), "no micro-step ran " + style
    assert worst[0] < 2e-2, f"bf16 attention differs from float64 by {worst[0]:.3g} relative"


class TokenMixer(torch.nn.Module):
    """q, k and v projections of per-token features, attention through dcp.torch.attend, and a
    squared-sum loss: a model whose gradients need every collective of its micro-step."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(5)
        self.project = torch.nn.Parameter(torch.randn(3, 16, 16, generator=generator, dtype=torch.float64) / 4)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        q, k, v = ((features @ self.project[j]).view(-1, 4, 4) for j in range(3))
        return dcp.torch.attend(q, k, v).pow(2).sum()


def body_ddp_mean_is_the_sum(rank: int, ranks: int) -> None:
    """DDP averages gradients; with gradient_reduction="mean" and model=ddp (sync in the last
    micro-step only) they equal a plain module's under SUM."""
    cache = dcp.torch.GroupCache().warm_up()
    batch = UNEQUAL  # ranks run 1, 1, 2 and 2 micro-steps: DDP syncing in each would hang
    plan = scheduler(ranks, dcp.models.qwen25_7b()).plan(batch)
    tokens_of = {i: n // 1_000 for i, n in enumerate(batch)}
    generator = torch.Generator().manual_seed(7)
    features = {i: torch.randn(tokens_of[i], 16, generator=generator, dtype=torch.float64) for i in tokens_of}

    def micro_step(module):
        return lambda c: module(torch.cat([features[i] for i in c.sample_ids])[c.layout.local_indices])

    plain, wrapped = TokenMixer(), TokenMixer()
    ddp = torch.nn.parallel.DistributedDataParallel(wrapped)
    dcp.torch.run_step(plan, micro_step(plain), batch=batch, cache=cache, tokens_of=tokens_of)
    dist.all_reduce(plain.project.grad)
    dcp.torch.run_step(plan, micro_step(ddp), batch=batch, cache=cache, tokens_of=tokens_of, model=ddp,
                       gradient_reduction="mean")
    assert len(set(counts(plan))) > 1, f"micro-step counts {counts(plan)}: no_sync untested"
    difference = float((wrapped.project.grad - plain.project.grad).abs().max() / plain.project.grad.abs().max())
    assert difference < 1e-12, f"DDP's averaged gradient differs from the SUM by {difference:.3g} relative"


class RunStepTest(unittest.TestCase):
    def test_every_sample_once_and_the_loss_scales_sum_to_the_batch_mean(self):
        run_on_ranks(body_sums_loss_scales, RANKS, "sum")

    def test_mean_reduction_multiplies_by_the_world(self):
        run_on_ranks(body_sums_loss_scales, RANKS, "mean")

    def test_lockstep_plan_runs_a_world_collective_in_every_micro_step(self):
        run_on_ranks(body_lockstep_collectives, RANKS, 3, "auto", seconds=120)

    def test_without_lockstep_the_same_collectives_fail_within_the_deadline(self):
        self.assertGreater(len(set(counts(scheduler(RANKS, dcp.models.qwen25_7b()).plan(UNEQUAL)))), 1,
                           "the batch must give ranks different micro-step counts, or this proves nothing")
        # Ranks 0 and 1 finish after one micro-step; ranks 2 and 3 wait in their second one's
        # collective until it times out or its peers are gone.
        with self.assertRaisesRegex(AssertionError, r"rank [23] failed in micro-step \d+ \(ranks"):
            run_on_ranks(body_lockstep_collectives, RANKS, 1, "off", seconds=60, collective_timeout=5)

    def test_a_plan_for_another_world_is_refused_naming_both_sizes(self):
        run_on_ranks(body_refuses_other_world, RANKS)

    def test_an_error_names_the_rank_and_micro_step(self):
        run_on_ranks(body_names_failing_micro_step, RANKS)

    def test_out_of_memory_is_reported_and_the_step_replanned(self):
        run_on_ranks(body_replans_out_of_memory, RANKS)

    def test_ddp_with_mean_reduction_gives_the_sum_of_gradients(self):
        run_on_ranks(body_ddp_mean_is_the_sum, RANKS, collective_timeout=30)

    def test_bf16_micro_steps_match_float64_within_bf16_precision(self):
        for style in ("ulysses", "ring", "hybrid"):
            with self.subTest(style=style):
                run_on_ranks(body_bf16_attention, RANKS, style)


if __name__ == "__main__":
    unittest.main()
