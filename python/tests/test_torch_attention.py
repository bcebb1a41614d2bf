"""dcp.torch's ShardLayout and sequence-parallel attention.

The layout tests need no processes. The attention tests spawn 4 Gloo processes once, run every
case there (Ulysses at degrees 2 and 4, ring at 2 and 4, hybrid at 4, causal and not, grouped
query heads, short and empty sequences, groups whose member order is not rank order) and
compare outputs and gradients in float64 with a dense reference over the whole packed batch
that shares no code with dcp.torch. Each test then checks the cases it names.
"""

import importlib
import itertools
import math
import os
import pickle
import shutil
import tempfile
import unittest
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple
from unittest import mock

import torch
import torch.distributed as dist

from _processes import run_on_ranks
from dcp.torch._groups_type import SequenceParallelGroups
from dcp.torch.attention import attention
from dcp.torch.layout import ShardLayout

WORLD = 4
RELATIVE_TOLERANCE = 1e-9  # float64 parity: the kernels differ from the reference only in rounding
LENGTHS = (37, 1, 5, 64, 3, 20, 2)  # lengths 1, 2, 3 and 5 are shorter than 2 * degree at degree 4
HEAD_DIM = 8


@dataclass(frozen=True)
class Case:
    """One attention run on groups of `degree` ranks; every aligned block of the world runs it."""

    name: str
    degree: int
    ulysses_degree: int
    lengths: Tuple[int, ...] = LENGTHS
    heads: int = 4
    kv_heads: int = 2
    causal: bool = True
    member_order: Tuple[int, ...] = tuple(range(WORLD))  # global ranks in member order, block by block

    @property
    def style(self) -> str:
        if self.ulysses_degree == self.degree:
            return "ulysses"
        return "ring" if self.ulysses_degree == 1 else "hybrid"


PERMUTED = (2, 0, 3, 1)
CASES = [
    Case("ulysses2", 2, 2),
    Case("ulysses2/full", 2, 2, causal=False),
    Case("ulysses4/replicated_kv", 4, 4),
    Case("ulysses4/replicated_kv/full", 4, 4, causal=False),
    Case("ulysses4/one_kv_head", 4, 4, kv_heads=1),
    Case("ring2", 2, 1),
    Case("ring2/full", 2, 1, causal=False),
    Case("ring4", 4, 1),
    Case("ring4/full", 4, 1, causal=False),
    Case("ring4/many_heads", 4, 1, heads=6, kv_heads=3),
    Case("hybrid4", 4, 2),
    Case("hybrid4/full", 4, 2, causal=False),
    Case("hybrid4/replicated_kv", 4, 2, kv_heads=1),
    Case("permuted/ulysses4", 4, 4, member_order=PERMUTED),
    Case("permuted/ring4", 4, 1, member_order=PERMUTED),
    Case("permuted/hybrid4", 4, 2, member_order=PERMUTED),
    Case("short/ulysses4", 4, 4, lengths=(1, 2, 3, 7)),
    Case("short/ring4", 4, 1, lengths=(1, 2, 3, 7)),
    Case("short/hybrid4", 4, 2, lengths=(1, 2, 3, 7)),
    Case("one_token/ring4", 4, 1, lengths=(1,)),
    Case("one_token/hybrid4", 4, 2, lengths=(1,), causal=False),
    Case("empty/ulysses4", 4, 4, lengths=()),
    Case("empty/ring4", 4, 1, lengths=()),
    Case("empty/hybrid4", 4, 2, lengths=()),
]


# --- The reference and the inputs -------------------------------------------------------------------


