"""The PyTorch trainer's adapter to dcp, written once per framework: the samples dcp plans for a
batch, the cost model the examples plan with
(Llama-3-8B on one node of H200s), the process groups a plan runs on, and `run_step`, which
runs this rank's micro-steps of a plan in order, each on its group with its recompute setting
and loss scale. It mirrors dcp::run_step and the toy executor of examples/mpi/toy_dcp.hpp."""

from __future__ import annotations

import math
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

import dcp
from llama import Document, Llama

#: Each trained token stands for this many tokens of the model dcp plans for, so that the
#: longest sequences (128 tokens: 32K planned tokens) need sequence parallelism on Llama-3-8B.
PLANNED_TOKENS_PER_TOKEN = 256
def planner_samples(batch: Sequence[Document]) -> List[dcp.Sample]:
    """What dcp plans: one text sample per document, id = its index in the batch."""
    return [dcp.text_sample(i, d.length * PLANNED_TOKENS_PER_TOKEN) for i, d in enumerate(batch)]


def llama3_8b_node(gpus: int, training: Optional[dcp.TrainingSpec] = None) -> dcp.AnalyticCostModel:
    """Llama-3-8B trained on one node of `gpus` H200s (one NVSwitch domain), one GPU per rank."""
    cluster = dcp.ClusterSpec(gpus=gpus, gpus_per_node=gpus, gpu=dcp.gpus.h200_sxm())
    return dcp.AnalyticCostModel(dcp.models.llama3_8b(), cluster, training or dcp.TrainingSpec())


class GroupCache:
    """The aligned groups a plan runs on, from torch.distributed.new_group, cached by
    (first rank, degree). new_group is collective over the world, so every rank creates every
    group of a new degree, in increasing degree and first rank, before the plan runs."""

    def __init__(self) -> None:
        self.world = dist.get_world_size()
        self.groups: Dict[Tuple[int, int], object] = {}

    def prepare(self, plan: dcp.StepPlan) -> None:
        for degree in sorted({m.degree for m in plan.micro_steps}):
            if degree > 1 and (0, degree) not in self.groups:
                for first in range(0, self.world, degree):
                    self.groups[(first, degree)] = dist.new_group(list(range(first, first + degree)))

    def group(self, first_rank: int, degree: int):
        return None if degree == 1 else self.groups[(first_rank, degree)]


def agree_on_plan(plan: dcp.StepPlan) -> None:
    """Every rank must run the same plan: compare fingerprints (collective)."""
    mine = torch.tensor(struct.unpack("q", struct.pack("Q", plan.fingerprint)), dtype=torch.int64)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    if any(int(f) != int(mine) for f in every):
        raise dcp.Error(f"rank {dist.get_rank()}: the ranks planned different steps "
                        f"(fingerprints {[int(f) for f in every]})")


class Executor:
    """Runs dcp's micro-steps with the Llama model. The micro-batch's mean loss per token, times
    the step's loss scale, is what it differentiates, so the SUM all-reduce after the step gives
    the batch's gradient. The plan's recompute setting counts layers of the planned model; the
    same fraction of this model's layers (rounded up) keeps only its input."""

    def __init__(self, model: Llama, batch: Sequence[Document], planned_layers: int = dcp.models.llama3_8b().layers):
        self.model, self.batch, self.planned_layers = model, batch, planned_layers
        self.recompute_modes: Dict[str, int] = {}

    def run(self, step: dcp.MicroStep, group, member: int) -> None:
        ids = list(step.sample_ids)
        tokens = sum(self.batch[i].length for i in ids)
        if tokens * PLANNED_TOKENS_PER_TOKEN != step.tokens:
            raise dcp.Error(f"executor: micro-step {step.sequence} was planned for {step.tokens} tokens, "
                            f"its samples have {tokens * PLANNED_TOKENS_PER_TOKEN}")
        layers = len(self.model.blocks)
        recomputed = math.ceil(step.recompute.layers * layers / self.planned_layers)
        mode = f"{recomputed} layers recomputed" + (", selective" if step.recompute.selective else "")
        self.recompute_modes[mode] = self.recompute_modes.get(mode, 0) + 1
        self.model.forward_backward(self.batch, ids, group, step.degree, member, step.loss_scale / tokens,
                                    recomputed, step.recompute.selective)


def run_step(cache: GroupCache, plan: dcp.StepPlan, executor: Executor) -> int:
    """This rank's micro-steps of `plan`, in plan order, each on its group; returns how many ran."""
    rank = dist.get_rank()
    agree_on_plan(plan)
    cache.prepare(plan)
    mine = plan.steps_of(rank)
    for index in mine:
        m = plan.micro_steps[index]
        try:
            executor.run(m, cache.group(m.first_rank, m.degree), rank - m.first_rank)
        except Exception as e:
            raise dcp.Error(f"rank {rank} failed in micro-step {m.sequence} "
                            f"(ranks {m.first_rank}..{m.last_rank}): {e}") from e
    return len(mine)
