"""A small Llama-style decoder in PyTorch, on CPU, float64 (so that gradients of different plans
can be compared to 1e-9): RMSNorm, causal self-attention with rotary position embeddings, a
SwiGLU MLP, a few layers.

A micro-batch is a packed set of sequences. `Llama.loss` runs the tokens of the sequences `ids`
that a `layout` holds (all of them when there is none) at their positions in their sequences,
and attends with the model's `attend(q, k, v)`: by default a block-diagonal causal attention
over the tokens it holds; the dcp loop passes `dcp.torch.attend`, which attends across the
micro-step's group. Nothing here imports dcp: the plain data-parallel loop
(plain_training_loop.py) and the dcp loop (ten_line_integration.py) run the same model.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

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


def local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sequence: torch.Tensor,
                    position: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v over q, k, v [n, h, d]: a token sees the tokens of its
    own sequence at or before its position."""
    mask = (sequence[:, None] == sequence[None, :]) & (position[None, :] <= position[:, None])
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

    def forward(self, x: torch.Tensor, sequence: torch.Tensor, position: torch.Tensor, attend) -> torch.Tensor:
        c = self.c
        head = c.hidden // c.heads
        h = rms_norm(x, self.attention_norm)
        q = rotary((h @ self.wq.T).view(-1, c.heads, head), position, c.rope_base)
        k = rotary((h @ self.wk.T).view(-1, c.heads, head), position, c.rope_base)
        v = (h @ self.wv.T).view(-1, c.heads, head)
        a = attend(q, k, v) if attend is not None else local_attention(q, k, v, sequence, position)
        x = x + a.reshape(-1, c.hidden) @ self.wo.T
        h = rms_norm(x, self.mlp_norm)
        return x + (F.silu(h @ self.w_gate.T) * (h @ self.w_up.T)) @ self.w_down.T


class Llama(torch.nn.Module):
    """`attend(q, k, v)`, if given, replaces the local attention of every block."""

    def __init__(self, c: Config = Config(), seed: int = 7, attend=None):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.c = c
        self.attend = attend
        self.embedding = torch.nn.Parameter(torch.randn(c.vocab, c.hidden, generator=generator, dtype=DTYPE))
        self.blocks = torch.nn.ModuleList(Block(c, generator) for _ in range(c.layers))
        self.final_norm = torch.nn.Parameter(torch.ones(c.hidden, dtype=DTYPE))
        self.output = torch.nn.Parameter(
            torch.randn(c.vocab, c.hidden, generator=generator, dtype=DTYPE) / math.sqrt(c.hidden))
        self.loss_sum = 0.0  # losses differentiated since zero_grad (this rank's share)

    def zero_grad(self, set_to_none: bool = False) -> None:
        super().zero_grad(set_to_none=set_to_none)
        self.loss_sum = 0.0

    def loss(self, batch: Sequence[Document], ids: Sequence[int], layout=None) -> torch.Tensor:
        """The sum of per-token cross-entropies over the sequences `ids` of `batch`, packed in
        that order: of the tokens `layout` holds (its local_indices and local_positions into
        the packed inputs), or of all of them."""
        sequences = [batch[i] for i in ids]
        inputs = torch.tensor([t for s in sequences for t in s.tokens[:-1]], dtype=torch.long)
        targets = torch.tensor([t for s in sequences for t in s.tokens[1:]], dtype=torch.long)
        if layout is None:
            sequence = torch.tensor([n for n, s in enumerate(sequences) for _ in range(s.length)], dtype=torch.long)
            position = torch.tensor([p for s in sequences for p in range(s.length)], dtype=torch.long)
        else:
            inputs, targets = inputs[layout.local_indices], targets[layout.local_indices]
            sequence, position = layout.local_sequence, layout.local_positions
        x = self.embedding[inputs]
        for block in self.blocks:
            x = block(x, sequence, position, self.attend)
        logits = rms_norm(x, self.final_norm) @ self.output.T
        return F.cross_entropy(logits, targets, reduction="sum")

    def backward(self, loss: torch.Tensor) -> None:
        """Differentiate `loss` (gradients accumulate) and count it in loss_sum."""
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
