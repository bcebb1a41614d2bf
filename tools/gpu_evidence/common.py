"""What every section shares: the shapes of a run, its time box, the timer, the result rows and
their CSV files."""

import csv
import dataclasses
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Type

# H200 SXM dense BF16 tensor-core peak (NVIDIA's datasheet gives 1,979 TFLOP/s with sparsity).
H200_BF16_PEAK_FLOPS = 989.4e12

OK, SKIPPED, OOM, ERROR = "ok", "skipped", "oom", "error"


@dataclass(kw_only=True)
class Row:
    """One measured case. status: ok, skipped (time box or not on this device), oom or error;
    note says why. Fields ending in _s are seconds (medians of the repeats)."""

    status: str = OK
    note: str = ""


@dataclass(frozen=True)
class LayerShape:
    """A decoder layer's widths (Llama: SwiGLU, grouped-query attention)."""

    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def qkv_out(self) -> int:
        return self.hidden + 2 * self.kv_heads * self.head_dim


@dataclass(frozen=True)
class Shapes:
    """Everything a run's size depends on: the H200 run's and the CPU smoke run's."""

    name: str
    llama: LayerShape
    stdit_hidden: int
    stdit_heads: int
    stdit_ffn: int
    host_tokens: Sequence[int]         # a: tokens of the host-bound block
    launch_count: int                  # a: tiny kernels per timed loop
    attention_lengths: Sequence[int]   # b: single causal sequences
    packed_tokens: Sequence[int]       # b: packed micro-batches of Wikipedia documents
    gemm_tokens: Sequence[int]         # c
    stack_layers: int                  # d
    stack_tokens: Sequence[int]        # d
    video_tokens: Sequence[int]        # e
    caption_tokens: int                # e
    repeats: int
    budgets: dict                      # seconds each section may take at most


# Llama-3-8B (hidden 4096, 32 heads, 8 KV heads, ffn 14336, vocab 128256) and STDiT3-XL
# (hidden 1152, 16 heads, ffn 4608): the models dcp's presets name llama3_8b and stdit3_xl.
H200 = Shapes(
    name="h200",
    llama=LayerShape(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256),
    stdit_hidden=1152, stdit_heads=16, stdit_ffn=4608,
    host_tokens=(128, 1024),
    launch_count=2000,
    attention_lengths=tuple(1024 << i for i in range(8)),  # 1K .. 128K
    packed_tokens=(16384, 65536),
    gemm_tokens=tuple(64 << i for i in range(10)),  # 64 .. 32K
    stack_layers=4,
    stack_tokens=(4096, 16384, 32768),
    video_tokens=(204800, 262144, 409600, 524288),
    caption_tokens=300,
    repeats=5,
    budgets={"f": 20, "c": 50, "b": 75, "e": 30, "d": 80, "a": 35},
)

# Tiny widths with the same structure, for the CPU (float32: bfloat16 matmuls are slow there).
SMOKE = Shapes(
    name="cpu-smoke",
    llama=LayerShape(hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256),
    stdit_hidden=48, stdit_heads=4, stdit_ffn=192,
    host_tokens=(16,),
    launch_count=200,
    attention_lengths=(64, 128),
    packed_tokens=(512,),
    gemm_tokens=(16, 64),
    stack_layers=2,
    stack_tokens=(128, 512),
    video_tokens=(2048,),
    caption_tokens=30,
    repeats=3,
    budgets={"f": 10, "c": 10, "b": 10, "e": 10, "d": 15, "a": 10},
)


class Budget:
    """A section's time box: it ends at the section's own allotment or the run's deadline,
    whichever comes first."""

    def __init__(self, seconds: float, run_deadline: float):
        self.deadline = min(time.monotonic() + seconds, run_deadline)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def allows(self, estimate_s: float = 0.0) -> bool:
        return self.left() > estimate_s

    def skip_note(self, estimate_s: float = 0.0) -> str:
        return f"time box: {max(self.left(), 0):.1f} s left, about {estimate_s:.1f} s needed"


class Clock:
    """Times a callable: CUDA events around each call on a GPU, perf_counter on the CPU."""

    def __init__(self, torch, device: str):
        self.torch = torch
        self.device = device
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def once(self, fn: Callable[[], object]) -> float:
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            stop = self.torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / 1e3
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin

    def median(self, fn: Callable[[], object], repeats: int, warmup: int = 1,
               max_seconds: float = math.inf) -> float:
        """The median of `repeats` timed calls after `warmup` untimed ones; stops early (after at
        least one timed call) once the timed calls add up to max_seconds."""
        for _ in range(warmup):
            fn()
        self.sync()
        samples: List[float] = []
        while len(samples) < repeats and (not samples or sum(samples) < max_seconds):
            samples.append(self.once(fn))
        return statistics.median(samples)


def is_out_of_memory(error: BaseException) -> bool:
    return "out of memory" in str(error).lower()


def short_error(error: BaseException) -> str:
    """The error's type and first line, cut to fit a table cell."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}"
    return text[:200]


def failed_row(row_type: Type[Row], error: BaseException, **fields) -> Row:
    status = OOM if is_out_of_memory(error) else ERROR
    return row_type(status=status, note=short_error(error), **fields)


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12 if seconds > 0 else 0.0


def write_csv(path: str, row_type: Type[Row], rows: Iterable[Row]) -> None:
    names = [f.name for f in dataclasses.fields(row_type) if f.name not in ("status", "note")]
    names += ["status", "note"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow(dataclasses.asdict(row))


def read_csv(path: str) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def as_float(text: Optional[str]) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


@dataclass(frozen=True)
class Section:
    """A section's letter, title, CSV file and the time columns every measured row must have."""

    letter: str
    title: str
    csv: str
    time_columns: Sequence[str]


SECTIONS = (
    Section("a", "Host cost of issuing kernels", "a_host.csv", ("host_s", "device_s")),
    Section("b", "Attention forward and backward by length", "b_attention.csv", ("forward_s", "backward_s")),
    Section("c", "BF16 GEMM efficiency by tokens", "c_gemm.csv", ("gemm_s",)),
    Section("d", "Llama-3-8B-shaped stack on Wikipedia-like micro-batches", "d_stack.csv", ("step_s", "host_s")),
    Section("e", "STDiT cross-attention over very long videos", "e_cross_attention.csv", ("forward_s", "backward_s")),
    Section("f", "Timer and one-rank collective checks", "f_sanity.csv", ("measured_s",)),
)
SECTION_BY_LETTER = {s.letter: s for s in SECTIONS}
