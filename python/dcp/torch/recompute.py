"""Per-micro-step activation recomputation, as the plan says, for any stack of blocks.

A plan gives each micro-step a dcp.RecomputeSetting: `layers` blocks recomputed in full (they
keep only their input; the planner recomputes the first ones) and, with `selective`, the cheap
parts of the others (the attention core: scores, softmax and the weighted sum; Korthikanti et
al. 2022). `Recompute` wraps the blocks of a model once; `run_step` switches the setting per
micro-step. The planned model may have more layers than the one trained (a toy stands in for
Llama-3-8B): the same fraction of this model's blocks is recomputed, rounded up.

The hook a model needs: its blocks in a list (an nn.ModuleList works), each called as
`block(x, ...)`; and, for selective recomputation, attention through `dcp.torch.attention`
(which checkpoints its core while `selective_active()`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Iterator, Optional, Sequence

import torch
from torch.utils.checkpoint import checkpoint

__all__ = ["Recompute", "selective_active"]

# A process-wide flag, not a context variable: checkpointed blocks run their forward again in
# backward, on the autograd engine's device thread where the CUDA backend runs it.
_selective = [False]


def selective_active() -> bool:
    """Whether the running micro-step recomputes the attention core of its blocks."""
    return _selective[0]


class Recompute:
    """Wraps `blocks` so that the first k of them run under activation checkpointing while a
    setting asks for it. `planned_layers` is the layer count of the model the plan was made
    for (default: len(blocks))."""

    def __init__(self, blocks: Sequence[torch.nn.Module], planned_layers: Optional[int] = None) -> None:
        self.blocks = list(blocks)
        if not self.blocks:
            raise ValueError("dcp.torch.Recompute: no blocks to wrap")
        self.planned_layers = planned_layers or len(self.blocks)
        if self.planned_layers < 1:
            raise ValueError(f"dcp.torch.Recompute: planned_layers = {planned_layers}, must be >= 1")
        self.recomputed = 0  # blocks recomputed in full under the current setting
        for index, block in enumerate(self.blocks):
            if getattr(block, "_dcp_recompute", None) is not None:
                raise ValueError(f"dcp.torch.Recompute: block {index} is already wrapped")
            block._dcp_recompute = self
            block.forward = functools.partial(self._forward, index, block.forward)

    def blocks_for(self, layers: int) -> int:
        """Blocks of this model recomputed for `layers` planned layers."""
        if layers < 0 or layers > self.planned_layers:
            raise ValueError(f"dcp.torch.Recompute: {layers} recomputed layers, the planned model has "
                             f"{self.planned_layers}")
        return math.ceil(layers * len(self.blocks) / self.planned_layers)

    @contextlib.contextmanager
    def setting(self, setting) -> Iterator[None]:
        """Run under a dcp.RecomputeSetting (its `layers` and `selective`)."""
        previous = self.recomputed, _selective[0]
        self.recomputed, _selective[0] = self.blocks_for(setting.layers), bool(setting.selective)
        try:
            yield
        finally:
            self.recomputed, _selective[0] = previous

    def _forward(self, index: int, forward, *args, **kwargs):
        if index < self.recomputed and torch.is_grad_enabled():
            return checkpoint(forward, *args, use_reentrant=False, **kwargs)
        return forward(*args, **kwargs)
