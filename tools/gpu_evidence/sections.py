"""The six measurements (a-f). Each takes the run's Context and returns its rows; a case that
fails or does not fit its section's time box becomes a row that says so, and the section goes
on with the next case."""

import math
import socket
import time
from dataclasses import dataclass
from typing import Callable, List, Sequence

import torch

import model
from common import (H200_BF16_PEAK_FLOPS, OK, SKIPPED, Budget, Clock, Row, Shapes, failed_row,
                    tflops)
from lengths import packed_micro_batch

NAN = math.nan


@dataclass
class Context:
    device: str
    dtype: torch.dtype
    shapes: Shapes
    clock: Clock
    run_deadline: float
    varlen: bool = False     # varlen_attn works here (model.varlen_works)

    def budget(self, section: str) -> Budget:
        return Budget(self.shapes.budgets[section], self.run_deadline)

    def tensor(self, *size, requires_grad: bool = False):
        return torch.randn(*size, device=self.device, dtype=self.dtype, requires_grad=requires_grad)

    def free_memory(self) -> None:
        if self.device == "cuda":
            torch.cuda.empty_cache()


def host_and_device(ctx: Context, fn: Callable[[], object], repeats: int):
    """Medians of the host's time to issue fn (perf_counter until fn returns, before waiting for
    the device) and of its device time (events; on the CPU the same wall time)."""
    hosts, devices = [], []
    for _ in range(repeats):
        ctx.clock.sync()
        if ctx.device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin = time.perf_counter()
            start.record()
            fn()
            stop.record()
            hosts.append(time.perf_counter() - begin)
            stop.synchronize()
            devices.append(start.elapsed_time(stop) / 1e3)
        else:
            begin = time.perf_counter()
            fn()
            hosts.append(time.perf_counter() - begin)
            devices.append(hosts[-1])
    return sorted(hosts)[len(hosts) // 2], sorted(devices)[len(devices) // 2]


def time_boxed(ctx: Context, budget: Budget, row_type, cases, measure: Callable[[dict], Row],
               power: float = 0.0, floor_s: float = 0.0) -> List[Row]:
    """measure(fields) for each (size, fields) of `cases`, in order, a row each. A case the
    budget cannot fit becomes a skipped row: it is expected to take the previous case's time
    scaled by (size / previous size) ** power, and at least floor_s. A failed case is a row too."""
    rows, last = [], None
    for size, fields in cases:
        estimate = max(floor_s, last[1] * (size / last[0]) ** power if last else 0.0)
        if not budget.allows(estimate):
            rows.append(row_type(status=SKIPPED, note=budget.skip_note(estimate), **fields))
            continue
        began = time.monotonic()
        try:
            rows.append(measure(fields))
        except Exception as error:  # noqa: BLE001 (recorded, the run goes on)
            rows.append(failed_row(row_type, error, **fields))
        last = (size, time.monotonic() - began)
        ctx.free_memory()
    return rows


# ---- a: the host's cost of issuing kernels ---------------------------------------------------

@dataclass(kw_only=True)
class HostRow(Row):
    case: str = ""
    mode: str = ""           # eager | cuda graph
    tokens: int = 0
    kernels: int = 0         # per call: device kernels (profiler) on a GPU, ATen ops on the CPU
    aten_ops: int = 0        # per call, counted by a TorchDispatchMode
    host_s: float = NAN      # host time to issue one call
    device_s: float = NAN    # device time of one call
    host_per_kernel_s: float = NAN


def count_aten_ops(fn: Callable[[], object]) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counter.calls += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        fn()
    return Counter.calls


def count_device_kernels(fn: Callable[[], object]) -> int:
    """Kernels, copies and memsets the profiler sees on the GPU during one call."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.events()
    on_device = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    # Some torch releases list device work only under the CPU operator that launched it.
    attached = sum(len(getattr(e, "kernels", [])) for e in events)
    return max(on_device, attached)


def capture_graph(fn: Callable[[], object]):
    """A CUDA graph of fn, after warm-up calls on a side stream (torch.cuda.graph's recipe)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def host_section(ctx: Context) -> List[HostRow]:
    budget, rows = ctx.budget("a"), []
    rows += tiny_kernel_rows(ctx)
    for tokens in ctx.shapes.host_tokens:
        if not budget.allows(2.0):
            rows.append(HostRow(case="llama block fwd+bwd", tokens=tokens, status=SKIPPED,
                                note=budget.skip_note(2.0)))
            continue
        rows += block_rows(ctx, tokens)
    return rows


def tiny_kernel_rows(ctx: Context) -> List[HostRow]:
    count = ctx.shapes.launch_count
    x = torch.zeros(1, device=ctx.device)

    def issue():
        for _ in range(count):
            x.add_(1)

    issue()
    host, device = host_and_device(ctx, issue, ctx.shapes.repeats)
    rows = [HostRow(case=f"{count} x add_ on 1 element", mode="eager", kernels=count, aten_ops=count,
                    host_s=host, device_s=device, host_per_kernel_s=host / count)]
    if ctx.device != "cuda":
        return rows
    try:
        graph = capture_graph(issue)
        host, device = host_and_device(ctx, graph.replay, ctx.shapes.repeats)
        rows.append(HostRow(case=f"{count} x add_ on 1 element", mode="cuda graph", kernels=count,
                            aten_ops=count, host_s=host, device_s=device, host_per_kernel_s=host / count))
    except Exception as error:  # noqa: BLE001 (recorded, the run goes on)
        rows.append(failed_row(HostRow, error, case="add_ loop", mode="cuda graph"))
    return rows


def block_rows(ctx: Context, tokens: int) -> List[HostRow]:
    shape = ctx.shapes.llama
    case = "llama block fwd+bwd"
    try:
        block = model.LlamaBlock(shape).to(ctx.device, ctx.dtype)
        batch = model.Batch([tokens], shape, ctx.device, ctx.dtype, allow_varlen=ctx.varlen)
        x = ctx.tensor(tokens, shape.hidden, requires_grad=True)

        def step():
            block(x, batch).sum().backward()

        step()
        aten_ops = count_aten_ops(step)
        kernels = count_device_kernels(step) if ctx.device == "cuda" else aten_ops
        host, device = host_and_device(ctx, step, ctx.shapes.repeats)
        rows = [HostRow(case=case, mode="eager", tokens=tokens, kernels=kernels, aten_ops=aten_ops,
                        host_s=host, device_s=device, host_per_kernel_s=host / max(kernels, 1))]
    except Exception as error:  # noqa: BLE001
        return [failed_row(HostRow, error, case=case, mode="eager", tokens=tokens)]
    if ctx.device == "cuda":
        rows.append(graph_block_row(ctx, block, step, tokens, kernels, aten_ops))
    return rows


def graph_block_row(ctx: Context, block, step, tokens: int, kernels: int, aten_ops: int) -> HostRow:
    case = "llama block fwd+bwd"
    try:
        block.zero_grad(set_to_none=True)
        graph = capture_graph(step)
        host, device = host_and_device(ctx, graph.replay, ctx.shapes.repeats)
        return HostRow(case=case, mode="cuda graph", tokens=tokens, kernels=kernels, aten_ops=aten_ops,
                       host_s=host, device_s=device, host_per_kernel_s=host / max(kernels, 1))
    except Exception as error:  # noqa: BLE001
        return failed_row(HostRow, error, case=case, mode="cuda graph", tokens=tokens)


# ---- b: attention by length ------------------------------------------------------------------

@dataclass(kw_only=True)
class AttentionRow(Row):
    batch: str = ""          # single | packed | packed as one sequence
    kernel: str = ""
    tokens: int = 0
    documents: int = 0
    longest: int = 0
    forward_s: float = NAN
    backward_s: float = NAN
    forward_tflops: float = NAN
    backward_tflops: float = NAN
    forward_fraction: float = NAN   # of the H200's dense BF16 peak
    backward_fraction: float = NAN


def causal_forward_flops(lengths: Sequence[int], hidden: int) -> float:
    """Causal attention forward per layer: half of 4 s² h per document."""
    return sum(2.0 * n * n * hidden for n in lengths)


def time_attention(ctx: Context, run: Callable, inputs, flops: float, **fields) -> AttentionRow:
    """Forward and backward (2.5x the forward's FLOPs, FlashAttention's convention) of `run`."""
    out = run(*inputs)
    grad = torch.randn_like(out)
    forward = ctx.clock.median(lambda: run(*inputs), ctx.shapes.repeats, max_seconds=5)
    backward = ctx.clock.median(lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True),
                                ctx.shapes.repeats, max_seconds=5)
    return AttentionRow(forward_s=forward, backward_s=backward,
                        forward_tflops=tflops(flops, forward), backward_tflops=tflops(2.5 * flops, backward),
                        forward_fraction=flops / forward / H200_BF16_PEAK_FLOPS,
                        backward_fraction=2.5 * flops / backward / H200_BF16_PEAK_FLOPS, **fields)


def single_kernels():
    """(label, backend): every forceable SDPA kernel on a GPU; torch's choice or math on the CPU."""
    if torch.cuda.is_available() and model.sdpa_backends():
        return model.sdpa_backends()
    return [("sdpa" if model.has_sdpa() else "math", None)]


def attention_section(ctx: Context) -> List[AttentionRow]:
    budget, rows = ctx.budget("b"), []
    for label, backend in single_kernels():
        cases = [(tokens, dict(batch="single", kernel=label, tokens=tokens, documents=1, longest=tokens))
                 for tokens in ctx.shapes.attention_lengths]
        rows += time_boxed(ctx, budget, AttentionRow, cases, lambda fields: time_single(ctx, backend, fields),
                           power=2)
    for varlen in sorted({ctx.varlen, False}, reverse=True):  # varlen_attn first where it works
        cases = []
        for tokens in ctx.shapes.packed_tokens:
            lengths = packed_micro_batch(tokens, seed=tokens)
            for batch, docs in (("packed", lengths), ("packed as one sequence", [tokens])):
                cases.append((tokens, dict(batch=batch, tokens=tokens, documents=len(docs), longest=max(docs))))
        rows += time_boxed(ctx, budget, AttentionRow, cases, lambda fields: time_packed(ctx, fields, varlen),
                           power=2, floor_s=3.0)
    return rows


def time_single(ctx: Context, backend, fields: dict) -> AttentionRow:
    shape, tokens = ctx.shapes.llama, fields["tokens"]
    inputs = [ctx.tensor(1, shape.heads, tokens, shape.head_dim, requires_grad=True) for _ in range(3)]
    with model.forced_backend(backend):
        return time_attention(ctx, lambda q, k, v: model.attention(q, k, v, causal=True), inputs,
                              causal_forward_flops([tokens], shape.hidden), **fields)


def time_packed(ctx: Context, fields: dict, varlen: bool) -> AttentionRow:
    """The packed micro-batch's documents (regenerated from its seed), or one sequence of its tokens."""
    shape, tokens = ctx.shapes.llama, fields["tokens"]
    docs = packed_micro_batch(tokens, seed=tokens) if fields["batch"] == "packed" else [tokens]
    attend = model.DocumentAttention(docs, ctx.device, allow_varlen=varlen)
    inputs = [ctx.tensor(tokens, shape.heads, shape.head_dim, requires_grad=True) for _ in range(3)]
    return time_attention(ctx, attend, inputs, causal_forward_flops(docs, shape.hidden),
                          kernel=attend.kernel, **fields)


# ---- c: BF16 GEMM efficiency by tokens -------------------------------------------------------

@dataclass(kw_only=True)
class GemmRow(Row):
    model: str = ""
    layer: str = ""
    tokens: int = 0
    in_features: int = 0
    out_features: int = 0
    timing: str = ""         # cuda graph of back-to-back calls | eager
    gemm_s: float = NAN
    tflops: float = NAN
    fraction_of_peak: float = NAN


def gemm_layers(shapes: Shapes):
    """(model, layer, in, out) of a Linear layer's y = x Wᵀ, Llama-3-8B's and STDiT3-XL's."""
    l, h, f = shapes.llama, shapes.stdit_hidden, shapes.stdit_ffn
    return [("llama3-8b", "qkv", l.hidden, l.qkv_out), ("llama3-8b", "o", l.hidden, l.hidden),
            ("llama3-8b", "gate+up", l.hidden, 2 * l.ffn), ("llama3-8b", "down", l.ffn, l.hidden),
            ("stdit3-xl", "qkv", h, 3 * h), ("stdit3-xl", "o", h, h),
            ("stdit3-xl", "fc1", h, f), ("stdit3-xl", "fc2", f, h)]


def gemm_section(ctx: Context) -> List[GemmRow]:
    budget, rows = ctx.budget("c"), []
    for name, layer, inputs, outputs in gemm_layers(ctx.shapes):
        weight_t = ctx.tensor(outputs, inputs).t()  # a Linear weight, used as Linear does (TN)
        cases = [(tokens, dict(model=name, layer=layer, tokens=tokens, in_features=inputs, out_features=outputs))
                 for tokens in ctx.shapes.gemm_tokens]
        rows += time_boxed(ctx, budget, GemmRow, cases,
                           lambda fields: time_gemm(ctx, ctx.tensor(fields["tokens"], inputs), weight_t, **fields),
                           floor_s=0.5)
        del weight_t
    return rows


def time_gemm(ctx: Context, x, weight_t, **fields) -> GemmRow:
    flops = 2.0 * x.shape[0] * weight_t.shape[0] * weight_t.shape[1]
    # Enough back-to-back calls that one timed call lasts about a millisecond at ~600 TFLOP/s.
    inner = max(1, min(200, math.ceil(1e-3 / (flops / 600e12))))
    y = torch.empty(x.shape[0], weight_t.shape[1], device=ctx.device, dtype=ctx.dtype)

    def calls():
        for _ in range(inner):
            torch.mm(x, weight_t, out=y)

    run, timing = calls, "eager"
    if ctx.device == "cuda":
        run, timing = capture_graph(calls).replay, "cuda graph"
    seconds = ctx.clock.median(run, ctx.shapes.repeats) / inner
    return GemmRow(timing=timing, gemm_s=seconds, tflops=tflops(flops, seconds),
                   fraction_of_peak=flops / seconds / H200_BF16_PEAK_FLOPS, **fields)


# ---- d: a Llama-3-8B-shaped stack on Wikipedia-like micro-batches ----------------------------

@dataclass(kw_only=True)
class StackRow(Row):
    case: str = ""
    packing: str = ""        # wikipedia (packed documents) | single document
    recompute: str = ""      # none | full
    layers: int = 0
    tokens: int = 0
    documents: int = 0
    longest: int = 0
    attention_kernel: str = ""
    step_s: float = NAN      # forward + backward, device time
    host_s: float = NAN      # the host's time to issue it
    static_bytes: float = NAN         # weights + gradients, allocated before the micro-step
    peak_allocated_bytes: float = NAN
    peak_reserved_bytes: float = NAN
    activation_bytes: float = NAN     # peak allocated - static
    lengths: str = ""        # every document's tokens, space-separated (for dcp's prediction)


def stack_cases(shapes: Shapes):
    for tokens in shapes.stack_tokens:
        for packing, lengths in (("wikipedia", packed_micro_batch(tokens, seed=7 + tokens)),
                                 ("single document", [tokens])):
            for recompute in ("none", "full"):
                yield packing, lengths, recompute


def build_stack(ctx: Context):
    """The stack, made on the device when torch can (a 2B-parameter model built on the CPU first
    would take longer than the whole section), with its gradients allocated."""
    shape = ctx.shapes.llama
    if hasattr(torch.device, "__enter__"):
        with torch.device(ctx.device):
            stack = model.LlamaStack(shape, ctx.shapes.stack_layers)
    else:
        stack = model.LlamaStack(shape, ctx.shapes.stack_layers)
    stack = stack.to(ctx.device, ctx.dtype)
    for p in stack.parameters():
        p.grad = torch.zeros_like(p)
    return stack


def memory_now(ctx: Context, name: str) -> float:
    return float(getattr(torch.cuda, name)()) if ctx.device == "cuda" else 0.0


def stack_section(ctx: Context) -> List[StackRow]:
    stack = build_stack(ctx)
    cases = []
    for packing, lengths, recompute in stack_cases(ctx.shapes):
        tokens = sum(lengths)
        cases.append((tokens, dict(case=f"{tokens} tokens, {packing}, recompute {recompute}", packing=packing,
                                   recompute=recompute, layers=ctx.shapes.stack_layers, tokens=tokens,
                                   documents=len(lengths), longest=max(lengths),
                                   lengths=" ".join(map(str, lengths)))))
    return time_boxed(ctx, ctx.budget("d"), StackRow, cases, lambda fields: time_micro_step(ctx, stack, fields),
                      power=1)


def time_micro_step(ctx: Context, stack, fields: dict) -> StackRow:
    batch = model.Batch([int(n) for n in fields["lengths"].split()], ctx.shapes.llama, ctx.device, ctx.dtype,
                        allow_varlen=ctx.varlen)
    recompute = fields["recompute"] == "full"
    token_ids = model.random_tokens(ctx.shapes.llama.vocab, batch.tokens, ctx.device)

    def micro_step():  # gradients accumulate, as over a step's micro-batches
        stack.loss(token_ids, batch, recompute).backward()

    micro_step()
    ctx.clock.sync()
    static = memory_now(ctx, "memory_allocated")
    if ctx.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    host, device = host_and_device(ctx, micro_step, ctx.shapes.repeats)
    peak = memory_now(ctx, "max_memory_allocated")
    return StackRow(attention_kernel=batch.attention.kernel, step_s=device, host_s=host,
                    static_bytes=static, peak_allocated_bytes=peak,
                    peak_reserved_bytes=memory_now(ctx, "max_memory_reserved"),
                    activation_bytes=peak - static, **fields)


# ---- e: STDiT's per-sample cross-attention over very long videos -----------------------------

@dataclass(kw_only=True)
class CrossRow(Row):
    video_tokens: int = 0
    caption_tokens: int = 0
    heads: int = 0
    head_dim: int = 0
    kernel: str = ""
    forward_s: float = NAN
    backward_s: float = NAN
    forward_tflops: float = NAN
    backward_tflops: float = NAN
    peak_allocated_bytes: float = NAN


def cross_kernels():
    if torch.cuda.is_available() and model.sdpa_backends():
        return [("torch's choice", None)] + model.sdpa_backends()
    return [("sdpa" if model.has_sdpa() else "math", None)]


def cross_attention_section(ctx: Context) -> List[CrossRow]:
    """One sample's query of N video tokens against its caption, as STDiT's cross-attention
    calls it per sample (4 N C h FLOPs forward, not causal)."""
    s, budget, rows = ctx.shapes, ctx.budget("e"), []
    for label, backend in cross_kernels():
        cases = [(tokens, dict(video_tokens=tokens, caption_tokens=s.caption_tokens, heads=s.stdit_heads,
                               head_dim=s.stdit_hidden // s.stdit_heads, kernel=label))
                 for tokens in s.video_tokens]
        rows += time_boxed(ctx, budget, CrossRow, cases,
                           lambda fields: time_cross_attention(ctx, backend, fields), floor_s=1.0)
    return rows


def time_cross_attention(ctx: Context, backend, fields: dict) -> CrossRow:
    heads, head_dim = fields["heads"], fields["head_dim"]
    q = ctx.tensor(1, heads, fields["video_tokens"], head_dim, requires_grad=True)
    k, v = (ctx.tensor(1, heads, fields["caption_tokens"], head_dim, requires_grad=True) for _ in range(2))
    flops = 4.0 * fields["video_tokens"] * fields["caption_tokens"] * heads * head_dim
    if ctx.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with model.forced_backend(backend):
        run = lambda: model.attention(q, k, v, causal=False)  # noqa: E731
        out = run()
        grad = torch.randn_like(out)
        forward = ctx.clock.median(run, ctx.shapes.repeats, max_seconds=3)
        backward = ctx.clock.median(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True),
                                    ctx.shapes.repeats, max_seconds=3)
    return CrossRow(forward_s=forward, backward_s=backward, forward_tflops=tflops(flops, forward),
                    backward_tflops=tflops(2.5 * flops, backward),
                    peak_allocated_bytes=memory_now(ctx, "max_memory_allocated"), **fields)


# ---- f: what tools/gpu_check.sh checks, cheaply ----------------------------------------------

@dataclass(kw_only=True)
class SanityRow(Row):
    check: str = ""
    backend: str = ""
    measured_s: float = NAN
    reference_s: float = NAN
    detail: str = ""


def sanity_section(ctx: Context) -> List[SanityRow]:
    rows = []
    for check in (timer_check, collective_check):
        try:
            rows.append(check(ctx))
        except Exception as error:  # noqa: BLE001
            rows.append(failed_row(SanityRow, error, check=check.__name__))
    return rows


def timer_check(ctx: Context) -> SanityRow:
    """A 256 MiB device copy (16 MiB on the CPU) timed by the clock and by the wall clock around
    a synchronize: the clock must not read more than the wall, nor far less."""
    elements = (256 if ctx.device == "cuda" else 16) << 18  # float32
    source = torch.ones(elements, device=ctx.device)
    target = torch.empty_like(source)
    copy = lambda: target.copy_(source)  # noqa: E731
    measured = ctx.clock.median(copy, 5)
    walls = []
    for _ in range(5):
        ctx.clock.sync()
        began = time.perf_counter()
        copy()
        ctx.clock.sync()
        walls.append(time.perf_counter() - began)
    wall = sorted(walls)[2]
    ratio = measured / wall
    bandwidth = 2 * source.numel() * 4 / measured / 1e12
    # On the CPU both readings are perf_counter: only a GPU's event timer is checked.
    ok = 0.5 <= ratio <= 1.05 or ctx.device != "cuda"
    return SanityRow(check=f"{'event' if ctx.device == 'cuda' else 'perf_counter'} timer vs wall clock",
                     backend=ctx.device, measured_s=measured, reference_s=wall,
                     detail=f"ratio {ratio:.3f}; copy {bandwidth:.2f} TB/s (read + write)",
                     status=OK if ok else "error", note="" if ok else "timer disagrees with the wall clock")


def nccl_version() -> str:
    version = torch.cuda.nccl.version()  # a tuple in torch 2.x, an int before
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def collective_check(ctx: Context) -> SanityRow:
    """torch.distributed on one rank (NCCL on a GPU, Gloo on the CPU): an all-gather of 1000
    int64 values must return them; then a timed 64 MiB all-reduce."""
    import torch.distributed as dist
    backend = "nccl" if ctx.device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        values = torch.arange(1000, dtype=torch.int64, device=ctx.device)
        gathered = [torch.empty_like(values)]
        dist.all_gather(gathered, values)
        if not torch.equal(gathered[0], values):
            raise RuntimeError("all_gather on one rank did not return the rank's values")
        data = torch.ones(16 << 20, device=ctx.device)
        measured = ctx.clock.median(lambda: dist.all_reduce(data), 5)
        version = nccl_version() if backend == "nccl" else ""
        detail = f"all_gather of 1000 int64 returned them; NCCL {version}" if version else \
            "all_gather of 1000 int64 returned them"
        return SanityRow(check="all_gather + 64 MiB all_reduce, world size 1", backend=backend,
                         measured_s=measured, detail=detail)
    finally:
        dist.destroy_process_group()
