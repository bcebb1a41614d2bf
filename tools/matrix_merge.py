#!/usr/bin/env python3
"""Replaces cells of a scenario-matrix JSON with those of partial full runs, every policy rerun.

Where a change reaches the other policies too (the analytic cost model all of them plan with),
ours alone cannot be refreshed (tools/matrix_refresh.py): the affected part of the matrix is rerun
in full with dcp-sim's axis filters, and the parts are merged here:

    ./build/tools/dcp-sim --matrix --gpu h100 --sp ring --steps 2 --json > h100-ring.json
    python3 tools/matrix_merge.py docs/data/matrix.json h100-ring.json [more.json ...]
    python3 tools/results_page.py     # docs/results.md is rendered from the JSON

A cell is matched by its model, workload, context, GPUs, GPU, style and ZeRO stage. Prints, per
merged cell, how ours and the best other policy moved (noise free, new / old), then the bars of
issue 10 over the merged matrix; rewrites the JSON and, with --markdown, the cells' table rows in
a file that holds the table (docs/results.md is rendered by tools/results_page.py instead).
"""

import argparse
import sys

import matrix_refresh as refresh


def key(c):
    return (c["model"], c["workload"], c["context"], c["gpus"], c["gpu"], c["sp"], c["zero"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix")
    parser.add_argument("parts", nargs="+")
    parser.add_argument("--markdown", help="a file holding the matrix table to update")
    o = parser.parse_args()
    cells = refresh.read_matrix(o.matrix, "matrix_merge")
    where = {key(c): n for n, c in enumerate(cells)}
    merged = []
    for part in o.parts:
        for c in refresh.read_matrix(part, "matrix_merge"):
            n = where.get(key(c))
            if n is None:
                sys.exit(f"matrix_merge: {part}: no cell of {o.matrix} matches '{c['command']}'")
            merged.append((cells[n], c))
            cells[n] = c
    print(f"{len(merged)} cells merged; noise free, new / old: ours, best other")
    for old, new in merged:
        if not (old.get("dcp_noise_free_tokens_per_s") and new.get("dcp_noise_free_tokens_per_s")):
            continue
        ours = new["dcp_noise_free_tokens_per_s"] / old["dcp_noise_free_tokens_per_s"]
        other = new["best_other_noise_free_tokens_per_s"] / old["best_other_noise_free_tokens_per_s"]
        if abs(ours - 1) > 1e-12 or abs(other - 1) > 1e-12:
            print(f"  {ours:.4f} {other:.4f} ({old['best_other_noise_free']} -> {new['best_other_noise_free']}) "
                  f"{new['command']}")
    refresh.summary(cells)
    if o.markdown:
        refresh.update_markdown(o.markdown, [new for _, new in merged if new.get("dcp_noise_free_tokens_per_s")])
    refresh.write_matrix(o.matrix, cells)


if __name__ == "__main__":
    main()