def dense_attention(q, k, v, lengths: Sequence[int], causal: bool) -> torch.Tensor:
    """Softmax attention over the whole packed batch with a dense block-diagonal (and causal) mask."""
    tokens, heads, dim = q.shape
    sequence = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths, dtype=torch.long))
    starts = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.long)
    position = torch.arange(tokens) - starts[sequence]
    allowed = sequence[:, None] == sequence[None, :]
    if causal:
        allowed &= position[None, :] <= position[:, None]
    k = k.repeat_interleave(heads // k.shape[1], dim=1)
    v = v.repeat_interleave(heads // v.shape[1], dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(dim)
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    return torch.einsum("hqk,khd->qhd", probs, v)


def packed_inputs(seed: int, tokens: int, heads: int, kv_heads: int) -> Dict[str, torch.Tensor]:
    """q, k, v and the weights of the scalar loss sum(out * weights), the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    shapes = {"q": (tokens, heads), "k": (tokens, kv_heads), "v": (tokens, kv_heads), "weights": (tokens, heads)}
    return {name: torch.randn(*shape, HEAD_DIM, generator=generator, dtype=torch.float64) for name, shape in shapes.items()}


def reference(case: Case, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The output and dq, dk, dv of the dense reference."""
    q, k, v = (inputs[name].clone().requires_grad_() for name in "qkv")
    out = dense_attention(q, k, v, case.lengths, case.causal)
    (out * inputs["weights"]).sum().backward()
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def run_attention(
    case: Case, inputs: Dict[str, torch.Tensor], layout: ShardLayout, groups: SequenceParallelGroups
) -> Dict[str, Optional[torch.Tensor]]:
    """The output and dq, dk, dv of this member's tokens through dcp.torch."""
    local = layout.local_indices
    q, k, v = (inputs[name][local].clone().requires_grad_() for name in "qkv")
    out = attention(q, k, v, layout, groups, causal=case.causal)
    (out * inputs["weights"][local]).sum().backward()
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def relative_error(actual: Optional[torch.Tensor], expected: torch.Tensor) -> float:
    """max |actual - expected| / max(max |expected|, 1): relative for the O(1) tensors here,
    absolute where the truth is 0 (dq and dk of a one-token sequence); infinite when actual is
    missing or misshapen."""
    if actual is None or actual.shape != expected.shape:
        return math.inf
    if expected.numel() == 0:
        return 0.0
    return ((actual - expected).abs().max() / expected.abs().max().clamp_min(1.0)).item()


# --- The spawned processes ------------------------------------------------------------------------


def make_process_groups() -> Dict[frozenset, object]:
    """Every group any case uses; every rank creates all of them in the same order."""
    rank_sets = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 1, 2, 3)]
    return {frozenset(ranks): dist.new_group(list(ranks)) for ranks in rank_sets}


def groups_for(case: Case, rank: int, process_groups: Dict[frozenset, object]) -> SequenceParallelGroups:
    """This rank's SequenceParallelGroups for `case`: blocks of `degree` consecutive entries of
    member_order, Ulysses over u consecutive members, rings over members of equal offset."""
    blocks = [case.member_order[first : first + case.degree] for first in range(0, WORLD, case.degree)]
    ranks = next(block for block in blocks if rank in block)
    member, u = ranks.index(rank), case.ulysses_degree
    ulysses_ranks = ranks[member // u * u : member // u * u + u]
    ring_ranks = ranks[member % u :: u]
    return SequenceParallelGroups(
        style=case.style,
        degree=case.degree,
        member=member,
        ranks=tuple(ranks),
        group=process_groups[frozenset(ranks)],
        ulysses_degree=u,
        ulysses_group=process_groups[frozenset(ulysses_ranks)] if len(ulysses_ranks) > 1 else None,
        ring_group=process_groups[frozenset(ring_ranks)] if len(ring_ranks) > 1 else None,
    )


def run_cases(rank: int, ranks: int, folder: str) -> None:
    """Run every case on this rank; write {case name: {tensor: relative error}} to the folder."""
    process_groups = make_process_groups()
    errors: Dict[str, Dict[str, float]] = {}
    for seed, case in enumerate(CASES):
        inputs = packed_inputs(seed, sum(case.lengths), case.heads, case.kv_heads)
        groups = groups_for(case, rank, process_groups)
        layout = ShardLayout.for_groups(case.lengths, groups)
        expected = reference(case, inputs)
        actual = run_attention(case, inputs, layout, groups)
        local = layout.local_indices
        errors[case.name] = {name: relative_error(actual[name], expected[name][local]) for name in expected}
    with open(os.path.join(folder, f"errors{rank}.pkl"), "wb") as file:
        pickle.dump(errors, file)


class DistributedAttentionTest(unittest.TestCase):
    errors: List[Dict[str, Dict[str, float]]]

    @classmethod
    def setUpClass(cls) -> None:
        folder = tempfile.mkdtemp(prefix="dcp_attention_")
        try:
            run_on_ranks(run_cases, WORLD, folder, seconds=120, collective_timeout=30)
            cls.errors = []
            for rank in range(WORLD):
                with open(os.path.join(folder, f"errors{rank}.pkl"), "rb") as file:
                    cls.errors.append(pickle.load(file))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def assert_match(self, *names: str) -> None:
        for name in names:
            for rank, errors in enumerate(self.errors):
                for tensor, error in errors[name].items():
                    with self.subTest(case=name, rank=rank, tensor=tensor):
                        self.assertLessEqual(error, RELATIVE_TOLERANCE)

    def test_ulysses_degree_2(self) -> None:
        self.assert_match("ulysses2", "ulysses2/full")

    def test_ulysses_degree_4_replicates_kv_heads(self) -> None:
        self.assert_match("ulysses4/replicated_kv", "ulysses4/replicated_kv/full", "ulysses4/one_kv_head")

    def test_ring_degree_2(self) -> None:
        self.assert_match("ring2", "ring2/full")

    def test_ring_degree_4(self) -> None:
        self.assert_match("ring4", "ring4/full", "ring4/many_heads")

    def test_hybrid_degree_4(self) -> None:
        self.assert_match("hybrid4", "hybrid4/full", "hybrid4/replicated_kv")

    def test_member_order_other_than_rank_order(self) -> None:
        self.assert_match("permuted/ulysses4", "permuted/ring4", "permuted/hybrid4")

    def test_sequences_shorter_than_the_chunks(self) -> None:
        self.assert_match("short/ulysses4", "short/ring4", "short/hybrid4", "one_token/ring4", "one_token/hybrid4")

    def test_empty_micro_batch(self) -> None:
        self.assert_match("empty/ulysses4", "empty/ring4", "empty/hybrid4")

    def test_every_case_ran_on_every_rank(self) -> None:
        for errors in self.errors:
            self.assertEqual(set(errors), {case.name for case in CASES})


# --- One process ----------------------------------------------------------------------------------


def single_groups(style: str = "none", degree: int = 1, ulysses_degree: int = 1) -> SequenceParallelGroups:
    """Groups with no process groups: enough for degree 1 and for checks that run before any collective."""
    return SequenceParallelGroups(style, degree, 0, tuple(range(degree)), None, ulysses_degree, None, None)


def documented_scaled_dot_product_attention(query, key, value, is_causal=False):
    """torch 2.x's reference implementation of F.scaled_dot_product_attention (its docs), for
    [batch, heads, tokens, head_dim] inputs with as many key as query heads."""
    if key.shape[1] != query.shape[1]:
        raise RuntimeError("scaled_dot_product_attention needs as many key/value heads as query heads")
    weights = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        allowed = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool).tril()
        weights = weights.masked_fill(~allowed, float("-inf"))
    return weights.softmax(dim=-1) @ value


