"""run_step: this rank's micro-steps of a dcp plan, run over torch.distributed.

The Python twin of the C++ runtime (include/dcp/runtime/executor.hpp and calibrated_step.hpp):
every rank checks the plan against the world and the batch and agrees on it before running
anything, passes the plan's world barriers, runs its micro-steps in plan order, each on its
group with its recomputation and loss scale, and measures each one. `run_calibrated_step`
adds the calibrated model's loop: share the measurements, refit, and re-plan a step that ran
out of memory.
"""

from __future__ import annotations

import contextlib
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist

import dcp

from ._groups_type import SequenceParallelGroups
from .groups import GroupCache, backend_device
from .layout import ShardLayout
from .recompute import Recompute

__all__ = [
    "MicroStepContext", "StepReport", "CalibratedStepResult", "agree_on_plan", "check_plan",
    "current", "run_step", "share_observations", "run_calibrated_step", "is_out_of_memory",
]

Batch = Sequence[Union[int, "dcp.Sample"]]
#: What a micro-step runs: given its context, the loss summed over this rank's tokens (a scalar
#: tensor; for an empty micro-step, a zero that still depends on the parameters).
MicroStepFn = Callable[["MicroStepContext"], torch.Tensor]

# The running micro-step, process-wide rather than a context variable: checkpointed blocks run
# their forward again in backward, on the autograd engine's device thread under CUDA.
_current: List[Optional["MicroStepContext"]] = [None]


@dataclass(frozen=True)
class MicroStepContext:
    """One micro-step as this rank runs it.

    `lengths` are the tokens of `sample_ids` as the model sees them, packed in that order;
    `layout` says which of the packed tokens this rank holds (run the model on those, at the
    positions `layout.local_positions`); `groups` are the process groups the attention uses.
    The loss `run_step` differentiates is the returned sum times `loss_scale / loss_tokens`.
    """

    index: int
    step: "dcp.MicroStep"
    sample_ids: Tuple[int, ...]
    lengths: Tuple[int, ...]
    groups: SequenceParallelGroups
    layout: ShardLayout
    recompute: "dcp.RecomputeSetting"
    loss_scale: float
    loss_tokens: int
    last: bool

    @property
    def empty(self) -> bool:
        """A lockstep plan's padding: no samples, but every collective of a micro-step runs."""
        return not self.sample_ids


def current() -> MicroStepContext:
    """The micro-step `run_step` is running on this thread (for attention modules that are not
    handed the context)."""
    context = _current[0]
    if context is None:
        raise RuntimeError("dcp.torch.current(): no micro-step is running (call it inside run_step)")
    return context


@dataclass
class StepReport:
    """What `run_step` ran on this rank: `indices` into plan.micro_steps, in run order, and a
    dcp.ExecutionReport for each (seconds, peak bytes, out_of_memory)."""

    plan: "dcp.StepPlan"
    indices: List[int] = field(default_factory=list)
    reports: List["dcp.ExecutionReport"] = field(default_factory=list)

    @property
    def out_of_memory(self) -> int:
        return sum(r.out_of_memory for r in self.reports)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is a device out-of-memory error (torch.cuda.OutOfMemoryError on torch 2,
    a RuntimeError saying "out of memory" on torch 1.13)."""
    kind = getattr(torch.cuda, "OutOfMemoryError", None)
    if kind is not None and isinstance(error, kind):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error)


def _samples(batch: Batch) -> List["dcp.Sample"]:
    return [dcp.text_sample(i, s) if isinstance(s, int) else s for i, s in enumerate(batch)]


def check_plan(plan: "dcp.StepPlan", batch: Batch, world: int) -> None:
    """Raise dcp.InvalidPlan unless `plan` runs `batch` on a world of `world` ranks: the plan's
    GPU count is the world's, every micro-step an aligned group inside it, every sample of the
    batch in exactly one micro-step, and a plan that claims lockstep is in lockstep (rounds of
    equal micro-step counts). Every rank holds the same plan, so every rank raises or none does."""
    if plan.gpus != world:
        raise dcp.InvalidPlan(f"run_step: the plan is for {plan.gpus} GPUs, but the world has {world} ranks "
                              f"(plan each step for the world it runs on)")
    dcp.validate_plan(plan.__copy__(), _samples(batch), world)  # also checks a lockstep claim


def agree_on_plan(plan: "dcp.StepPlan") -> None:
    """Collective: raise dcp.Error on every rank unless every rank holds the same plan (by
    fingerprint), compared on the backend's device."""
    mine = struct.unpack("q", struct.pack("Q", plan.fingerprint))[0]
    value = torch.tensor([mine], dtype=torch.int64, device=backend_device())
    every = [torch.empty_like(value) for _ in range(dist.get_world_size())]
    dist.all_gather(every, value)
    fingerprints = [int(f.item()) for f in every]
    if any(f != mine for f in fingerprints):
        differing = [r for r, f in enumerate(fingerprints) if f != fingerprints[0]]
        raise dcp.Error(f"rank {dist.get_rank()}: the ranks planned different steps (ranks {differing} "
                        f"differ from rank 0's fingerprint {fingerprints[0] & (2**64 - 1):#x})")


