#!/usr/bin/env python3
"""dcp's predictions next to section d's measurements, and what a least-squares calibration
does to their error: reads d_stack.csv from the output folder, writes d_prediction.csv,
calibration.csv and prediction.json. Needs the dcp bindings (python/, built by CMake); without
them it writes prediction.json saying why, so a run without them can be predicted later:

    PYTHONPATH=build/python python3 tools/gpu_evidence/predict.py --out DIR
"""

import argparse
import copy
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import H200, OK, SMOKE, Row, as_float, read_csv, write_csv  # noqa: E402

NAN = math.nan


@dataclass(kw_only=True)
class PredictionRow(Row):
    case: str = ""
    measured_s: float = NAN
    predicted_s: float = NAN          # dcp's seconds(): max(device, host)
    predicted_device_s: float = NAN
    predicted_host_s: float = NAN
    time_error: float = NAN           # predicted / measured - 1
    measured_activation_bytes: float = NAN
    predicted_activation_bytes: float = NAN
    measured_static_bytes: float = NAN
    predicted_static_bytes: float = NAN   # dcp's states (with ZeRO-1 Adam) + runtime reserve


@dataclass(kw_only=True)
class CalibrationRow(Row):
    observed: int = 0                 # observations given to dcp.Calibrated, in run order
    mean_time_error_all: float = NAN  # mean |predicted / measured - 1| over every case
    mean_time_error_unseen: float = NAN  # the same over the cases not yet observed


def import_dcp(folder: str):
    if folder:
        sys.path.insert(0, os.path.abspath(folder))
    import dcp
    return dcp


def cost_model(dcp, shapes, layers: int):
    """llama3_8b with the run's widths and layers, on one H200 (ClusterSpec of one GPU)."""
    spec = copy.copy(dcp.models.llama3_8b())
    s = shapes.llama
    spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.ffn, spec.vocab = \
        layers, s.hidden, s.heads, s.kv_heads, s.ffn, s.vocab
    spec.name = f"{spec.name} widths {s.hidden}/{s.ffn}, {layers} layers"
    cluster = dcp.ClusterSpec(gpus=1, gpus_per_node=1, gpu=dcp.gpus.h200_sxm())
    return dcp.AnalyticCostModel(spec, cluster)


def observation(dcp, row: dict, layers: int):
    shape = dcp.MicroBatchShape()
    for index, length in enumerate(row["lengths"].split()):
        shape += dcp.MicroBatchShape.of(dcp.text_sample(index, int(length)))
    recompute = dcp.RecomputeSetting.full(layers) if row["recompute"] == "full" else dcp.RecomputeSetting.none()
    report = dcp.ExecutionReport(seconds=as_float(row["step_s"]),
                                 peak_bytes=max(as_float(row["peak_allocated_bytes"]), 0.0))
    return dcp.Observation(shape=shape, config=dcp.ExecutionConfig(degree=1, recompute=recompute), report=report)


def prediction_rows(cost, measured: List[dict], observations) -> List[PredictionRow]:
    rows = []
    for row, o in zip(measured, observations):
        predicted = cost.seconds(o.shape, o.config)
        rows.append(PredictionRow(
            case=row["case"], measured_s=o.report.seconds, predicted_s=predicted,
            predicted_device_s=cost.device_seconds(o.shape, o.config),
            predicted_host_s=cost.host_seconds(o.config), time_error=predicted / o.report.seconds - 1,
            measured_activation_bytes=as_float(row["activation_bytes"]),
            predicted_activation_bytes=cost.activation_bytes(o.shape, o.config),
            measured_static_bytes=as_float(row["static_bytes"]),
            predicted_static_bytes=cost.memory_terms(o.shape, o.config)[0]))
    return rows


def mean_error(cost, observations) -> float:
    if not observations:
        return NAN
    return sum(abs(cost.seconds(o.shape, o.config) / o.report.seconds - 1) for o in observations) / len(observations)


def calibration_rows(dcp, cost, observations) -> List[CalibrationRow]:
    """Observe the first N cases (N = 0, 1, 2, 4, ..., all) and report the error after."""
    counts = sorted({0, len(observations)} | {n for n in (1, 2, 4, 8, 16) if n < len(observations)})
    rows = []
    for n in counts:
        calibrated = dcp.Calibrated(cost)
        if n:
            calibrated.observe(observations[:n])
        rows.append(CalibrationRow(observed=n, mean_time_error_all=mean_error(calibrated, observations),
                                   mean_time_error_unseen=mean_error(calibrated, observations[n:])))
    return rows


def no_prediction(summary_path: str, reason: str) -> int:
    with open(summary_path, "w") as f:
        json.dump({"status": f"no prediction: {reason}"}, f, indent=2)
    print(f"predict.py: no prediction: {reason}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the measurement's output folder")
    parser.add_argument("--dcp-python", default="", help="folder holding the built dcp package")
    args = parser.parse_args(argv)
    summary_path = os.path.join(args.out, "prediction.json")
    measured = [row for row in read_csv(os.path.join(args.out, "d_stack.csv")) if row["status"] == OK]
    try:
        dcp = import_dcp(args.dcp_python) if measured else None
    except ImportError as error:
        return no_prediction(summary_path, f"the dcp bindings do not import ({error})")
    if dcp is None:
        return no_prediction(summary_path, "section d measured no micro-step")
    with open(os.path.join(args.out, "results.json")) as f:
        shapes = SMOKE if json.load(f)["mode"] == SMOKE.name else H200
    cost = cost_model(dcp, shapes, shapes.stack_layers)
    observations = [observation(dcp, row, shapes.stack_layers) for row in measured]
    write_csv(os.path.join(args.out, "d_prediction.csv"), PredictionRow,
              prediction_rows(cost, measured, observations))
    write_csv(os.path.join(args.out, "calibration.csv"), CalibrationRow,
              calibration_rows(dcp, cost, observations))
    constants = cost.constants()
    m = cost.model()
    summary = {"status": "ok",
               "model": f"{m.name}: hidden {m.hidden}, heads {m.heads}/{m.kv_heads}, ffn {m.ffn}, vocab {m.vocab}",
               "cluster": str(cost.cluster()), "training": str(cost.training()),
               "constants": {name: getattr(constants, name) for name in
                             ("dense_efficiency", "attention_forward_efficiency", "attention_backward_efficiency",
                              "kernel_launch_seconds", "kernels_per_layer", "host_seconds_per_kernel",
                              "step_overhead_seconds")}}
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
