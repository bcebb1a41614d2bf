#!/usr/bin/env python3
"""Reruns ours in every cell of a scenario-matrix JSON and updates ours' columns in place.

When only the planner changes, the other policies' rates in the matrix stay what the full run
measured (every policy plans its own way; none calls ours), so each cell's command is rerun with
`--policies dcp` and the cell's dcp columns and ratios are recomputed against the stored rates.
A policy's batches and noise follow from the seed and its name, not from which policies run
beside it, so an unchanged planner reproduces the stored rates exactly.

    python3 tools/matrix_refresh.py ./build/tools/dcp-sim docs/data/matrix.json [--jobs 2]
    python3 tools/results_page.py     # docs/results.md is rendered from the JSON

Prints what moved and the bars of issue 10 over the refreshed matrix; rewrites the JSON and,
with --markdown FILE, every cell's row of a matrix table in that file (found by its model,
workload, context, GPUs, GPU, style and ZeRO stage) as the JSON now renders it.
"""

import argparse
import concurrent.futures
import json
import shlex
import subprocess
import sys


def run_ours(binary, command):
    args = shlex.split(command)[1:] + ["--policies", "dcp", "--json"]
    done = subprocess.run([binary] + args, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
    return json.loads(done.stdout)["scenarios"][0]["policies"][0], None


def context_label(tokens):
    if tokens is None:
        return "-"
    return f"{tokens // 1048576}M" if tokens % 1048576 == 0 else f"{tokens // 1024}K"


def row_key(c):
    """The first seven columns of the cell's row: what identifies it in the table."""
    return "| " + " | ".join([c["model"], c["workload"], context_label(c["context"]), str(c["gpus"]), c["gpu"],
                              c["sp"], str(c["zero"])]) + " | "


def table_row(c):
    """The cell's row of the matrix table in docs/results.md."""
    nf = f"{c['dcp_over_best_other_noise_free']:.3f}x"
    if c["best_other_noise_free"] != c["best_other"]:
        nf += f" ({c['best_other_noise_free']})"
    cells = [c["model"], c["workload"], context_label(c["context"]), str(c["gpus"]), c["gpu"], c["sp"],
             str(c["zero"]), f"{c['dcp_tokens_per_s']:,.0f}", c["best_other"], f"{c['dcp_over_best_other']:.3f}x",
             nf, f"{c['speedup_vs_best_static']:.3f}x",
             f"{100 * c['gap_to_bound']:.1f} % (+{100 * c['noise_share']:.1f} %)",
             f"{c['oom_events']} / {c['dcp_oom_events']}"]
    return "| " + " | ".join(cells) + " |"


def summary(cells):
    ran = [c for c in cells if c.get("dcp_noise_free_tokens_per_s")]
    ok = [c for c in ran if c["dcp_over_best_other_noise_free"] >= 0.995]
    gaps = [c["gap_to_bound"] for c in ran]
    print(f"cells {len(cells)}, ran {len(ran)}; ours >= 0.995 x best other, noise free: {len(ok)}; "
          f"mean gap {100 * sum(gaps) / len(gaps):.2f} %, above 12 %: {sum(g > 0.12 for g in gaps)}; "
          f"OOM events, ours: {sum(c.get('dcp_oom_events', 0) for c in ran)}")
    for c in sorted(ran, key=lambda c: c["dcp_over_best_other_noise_free"]):
        if c["dcp_over_best_other_noise_free"] < 0.995:
            print(f"  miss {c['dcp_over_best_other_noise_free']:.4f} vs {c['best_other_noise_free']}: {c['command']}")


def update_markdown(path, cells):
    """Rewrites the table row of every cell in `cells` found in the Markdown file at `path`."""
    rows = {row_key(c): table_row(c) for c in cells}
    with open(path) as f:
        lines = f.read().split("\n")
    found = changed = 0
    for n, line in enumerate(lines):
        row = rows.get(" | ".join(line.split(" | ")[:7]) + " | ")
        if row is None:
            continue
        found += 1
        changed += line != row
        lines[n] = row
    print(f"{path}: {found} of {len(rows)} cells' rows found, {changed} changed")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def read_matrix(path, tool):
    """The cells of a dcp-sim --matrix --json file; exits naming `tool` if it is not one."""
    with open(path) as f:
        doc = json.load(f)
    if list(doc) != ["matrix"]:
        sys.exit(f"{tool}: {path} is not a dcp-sim --matrix --json file")
    return doc["matrix"]


def write_matrix(path, cells):
    """Writes the matrix as dcp-sim --matrix --json does: a cell per line."""
    with open(path, "w") as f:
        f.write('{"matrix":[\n' + ",\n".join(" " + json.dumps(c, separators=(",", ":")) for c in cells) + "\n]}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("matrix")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--markdown", help="a file holding the matrix table to update")
    o = parser.parse_args()
    cells = read_matrix(o.matrix, "matrix_refresh")
    todo = [c for c in cells if c.get("dcp_noise_free_tokens_per_s")]
    with concurrent.futures.ThreadPoolExecutor(o.jobs) as pool:
        results = list(pool.map(lambda c: run_ours(o.binary, c["command"]), todo))
    moved = []
    for cell, (ours, error) in zip(todo, results):
        if ours is None:
            sys.exit(f"matrix_refresh: '{cell['command']}' failed: {error}")
        before = cell["dcp_noise_free_tokens_per_s"]
        static_rate = cell["dcp_tokens_per_s"] / cell["speedup_vs_best_static"]
        cell["dcp_tokens_per_s"] = ours["tokens_per_s"]
        cell["dcp_noise_free_tokens_per_s"] = ours["noise_free_tokens_per_s"]
        cell["dcp_over_best_other"] = ours["tokens_per_s"] / cell["best_other_tokens_per_s"]
        cell["dcp_over_best_other_noise_free"] = (ours["noise_free_tokens_per_s"] /
                                                  cell["best_other_noise_free_tokens_per_s"])
        cell["speedup_vs_best_static"] = ours["tokens_per_s"] / static_rate
        cell["gap_to_bound"] = ours["gap_to_bound"]
        cell["noise_share"] = ours["noise_share"]
        cell["dcp_oom_events"] = ours["oom_events"]
        ratio = ours["noise_free_tokens_per_s"] / before
        if abs(ratio - 1) > 1e-12:
            moved.append((ratio, cell["command"]))
    print(f"ours moved in {len(moved)} of {len(todo)} cells (noise free, new / old):")
    for ratio, command in sorted(moved):
        print(f"  {ratio:.4f} {command}")
    summary(cells)
    if o.markdown:
        update_markdown(o.markdown, todo)
    write_matrix(o.matrix, cells)


if __name__ == "__main__":
    main()
