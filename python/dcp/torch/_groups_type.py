"""The process groups one micro-step runs on, as the attention functions see them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple


class GroupPosition:
    """A member's place in a group of `degree` members split into Ulysses blocks of
    `ulysses_degree` consecutive members, with rings across the blocks."""

    degree: int
    member: int
    ulysses_degree: int

    @property
    def ring_degree(self) -> int:
        return self.degree // self.ulysses_degree

    @property
    def ulysses_member(self) -> int:
        """This member's index in its Ulysses block."""
        return self.member % self.ulysses_degree

    @property
    def ring_member(self) -> int:
        """This member's index in its ring (the index of its Ulysses block)."""
        return self.member // self.ulysses_degree


@dataclass(frozen=True)
class SequenceParallelGroups(GroupPosition):
    """This rank's view of a micro-step's group of `degree` ranks.

    `ranks` are the group's global ranks in member order; this rank is `ranks[member]`. A
    sequence-parallel style of "ulysses", "ring" or "hybrid" ("none" at degree 1). The group
    is split as dcp's C++ runtime splits it (include/dcp/runtime/group_cache.hpp): Ulysses over
    the aligned block of `ulysses_degree` consecutive members that holds this rank, ring over
    the degree / ulysses_degree members at this rank's offset in its block (members
    member % u, member % u + u, ...). Ulysses: ulysses_degree == degree; ring:
    ulysses_degree == 1. A group of one member is None.
    """

    style: str
    degree: int
    member: int
    ranks: Tuple[int, ...]
    group: Optional[Any]
    ulysses_degree: int
    ulysses_group: Optional[Any]
    ring_group: Optional[Any]

    def ring_ranks(self) -> Tuple[int, ...]:
        """Global ranks of this rank's ring, in ring order."""
        return tuple(self.ranks[self.ulysses_member + i * self.ulysses_degree] for i in range(self.ring_degree))

    def ulysses_ranks(self) -> Tuple[int, ...]:
        """Global ranks of this rank's Ulysses block, in member order."""
        first = self.ring_member * self.ulysses_degree
        return tuple(self.ranks[first : first + self.ulysses_degree])
