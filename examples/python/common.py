"""What the plain loop and the dcp loop share: the batches (lengths from the Wikipedia profile of
../shared/data) and the launcher of the processes. Nothing here knows about dcp."""

from __future__ import annotations

import math
import os
import random
import tempfile
from typing import List, Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from llama import Document, make_batch

#: Wikipedia lengths are divided by this (rounded up) and clamped to [MIN_LENGTH, MAX_LENGTH]:
#: the profile's shape, compressed so that a CPU step takes milliseconds.
LENGTH_DIVISOR = 32
MIN_LENGTH, MAX_LENGTH = 4, 128

_profile: Optional[List[int]] = None


def wikipedia_lengths() -> List[int]:
    """The 1,000,000 Wikipedia document lengths of ../shared/data (DCP_SHARED_DATA_DIR overrides)."""
    global _profile
    if _profile is None:
        here = os.path.dirname(os.path.abspath(__file__))
        folder = os.environ.get("DCP_SHARED_DATA_DIR", os.path.join(here, "..", "..", "..", "shared", "data"))
        path = os.path.join(folder, "wikipedia-lengths.txt")
        with open(path) as f:
            _profile = [int(line) for line in f if line.strip()]
        if not _profile:
            raise ValueError(f"{path} holds no lengths")
    return _profile


def batch_of(step: int, count: int = 24, seed: int = 2024) -> List[Document]:
    """Step `step`'s batch: `count` documents whose lengths are drawn from the Wikipedia profile."""
    profile = wikipedia_lengths()
    rng = random.Random(seed * 7919 + step)
    lengths = [min(MAX_LENGTH, max(MIN_LENGTH, math.ceil(profile[rng.randrange(len(profile))] / LENGTH_DIVISOR)))
               for _ in range(count)]
    return make_batch(lengths, seed, step)


def spawn(main, ranks: int = 4, *args) -> None:
    """Runs main(rank, ranks, *args) on `ranks` processes joined by a Gloo process group (a
    file store in a fresh temporary folder, so concurrent runs never meet)."""
    with tempfile.TemporaryDirectory(prefix="dcp-torch-") as folder:
        mp.spawn(_entry, args=(ranks, os.path.join(folder, "store"), main, args), nprocs=ranks, join=True)


def _entry(rank: int, ranks: int, store: str, main, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=ranks)
    try:
        main(rank, ranks, *args)
    finally:
        dist.destroy_process_group()
