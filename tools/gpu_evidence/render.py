#!/usr/bin/env python3
"""Renders a tools/gpu_evidence.sh output folder as Markdown tables: OUT/gpu-results.md, and
with --docs docs/gpu-results.md (only from a GPU run, never from a --cpu-smoke one).

    python3 tools/gpu_evidence/render.py [OUT]            # OUT/gpu-results.md
    python3 tools/gpu_evidence/render.py --docs OUT       # also docs/gpu-results.md
    python3 tools/gpu_evidence/render.py --docs --empty   # the page before any H200 run

OUT defaults to $OUT, else build-gpu-evidence-out. The page carries no date (the docs carry no
history; results.json has the run's date)."""

import argparse
import json
import math
import os
import sys
from typing import Callable, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import OK, SECTION_BY_LETTER, SMOKE, as_float, read_csv  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PREAMBLE = """\
# GPU results: what one H200 measures

`tools/gpu_evidence.sh` is one prepared measurement run for one NVIDIA H200 (about 6 minutes,
the build of dcp's Python bindings included). Every figure is the median of repeated runs after
warm-up, timed with CUDA events; each section has a time box and records the shapes it had to
skip, and a section that fails records its error while the run goes on.

| section | what it measures |
|---|---|
| a | the host's time to issue kernels in eager PyTorch: a loop of one-element `add_` kernels, and a Llama-3-8B block's forward and backward at few tokens (host time over the kernels the profiler counts); both again replayed from a CUDA graph |
| b | causal attention forward and backward by length (1K-128K, one sequence, each SDPA kernel torch can be forced to: flash, cuDNN, memory-efficient) and on packed micro-batches of Wikipedia-like documents (`varlen_attn` where torch has it, else one SDPA call per document), in TFLOP/s with causal FLOPs counted as half of 4 s² h per layer forward and the backward as 2.5 forwards |
| c | BF16 GEMM efficiency (a Linear layer's `x Wᵀ`, back-to-back calls replayed from a CUDA graph) at 64-32K tokens per GPU, at Llama-3-8B's and STDiT3-XL's layer widths, as a fraction of the H200's 989.4 TFLOP/s dense BF16 peak |
| d | a stack of Llama-3-8B layers (embedding, LM head and loss included) on micro-batches of Wikipedia-like lengths and on single documents, without and with full recomputation (`torch.utils.checkpoint`): time and peak memory per micro-step, next to dcp's analytic prediction for the same shapes, and the error after a least-squares calibration (`dcp.Calibrated`) has seen the first N of them |
| e | STDiT's per-sample cross-attention above 200K video tokens (a query of N tokens against 300 caption tokens, hidden 1152, 16 heads): time, and whether each kernel runs or runs out of memory |
| f | what `tools/gpu_check.sh` checks, cheaply: the event timer against the wall clock on a device copy, and NCCL on one rank (`torch.distributed`, world size 1) |

On the GPU machine, from the repository root (the checkout alone: the script reads nothing
from `../shared`; the Wikipedia lengths come from the table embedded in
`sim/include/dcp/workload/wikipedia_profile.hpp`):

```sh
bash tools/gpu_evidence.sh                      # writes $OUT (default build-gpu-evidence-out/)
python3 tools/gpu_evidence/render.py --docs OUT # then, with that folder here: rewrites this page
```

Without a GPU, `bash tools/gpu_evidence.sh --cpu-smoke` runs every section with tiny shapes on
the CPU (the CTest test `gpu_evidence.cpu_smoke` does, and checks every section's rows); its
figures say nothing about a GPU. `bash tools/gpu_evidence.sh --help` lists the options.
"""

NO_RUN = """\
## Results

No H200 run has been made yet for this repository: there are no measured figures. The tables
appear here after a run on the GPU machine, rendered from its output folder.
"""


# ---- cells -----------------------------------------------------------------------------------

def missing(value: float) -> bool:
    return math.isnan(value) or value == 0


def seconds(text: str) -> str:
    value = as_float(text)
    if missing(value):
        return "–"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def number(text: str, digits: int = 3) -> str:
    value = as_float(text)
    return "–" if math.isnan(value) else f"{value:.{digits}g}"


def percent(text: str) -> str:
    value = as_float(text)
    return "–" if math.isnan(value) else f"{100 * value:.3g} %"


def gib(text: str) -> str:
    value = as_float(text)
    if missing(value):
        return "–"
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.3g} MiB"


def count(text: str) -> str:
    return "–" if text in ("", "0") else text


def plain(text: str) -> str:
    return (text or "–").replace("|", "/")


def status(row: dict) -> str:
    return "ok" if row["status"] == OK else f"{row['status']}: {plain(row['note'])}"


Column = Tuple[str, Callable[[dict], str]]


def field(name: str, fmt: Callable[[str], str] = plain) -> Callable[[dict], str]:
    return lambda row: fmt(row.get(name, ""))


