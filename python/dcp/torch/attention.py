"""Sequence-parallel attention over a packed micro-batch of variable-length sequences.

`attention()` computes, for this member's tokens of a `ShardLayout`, attention that is
block-diagonal over sequences (a token sees only its own sequence) and, when causal, causal
within a sequence. It dispatches on the group's style:

- "none" (degree 1): local attention over whole sequences.
- "ulysses" (DeepSpeed-Ulysses, Jacobs et al. 2023): one all-to-all turns q, k, v from sharded
  by tokens into sharded by heads, local attention runs over whole sequences, and one
  all-to-all turns the output back.
- "ring" (ring attention, Liu et al. 2023; the zigzag causal balance of Megatron-LM's context
  parallelism): each ring member keeps its queries while the key/value shares travel around
  the ring; blocks merge by log-sum-exp (online softmax). The backward pass sends the key/value
  gradients around the ring behind their shares. A rank holds its own share and at most the
  shares (and gradient accumulators) of two steps, never the whole micro-batch's keys.
- "hybrid" (USP, Fang & Zhao 2024): Ulysses inside `groups.ulysses_group`, ring attention over
  `groups.ring_group` on the Ulysses output.

Collectives: only `all_to_all_single` with uneven (also zero) split sizes, which Gloo (torch
1.13 and later) and NCCL both implement; Gloo has no list `all_to_all` and no
`reduce_scatter`. A ring step is an all-to-all on the ring group in which each member sends
only to the next and receives only from the previous one: it cannot deadlock on NCCL as
unpaired `isend`/`irecv` can, and it runs asynchronously while the step computes.

Kernels: where no log-sum-exp is needed ("none", "ulysses") the sequences run through
FlashAttention's variable-length kernel in one call where torch has it and it works on the
device (`torch.nn.attention.varlen.varlen_attn`, torch 2.9 and later, CUDA, 16-bit; probed
once), else each through `torch.nn.functional.scaled_dot_product_attention` (torch 2.0 and
later), else through the plain kernel. Ring and hybrid attention always run the plain kernel
(einsum, masked softmax, explicit log-sum-exp) with an explicit backward pass. The plain
kernel computes in float32 for 16-bit inputs and in the input's precision otherwise.

Grouped-query attention: kv_heads must divide heads. Where the Ulysses degree does not divide
kv_heads, each key/value head is repeated (the fewest times that make the count divisible)
before the all-to-all; autograd sums the copies' gradients.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ._groups_type import SequenceParallelGroups
from .layout import Segment, ShardLayout

_SCALED_DOT_PRODUCT_ATTENTION = getattr(F, "scaled_dot_product_attention", None)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: ShardLayout,
    groups: SequenceParallelGroups,
    *,
    causal: bool = True,
    softmax_scale: Optional[float] = None,
) -> torch.Tensor:
    """Attention for this member's tokens: q [local_tokens, heads, head_dim], k and v
    [local_tokens, kv_heads, head_dim] in `layout`'s local order; returns
    [local_tokens, heads, head_dim]. `softmax_scale` defaults to head_dim ** -0.5; causal=False
    gives full attention within each sequence. Every member of `groups` must call it with the
    same lengths, head counts and flags. Raises ValueError on shapes, layouts or groups that do
    not fit together."""
    _check_inputs(q, k, v, layout, groups)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    share = layout.share(layout.ring_member)
    if groups.style == "none":
        return _local_attention(q, k, v, share, causal, scale)
    if groups.style == "ring":
        return _RingAttention.apply(q, k, v, _Ring(layout, groups, causal), scale)
    ulysses = _UlyssesExchange(layout, groups)
    k, v = _replicate_kv_heads(k, v, groups.ulysses_degree)
    q, k, v = _ScatterHeads.apply(ulysses, q, k, v)
    if groups.style == "ulysses":
        out = _local_attention(q, k, v, share, causal, scale)
    else:
        out = _RingAttention.apply(q, k, v, _Ring(layout, groups, causal), scale)
    return _GatherHeads.apply(ulysses, out)


def _implied_style(degree: int, ulysses_degree: int) -> str:
    if degree == 1:
        return "none"
    if ulysses_degree == degree:
        return "ulysses"
    return "ring" if ulysses_degree == 1 else "hybrid"


def _check_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: ShardLayout, groups: SequenceParallelGroups
) -> None:
    _check_groups(layout, groups)
    _check_tensors(q, k, v, layout.local_tokens, groups.ulysses_degree)


def _check_groups(layout: ShardLayout, groups: SequenceParallelGroups) -> None:
    style = _implied_style(groups.degree, groups.ulysses_degree)
    if groups.style != style:
        raise ValueError(
            f"attention: style = {groups.style!r} does not fit degree = {groups.degree} and "
            f"ulysses_degree = {groups.ulysses_degree}, which make {style!r}"
        )
    expected = (groups.degree, groups.member, groups.ulysses_degree)
    actual = (layout.degree, layout.member, layout.ulysses_degree)
    if actual != expected:
        raise ValueError(
            f"attention: layout (degree, member, ulysses_degree) = {actual} differs from the groups' {expected}"
        )


def _check_tensors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, local_tokens: int, ulysses_degree: int) -> None:
    alike = q.dim() == k.dim() == v.dim() == 3 and k.shape == v.shape
    if not alike or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(
            f"attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} must be "
            f"[tokens, heads, head_dim], k and v of one shape, with q's tokens and head_dim"
        )
    if q.shape[0] != local_tokens:
        raise ValueError(f"attention: q has {q.shape[0]} tokens; the layout gives this member {local_tokens}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if kv_heads == 0 or heads % kv_heads != 0:
        raise ValueError(f"attention: kv_heads = {kv_heads} must divide heads = {heads}")
    if heads % ulysses_degree != 0:
        raise ValueError(f"attention: heads = {heads} is not divisible by the Ulysses degree {ulysses_degree}")


def _replicate_kv_heads(k: torch.Tensor, v: torch.Tensor, ulysses_degree: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """k and v with each head repeated the fewest times that make the head count divisible by the
    Ulysses degree; query head h still reads (a copy of) key/value head h // (heads / kv_heads)."""
    copies = ulysses_degree // math.gcd(k.shape[1], ulysses_degree)
    if copies == 1:
        return k, v
    return k.repeat_interleave(copies, dim=1), v.repeat_interleave(copies, dim=1)


