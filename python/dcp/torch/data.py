"""The data-loader integration: every rank plans the same global batch from lengths alone and
loads only the samples of its own micro-steps.

`PlannedBatches` takes the global batches as lists of dataset indices (the same on every rank:
a sampler with the same seed, as data-parallel loaders already use) and a way to read a
sample's length without loading it (a metadata column, a lengths file). For each batch it plans
with the scheduler — the next batch on a background thread while the current step trains
(planning releases the GIL) — then loads `dataset[i]` for the samples of this rank's
micro-steps only and yields a `PlannedBatch` that `run_step` takes as it is.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import dcp

__all__ = ["PlannedBatch", "PlannedBatches"]


@dataclass
class PlannedBatch:
    """One global batch: its plan, the samples planned (`id` = dataset index), this rank's
    loaded items by dataset index, and their lengths in tokens."""

    plan: "dcp.StepPlan"
    samples: List["dcp.Sample"]
    items: Dict[int, Any]
    lengths: Dict[int, int]

    def tokens_of(self, index: int) -> int:
        return self.lengths[index]

    def run_options(self) -> Dict[str, Any]:
        """The keyword arguments of run_step that describe this batch."""
        return {"batch": self.samples, "tokens_of": self.tokens_of}


class PlannedBatches:
    """Iterates planned global batches of `dataset` for this rank.

    `batches`: the global batches as sequences of dataset indices, identical on every rank.
    `length_of(index)`: the sample's tokens without loading it. `scheduler`: anything with
    `plan(list of dcp.Sample)` (dcp.Scheduler, dcp.CalibratedScheduler, dcp.StaticScheduler).
    `sample_of(index, tokens)` makes the dcp.Sample planned (default: a text sample; pass
    dcp.video_sample for videos). `prefetch`: plan the next batch while this one trains — on
    another thread, with the scheduler as it is then; a CalibratedScheduler that observes every
    step needs `prefetch=False`, so that each plan sees the last fit and never runs while
    `observe` changes the model.
    """

    def __init__(self, dataset, batches: Iterable[Sequence[int]], length_of: Callable[[int], int], scheduler, *,
                 rank: int, sample_of: Callable[[int, int], "dcp.Sample"] = dcp.text_sample,
                 prefetch: bool = True) -> None:
        self.dataset, self.batches, self.length_of = dataset, batches, length_of
        self.scheduler, self.rank, self.sample_of, self.prefetch = scheduler, rank, sample_of, prefetch

    def __iter__(self) -> Iterator[PlannedBatch]:
        batches = iter(self.batches)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dcp-plan") as planner:
            pending = self._submit(planner, batches)
            while pending is not None:
                samples, plan = pending.result()
                if self.prefetch:
                    pending = self._submit(planner, batches)
                yield self._load(samples, plan)
                if not self.prefetch:
                    pending = self._submit(planner, batches)

    def _submit(self, planner: ThreadPoolExecutor, batches: Iterator[Sequence[int]]) -> Optional[Future]:
        indices = next(batches, None)
        return None if indices is None else planner.submit(self._plan, list(indices))

    def _plan(self, indices: List[int]):
        if len(set(indices)) != len(indices):
            seen = set()
            repeated = next(i for i in indices if i in seen or seen.add(i))
            raise dcp.InvalidSample(f"PlannedBatches: dataset index {repeated} appears twice in one batch")
        samples = [self.sample_of(index, int(self.length_of(index))) for index in indices]
        return samples, self.scheduler.plan(samples)

    def _load(self, samples: List["dcp.Sample"], plan: "dcp.StepPlan") -> PlannedBatch:
        lengths = {int(s.id): int(s.tokens) for s in samples}
        mine = sorted({int(i) for index in plan.steps_of(self.rank) for i in plan.micro_steps[index].sample_ids})
        return PlannedBatch(plan, samples, {i: self.dataset[i] for i in mine}, lengths)
