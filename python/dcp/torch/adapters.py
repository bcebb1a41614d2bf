"""Bring your own model: what a transformer needs to train under dcp.torch.

The protocol, for any model:
  1. Run on this rank's tokens of the micro-batch: `context.layout.local_indices` picks them
     from the packed sequences, at the positions `context.layout.local_positions` (rotary
     embeddings must use these positions, not 0..n).
  2. In every attention layer, call `attend(q, k, v)` with q of shape [local tokens, heads,
     head_dim] and k, v of shape [local tokens, kv heads, head_dim]: it attends within each
     sequence over the micro-step's group in the planned style (Ulysses, ring or hybrid) and
     returns [local tokens, heads, head_dim]. Everything else in a block is per token.
  3. Return the sum of this rank's token losses from the micro-step function; run_step scales
     and differentiates it.
  4. For recomputation, hand the blocks to `dcp.torch.Recompute`.

`hf_attention` is (2) for a Hugging Face model, written against the documented
`AttentionInterface` of transformers (a function of module, query [batch, heads, tokens,
head_dim], key, value, attention_mask, scaling, dropout; returning [batch, tokens, heads,
head_dim] and the weights): `register_hf_attention()` registers it as "dcp", then load the
model with `attn_implementation="dcp"` and call it on the local tokens as one packed row with
`position_ids=context.layout.local_positions[None]`.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch.utils.checkpoint import checkpoint

from .attention import attention
from .recompute import selective_active
from .runtime import MicroStepContext, current

__all__ = ["attend", "hf_attention", "register_hf_attention"]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, context: Optional[MicroStepContext] = None,
           causal: bool = True, softmax_scale: Optional[float] = None) -> torch.Tensor:
    """Attention of this rank's tokens over the running micro-step (`current()` unless
    `context` is given): within each packed sequence, causal unless `causal=False`, across the
    micro-step's group in its planned style. Under a selective recompute setting the attention
    core keeps no activations and runs again in backward (with its collectives)."""
    context = context or current()
    if selective_active() and torch.is_grad_enabled():
        return checkpoint(_core, q, k, v, context, causal, softmax_scale, use_reentrant=False)
    return _core(q, k, v, context, causal, softmax_scale)


def _core(q, k, v, context: MicroStepContext, causal: bool, softmax_scale: Optional[float]) -> torch.Tensor:
    return attention(q, k, v, context.layout, context.groups, causal=causal, softmax_scale=softmax_scale)


def hf_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
                 **kwargs) -> Tuple[torch.Tensor, None]:
    """transformers' attention function signature over dcp's micro-step: one packed row
    (batch 1) of this rank's tokens; the mask is ignored (sequences are separated by the
    micro-step's layout) and dropout must be 0."""
    if query.shape[0] != 1:
        raise ValueError(f"dcp.torch.hf_attention: batch of {query.shape[0]} rows, dcp packs a micro-batch "
                         f"into one row (batch 1)")
    if dropout:
        raise ValueError(f"dcp.torch.hf_attention: dropout = {dropout}, attention dropout is not supported")
    causal = bool(getattr(module, "is_causal", True))
    out = attend(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1),
                 causal=causal, softmax_scale=scaling)
    return out[None], None


def register_hf_attention(name: str = "dcp") -> str:
    """Register `hf_attention` with transformers' AttentionInterface under `name`; returns it."""
    from transformers import AttentionInterface  # only here: transformers is optional

    AttentionInterface.register(name, hf_attention)
    return name