def _group_ranks(group: object, global_ranks: Sequence[int]) -> List[int]:
    return [dist.get_group_rank(group, rank) for rank in global_ranks]


def _all_to_all(received: torch.Tensor, send: torch.Tensor, receive_sizes: List[int], send_sizes: List[int],
                group: object, async_op: bool = False):
    """all_to_all_single into `received`. bfloat16 travels as the float16 it has the bits of:
    the exchange only moves bytes, and Gloo (torch 1.13) has no bfloat16."""
    if send.dtype == torch.bfloat16:
        received, send = received.view(torch.float16), send.view(torch.float16)
    return dist.all_to_all_single(received, send, receive_sizes, send_sizes, group=group, async_op=async_op)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


# --- Ulysses: tokens sharded <-> heads sharded ---------------------------------------------------


class _UlyssesExchange:
    """The all-to-all of one Ulysses block between tokens sharded (member j holds its
    `token_counts[j]` tokens, all heads) and heads sharded (every member holds all the block's
    tokens, in member order, and head block j of width / degree heads)."""

    def __init__(self, layout: ShardLayout, groups: SequenceParallelGroups) -> None:
        self.group = groups.ulysses_group
        self.degree = groups.ulysses_degree
        self.token_counts = layout.ulysses_token_counts
        self.local_tokens = layout.local_tokens
        # all_to_all_single orders its splits by group rank, which need not be member order.
        self.group_rank_of_member = _group_ranks(self.group, groups.ulysses_ranks())
        self.member_at_group_rank = sorted(range(self.degree), key=self.group_rank_of_member.__getitem__)
        self.in_member_order = self.member_at_group_rank == list(range(self.degree))

    def tokens_to_heads(self, blocks: torch.Tensor) -> torch.Tensor:
        """blocks [degree, local_tokens, w, D] (head block j for member j) -> [block tokens, w, D]."""
        _, tokens, width, dim = blocks.shape
        if not self.in_member_order:
            blocks = blocks[self.member_at_group_rank]
        send = blocks.reshape(self.degree * tokens, width, dim).contiguous()
        received = send.new_empty((sum(self.token_counts), width, dim))
        receive_sizes = [self.token_counts[member] for member in self.member_at_group_rank]
        _all_to_all(received, send, receive_sizes, [tokens] * self.degree, self.group)
        if self.in_member_order:
            return received
        pieces = received.split(receive_sizes)
        return torch.cat([pieces[self.group_rank_of_member[member]] for member in range(self.degree)])

    def heads_to_tokens(self, sharded: torch.Tensor) -> torch.Tensor:
        """sharded [block tokens, w, D] -> [degree, local_tokens, w, D] (head block j from member j)."""
        _, width, dim = sharded.shape
        send_sizes = [self.token_counts[member] for member in self.member_at_group_rank]
        if self.in_member_order:
            send = sharded.contiguous()
        else:
            pieces = sharded.split(list(self.token_counts))
            send = torch.cat([pieces[member] for member in self.member_at_group_rank])
        received = send.new_empty((self.degree * self.local_tokens, width, dim))
        _all_to_all(received, send, [self.local_tokens] * self.degree, send_sizes, self.group)
        blocks = received.view(self.degree, self.local_tokens, width, dim)
        return blocks if self.in_member_order else blocks[self.group_rank_of_member]


