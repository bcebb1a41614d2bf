"""A small Llama-style decoder in PyTorch, trained with sequence parallelism on CPU (Gloo).

RMSNorm, causal self-attention with rotary position embeddings, a SwiGLU MLP, a few layers;
float64 so that gradients of different plans can be compared to 1e-9. A micro-batch is a
packed set of sequences; each sequence's tokens are split into contiguous chunks over the
members of the micro-step's group (chunk j on member j), and attention gathers the keys and
values of the whole micro-batch from the group (`GatherKeysValues`), with a block-diagonal
causal mask built from each token's (sequence, position). Nothing here knows about dcp: the
plain data-parallel loop (plain_training_loop.py) and the dcp loop (ten_line_integration.py)
run the same `Llama.forward_backward`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

DTYPE = torch.float64


@dataclass(frozen=True)
class Config:
    vocab: int = 64
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    ffn: int = 64
    rope_base: float = 10000.0


class Document:
    """One training sequence: tokens[:-1] are the inputs, tokens[1:] the targets."""

    def __init__(self, tokens: List[int]):
        if len(tokens) < 2:
            raise ValueError(f"a sequence needs at least 2 tokens, got {len(tokens)}")
        self.tokens = tokens

    @property
    def length(self) -> int:
        """Tokens trained on (= loss terms)."""
        return len(self.tokens) - 1


def make_batch(lengths: Sequence[int], seed: int, step: int, vocab: int = Config.vocab) -> List[Document]:
    """Sequences of the given lengths with a learnable pattern (each continues its key's stride)."""
    rng = random.Random(seed * 1000003 + step)
    out = []
    for length in lengths:
        stride = rng.randrange(1, 8)
        tokens = [rng.randrange(vocab)]
        for _ in range(length):
            tokens.append(rng.randrange(vocab) if rng.random() < 0.1 else (tokens[-1] + stride) % vocab)
        out.append(Document(tokens))
    return out


def tokens_of(batch: Sequence[Document], ids: Optional[Sequence[int]] = None) -> int:
    """Loss terms of the sequences `ids` of `batch` (all when ids is None)."""
    chosen = batch if ids is None else [batch[i] for i in ids]
    return sum(s.length for s in chosen)


def chunk_bounds(length: int, degree: int, member: int) -> range:
    """Positions of a sequence of `length` tokens held by `member` of a group of `degree`."""
    return range(length * member // degree, length * (member + 1) // degree)


class Layout:
    """Which tokens of a micro-batch each member holds, in the order the gather concatenates
    them: member 0's chunks of every sequence, then member 1's, ..."""

    def __init__(self, lengths: Sequence[int], degree: int, member: int):
        self.degree = degree
        self.member = member
        self.sizes = []  # tokens held by each member
        seq_ids, positions = [], []
        for j in range(degree):
            n = 0
            for s, length in enumerate(lengths):
                chunk = chunk_bounds(length, degree, j)
                seq_ids.extend([s] * len(chunk))
                positions.extend(chunk)
                n += len(chunk)
            self.sizes.append(n)
        self.all_sequence = torch.tensor(seq_ids, dtype=torch.long)
        self.all_position = torch.tensor(positions, dtype=torch.long)
        begin = sum(self.sizes[:member])
        self.mine = slice(begin, begin + self.sizes[member])
        self.sequence = self.all_sequence[self.mine]
        self.position = self.all_position[self.mine]

    def mask(self) -> torch.Tensor:
        """[mine, all]: a query sees the keys of its own sequence at or before its position."""
        same = self.sequence[:, None] == self.all_sequence[None, :]
        causal = self.all_position[None, :] <= self.position[:, None]
        return same & causal


class GatherKeysValues(torch.autograd.Function):
    """Forward: all-gather each member's keys and values (packed on the last dimension) over the
    group, padded to the largest member's count (Gloo gathers equal sizes). Backward: each
    member's gradient holds its own queries' share for every key, so the member's slice of the
    SUM over the group is its keys' gradient: a reduce-scatter, written as all-reduce and slice
    (Gloo has no reduce_scatter; torch 1.13's distributed.nn all_gather is wrong on subgroups
    that do not start at rank 0)."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, group, sizes: List[int], member: int) -> torch.Tensor:
        ctx.group, ctx.sizes, ctx.member = group, sizes, member
        widest = max(sizes)
        padded = local.new_zeros((widest,) + tuple(local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous(), group=group)
        return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
        begin = sum(ctx.sizes[: ctx.member])
        return total[begin : begin + ctx.sizes[ctx.member]], None, None, None


def rotary(x: torch.Tensor, position: torch.Tensor, base: float) -> torch.Tensor:
    """Rotary position embedding of x [tokens, heads, head_dim] at the given positions."""
    half = x.shape[-1] // 2
    frequency = base ** (-torch.arange(half, dtype=DTYPE) / half)
    angle = position.to(DTYPE)[:, None] * frequency[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v for q [n, h, d], k and v [m, h, d], mask [n, m]."""
    scores = torch.einsum("nhd,mhd->hnm", q, k) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask[None], float("-inf"))
    return torch.einsum("hnm,mhd->nhd", scores.softmax(-1), v)


class Block(torch.nn.Module):
    def __init__(self, c: Config, generator: torch.Generator):
        super().__init__()
        self.c = c

        def weight(*shape):
            return torch.nn.Parameter(torch.randn(*shape, generator=generator, dtype=DTYPE) / math.sqrt(shape[-1]))

        self.attention_norm = torch.nn.Parameter(torch.ones(c.hidden, dtype=DTYPE))
        self.wq, self.wk, self.wv, self.wo = (weight(c.hidden, c.hidden) for _ in range(4))
        self.mlp_norm = torch.nn.Parameter(torch.ones(c.hidden, dtype=DTYPE))
        self.w_gate, self.w_up = weight(c.ffn, c.hidden), weight(c.ffn, c.hidden)
        self.w_down = weight(c.hidden, c.ffn)

    def forward(self, x: torch.Tensor, layout: Layout, group, selective: bool) -> torch.Tensor:
        c = self.c
        head = c.hidden // c.heads
        h = rms_norm(x, self.attention_norm)
        q = rotary((h @ self.wq.T).view(-1, c.heads, head), layout.position, c.rope_base)
        k = rotary((h @ self.wk.T).view(-1, c.heads, head), layout.position, c.rope_base)
        v = (h @ self.wv.T).view(-1, c.heads, head)
        if layout.degree > 1:
            kv = GatherKeysValues.apply(torch.cat([k, v], dim=-1), group, layout.sizes, layout.member)
            k, v = kv[..., :head], kv[..., head:]
        mask = layout.mask()
        if selective:  # selective recomputation: the attention probabilities are not kept
            a = checkpoint(attention_core, q, k, v, mask, use_reentrant=False)
        else:
            a = attention_core(q, k, v, mask)
        x = x + a.reshape(-1, c.hidden) @ self.wo.T
        h = rms_norm(x, self.mlp_norm)
        return x + (F.silu(h @ self.w_gate.T) * (h @ self.w_up.T)) @ self.w_down.T


class Llama(torch.nn.Module):
    def __init__(self, c: Config = Config(), seed: int = 7):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.c = c
        self.embedding = torch.nn.Parameter(torch.randn(c.vocab, c.hidden, generator=generator, dtype=DTYPE))
        self.blocks = torch.nn.ModuleList(Block(c, generator) for _ in range(c.layers))
        self.final_norm = torch.nn.Parameter(torch.ones(c.hidden, dtype=DTYPE))
        self.output = torch.nn.Parameter(
            torch.randn(c.vocab, c.hidden, generator=generator, dtype=DTYPE) / math.sqrt(c.hidden))
        self.loss_sum = 0.0  # scaled loss accumulated since zero_grad (this rank's share)

    def zero_grad(self, set_to_none: bool = False) -> None:
        super().zero_grad(set_to_none=set_to_none)
        self.loss_sum = 0.0

    def forward_backward(self, batch: Sequence[Document], ids: Sequence[int], group, degree: int, member: int,
                         scale: float, recomputed_layers: int = 0, selective: bool = False) -> None:
        """Forward and backward of the sequences `ids` of `batch` as one micro-batch on a group
        of `degree` members (this rank is `member`; group None when degree is 1): the loss is
        the sum of per-token cross-entropies of this member's tokens times `scale`, gradients
        accumulate. The first `recomputed_layers` layers keep only their input (recomputed in
        backward); with `selective`, the others drop their attention probabilities."""
        sequences = [batch[i] for i in ids]
        layout = Layout([s.length for s in sequences], degree, member)
        inputs, targets = [], []
        for s in sequences:
            chunk = chunk_bounds(s.length, degree, member)
            inputs.extend(s.tokens[chunk.start : chunk.stop])
            targets.extend(s.tokens[chunk.start + 1 : chunk.stop + 1])
        x = self.embedding[torch.tensor(inputs, dtype=torch.long)]
        for index, block in enumerate(self.blocks):
            if index < recomputed_layers:
                x = checkpoint(block, x, layout, group, False, use_reentrant=False)
            else:
                x = block(x, layout, group, selective)
        logits = rms_norm(x, self.final_norm) @ self.output.T
        loss = F.cross_entropy(logits, torch.tensor(targets, dtype=torch.long), reduction="sum") * scale
        loss.backward()
        self.loss_sum += loss.item()

    def gradients(self) -> List[torch.Tensor]:
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.parameters()]

    def all_reduce(self) -> float:
        """SUM of every rank's gradients and losses over the world; returns the batch's loss."""
        flat = torch.cat([g.reshape(-1) for g in self.gradients()] + [torch.tensor([self.loss_sum], dtype=DTYPE)])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in self.parameters():
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n
        return float(flat[-1])

    @torch.no_grad()
    def sgd(self, learning_rate: float) -> None:
        for p in self.parameters():
            p -= learning_rate * p.grad
