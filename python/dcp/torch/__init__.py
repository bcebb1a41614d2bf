"""dcp.torch: train PyTorch models on dcp's plans.

    import dcp, dcp.torch
    cache = dcp.torch.GroupCache().warm_up()                  # every group, made once at start
    scheduler = dcp.Scheduler(dcp.ModelSpec.from_hf_config("config.json"), cluster)
    for batch in dcp.torch.PlannedBatches(dataset, sampler, length_of, scheduler, rank=rank):
        dcp.torch.run_step(batch.plan, micro_step, cache=cache, model=model, **batch.run_options())
        optimizer.step(); optimizer.zero_grad()

`micro_step(context)` runs the model on this rank's tokens of one micro-step (context.layout)
and returns the sum of their losses; attention layers call `dcp.torch.attend(q, k, v)`. What a
model must do is in dcp.torch.adapters; docs/integration.md has the whole story. Runs on torch
1.13 (CPU, Gloo) and torch 2.x (CUDA, NCCL).
"""

try:
    import torch as _torch  # noqa: F401 - the check that PyTorch is installed
except ImportError as _missing:  # pragma: no cover - depends on the machine
    raise ImportError("dcp.torch needs PyTorch: install torch (pip install torch, or Debian's "
                      "python3-torch)") from _missing

from ._groups_type import SequenceParallelGroups
from .adapters import attend, hf_attention, register_hf_attention
from .data import PlannedBatch, PlannedBatches
from .groups import GroupCache, backend_device
from .layout import ShardLayout
from .recompute import Recompute, selective_active
from .runtime import (
    CalibratedStepResult,
    MicroStepContext,
    StepReport,
    agree_on_plan,
    check_plan,
    current,
    is_out_of_memory,
    run_calibrated_step,
    run_step,
    share_observations,
)

__all__ = [
    "CalibratedStepResult", "GroupCache", "MicroStepContext", "PlannedBatch", "PlannedBatches", "Recompute",
    "SequenceParallelGroups", "ShardLayout", "StepReport", "agree_on_plan", "attend",
    "backend_device", "check_plan", "current", "hf_attention", "is_out_of_memory", "register_hf_attention",
    "run_calibrated_step", "run_step", "selective_active", "share_observations",
]