class LocalAttentionTest(unittest.TestCase):
    def test_degree_1_matches_the_dense_reference(self) -> None:
        for causal, kv_heads in itertools.product((True, False), (1, 2, 4)):
            with self.subTest(causal=causal, kv_heads=kv_heads):
                case = Case("none", 1, 1, kv_heads=kv_heads, causal=causal)
                inputs = packed_inputs(7, sum(LENGTHS), case.heads, kv_heads)
                expected = reference(case, inputs)
                actual = run_attention(case, inputs, ShardLayout(LENGTHS), single_groups())
                for name in expected:
                    self.assertLessEqual(relative_error(actual[name], expected[name]), RELATIVE_TOLERANCE, name)

    def test_fused_path_calls_scaled_dot_product_attention_as_documented(self) -> None:
        # torch 2.x runs "none" and "ulysses" through F.scaled_dot_product_attention; on torch 1.13
        # a stand-in that follows its documented reference implementation takes its place.
        module = importlib.import_module("dcp.torch.attention")
        for causal, scale in itertools.product((True, False), (None, 0.3)):
            with self.subTest(causal=causal, scale=scale), mock.patch.object(
                module, "_SCALED_DOT_PRODUCT_ATTENTION", documented_scaled_dot_product_attention
            ):
                inputs = packed_inputs(11, sum(LENGTHS), 4, 2)
                q, k, v = (inputs[name] for name in "qkv")
                out = attention(q, k, v, ShardLayout(LENGTHS), single_groups(), causal=causal, softmax_scale=scale)
                rescale = 1.0 if scale is None else scale * math.sqrt(HEAD_DIM)
                expected = dense_attention(q * rescale, k, v, LENGTHS, causal)
                self.assertLessEqual(relative_error(out, expected), RELATIVE_TOLERANCE)

    def test_softmax_scale(self) -> None:
        q, k, v = (tensor for name, tensor in packed_inputs(3, sum(LENGTHS), 4, 2).items() if name != "weights")
        out = attention(q, k, v, ShardLayout(LENGTHS), single_groups(), softmax_scale=0.5 / math.sqrt(HEAD_DIM))
        expected = dense_attention(q * 0.5, k, v, LENGTHS, causal=True)
        self.assertLessEqual(relative_error(out, expected), RELATIVE_TOLERANCE)

    def test_heads_not_divisible_by_the_ulysses_degree(self) -> None:
        layout = ShardLayout(LENGTHS, degree=4, member=0, ulysses_degree=4)
        q = torch.zeros(layout.local_tokens, 6, HEAD_DIM)
        k = torch.zeros(layout.local_tokens, 2, HEAD_DIM)
        with self.assertRaisesRegex(ValueError, r"heads = 6 is not divisible by the Ulysses degree 4"):
            attention(q, k, k, layout, single_groups("ulysses", 4, 4))

    def test_bad_inputs(self) -> None:
        layout = ShardLayout(LENGTHS)
        q = torch.zeros(layout.local_tokens, 4, HEAD_DIM)
        with self.assertRaisesRegex(ValueError, r"kv_heads = 3 must divide heads = 4"):
            attention(q, q[:, :3], q[:, :3], layout, single_groups())
        with self.assertRaisesRegex(ValueError, r"q has 5 tokens; the layout gives this member 132"):
            attention(q[:5], q[:5], q[:5], layout, single_groups())
        with self.assertRaisesRegex(ValueError, r"style = 'ring' does not fit degree = 1"):
            attention(q, q, q, layout, single_groups("ring"))
        with self.assertRaisesRegex(ValueError, r"layout \(degree, member, ulysses_degree\) = \(1, 0, 1\)"):
            attention(q, q, q, layout, single_groups("ring", 2, 1))