def table(rows: Sequence[dict], columns: Sequence[Column]) -> str:
    if not rows:
        return "_No rows._\n"
    lines = ["| " + " | ".join(title for title, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for _, cell in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ---- sections --------------------------------------------------------------------------------

def section_a(out: str) -> str:
    rows = read_csv(os.path.join(out, "a_host.csv"))
    return ("Host time: `perf_counter` until the call returns, before waiting for the device; device "
            "time: CUDA events. Kernels: what the profiler sees on the GPU in one call (on the CPU: "
            "the ATen operators a dispatch mode counts, forward and backward).\n\n" + table(rows, [
                ("case", field("case")), ("mode", field("mode")), ("tokens", field("tokens", count)),
                ("kernels", field("kernels")), ("ATen ops", field("aten_ops")),
                ("host", field("host_s", seconds)), ("device", field("device_s", seconds)),
                ("host per kernel", field("host_per_kernel_s", seconds)), ("status", status)]) +
            dcp_launch_constants(out))


def dcp_launch_constants(out: str) -> str:
    """dcp's constants for the same quantities, where predict.py read them from the bindings."""
    constants = read_prediction(out).get("constants", {})
    names = ("host_seconds_per_kernel", "kernel_launch_seconds", "kernels_per_layer")
    if not all(name in constants for name in names):
        return ""
    return ("\ndcp's analytic constants for comparison: " +
            ", ".join(f"`{name}` = {constants[name]:g}" for name in names) +
            " (kernels_per_layer: a block's forward and backward kernels).\n")


def read_prediction(out: str) -> dict:
    path = os.path.join(out, "prediction.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def section_b(out: str) -> str:
    rows = read_csv(os.path.join(out, "b_attention.csv"))
    return ("Llama-3-8B's attention: 32 query heads of 128 (K and V repeated from 8 heads), causal. "
            "TFLOP/s count 2 s² h per document forward and 2.5 times that backward; "
            "the fractions are of 989.4 TFLOP/s.\n\n" + table(rows, [
                ("batch", field("batch")), ("kernel", field("kernel")), ("tokens", field("tokens")),
                ("documents", field("documents")), ("longest", field("longest")),
                ("forward", field("forward_s", seconds)), ("fwd TFLOP/s", field("forward_tflops", number)),
                ("fwd of peak", field("forward_fraction", percent)),
                ("backward", field("backward_s", seconds)), ("bwd TFLOP/s", field("backward_tflops", number)),
                ("bwd of peak", field("backward_fraction", percent)), ("status", status)]))


def section_c(out: str) -> str:
    rows = read_csv(os.path.join(out, "c_gemm.csv"))
    return ("`torch.mm(x, Wᵀ)` in BF16 (FP32 accumulation), 2 t·in·out FLOPs per call; the fraction "
            "is of 989.4 TFLOP/s (dcp's `dense_efficiency` is the fraction it assumes for large "
            "GEMMs).\n\n" + table(rows, [
                ("model", field("model")), ("layer", field("layer")), ("tokens", field("tokens")),
                ("in", field("in_features")), ("out", field("out_features")), ("timing", field("timing")),
                ("time", field("gemm_s", seconds)), ("TFLOP/s", field("tflops", number)),
                ("of peak", field("fraction_of_peak", percent)), ("status", status)]))


def section_d(out: str) -> str:
    rows = read_csv(os.path.join(out, "d_stack.csv"))
    text = ("Forward and backward of one micro-step, gradients accumulating; static = weights and "
            "gradients allocated before it (no optimizer state), activations = peak allocated minus "
            "static.\n\n" + table(rows, [
                ("case", field("case")), ("layers", field("layers")), ("documents", field("documents")),
                ("longest", field("longest")), ("attention", field("attention_kernel")),
                ("step", field("step_s", seconds)), ("host", field("host_s", seconds)),
                ("static", field("static_bytes", gib)), ("peak allocated", field("peak_allocated_bytes", gib)),
                ("peak reserved", field("peak_reserved_bytes", gib)),
                ("activations", field("activation_bytes", gib)), ("status", status)]))
    return text + "\n" + predictions(out)


def predictions(out: str) -> str:
    summary = read_prediction(out)
    if not summary:
        return "dcp's predictions: not made in this run (predict.py did not run).\n"
    if summary.get("status") != "ok":
        return f"dcp's predictions: {summary.get('status')}. The measured values stand alone.\n"
    constants = ", ".join(f"`{k}` = {v:g}" for k, v in summary.get("constants", {}).items())
    rows = read_csv(os.path.join(out, "d_prediction.csv"))
    calibration = read_csv(os.path.join(out, "calibration.csv"))
    return ("dcp's prediction for the same shapes: `dcp.AnalyticCostModel` of "
            f"`{summary['model']}` on one H200, degree 1, default constants ({constants}). dcp's "
            "static memory counts ZeRO-1 Adam states and its runtime reserve, which this process does "
            "not hold: compare activations.\n\n" + table(rows, [
                ("case", field("case")), ("measured", field("measured_s", seconds)),
                ("predicted", field("predicted_s", seconds)), ("device part", field("predicted_device_s", seconds)),
                ("host part", field("predicted_host_s", seconds)), ("time error", field("time_error", percent)),
                ("activations measured", field("measured_activation_bytes", gib)),
                ("activations predicted", field("predicted_activation_bytes", gib)), ("status", status)]) +
            "\nA least-squares calibration (`dcp.Calibrated.observe`) given the first N cases in run "
            "order; the error is the mean |predicted / measured - 1|.\n\n" + table(calibration, [
                ("observed", field("observed")), ("error, all cases", field("mean_time_error_all", percent)),
                ("error, cases not yet observed", field("mean_time_error_unseen", percent))]))


def section_e(out: str) -> str:
    rows = read_csv(os.path.join(out, "e_cross_attention.csv"))
    return ("One sample's call: `scaled_dot_product_attention` of [1, 16, N, 72] against [1, 16, 300, 72], "
            "not causal, 4 N C h FLOPs forward; peak = `max_memory_allocated` during the case.\n\n" + table(rows, [
                ("video tokens", field("video_tokens")), ("caption", field("caption_tokens")),
                ("kernel", field("kernel")), ("forward", field("forward_s", seconds)),
                ("fwd TFLOP/s", field("forward_tflops", number)), ("backward", field("backward_s", seconds)),
                ("bwd TFLOP/s", field("backward_tflops", number)),
                ("peak", field("peak_allocated_bytes", gib)), ("status", status)]))


def section_f(out: str) -> str:
    rows = read_csv(os.path.join(out, "f_sanity.csv"))
    return table(rows, [("check", field("check")), ("backend", field("backend")),
                        ("measured", field("measured_s", seconds)), ("wall clock", field("reference_s", seconds)),
                        ("detail", field("detail")), ("status", status)])


RENDERERS = {"a": section_a, "b": section_b, "c": section_c, "d": section_d, "e": section_e, "f": section_f}


# ---- the page --------------------------------------------------------------------------------

def run_facts(results: dict, out: str) -> str:
    machine = results.get("machine", {})
    build = read_build_status(out)
    facts = [("mode", results.get("mode", "?")),
             ("GPU", machine.get("gpu", "none (CPU)")),
             ("torch / CUDA / cuDNN / NCCL", " / ".join(str(machine.get(k) or "–") for k in ("torch", "cuda", "cudnn", "nccl"))),
             ("python, host", f"{machine.get('python', '?')}, {machine.get('host', '?')} with {machine.get('cpu_count', '?')} CPUs"),
             ("command", f"`{results.get('command', '?')}`"),
             ("measurements", f"{results.get('elapsed_s', '?')} s of a {results.get('budget_s', '?')} s budget"),
             ("dcp bindings' build", build)]
    lines = ["| | |", "|---|---|"] + [f"| {name} | {plain(str(value))} |" for name, value in facts]
    return "\n".join(lines) + "\n"


def read_build_status(out: str) -> str:
    path = os.path.join(out, "build.status")
    if not os.path.exists(path):
        return "not built in this run"
    with open(path) as f:
        return f.read().strip() or "?"


def render(out: str) -> str:
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    parts = [PREAMBLE, "## The run\n", run_facts(results, out)]
    if results.get("mode") == SMOKE.name:
        parts.append("\n**A CPU smoke run with tiny shapes: these figures say nothing about a GPU.**\n")
    for letter, section in SECTION_BY_LETTER.items():
        parts.append(f"\n## {letter}. {section.title}\n\n")
        if letter in results.get("sections", {}):
            parts.append(RENDERERS[letter](out))
        else:
            parts.append("_Not run._\n")
    return "".join(parts)


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=os.environ.get("OUT") or os.path.join(ROOT, "build-gpu-evidence-out"),
                        help="the run's output folder")
    parser.add_argument("--docs", action="store_true", help="also write docs/gpu-results.md")
    parser.add_argument("--empty", action="store_true", help="the page before any run (with --docs)")
    args = parser.parse_args(argv)
    docs_page = os.path.join(ROOT, "docs", "gpu-results.md")
    if args.empty:
        if not args.docs:
            parser.error("--empty: allowed only with --docs (it writes the page before any run)")
        write(docs_page, PREAMBLE + "\n" + NO_RUN)
        return 0
    if not os.path.exists(os.path.join(args.out, "results.json")):
        parser.error(f"OUT {args.out!r}: no results.json there; give the folder tools/gpu_evidence.sh wrote")
    with open(os.path.join(args.out, "results.json")) as f:
        mode = json.load(f).get("mode")
    page = render(args.out)
    write(os.path.join(args.out, "gpu-results.md"), page)
    if args.docs:
        if mode == SMOKE.name:
            parser.error(f"--docs: {args.out!r} holds a --cpu-smoke run; docs/gpu-results.md takes only a GPU run")
        write(docs_page, page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