class _Timer:
    """Seconds and peak device bytes of one micro-step: CUDA events and the allocator's peak on a
    GPU, wall time (and no peak) on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.begin, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.begin.record()
        else:
            self.begin_seconds = time.perf_counter()

    def stop(self, report: "dcp.ExecutionReport") -> None:
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            report.seconds = self.begin.elapsed_time(self.end) / 1000.0
            report.peak_bytes = float(torch.cuda.max_memory_allocated())
        else:
            report.seconds = time.perf_counter() - self.begin_seconds


@contextlib.contextmanager
def _gradient_sync(model: Optional[torch.nn.Module], sync: bool) -> Iterator[None]:
    """Gradients reduced by the framework only when `sync`: DDP's and FSDP's no_sync, FSDP2's
    set_requires_gradient_sync; nothing for a model that does neither."""
    if model is None or sync:
        if model is not None and hasattr(model, "set_requires_gradient_sync"):
            model.set_requires_gradient_sync(True)
        yield
    elif hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(False)
        yield
    elif hasattr(model, "no_sync"):
        with model.no_sync():
            yield
    else:
        yield


def _tokens_lookup(batch: Batch, tokens_of) -> Callable[[int], int]:
    if tokens_of is None:
        samples = {s.id: s.tokens for s in _samples(batch)}
        return samples.__getitem__
    if callable(tokens_of):
        return tokens_of
    return tokens_of.__getitem__


def run_step(plan: "dcp.StepPlan", micro_step: MicroStepFn, *, batch: Batch, cache: GroupCache,
             tokens_of: Union[None, Sequence[int], Dict[int, int], Callable[[int], int]] = None,
             model: Optional[torch.nn.Module] = None, gradient_reduction: str = "sum",
             recompute: Optional[Recompute] = None,
             backward: Callable[[torch.Tensor], None] = torch.Tensor.backward) -> StepReport:
    """Run this rank's micro-steps of `plan` in order (collective over the world).

    `batch` is what was planned (lengths, ids = indices, or dcp.Sample objects); `tokens_of`
    maps a sample id to the tokens the model sees (default: the planned tokens). Each
    micro-step calls `micro_step(context)` with `current()` set, under `recompute`'s setting for
    it, and differentiates the returned loss sum times loss_scale / loss_tokens with `backward`
    (e.g. a GradScaler's). Gradients must then be summed over the world: with
    `gradient_reduction="sum"` the caller all-reduces with SUM; with "mean" (DDP, FSDP, FSDP2
    and ZeRO average by default) the loss is multiplied by the world size so that their mean is
    the sum. With `model` (DDP, FSDP or FSDP2), the framework reduces gradients only in this
    rank's last micro-step. A device out-of-memory error in a micro-step is reported (the
    micro-step's ExecutionReport.out_of_memory) and the step goes on; any other error is raised
    as dcp.Error naming the rank and the micro-step. Returns this rank's StepReport.
    """
    world, rank = dist.get_world_size(), dist.get_rank()
    if gradient_reduction not in ("sum", "mean"):
        raise ValueError(f"run_step: gradient_reduction = {gradient_reduction!r}, must be 'sum' or 'mean'")
    check_plan(plan, batch, world)
    agree_on_plan(plan)
    cache.prepare(plan)
    tokens = _tokens_lookup(batch, tokens_of)
    factor = float(world) if gradient_reduction == "mean" else 1.0
    mine = plan.steps_of(rank)
    barriers = sorted(plan.barriers)
    timer = _Timer(backend_device())
    report = StepReport(plan)
    for position, index in enumerate(mine):
        step = plan.micro_steps[index]
        while barriers and step.sequence >= barriers[0]:
            dist.barrier()
            barriers.pop(0)
        context = _context(plan, index, step, cache, tokens, last=position == len(mine) - 1)
        report.indices.append(index)
        report.reports.append(_run_one(context, micro_step, model, recompute, backward, factor, timer, rank))
    for _ in barriers:
        dist.barrier()
    return report


def _context(plan, index: int, step, cache: GroupCache, tokens: Callable[[int], int], last: bool) -> MicroStepContext:
    ids = tuple(int(i) for i in step.sample_ids)
    lengths = tuple(int(tokens(i)) for i in ids)
    groups = cache.groups_of(step, plan.hybrid_ulysses_degree)
    return MicroStepContext(
        index=index, step=step, sample_ids=ids, lengths=lengths, groups=groups,
        layout=ShardLayout(lengths, groups.degree, groups.member, groups.ulysses_degree),
        recompute=step.recompute, loss_scale=step.loss_scale, loss_tokens=sum(lengths), last=last)


def _run_one(context: MicroStepContext, micro_step: MicroStepFn, model, recompute: Optional[Recompute],
             backward, factor: float, timer: _Timer, rank: int) -> "dcp.ExecutionReport":
    report = dcp.ExecutionReport()
    _current[0] = context
    timer.start()
    try:
        setting = recompute.setting(context.recompute) if recompute is not None else contextlib.nullcontext()
        with setting, _gradient_sync(model, context.last):
            loss = micro_step(context)
            scale = context.loss_scale * factor / context.loss_tokens if context.loss_tokens else 0.0
            if isinstance(loss, torch.Tensor) and loss.requires_grad:
                backward(loss * scale)
        timer.stop(report)
    except Exception as e:  # noqa: BLE001 - reported or re-raised with the rank and micro-step
        if not is_out_of_memory(e):
            step = context.step
            raise dcp.Error(f"rank {rank} failed in micro-step {step.sequence} "
                            f"(ranks {step.first_rank}..{step.last_rank}): {e}") from e
        report.out_of_memory = True
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    finally:
        _current[0] = None
    return report


def share_observations(plan: "dcp.StepPlan", batch: Batch, report: StepReport) -> List["dcp.Observation"]:
    """Collective: every micro-step of `plan` as its group measured it (the largest time and peak
    of its members; out of memory if any member was), the same list on every rank."""
    count = len(plan.micro_steps)
    values = torch.zeros((count, 3), dtype=torch.float64, device=backend_device())
    for index, r in zip(report.indices, report.reports):
        values[index, 0], values[index, 1], values[index, 2] = r.seconds, r.peak_bytes, float(r.out_of_memory)
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    observations = dcp.plan_observations(plan, _samples(batch))
    for o, (seconds, peak, out_of_memory) in zip(observations, values.cpu().tolist()):
        o.report.seconds, o.report.peak_bytes, o.report.out_of_memory = seconds, peak, out_of_memory > 0
    return observations


@dataclass
class CalibratedStepResult:
    """The plan that ran without running out of memory, this rank's report of it, every
    micro-step's shared observation, the plans tried and the micro-steps that ran out of memory."""

    plan: "dcp.StepPlan"
    report: StepReport
    observations: List["dcp.Observation"]
    attempts: int
    out_of_memory: int


def run_calibrated_step(scheduler: "dcp.CalibratedScheduler", batch: Batch, micro_step: MicroStepFn, *,
                        cache: GroupCache, discard_gradients: Callable[[], None], max_attempts: int = 3,
                        **run_options) -> CalibratedStepResult:
    """One step with online calibration (collective; every rank passes the same batch and a
    scheduler in the same state): plan, run_step, share the measurements and refit the model
    on every rank alike; if a micro-step ran out of memory, `discard_gradients()` and re-plan
    with the tightened model, at most `max_attempts` plans. Raises dcp.Error naming the first
    micro-step that ran out of memory when every attempt did."""
    if max_attempts < 1:
        raise ValueError(f"run_calibrated_step: max_attempts = {max_attempts}, must be >= 1")
    out_of_memory = 0
    for attempt in range(1, max_attempts + 1):
        plan = scheduler.plan(batch)
        report = run_step(plan, micro_step, batch=batch, cache=cache, **run_options)
        observations = share_observations(plan, batch, report)
        scheduler.observe(observations)
        failed = [(o, m) for o, m in zip(observations, plan.micro_steps) if o.report.out_of_memory]
        out_of_memory += len(failed)
        if not failed:
            return CalibratedStepResult(plan, report, observations, attempt, out_of_memory)
        discard_gradients()
        step = failed[0][1]
        what = (f"{len(failed)} micro-step(s) ran out of memory, first {step.sequence} (ranks "
                f"{step.first_rank}..{step.last_rank}, {step.tokens} tokens, recompute {step.recompute})")
    raise dcp.Error(f"run_calibrated_step: attempt {max_attempts} of {max_attempts}: {what}")