# --- The layout alone ------------------------------------------------------------------------------


class ShardLayoutTest(unittest.TestCase):
    SHAPES = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 2), (8, 4)]
    BATCHES = [LENGTHS, (1,), (1, 1, 1), (15, 16, 17), (), (100,)]

    def test_members_hold_every_token_once(self) -> None:
        for (degree, u), lengths in itertools.product(self.SHAPES, self.BATCHES):
            with self.subTest(degree=degree, ulysses_degree=u, lengths=lengths):
                layouts = [ShardLayout(lengths, degree, member, u) for member in range(degree)]
                indices = torch.cat([layout.local_indices for layout in layouts])
                self.assertEqual(sorted(indices.tolist()), list(range(sum(lengths))))
                for layout in layouts:
                    self.assertEqual(layout.local_tokens, len(layout.local_indices))
                    self.assertEqual(layout.cu_seqlens.tolist(), [0, *itertools.accumulate(lengths)])
                    starts = layout.cu_seqlens[layout.local_sequence]
                    self.assertTrue(torch.equal(layout.local_indices, starts + layout.local_positions))

    def test_ring_members_hold_zigzag_chunks(self) -> None:
        lengths, degree, u = (37, 1, 5, 64), 8, 2
        ring = degree // u
        for member in range(degree):
            layout = ShardLayout(lengths, degree, member, u)
            block = [ShardLayout(lengths, degree, first, u) for first in range(member // u * u, member // u * u + u)]
            held = {(s, p) for other in block for s, p in zip(other.local_sequence.tolist(), other.local_positions.tolist())}
            expected = set()
            for sequence, length in enumerate(lengths):
                for chunk in (layout.ring_member, 2 * ring - 1 - layout.ring_member):
                    chunk_positions = range(chunk * length // (2 * ring), (chunk + 1) * length // (2 * ring))
                    expected |= {(sequence, position) for position in chunk_positions}
            self.assertEqual(held, expected, f"member {member}")

    def test_ulysses_members_split_their_share_evenly_in_order(self) -> None:
        for member in range(4):
            layout = ShardLayout((37, 1, 5, 64), 4, member, 4)
            self.assertIn(layout.local_tokens, (26, 27))
            self.assertEqual(layout.ulysses_token_counts, (26, 27, 27, 27))
        whole = torch.cat([ShardLayout((37, 1, 5, 64), 4, member, 4).local_indices for member in range(4)])
        self.assertEqual(whole.tolist(), list(range(107)))

    def test_degree_1_is_the_packed_order(self) -> None:
        layout = ShardLayout(LENGTHS)
        self.assertEqual(layout.local_indices.tolist(), list(range(sum(LENGTHS))))
        self.assertEqual(layout.local_sequence.tolist()[:40], [0] * 37 + [1, 2, 2])
        self.assertEqual(layout.local_positions.tolist()[35:40], [35, 36, 0, 0, 1])

    def test_bad_arguments_name_the_value_and_the_limit(self) -> None:
        with self.assertRaisesRegex(ValueError, r"lengths\[1\] = 0 must be at least 1"):
            ShardLayout([3, 0])
        with self.assertRaisesRegex(ValueError, r"degree = 0 must be at least 1"):
            ShardLayout([3], degree=0)
        with self.assertRaisesRegex(ValueError, r"member = 4 must be in \[0, degree = 4\)"):
            ShardLayout([3], degree=4, member=4)
        with self.assertRaisesRegex(ValueError, r"ulysses_degree = 3 must be a divisor of degree = 4"):
            ShardLayout([3], degree=4, ulysses_degree=3)
        with self.assertRaises(TypeError):
            ShardLayout([2.5])


if __name__ == "__main__":
    unittest.main()
