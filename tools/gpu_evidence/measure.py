#!/usr/bin/env python3
"""Runs the measurements of tools/gpu_evidence.sh and writes one CSV per section and
results.json to the output folder. Run through the shell script, which also builds dcp's
bindings for the predictions; alone:

    python3 tools/gpu_evidence/measure.py --out DIR [--cpu-smoke] [--sections a,b,...] [--budget S]
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import H200, SECTION_BY_LETTER, SMOKE, Clock, failed_row, write_csv  # noqa: E402

# The order they run in: the host-cost section after the others, so that the bindings' build
# (which the shell script runs meanwhile) has finished and does not share the host; the
# cross-attention last, since a failing kernel there can leave the CUDA context unusable.
RUN_ORDER = "fcbdae"


def parse_arguments(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the CSVs and results.json")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--sections", default="abcdef", help="letters of the sections to run (default: abcdef)")
    parser.add_argument("--budget", default=None, help="seconds the measurements may take in all")
    parser.add_argument("--build-status", default="", help="file the bindings' build writes when it ends; "
                        "section a waits for it")
    parser.add_argument("--command", default="", help="the command to record in results.json")
    args = parser.parse_args(argv)
    args.sections = checked_sections(parser, args.sections)
    args.budget = checked_budget(parser, args.budget, default=60 if args.cpu_smoke else 300)
    return args


def checked_sections(parser: argparse.ArgumentParser, text: str) -> str:
    letters = text.replace(",", "")
    unknown = sorted(set(letters) - set(SECTION_BY_LETTER))
    if not letters or unknown:
        parser.error(f"--sections {text!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; "
                     f"allowed: letters of {''.join(SECTION_BY_LETTER)}, e.g. a,c,f")
    return "".join(letter for letter in RUN_ORDER if letter in letters)


def checked_budget(parser: argparse.ArgumentParser, text: Optional[str], default: int) -> float:
    if text is None:
        return float(default)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 10 <= seconds <= 3600:
        parser.error(f"--budget {text!r}: not allowed; give seconds from 10 to 3600")
    return seconds


def machine_facts(torch, sections, device: str) -> dict:
    facts = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
             "host": platform.machine(), "cpu_count": os.cpu_count(), "cuda": torch.version.cuda}
    if device == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(0)
        facts["gpu_memory_bytes"] = torch.cuda.get_device_properties(0).total_memory
        facts["cudnn"] = torch.backends.cudnn.version()
        facts["nccl"] = sections.nccl_version()
        facts["sdpa_enabled"] = {name: getattr(torch.backends.cuda, f"{name}_sdp_enabled")()
                                 for name in ("flash", "mem_efficient", "math", "cudnn")
                                 if hasattr(torch.backends.cuda, f"{name}_sdp_enabled")}
    facts["nvidia_smi"] = nvidia_smi()
    return facts


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"nvidia-smi not run: {error}"


def wait_for_build(path: str, deadline: float) -> str:
    """Waits until the bindings' build has written `path` (or the deadline); says how it went."""
    if not path:
        return "no build"
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.5)
    return "finished" if os.path.exists(path) else "still running when section a started"


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_arguments(argv)
    started = time.monotonic()
    run_deadline = started + args.budget
    os.makedirs(args.out, exist_ok=True)

    import torch
    import model
    import sections
    device = "cpu" if args.cpu_smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("measure.py: no CUDA device visible to torch; use --cpu-smoke on a machine without a GPU",
              file=sys.stderr)
        return 2
    torch.manual_seed(0)
    shapes = SMOKE if args.cpu_smoke else H200
    ctx = sections.Context(device=device, dtype=torch.float32 if args.cpu_smoke else torch.bfloat16,
                           shapes=shapes, clock=Clock(torch, device), run_deadline=run_deadline)
    ctx.varlen = model.varlen_works(device, ctx.dtype)
    runners = {"a": (sections.host_section, sections.HostRow),
               "b": (sections.attention_section, sections.AttentionRow),
               "c": (sections.gemm_section, sections.GemmRow),
               "d": (sections.stack_section, sections.StackRow),
               "e": (sections.cross_attention_section, sections.CrossRow),
               "f": (sections.sanity_section, sections.SanityRow)}
    results = {"mode": shapes.name, "command": args.command or shlex.join(sys.argv),
               "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
               "budget_s": args.budget, "machine": machine_facts(torch, sections, device),
               "varlen_attn_works": ctx.varlen, "sections": {}}
    for letter in args.sections:
        section = SECTION_BY_LETTER[letter]
        if letter == "a":
            results["build_when_section_a_started"] = wait_for_build(args.build_status, run_deadline - 40)
        run, row_type = runners[letter]
        began = time.monotonic()
        print(f"::: section {letter}: {section.title} ({began - started:.0f} s)", flush=True)
        try:
            rows = run(ctx)
        except Exception as error:  # noqa: BLE001 (the section's failure is its result)
            rows = [failed_row(row_type, error)]
        ctx.free_memory()
        write_csv(os.path.join(args.out, section.csv), row_type, rows)
        statuses = [row.status for row in rows]
        results["sections"][letter] = {"title": section.title, "csv": section.csv,
                                       "seconds": round(time.monotonic() - began, 2),
                                       **{s: statuses.count(s) for s in sorted(set(statuses))}}
        print(f"    {results['sections'][letter]}", flush=True)
    results["elapsed_s"] = round(time.monotonic() - started, 2)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
