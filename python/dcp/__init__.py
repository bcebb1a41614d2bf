"""dcp — Data-Centric Parallel scheduling for distributed training, from Python.

Plan a batch in one line::

    import dcp
    plan = dcp.plan([512, 8192, 130000], gpus=8)

or with your own specs::

    cluster = dcp.ClusterSpec(gpus=4, gpus_per_node=4, gpu=dcp.gpus.h200_sxm())
    scheduler = dcp.Scheduler(dcp.models.llama3_8b(), cluster)
    plan = scheduler.plan(lengths)          # lengths: ids are the indices; or a list of Sample
    for index in plan.steps_of(rank):
        step = plan.micro_steps[index]      # run step.sample_ids on ranks
        ...                                 # [step.first_rank, step.last_rank], scale the
                                            # mean loss by step.loss_scale

Units: seconds, bytes, tokens. Names mirror the C++ library (docs/concepts.md): C++ types are
CamelCase classes, their fields read/write attributes (a class built from keywords or from the
fields in order), their member functions methods (``cost.memory_budget()``,
``scheduler.cost()``); the derived quantities of StepPlan (``gap``, ``step_seconds``,
``idle_fraction``, ``total_tokens``) and MicroStep (``degree``, ``last_rank``, ``end_seconds``,
``recompute``) are read-only properties. Bad input raises ``dcp.Error`` (a ValueError) or one
of its subclasses with the C++ library's message, which names the sample or field, the value
and the limit.
"""

from typing import Optional, Sequence, Union

from . import _dcp
from ._dcp import (
    AnalyticConstants,
    AnalyticCostModel,
    AttentionKind,
    Calibrated,
    CalibratedScheduler,
    CalibrationOptions,
    CalibrationReport,
    ClusterSpec,
    CommError,
    Error,
    ExecutionConfig,
    ExecutionReport,
    GpuSpec,
    InvalidPlan,
    InvalidSample,
    InvalidSpec,
    LockstepMode,
    LossNormalisation,
    MicroBatchShape,
    MicroStep,
    MicroStepList,
    MlpKind,
    ModelFamily,
    ModelSpec,
    Observation,
    Precision,
    RankInterval,
    RecomputeSetting,
    Sample,
    SampleDoesNotFit,
    Scheduler,
    SequenceParallel,
    SimOptions,
    SimulatedMicroStep,
    StaticScheduler,
    StepPlan,
    StepResult,
    TrainingSpec,
    TruthModel,
    VideoShape,
    compute_fingerprint,
    gib,
    hgx_cluster,
    plan_observations,
    simulate,
    text_sample,
    truth_lower_bound_seconds,
    validate,
    validate_plan,
    video_sample,
)
from . import gpus, models
from . import gpus as _gpu_presets  # `gpus` is also plan()'s argument
from ._hf import model_spec_from_hf_config as _model_spec_from_hf_config

ModelSpec.from_hf_config = staticmethod(_model_spec_from_hf_config)

__version__: str = _dcp.__version__


def plan(
    batch: Sequence[Union[int, Sample]],
    model: Union[str, ModelSpec] = "llama3-8b",
    gpu: Union[str, GpuSpec] = "h200",
    gpus: int = 8,
    gpus_per_node: Optional[int] = None,
    sp: Union[str, SequenceParallel, None] = None,
    training: Optional[TrainingSpec] = None,
) -> StepPlan:
    """Plan one training step of `batch` (lengths in tokens, or Sample objects) in one call.

    `model` and `gpu` are presets by name (dcp.models.names(), dcp.gpus.names()) or specs;
    `gpus` GPUs in nodes of `gpus_per_node` (default: min(gpus, 8)); `sp` ("ulysses", "ring",
    "hybrid" or "auto" -- chosen per micro-batch; default: the training spec's, ulysses)
    overrides training.sp. Unknown names raise
    ValueError listing the known ones.
    """
    model_spec = model if isinstance(model, ModelSpec) else models.by_name(model)
    gpu_spec = gpu if isinstance(gpu, GpuSpec) else _gpu_presets.by_name(gpu)
    per_node = gpus_per_node if gpus_per_node is not None else min(gpus, 8)
    cluster = ClusterSpec(gpus=gpus, gpus_per_node=per_node, gpu=gpu_spec)
    spec = TrainingSpec() if training is None else training.__copy__()
    if sp is not None:
        spec.sp = sp
    return Scheduler(model_spec, cluster, spec).plan(batch)


__all__ = [
    "AnalyticConstants", "AnalyticCostModel", "AttentionKind", "Calibrated",
    "CalibratedScheduler", "CalibrationOptions", "CalibrationReport", "ClusterSpec",
    "CommError", "Error", "ExecutionConfig", "ExecutionReport", "GpuSpec", "InvalidPlan",
    "InvalidSample", "InvalidSpec", "LockstepMode", "LossNormalisation", "MicroBatchShape",
    "MicroStep", "MicroStepList", "MlpKind", "ModelFamily", "ModelSpec", "Observation",
    "Precision", "RankInterval", "RecomputeSetting", "Sample", "SampleDoesNotFit", "Scheduler",
    "SequenceParallel", "SimOptions", "SimulatedMicroStep", "StaticScheduler", "StepPlan",
    "StepResult", "TrainingSpec", "TruthModel", "VideoShape", "compute_fingerprint", "gib",
    "gpus", "hgx_cluster", "models", "plan", "plan_observations", "simulate", "text_sample",
    "truth_lower_bound_seconds", "validate", "validate_plan", "video_sample", "__version__",
]
