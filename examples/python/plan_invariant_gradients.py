"""Plan-invariant gradients in PyTorch on 4 processes (Gloo): `plan_invariant_gradients.py [steps]`.

Trains the Llama model of llama.py (float64, documents of 4..128 tokens drawn from the Wikipedia
profile) for 50 steps, once per plan, in lockstep: one copy of the weights per plan, the same
batch for all. Every step each plan is made by the dcp bindings over a real cost model
(Llama-3-8B on one node of 4 H200s, each token standing for 256 planned tokens) and run with
dcp.torch.run_step over torch.distributed groups: sequence-parallel micro-batches are split over
their group's members and attend through dcp.torch.attend in the planned style (Ulysses
all-to-all, ring attention, or hybrid); then the gradients are all-reduced with SUM over the
world. The first plan is the static layout (degree 4 for every document, full recompute); the
others are DataCentricScheduler plans with other recompute strategies, memory budgets and
sequence-parallel styles, so degrees, styles, accumulation counts and recompute settings differ.

Checks (every rank raises, so the run exits non-zero, if one fails): at every step each plan's
gradient is within 1e-9 (relative, per tensor, max norm) of the static plan's; each plan's loss
printed with %.12g is the static plan's at every step; the plans really differ from the static
one in degrees, micro-steps per rank and recompute settings, and Ulysses, ring and hybrid
micro-steps of degree > 1 all ran. Prints the largest relative
gradient difference of each plan. CTest: example.python.plan_invariant_gradients.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable, Dict, List, Tuple

import torch

import dcp
import dcp.torch
from common import batch_of, spawn
from llama import Llama
from planning import PLANNED_LAYERS, llama3_8b_node, planner_samples

TOLERANCE = 1e-9
LEARNING_RATE = 0.5


def make_planners(gpus: int) -> List[Tuple[str, Callable[[List[dcp.Sample]], dcp.StepPlan]]]:
    tight = dcp.TrainingSpec()
    tight.headroom_fraction = 0.4  # a smaller activation budget: more micro-steps and recompute
    roomy_cost, tight_cost = llama3_8b_node(gpus), llama3_8b_node(gpus, tight)
    ring_cost = llama3_8b_node(gpus, dcp.TrainingSpec(headroom_fraction=0.4, sp="ring"))
    # Hybrid splits a group into node-local Ulysses blocks: nodes of 2 GPUs give blocks of 2.
    two_per_node = dcp.ClusterSpec(gpus=gpus, gpus_per_node=2, gpu=dcp.gpus.h200_sxm())
    hybrid_cost = dcp.AnalyticCostModel(dcp.models.llama3_8b(), two_per_node,
                                        dcp.TrainingSpec(headroom_fraction=0.4, sp="hybrid"))
    schedulers = [
        ("static", dcp.StaticScheduler(tight_cost, gpus, recompute="full")),
        ("dcp", dcp.Scheduler(roomy_cost)),
        ("dcp-tight", dcp.Scheduler(tight_cost)),
        ("dcp-selective", dcp.Scheduler(roomy_cost, recompute="selective")),
        ("dcp-ring", dcp.Scheduler(ring_cost)),
        ("dcp-hybrid", dcp.Scheduler(hybrid_cost)),
    ]
    return [(name, s.plan) for name, s in schedulers]


def relative_difference(gradients: List[torch.Tensor], reference: List[torch.Tensor]) -> float:
    """Max over the parameter tensors of |g - reference|_max / |reference|_max."""
    worst = 0.0
    for g, r in zip(gradients, reference):
        difference = float((g - r).abs().max())
        if difference > 0:
            scale = float(r.abs().max())
            worst = max(worst, difference / scale if scale > 0 else float("inf"))
    return worst


def train(rank: int, ranks: int, steps: int) -> None:
    planners = make_planners(ranks)
    models = [Llama(seed=7, attend=dcp.torch.attend) for _ in planners]
    recomputes = [dcp.torch.Recompute(model.blocks, PLANNED_LAYERS) for model in models]
    cache = dcp.torch.GroupCache().warm_up(hybrid_ulysses_degree=2)
    styles: Counter = Counter()
    worst: Dict[str, Tuple[float, int]] = {name: (0.0, -1) for name, _ in planners}
    differs = {name: Counter() for name, _ in planners}
    recompute_modes = {name: Counter() for name, _ in planners}
    problems: List[str] = []
    for step in range(steps):
        batch = batch_of(step)
        samples = planner_samples(batch)
        reference = None
        for (name, plan_of), model, recompute in zip(planners, models, recomputes):
            plan = plan_of(samples)
            model.zero_grad()
            dcp.torch.run_step(plan, lambda c: model.loss(batch, c.sample_ids, c.layout), batch=samples, cache=cache,
                               tokens_of=lambda i: batch[i].length, recompute=recompute, backward=model.backward)
            recompute_modes[name].update(f"{recompute.blocks_for(m.recompute.layers)} layers recomputed"
                                         + (", selective" if m.recompute.selective else "") for m in plan.micro_steps)
            styles.update(m.config.sp.name for m in plan.micro_steps if m.degree > 1)
            loss = model.all_reduce()
            gradients = [g.clone() for g in model.gradients()]
            shape = (sorted(m.degree for m in plan.micro_steps),
                     [len(plan.steps_of(r)) for r in range(ranks)],
                     sorted((m.recompute.layers, m.recompute.selective) for m in plan.micro_steps))
            if reference is None:
                reference = (loss, gradients, shape)
            else:
                difference = relative_difference(gradients, reference[1])
                if difference > worst[name][0]:
                    worst[name] = (difference, step)
                if f"{loss:.12g}" != f"{reference[0]:.12g}":
                    problems.append(f"step {step}: {name} loss {loss:.12g}, static {reference[0]:.12g}")
                for what, mine, theirs in zip(("degrees", "accumulation", "recompute"), shape, reference[2]):
                    differs[name][what] += mine != theirs
            model.sgd(LEARNING_RATE)
        if rank == 0 and (step % 10 == 0 or step == steps - 1):
            print(f"step {step:2d}  loss {reference[0]:.12g}", flush=True)

    for name, _ in planners[1:]:
        difference, step = worst[name]
        if rank == 0:
            print(f"{name:14s} max relative gradient difference {difference:.3g} (step {step}); steps with other "
                  f"degrees {differs[name]['degrees']}, accumulation counts {differs[name]['accumulation']}, "
                  f"recompute settings {differs[name]['recompute']} of {steps}; micro-steps planned by recompute "
                  f"{dict(recompute_modes[name])}", flush=True)
        if not difference <= TOLERANCE:
            problems.append(f"{name}: gradient differs from the static plan's by {difference:.3g} (step {step}), "
                            f"more than {TOLERANCE:g}")
    for what in ("degrees", "accumulation", "recompute"):
        if not any(differs[name][what] for name, _ in planners[1:]):
            problems.append(f"no plan differs from the static one in its {what}: the test would prove nothing")
    for style in ("ulysses", "ring", "hybrid"):
        if not styles[style]:
            problems.append(f"no micro-step of degree > 1 ran {style} attention: the test would prove nothing")
    if rank == 0:
        print(f"micro-steps of degree > 1 by style: {dict(styles)}", flush=True)
    overall = max(w[0] for name, w in worst.items() if name != planners[0][0])
    if rank == 0:
        print(f"max relative gradient difference over {len(planners) - 1} plans x {steps} steps: {overall:.3g} "
              f"(tolerance {TOLERANCE:g})", flush=True)
    if problems:
        raise SystemExit("plan_invariant_gradients failed:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    spawn(train, 4, int(sys.argv[1]) if len(sys.argv) > 1 else 50)
