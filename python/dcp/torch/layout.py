"""Which tokens of a packed micro-batch each member of a sequence-parallel group holds.

One layout serves every style, so an executor splits its inputs without knowing the style. The
packed micro-batch concatenates its sequences in order; sequence s covers packed tokens
[cu_seqlens[s], cu_seqlens[s + 1]). With r = degree / ulysses_degree ring members:

1. Ring level (causal load balance, the zigzag of Megatron-LM's context parallelism): every
   sequence is cut into 2·r chunks, chunk c covering positions [c·L // 2r, (c+1)·L // 2r);
   ring member i holds chunks i and 2r−1−i of every sequence. That set of tokens, sequence by
   sequence in position order, is ring member i's *share*.
2. Ulysses level: the u = ulysses_degree members of a Ulysses block split their ring member's
   share into u contiguous pieces of ⌊T/u⌋ or ⌈T/u⌉ tokens, in member order, so that the
   Ulysses all-to-all reassembles the share by concatenating what the members hold.

Member m of the group is ring member m // u and Ulysses member m % u, as
`SequenceParallelGroups` splits the group. Sequences shorter than 2·r tokens leave some chunks
empty, and a member may hold no tokens at all.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch

from ._groups_type import GroupPosition, SequenceParallelGroups


@dataclass(frozen=True)
class Segment:
    """Positions [start, stop) of sequence `sequence`: consecutive tokens of one sequence."""

    sequence: int
    start: int
    stop: int

    @property
    def tokens(self) -> int:
        return self.stop - self.start


class ShardLayout(GroupPosition):
    """The tokens of a packed micro-batch that member `member` of a group of `degree` holds.

    `lengths` are the sequences' token counts in packing order (an empty list is an empty
    micro-batch); `ulysses_degree` is the size of the Ulysses blocks (1: ring attention over the
    whole group; `degree`: Ulysses over the whole group). Tensors are int64 on the CPU:

    - `cu_seqlens` [sequences + 1]: the packed offset of each sequence, then the total.
    - `local_indices` [local_tokens]: packed index of each local token, in local order.
    - `local_positions` [local_tokens]: position of each local token within its sequence.
    - `local_sequence` [local_tokens]: sequence index of each local token.

    `segments` are the local tokens as runs of consecutive positions, in local order, and
    `ulysses_token_counts` the tokens each member of this member's Ulysses block holds, in Ulysses
    member order. The members' `local_indices` together hold every packed token exactly once.
    """

    def __init__(self, lengths: Sequence[int], degree: int = 1, member: int = 0, ulysses_degree: int = 1) -> None:
        self.lengths: Tuple[int, ...] = _checked_lengths(lengths)
        _check_group_shape(degree, member, ulysses_degree)
        self.degree = degree
        self.member = member
        self.ulysses_degree = ulysses_degree
        self._shares = tuple(_ring_share(self.lengths, self.ring_degree, i) for i in range(self.ring_degree))
        self.ulysses_token_counts = _even_split(self.share_tokens(self.ring_member), ulysses_degree)
        first = sum(self.ulysses_token_counts[: self.ulysses_member])
        self.segments = _cut(self.share(self.ring_member), first, first + self.local_tokens)
        offsets = [0]
        for length in self.lengths:
            offsets.append(offsets[-1] + length)
        self.cu_seqlens = torch.tensor(offsets, dtype=torch.long)
        self.local_positions = _concat_ranges([(s.start, s.stop) for s in self.segments])
        self.local_sequence = _repeat([(s.sequence, s.tokens) for s in self.segments])
        self.local_indices = self.local_positions + self.cu_seqlens[self.local_sequence]

    @classmethod
    def for_groups(cls, lengths: Sequence[int], groups: SequenceParallelGroups) -> "ShardLayout":
        """The layout of this rank's share of a micro-batch run on `groups`."""
        return cls(lengths, groups.degree, groups.member, groups.ulysses_degree)

    @property
    def local_tokens(self) -> int:
        return self.ulysses_token_counts[self.ulysses_member]

    @property
    def total_tokens(self) -> int:
        return sum(self.lengths)

    def share(self, ring_member: int) -> Tuple[Segment, ...]:
        """The segments that ring member `ring_member`'s Ulysses block holds together, in order."""
        return self._shares[ring_member]

    def share_tokens(self, ring_member: int) -> int:
        return _tokens_of(self._shares[ring_member])

    def __repr__(self) -> str:
        return (
            f"ShardLayout(sequences={len(self.lengths)}, total_tokens={self.total_tokens}, degree={self.degree}, "
            f"member={self.member}, ulysses_degree={self.ulysses_degree}, local_tokens={self.local_tokens})"
        )


def _checked_lengths(lengths: Sequence[int]) -> Tuple[int, ...]:
    checked = tuple(operator.index(length) for length in lengths)
    for index, length in enumerate(checked):
        if length < 1:
            raise ValueError(f"ShardLayout: lengths[{index}] = {length} must be at least 1")
    return checked


def _check_group_shape(degree: int, member: int, ulysses_degree: int) -> None:
    if degree < 1:
        raise ValueError(f"ShardLayout: degree = {degree} must be at least 1")
    if not 0 <= member < degree:
        raise ValueError(f"ShardLayout: member = {member} must be in [0, degree = {degree})")
    if ulysses_degree < 1 or degree % ulysses_degree != 0:
        raise ValueError(f"ShardLayout: ulysses_degree = {ulysses_degree} must be a divisor of degree = {degree}")


def _ring_share(lengths: Tuple[int, ...], ring_degree: int, ring_member: int) -> Tuple[Segment, ...]:
    """Chunks ring_member and 2r−1−ring_member of every sequence, empty chunks left out."""
    chunks = 2 * ring_degree
    segments: List[Segment] = []
    for sequence, length in enumerate(lengths):
        for chunk in (ring_member, chunks - 1 - ring_member):
            start, stop = chunk * length // chunks, (chunk + 1) * length // chunks
            if start == stop:
                continue
            if segments and segments[-1].sequence == sequence and segments[-1].stop == start:
                segments[-1] = Segment(sequence, segments[-1].start, stop)
            else:
                segments.append(Segment(sequence, start, stop))
    return tuple(segments)


def _even_split(tokens: int, parts: int) -> Tuple[int, ...]:
    """Sizes of `parts` contiguous pieces of `tokens`, piece j covering [j·T // parts, (j+1)·T // parts)."""
    return tuple((j + 1) * tokens // parts - j * tokens // parts for j in range(parts))


def _cut(segments: Tuple[Segment, ...], first: int, stop: int) -> Tuple[Segment, ...]:
    """The tokens [first, stop) of the concatenated `segments`, as segments."""
    cut: List[Segment] = []
    offset = 0
    for segment in segments:
        begin, end = max(first, offset), min(stop, offset + segment.tokens)
        if begin < end:
            cut.append(Segment(segment.sequence, segment.start + begin - offset, segment.start + end - offset))
        offset += segment.tokens
    return tuple(cut)


def _tokens_of(segments: Tuple[Segment, ...]) -> int:
    return sum(segment.tokens for segment in segments)


def _concat_ranges(ranges: List[Tuple[int, int]]) -> torch.Tensor:
    if not ranges:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat([torch.arange(start, stop, dtype=torch.long) for start, stop in ranges])


def _repeat(values_and_counts: List[Tuple[int, int]]) -> torch.Tensor:
    values = torch.tensor([value for value, _ in values_and_counts], dtype=torch.long)
    counts = torch.tensor([count for _, count in values_and_counts], dtype=torch.long)
    return torch.repeat_interleave(values, counts)