class _ScatterHeads(torch.autograd.Function):
    """Tensors [local_tokens, width_i, D] sharded by tokens -> [block tokens, width_i / degree, D]
    sharded by heads, all in one all-to-all; the backward pass is the inverse all-to-all."""

    @staticmethod
    def forward(ctx, exchange: _UlyssesExchange, *tensors: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        ctx.exchange = exchange
        ctx.widths = [tensor.shape[1] // exchange.degree for tensor in tensors]
        blocks = torch.cat([_head_blocks(tensor, exchange.degree) for tensor in tensors], dim=2)
        return tuple(exchange.tokens_to_heads(blocks).split(ctx.widths, dim=1))

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        blocks = ctx.exchange.heads_to_tokens(torch.cat(grads, dim=1))
        return (None, *(_from_head_blocks(part) for part in blocks.split(ctx.widths, dim=2)))


class _GatherHeads(torch.autograd.Function):
    """[block tokens, heads / degree, D] sharded by heads -> [local_tokens, heads, D] sharded by
    tokens; the backward pass is the inverse all-to-all."""

    @staticmethod
    def forward(ctx, exchange: _UlyssesExchange, sharded: torch.Tensor) -> torch.Tensor:
        ctx.exchange = exchange
        return _from_head_blocks(exchange.heads_to_tokens(sharded))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> Tuple[None, torch.Tensor]:
        return None, ctx.exchange.tokens_to_heads(_head_blocks(grad, ctx.exchange.degree))


def _head_blocks(tensor: torch.Tensor, degree: int) -> torch.Tensor:
    """[tokens, heads, D] -> [degree, tokens, heads / degree, D]: head block j first."""
    tokens, heads, dim = tensor.shape
    return tensor.reshape(tokens, degree, heads // degree, dim).transpose(0, 1)


def _from_head_blocks(blocks: torch.Tensor) -> torch.Tensor:
    """[degree, tokens, w, D] -> [tokens, degree * w, D], the inverse of `_head_blocks`."""
    degree, tokens, width, dim = blocks.shape
    return blocks.transpose(0, 1).reshape(tokens, degree * width, dim)


# --- Local attention over whole sequences ---------------------------------------------------------


def _local_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, share: Tuple[Segment, ...], causal: bool, scale: float
) -> torch.Tensor:
    """Attention over a ring degree of 1's share: one segment per sequence, the whole sequence.
    All sequences in one varlen kernel call where torch has one that works here (see
    `_varlen_kernel`), else one call per sequence."""
    if share and scale == q.shape[-1] ** -0.5 and _varlen_kernel(q.device, q.dtype) is not None:
        return _varlen_attention(q, k, v, [segment.tokens for segment in share], causal)
    outputs = []
    offset = 0
    for segment in share:
        rows = slice(offset, offset + segment.tokens)
        outputs.append(_sequence_attention(q[rows], k[rows], v[rows], causal, scale))
        offset += segment.tokens
    # With no tokens, a clone keeps the output in q's graph, so backward still runs the collectives.
    return torch.cat(outputs) if outputs else q.clone()


_VARLEN_PROBED: Dict[Tuple[str, torch.dtype], Optional[object]] = {}


def _varlen_kernel(device: torch.device, dtype: torch.dtype):
    """torch.nn.attention.varlen.varlen_attn (FlashAttention's variable-length kernel, torch 2.9
    and later) where it exists, takes `is_causal`, and runs forward and backward on this device
    and dtype (CUDA, 16-bit): probed once per device type and dtype; None otherwise."""
    key = (device.type, dtype)
    if key not in _VARLEN_PROBED:
        _VARLEN_PROBED[key] = _probe_varlen(device, dtype)
    return _VARLEN_PROBED[key]


def _probe_varlen(device: torch.device, dtype: torch.dtype):
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return None
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    if "is_causal" not in inspect.signature(varlen_attn).parameters:
        return None
    try:  # its signature has changed between releases: any failure means the per-sequence path
        q, k, v = (torch.randn(8, 2, 64, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        offsets = torch.tensor([0, 3, 8], dtype=torch.int32, device=device)
        out = varlen_attn(q, k, v, offsets, offsets, 5, 5, is_causal=True)
        out.float().sum().backward()
        expected = torch.cat([_plain_sequence_attention(q[a:b], k[a:b], v[a:b], True, 64**-0.5)
                              for a, b in ((0, 3), (3, 8))])
        if not torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2):
            return None  # another reading of the offsets or the mask: not the attention we need
    except Exception:  # noqa: BLE001
        return None
    return varlen_attn


def _varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: List[int], causal: bool) -> torch.Tensor:
    """Every sequence of the share in one varlen kernel call (K/V heads repeated for GQA)."""
    heads, kv_heads = q.shape[1], k.shape[1]
    if kv_heads != heads:
        k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
    offsets = torch.tensor([0] + lengths, dtype=torch.int32, device=q.device).cumsum(0, dtype=torch.int32)
    longest = max(lengths)
    return _varlen_kernel(q.device, q.dtype)(q, k, v, offsets, offsets, longest, longest, is_causal=causal)


def _sequence_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    if _SCALED_DOT_PRODUCT_ATTENTION is not None:
        return _fused_sequence_attention(q, k, v, causal, scale)
    return _plain_sequence_attention(q, k, v, causal, scale)


def _fused_sequence_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    """One whole sequence through scaled_dot_product_attention (torch 2.0 and later)."""
    heads, kv_heads, dim = q.shape[1], k.shape[1], q.shape[2]
    if kv_heads != heads:
        k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
    default_scale = dim**-0.5
    if scale != default_scale:
        q = q * (scale / default_scale)  # torch 2.0's SDPA takes no `scale`; it applies dim ** -0.5
    batched = [tensor.transpose(0, 1).unsqueeze(0) for tensor in (q, k, v)]
    out = _SCALED_DOT_PRODUCT_ATTENTION(*batched, is_causal=causal)
    return out.squeeze(0).transpose(0, 1)


def _plain_sequence_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    """One whole sequence with a masked softmax; autograd differentiates it."""
    tokens, heads, dim = q.shape
    dtype = _compute_dtype(q.dtype)
    queries = _grouped(q.to(dtype), k.shape[1])
    mask = torch.ones(tokens, tokens, dtype=torch.bool, device=q.device).tril() if causal else None
    probs = torch.softmax(_scores(queries, k.to(dtype), scale, mask), dim=-1)
    return torch.einsum("hgqk,khd->qhgd", probs, v.to(dtype)).reshape(tokens, heads, dim).to(q.dtype)


def _grouped(q: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """[tokens, heads, D] -> [tokens, kv_heads, heads / kv_heads, D]: query heads by key/value head."""
    tokens, heads, dim = q.shape
    return q.reshape(tokens, kv_heads, heads // kv_heads, dim)


def _scores(queries: torch.Tensor, keys: torch.Tensor, scale: float, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """queries [tq, kv_heads, group, D], keys [tk, kv_heads, D] -> [kv_heads, group, tq, tk];
    entries where `mask` [tq, tk] is False are -inf."""
    scores = torch.einsum("qhgd,khd->hgqk", queries, keys) * scale
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


# --- Ring attention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """One sequence's rectangle of the scores between a query share and a key/value share:
    rows `queries` of the query share against rows `keys` of the key/value share.
    `masked_positions` (query segments, key segments) give the positions behind both where the
    causal mask cuts the rectangle, and is None where it does not."""

    queries: slice
    keys: slice
    masked_positions: Optional[Tuple[Tuple[Segment, ...], Tuple[Segment, ...]]]

    def mask(self, device: torch.device) -> Optional[torch.Tensor]:
        if self.masked_positions is None:
            return None
        query_segments, key_segments = self.masked_positions
        return _positions(key_segments, device)[None, :] <= _positions(query_segments, device)[:, None]


@dataclass(frozen=True)
class _SequenceRows:
    """Rows [offset, offset + tokens) of a share hold `segments` of one sequence, positions rising."""

    offset: int
    segments: Tuple[Segment, ...]

    @property
    def tokens(self) -> int:
        return sum(segment.tokens for segment in self.segments)


def _rows_by_sequence(share: Tuple[Segment, ...]) -> Dict[int, _SequenceRows]:
    rows: Dict[int, _SequenceRows] = {}
    offset = 0
    for segment in share:
        held = rows.get(segment.sequence)
        if held is None:
            rows[segment.sequence] = _SequenceRows(offset, (segment,))
        else:
            rows[segment.sequence] = _SequenceRows(held.offset, held.segments + (segment,))
        offset += segment.tokens
    return rows


def _blocks(query_share: Tuple[Segment, ...], key_share: Tuple[Segment, ...], causal: bool) -> Tuple[_Block, ...]:
    """The rectangles of one ring step that hold any unmasked score, one per shared sequence."""
    keys_by_sequence = _rows_by_sequence(key_share)
    blocks = []
    for sequence, queries in _rows_by_sequence(query_share).items():
        keys = keys_by_sequence.get(sequence)
        if keys is None:
            continue
        block = _causal_block(queries, keys) if causal else _full_block(queries, keys)
        if block is not None:
            blocks.append(block)
    return tuple(blocks)


def _full_block(queries: _SequenceRows, keys: _SequenceRows) -> _Block:
    return _Block(_rows(queries.offset, queries.tokens), _rows(keys.offset, keys.tokens), None)


def _causal_block(queries: _SequenceRows, keys: _SequenceRows) -> Optional[_Block]:
    """The queries at or after the first key against the keys at or before the last query: a
    suffix and a prefix of the rows, as positions rise. The zigzag layout leaves half of an
    off-diagonal step's rectangle, with no mask. None when every score is masked."""
    first_key, last_query = keys.segments[0].start, queries.segments[-1].stop - 1
    query_segments = _within(queries.segments, first_key, last_query + 1)
    key_segments = _within(keys.segments, first_key, last_query + 1)
    if not query_segments or not key_segments:
        return None
    query_tokens = sum(segment.tokens for segment in query_segments)
    key_tokens = sum(segment.tokens for segment in key_segments)
    unmasked = key_segments[-1].stop - 1 <= query_segments[0].start
    return _Block(
        _rows(queries.offset + queries.tokens - query_tokens, query_tokens),
        _rows(keys.offset, key_tokens),
        None if unmasked else (query_segments, key_segments),
    )


def _rows(first: int, count: int) -> slice:
    return slice(first, first + count)


def _within(segments: Tuple[Segment, ...], start: int, stop: int) -> Tuple[Segment, ...]:
    """The parts of `segments` with positions in [start, stop)."""
    clipped = (Segment(s.sequence, max(s.start, start), min(s.stop, stop)) for s in segments)
    return tuple(segment for segment in clipped if segment.start < segment.stop)


def _positions(segments: Tuple[Segment, ...], device: torch.device) -> torch.Tensor:
    return torch.cat([torch.arange(s.start, s.stop, device=device) for s in segments])


class _InFlight:
    """A pass along the ring that has been started: `wait()` gives the received tensor."""

    def __init__(self, work: object, received: torch.Tensor) -> None:
        self.work = work
        self.received = received

    def wait(self) -> torch.Tensor:
        self.work.wait()
        return self.received


class _Ring:
    """What a ring attention call needs besides tensors: its peers, the token count of every
    ring member's share, and for each step the source of the key/value share and its blocks."""

    def __init__(self, layout: ShardLayout, groups: SequenceParallelGroups, causal: bool) -> None:
        self.group = groups.ring_group
        self.degree = groups.ring_degree
        member = groups.ring_member
        ring_ranks = groups.ring_ranks()
        self.next_group_rank, self.previous_group_rank = _group_ranks(
            self.group, [ring_ranks[(member + 1) % self.degree], ring_ranks[(member - 1) % self.degree]]
        )
        self.share_tokens = [layout.share_tokens(i) for i in range(self.degree)]
        self.own_tokens = self.share_tokens[member]
        # Step t computes with the share of member - t, which came t hops along the ring.
        self.sources = [(member - step) % self.degree for step in range(self.degree)]
        own_share = layout.share(member)
        self.blocks = [_blocks(own_share, layout.share(source), causal) for source in self.sources]

    def pass_along(self, tensor: torch.Tensor, incoming_rows: int) -> _InFlight:
        """Start sending `tensor` to the next member and receiving `incoming_rows` rows from the
        previous one."""
        received = tensor.new_empty((incoming_rows, *tensor.shape[1:]))
        send_sizes = [0] * self.degree
        send_sizes[self.next_group_rank] = tensor.shape[0]
        receive_sizes = [0] * self.degree
        receive_sizes[self.previous_group_rank] = incoming_rows
        work = _all_to_all(received, tensor.contiguous(), receive_sizes, send_sizes, self.group, async_op=True)
        return _InFlight(work, received)

    def key_value_rows(self, source: int) -> int:
        """Rows of the stacked keys and values of `source`'s share."""
        return 2 * self.share_tokens[source]


class _RingAttention(torch.autograd.Function):
    """Ring attention of one ring member's share: q [tokens, heads, D], k and v
    [tokens, kv_heads, D], with an explicit backward pass that rings dK and dV back home."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: _Ring, scale: float) -> torch.Tensor:
        out, log_sum_exp = _ring_forward(q, k, v, ring, scale)
        ctx.save_for_backward(q, k, v, out, log_sum_exp)
        ctx.ring = ring
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        q, k, v, out, log_sum_exp = ctx.saved_tensors
        dq, dk, dv = _ring_backward(q, k, v, out, log_sum_exp, grad_out, ctx.ring, ctx.scale)
        return dq, dk, dv, None, None


def _ring_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: _Ring, scale: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The output [tokens, heads, D] and the log-sum-exp [tokens, kv_heads, group] of every row."""
    dtype = _compute_dtype(q.dtype)
    queries = _grouped(q.to(dtype), k.shape[1])
    out = torch.zeros_like(queries)
    log_sum_exp = torch.full(queries.shape[:-1], float("-inf"), dtype=dtype, device=q.device)
    key_values = torch.cat([k, v]).to(dtype)
    for step, source in enumerate(ring.sources):
        last = step + 1 == ring.degree
        in_flight = None if last else ring.pass_along(key_values, ring.key_value_rows(ring.sources[step + 1]))
        keys, values = _keys_and_values(key_values, ring.share_tokens[source])
        for block in ring.blocks[step]:
            _merge_block(out, log_sum_exp, block, queries, keys, values, scale)
        if in_flight is not None:
            key_values = in_flight.wait()
    return out.reshape(q.shape).to(q.dtype), log_sum_exp


def _keys_and_values(stacked: torch.Tensor, tokens: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The two halves of torch.cat([keys, values]) of `tokens` tokens each."""
    return stacked[:tokens], stacked[tokens:]


def _merge_block(
    out: torch.Tensor,
    log_sum_exp: torch.Tensor,
    block: _Block,
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    scale: float,
) -> None:
    """Fold one block into the running output and log-sum-exp (online softmax). Every row of a
    block sees at least one key, so the block's log-sum-exp is finite."""
    rows = block.queries
    scores = _scores(queries[rows], keys[block.keys], scale, block.mask(queries.device))
    block_lse = torch.logsumexp(scores, dim=-1)
    block_out = torch.einsum("hgqk,khd->qhgd", torch.exp(scores - block_lse[..., None]), values[block.keys])
    block_lse = block_lse.permute(2, 0, 1)
    merged = torch.logaddexp(log_sum_exp[rows], block_lse)
    kept, added = torch.exp(log_sum_exp[rows] - merged), torch.exp(block_lse - merged)
    out[rows] = out[rows] * kept[..., None] + block_out * added[..., None]
    log_sum_exp[rows] = merged


def _ring_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    log_sum_exp: torch.Tensor,
    grad_out: torch.Tensor,
    ring: _Ring,
    scale: float,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The standard ring-attention backward pass: the key/value shares go around the ring again,
    each followed by its gradient accumulator, which every member adds to before passing it on;
    after the last step each accumulator has come back to its share's owner."""
    dtype = _compute_dtype(q.dtype)
    kv_heads = k.shape[1]
    queries = _grouped(q.to(dtype), kv_heads)
    grads = _grouped(grad_out.to(dtype), kv_heads)
    # delta_i = sum_d dO_id O_id, the softmax Jacobian's row term (FlashAttention-2, Alg. 2).
    delta = (grads * _grouped(out.to(dtype), kv_heads)).sum(dim=-1)
    dq = torch.zeros_like(queries)
    key_values = torch.cat([k, v]).to(dtype)
    accumulator_in_flight: Optional[_InFlight] = None
    for step, source in enumerate(ring.sources):
        last = step + 1 == ring.degree
        in_flight = None if last else ring.pass_along(key_values, ring.key_value_rows(ring.sources[step + 1]))
        tokens = ring.share_tokens[source]
        keys, values = _keys_and_values(key_values, tokens)
        d_key_values = torch.zeros_like(key_values)
        for block in ring.blocks[step]:
            _block_backward(block, queries, keys, values, grads, log_sum_exp, delta, scale, dq, d_key_values, tokens)
        if accumulator_in_flight is not None:
            d_key_values += accumulator_in_flight.wait()
        accumulator_in_flight = ring.pass_along(d_key_values, ring.key_value_rows((source - 1) % ring.degree))
        if in_flight is not None:
            key_values = in_flight.wait()
    dk, dv = _keys_and_values(accumulator_in_flight.wait(), ring.own_tokens)
    return dq.reshape(q.shape).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _block_backward(
    block: _Block,
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    grads: torch.Tensor,
    log_sum_exp: torch.Tensor,
    delta: torch.Tensor,
    scale: float,
    dq: torch.Tensor,
    d_key_values: torch.Tensor,
    key_tokens: int,
) -> None:
    """Add one block's share of dQ to `dq` and of dK, dV to `d_key_values` (dK rows first)."""
    rows, columns = block.queries, block.keys
    block_queries, block_keys, block_grads = queries[rows], keys[columns], grads[rows]
    scores = _scores(block_queries, block_keys, scale, block.mask(queries.device))
    probs = torch.exp(scores - log_sum_exp[rows].permute(1, 2, 0)[..., None])
    d_probs = torch.einsum("qhgd,khd->hgqk", block_grads, values[columns])
    d_scores = probs * (d_probs - delta[rows].permute(1, 2, 0)[..., None]) * scale
    dq[rows] += torch.einsum("hgqk,khd->qhgd", d_scores, block_keys)
    dk, dv = _keys_and_values(d_key_values, key_tokens)
    dk[columns] += torch.einsum("hgqk,qhgd->khd", d_scores, block_queries)
    dv[columns] += torch.einsum("hgqk,qhgd->khd", probs, block_grads)
