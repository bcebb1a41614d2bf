"""Plan-invariant gradients in PyTorch on 4 processes (Gloo): `plan_invariant_gradients.py [steps]`.

Trains the Llama model of llama.py (float64, documents of 4..128 tokens drawn from the Wikipedia
profile) for 50 steps, once per plan, in lockstep: one copy of the weights per plan, the same
batch for all. Every step each plan is made by the dcp bindings over a real cost model
(Llama-3-8B on one node of 4 H200s, each token standing for 256 planned tokens) and run with
dcp_torch.run_step over torch.distributed groups: sequence-parallel micro-batches are split over
their group's members, keys and values gathered through the group; then the gradients are
all-reduced with SUM over the world. The first plan is the static layout (degree 4 for every
document, full recompute); the others are DataCentricScheduler plans with other recompute
strategies and memory budgets, so degrees, accumulation counts and recompute settings differ.

Checks (every rank raises, so the run exits non-zero, if one fails): at every step each plan's
gradient is within 1e-9 (relative, per tensor, max norm) of the static plan's; each plan's loss
printed with %.12g is the static plan's at every step; the plans really differ from the static
one in degrees, micro-steps per rank and recompute settings. Prints the largest relative
gradient difference of each plan. CTest: example.python.plan_invariant_gradients.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable, Dict, List, Tuple

import torch

import dcp
from common import batch_of, spawn
from dcp_torch import Executor, GroupCache, llama3_8b_node, planner_samples, run_step
from llama import Llama

TOLERANCE = 1e-9
LEARNING_RATE = 0.5


def make_planners(gpus: int) -> List[Tuple[str, Callable[[List[dcp.Sample]], dcp.StepPlan]]]:
    tight = dcp.TrainingSpec()
    tight.headroom_fraction = 0.4  # a smaller activation budget: more micro-steps and recompute
    roomy_cost, tight_cost = llama3_8b_node(gpus), llama3_8b_node(gpus, tight)
    schedulers = [
        ("static", dcp.StaticScheduler(tight_cost, gpus, recompute="full")),
        ("dcp", dcp.Scheduler(roomy_cost)),
        ("dcp-tight", dcp.Scheduler(tight_cost)),
        ("dcp-selective", dcp.Scheduler(roomy_cost, recompute="selective")),
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
    models = [Llama(seed=7) for _ in planners]
    cache = GroupCache()
    worst: Dict[str, Tuple[float, int]] = {name: (0.0, -1) for name, _ in planners}
    differs = {name: Counter() for name, _ in planners}
    recompute_modes = {name: Counter() for name, _ in planners}
    problems: List[str] = []
    for step in range(steps):
        batch = batch_of(step)
        samples = planner_samples(batch)
        reference = None
        for (name, plan_of), model in zip(planners, models):
            plan = plan_of(samples)
            model.zero_grad()
            executor = Executor(model, batch)
            run_step(cache, plan, executor)
            recompute_modes[name].update(executor.recompute_modes)
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
                  f"recompute settings {differs[name]['recompute']} of {steps}; executor ran "
                  f"{dict(recompute_modes[name])}", flush=True)
        if not difference <= TOLERANCE:
            problems.append(f"{name}: gradient differs from the static plan's by {difference:.3g} (step {step}), "
                            f"more than {TOLERANCE:g}")
    for what in ("degrees", "accumulation", "recompute"):
        if not any(differs[name][what] for name, _ in planners[1:]):
            problems.append(f"no plan differs from the static one in its {what}: the test would prove nothing")
    overall = max(w[0] for name, w in worst.items() if name != planners[0][0])
    if rank == 0:
        print(f"max relative gradient difference over {len(planners) - 1} plans x {steps} steps: {overall:.3g} "
              f"(tolerance {TOLERANCE:g})", flush=True)
    if problems:
        raise SystemExit("plan_invariant_gradients failed:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    spawn(train, 4, int(sys.argv[1]) if len(sys.argv) > 1 else 50)
