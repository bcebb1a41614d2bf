"""The measured layers in plain PyTorch: attention over packed documents, a Llama decoder block
and a stack of them with the embedding, LM head and loss. Runs on torch 1.13 (CPU) and 2.x."""

import inspect
import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from common import LayerShape


def has_sdpa() -> bool:
    return hasattr(F, "scaled_dot_product_attention")


def math_attention(q, k, v, causal: bool):
    """softmax(q kᵀ / √d) v on [batch, heads, tokens, head_dim], for a torch without SDPA."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        rows, cols = scores.shape[-2:]
        mask = torch.ones(rows, cols, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ v


def attention(q, k, v, causal: bool):
    """[batch, heads, tokens, head_dim]: SDPA where torch has it (its own kernel choice, or the
    one an enclosing sdpa_kernel() allows), the math fallback otherwise."""
    if has_sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return math_attention(q, k, v, causal)


def sdpa_backends():
    """(name, backend) of torch's fused SDPA kernels that can be forced, [] where torch cannot."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:
        return []
    names = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
    return [(name.lower(), getattr(SDPBackend, name)) for name in names if hasattr(SDPBackend, name)]


def forced_backend(backend):
    """The context that lets SDPA use only `backend` (None: torch's own choice)."""
    if backend is None:
        import contextlib
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel
    return sdpa_kernel([backend])


def _varlen_function():
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


class DocumentAttention:
    """Causal attention within each document of a packed micro-batch, on [tokens, heads, d].

    torch.nn.attention.varlen.varlen_attn (FlashAttention's varlen kernel, torch >= 2.9) where
    torch has it on this device and allow_varlen; otherwise one causal SDPA call per document."""

    def __init__(self, lengths: Sequence[int], device: str, allow_varlen: bool = True):
        self.lengths = list(lengths)
        self.varlen = _varlen_function() if (allow_varlen and device == "cuda") else None
        self.kernel = "varlen_attn" if self.varlen else f"{'sdpa' if has_sdpa() else 'math'} per document"
        if self.varlen:
            offsets = [0]
            for length in self.lengths:
                offsets.append(offsets[-1] + length)
            self.offsets = torch.tensor(offsets, dtype=torch.int32, device=device)
            parameters = inspect.signature(self.varlen).parameters
            self.causal = {"is_causal": True} if "is_causal" in parameters else {"window_size": (-1, 0)}

    def __call__(self, q, k, v):
        if self.varlen:
            longest = max(self.lengths)
            return self.varlen(q, k, v, self.offsets, self.offsets, longest, longest, **self.causal)
        outputs, start = [], 0
        for length in self.lengths:
            end = start + length
            pieces = [t[start:end].transpose(0, 1).unsqueeze(0) for t in (q, k, v)]
            outputs.append(attention(*pieces, causal=True).squeeze(0).transpose(0, 1))
            start = end
        return torch.cat(outputs)


def varlen_works(device: str, dtype) -> bool:
    """Whether varlen_attn runs forward and backward here (its signature has changed between
    torch releases): the stack and the block use the per-document loop otherwise."""
    if _varlen_function() is None or device != "cuda":
        return False
    try:
        attend = DocumentAttention([3, 5], device)
        q, k, v = (torch.randn(8, 2, 64, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        attend(q, k, v).sum().backward()
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 (any failure means: do not use it)
        return False


def rope_tables(lengths: Sequence[int], head_dim: int, device: str, dtype):
    """cos and sin [tokens, 1, head_dim/2] with positions restarting at each document."""
    positions = torch.cat([torch.arange(n, device=device) for n in lengths]).float()
    inverse = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = positions[:, None] * inverse[None, :]
    return angles.cos()[:, None, :].to(dtype), angles.sin()[:, None, :].to(dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rms_norm(x, weight, eps: float = 1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight


class Batch:
    """A packed micro-batch: its documents' lengths and what every layer needs for them."""

    def __init__(self, lengths: Sequence[int], shape: LayerShape, device: str, dtype,
                 allow_varlen: bool = True):
        self.lengths = list(lengths)
        self.tokens = sum(self.lengths)
        self.attention = DocumentAttention(self.lengths, device, allow_varlen)
        self.cos, self.sin = rope_tables(self.lengths, shape.head_dim, device, dtype)


class LlamaBlock(nn.Module):
    """RMSNorm, fused QKV, RoPE, causal attention per document, output projection; RMSNorm,
    SwiGLU (fused gate+up, down). K and V are repeated to the query heads before attention."""

    def __init__(self, shape: LayerShape):
        super().__init__()
        self.shape = shape
        self.attention_norm = nn.Parameter(torch.ones(shape.hidden))
        self.qkv = nn.Linear(shape.hidden, shape.qkv_out, bias=False)
        self.out = nn.Linear(shape.hidden, shape.hidden, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(shape.hidden))
        self.gate_up = nn.Linear(shape.hidden, 2 * shape.ffn, bias=False)
        self.down = nn.Linear(shape.ffn, shape.hidden, bias=False)

    def forward(self, x, batch: Batch):
        s = self.shape
        tokens, kv_width = x.shape[0], s.kv_heads * s.head_dim
        q, k, v = self.qkv(rms_norm(x, self.attention_norm)).split([s.hidden, kv_width, kv_width], -1)
        q = rotate(q.view(tokens, s.heads, s.head_dim), batch.cos, batch.sin)
        k = rotate(k.view(tokens, s.kv_heads, s.head_dim), batch.cos, batch.sin)
        v = v.view(tokens, s.kv_heads, s.head_dim)
        group = s.heads // s.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        x = x + self.out(batch.attention(q, k, v).reshape(tokens, s.hidden))
        gate, up = self.gate_up(rms_norm(x, self.mlp_norm)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class LlamaStack(nn.Module):
    """Embedding, `layers` blocks, final norm, LM head and cross-entropy: Llama-3-8B's shapes
    with fewer layers. recompute=True runs each block under torch.utils.checkpoint (full
    recomputation: only the block's input is kept)."""

    def __init__(self, shape: LayerShape, layers: int):
        super().__init__()
        self.embedding = nn.Embedding(shape.vocab, shape.hidden)
        self.blocks = nn.ModuleList(LlamaBlock(shape) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(shape.hidden))
        self.head = nn.Linear(shape.hidden, shape.vocab, bias=False)

    def loss(self, token_ids, batch: Batch, recompute: bool):
        from torch.utils.checkpoint import checkpoint
        x = self.embedding(token_ids)
        for block in self.blocks:
            x = checkpoint(block, x, batch, use_reentrant=False) if recompute else block(x, batch)
        logits = self.head(rms_norm(x, self.norm))
        # BF16 logits upcast to FP32 for the loss, as dcp's memory model counts them.
        return F.cross_entropy(logits.float()[:-1], token_ids[1:])


def random_tokens(vocab: int, tokens: int, device: str, seed: int = 0):
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(vocab, (tokens,), generator=generator).to(device)
