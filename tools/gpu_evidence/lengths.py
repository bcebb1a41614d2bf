"""Wikipedia-like document lengths from the quantile table the repository embeds
(sim/include/dcp/workload/wikipedia_profile.hpp), sampled as dcp's empirical_profile does:
inverse CDF, log-linear between the table's points, rounded. The GPU machine has no ../shared,
so the table is read from the header rather than from the measured file."""

import math
import os
import random
import re
from bisect import bisect_right
from functools import lru_cache
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = os.path.join(ROOT, "sim", "include", "dcp", "workload", "wikipedia_profile.hpp")


@lru_cache(maxsize=1)
def wikipedia_points() -> Tuple[Tuple[float, float], ...]:
    """(probability, tokens) points of the embedded table, probability in [0, 1]."""
    with open(PROFILE) as f:
        text = f.read()
    body = re.search(r"wikipedia_points\[\]\s*=\s*\{(.*?)\};", text, re.S)
    if body is None:
        raise RuntimeError(f"{PROFILE}: no wikipedia_points table")
    points = tuple((int(p) / 1e6, float(t)) for p, t in re.findall(r"\{(\d+),\s*(\d+)\}", body.group(1)))
    if len(points) < 2 or points[0][0] != 0 or points[-1][0] != 1:
        raise RuntimeError(f"{PROFILE}: the table must run from probability 0 to 1")
    return points


@lru_cache(maxsize=1)
def _probabilities() -> Tuple[float, ...]:
    return tuple(p for p, _ in wikipedia_points())


def draw_length(rng: random.Random) -> int:
    points = wikipedia_points()
    u = rng.random()
    i = min(max(bisect_right(_probabilities(), u) - 1, 0), len(points) - 2)
    (p0, t0), (p1, t1) = points[i], points[i + 1]
    share = (u - p0) / (p1 - p0)
    return max(1, round(math.exp(math.log(t0) + share * (math.log(t1) - math.log(t0)))))


def packed_micro_batch(tokens: int, seed: int) -> List[int]:
    """Documents drawn until `tokens` are filled; the last one is cut to fit, and a document
    longer than the micro-batch is cut to it (as a packing loader does)."""
    rng = random.Random(seed)
    lengths: List[int] = []
    while sum(lengths) < tokens:
        lengths.append(min(draw_length(rng), tokens - sum(lengths)))
    return lengths
