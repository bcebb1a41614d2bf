"""What the examples plan: each toy document as a text sample of Llama-3-8B, trained on one node
of H200s. The toy model is tiny and CPU-bound; the plans are the ones dcp makes for the real
model, so that their degrees, styles, micro-step counts and recomputation differ as they would."""

from __future__ import annotations

from typing import List, Optional, Sequence

import dcp
from llama import Document

#: Each trained token stands for this many tokens of the model dcp plans for, so that the
#: longest sequences (128 tokens: 32K planned tokens) need sequence parallelism on Llama-3-8B.
PLANNED_TOKENS_PER_TOKEN = 256

#: Layers of the planned model; a plan's recompute setting counts these.
PLANNED_LAYERS = dcp.models.llama3_8b().layers


def planner_samples(batch: Sequence[Document]) -> List[dcp.Sample]:
    """What dcp plans: one text sample per document, id = its index in the batch."""
    return [dcp.text_sample(i, d.length * PLANNED_TOKENS_PER_TOKEN) for i, d in enumerate(batch)]


def llama3_8b_node(gpus: int, training: Optional[dcp.TrainingSpec] = None) -> dcp.AnalyticCostModel:
    """Llama-3-8B trained on one node of `gpus` H200s (one NVSwitch domain), one GPU per rank."""
    cluster = dcp.ClusterSpec(gpus=gpus, gpus_per_node=gpus, gpu=dcp.gpus.h200_sxm())
    return dcp.AnalyticCostModel(dcp.models.llama3_8b(), cluster, training or dcp.TrainingSpec())
