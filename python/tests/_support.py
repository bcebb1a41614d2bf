"""Shared by the tests: the Wikipedia lengths of ../shared/data and batches drawn from them."""

import os
import random
import unittest
from functools import lru_cache
from typing import List


@lru_cache(maxsize=1)
def wikipedia_lengths() -> List[int]:
    """The lengths of DCP_SHARED_DATA_DIR/wikipedia-lengths.txt (skips the test if absent)."""
    folder = os.environ.get("DCP_SHARED_DATA_DIR", "")
    path = os.path.join(folder, "wikipedia-lengths.txt")
    if not folder or not os.path.exists(path):
        raise unittest.SkipTest(f"{path} not found (set DCP_SHARED_DATA_DIR)")
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def wikipedia_batch(seed: int, tokens: int = 1_000_000, context: int = 65536) -> List[int]:
    """Documents drawn at random until `tokens`, each cut into pieces of at most `context`
    (as tests/support/batches.hpp does)."""
    lengths = wikipedia_lengths()
    rng = random.Random(seed)
    batch: List[int] = []
    while sum(batch) < tokens:
        length = lengths[rng.randrange(len(lengths))]
        while length > 0:
            batch.append(min(length, context))
            length -= context
    return batch
