"""The process groups dcp's plans run on, made once over torch.distributed.

A micro-step of degree d runs on the aligned ranks [first, first + d) (d a power of two,
first a multiple of d); a hybrid micro-step also splits its group into Ulysses blocks of u
consecutive ranks and rings of the d / u ranks u apart. `torch.distributed.new_group` is
collective over the whole world, and NCCL creates a communicator the first time a group is
used, so `GroupCache` makes every group a run can need at start (`warm_up`) and runs one
collective on each: no communicator is created in the middle of a step, where ranks would wait
for each other in different groups.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple

import torch
import torch.distributed as dist

from ._groups_type import SequenceParallelGroups

__all__ = ["GroupCache", "SequenceParallelGroups", "backend_device"]


def backend_device() -> torch.device:
    """The device the default process group's collectives take tensors on: this process's CUDA
    device under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _is_power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


class GroupCache:
    """Every aligned group of a power-of-two degree in the world, and the hybrid rings.

    Made on every rank in the same order (new_group is collective). `warm_up` makes the groups
    up to `max_degree` (default: the world) at once; `prepare(plan)`, which run_step calls on
    every rank, makes what a plan needs beyond them, so `groups_of` never creates a group.
    """

    def __init__(self) -> None:
        if not dist.is_initialized():
            raise RuntimeError("dcp.torch.GroupCache: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first)")
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        self._blocks: Dict[Tuple[int, int], object] = {}  # (first rank, degree) -> group
        self._rings: Dict[Tuple[int, int], object] = {}  # (degree, ulysses) -> this rank's ring

    def warm_up(self, max_degree: Optional[int] = None, hybrid_ulysses_degree: int = 0) -> "GroupCache":
        """Make the groups of every degree 2, 4, ... up to `max_degree` (default: the largest
        power of two in the world) and, with `hybrid_ulysses_degree` u >= 2, the rings of every
        hybrid degree above u; then run one all-reduce on each group this rank is in."""
        largest = 1
        while largest * 2 <= (max_degree or self.world) and largest * 2 <= self.world:
            largest *= 2
        degrees = [1 << k for k in range(1, largest.bit_length())]
        made = [self._block(self.rank // d * d, d) for d in degrees if self.rank // d * d + d <= self.world]
        if hybrid_ulysses_degree >= 2:
            made += [self._ring(d, hybrid_ulysses_degree) for d in degrees if d > hybrid_ulysses_degree]
        self._touch(g for g in made if g is not None)
        return self

    def prepare(self, plan) -> None:
        """Make every group `plan` needs that is not made yet (collective: every rank calls it
        with the same plan, as run_step does before running anything, so that no rank creates a
        group the others are not creating)."""
        made = []
        for degree in sorted({m.degree for m in plan.micro_steps if m.degree > 1}):
            if (0, degree) not in self._blocks:
                self._block(0, degree)
                if self.rank // degree * degree + degree <= self.world:
                    made.append(self._block(self.rank // degree * degree, degree))
        u = plan.hybrid_ulysses_degree
        for degree in sorted({m.degree for m in plan.micro_steps if m.degree > 1 and m.config.sp.name == "hybrid"}):
            if (degree, u) not in self._rings:
                made.append(self._ring(degree, u))
        self._touch(g for g in made if g is not None)

    def groups_of(self, step, hybrid_ulysses_degree: int = 0) -> SequenceParallelGroups:
        """This rank's view of micro-step `step` (a dcp.MicroStep that holds this rank)."""
        degree, first = step.degree, step.first_rank
        if not step.includes(self.rank):
            raise ValueError(f"dcp.torch: rank {self.rank} is not in micro-step {step.sequence} "
                             f"(ranks {first}..{step.last_rank})")
        style = "none" if degree == 1 else step.config.sp.name
        ulysses = {"none": 1, "ulysses": degree, "ring": 1}.get(style, hybrid_ulysses_degree)
        if style == "hybrid" and not (_is_power_of_two(ulysses) and 2 <= ulysses < degree):
            raise ValueError(f"dcp.torch: hybrid micro-step {step.sequence} of degree {degree} needs the "
                             f"plan's hybrid_ulysses_degree in [2, {degree}), a power of two; got {ulysses}")
        member = self.rank - first
        block_first = first + member // ulysses * ulysses
        return SequenceParallelGroups(
            style=style,
            degree=degree,
            member=member,
            ranks=tuple(range(first, first + degree)),
            group=self._block(first, degree),
            ulysses_degree=ulysses,
            ulysses_group=self._block(block_first, ulysses),
            ring_group=None if ulysses == degree else (self._block(first, degree) if ulysses == 1
                                                        else self._ring(degree, ulysses)))

    def _block(self, first: int, degree: int):
        """The group of ranks [first, first + degree), made with all groups of that degree."""
        if degree == 1:
            return None
        if not _is_power_of_two(degree) or degree > self.world:
            raise ValueError(f"dcp.torch: a group of degree {degree} in a world of {self.world} ranks "
                             f"(degrees are powers of two up to the world)")
        if (0, degree) not in self._blocks:
            for start in range(0, self.world - degree + 1, degree):
                self._blocks[(start, degree)] = dist.new_group(list(range(start, start + degree)))
        return self._blocks[(first, degree)]

    def _ring(self, degree: int, ulysses: int):
        """This rank's ring of a hybrid group of `degree` with Ulysses blocks of `ulysses`: the
        degree / ulysses ranks at this rank's offset in its block; all rings made at once."""
        if (degree, ulysses) not in self._rings:
            mine = None
            for start in range(0, self.world - degree + 1, degree):
                for offset in range(ulysses):
                    ranks = list(range(start + offset, start + degree, ulysses))
                    group = dist.new_group(ranks)
                    if self.rank in ranks:
                        mine = group
            self._rings[(degree, ulysses)] = mine
        return self._rings[(degree, ulysses)]

    def _touch(self, groups: Iterable[object]) -> None:
        """One all-reduce on each group, so that a lazy backend (NCCL) creates its communicator now."""
        probe = torch.zeros(1, device=backend_device())
        for group in groups:
            dist.all_reduce(probe, group=group)
