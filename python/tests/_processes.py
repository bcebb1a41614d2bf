"""Runs a test body on several processes joined by a Gloo process group, with a deadline: a
body that would hang (ranks waiting in collectives the others never join) ends as a failure."""

import datetime
import os
import tempfile
import time
import traceback
from typing import Any, Callable, Tuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class Deadline(AssertionError):
    """The processes did not finish in time."""


def run_on_ranks(body: Callable[..., None], ranks: int, *args: Any, seconds: float = 120.0,
                 collective_timeout: float = 60.0) -> None:
    """Runs body(rank, ranks, *args) on `ranks` processes; raises AssertionError with the first
    failing rank's traceback, or Deadline after `seconds` (the processes are killed).
    `collective_timeout` is the process group's timeout: a collective that waits longer raises."""
    with tempfile.TemporaryDirectory(prefix="dcp-torch-test-") as folder:
        store = os.path.join(folder, "store")
        errors = [os.path.join(folder, f"error-{r}") for r in range(ranks)]
        context = mp.start_processes(_entry, args=(ranks, store, collective_timeout, errors, body, args),
                                     nprocs=ranks, join=False, start_method="spawn")
        deadline = time.monotonic() + seconds
        try:
            while not context.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                if time.monotonic() > deadline:
                    raise Deadline(f"{ranks} processes did not finish within {seconds:g} s")
        except mp.ProcessRaisedException:
            pass
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
        failures = [_read(e) for e in errors if os.path.exists(e)]
        if failures:
            raise AssertionError(f"{len(failures)} of {ranks} ranks failed; first:\n{failures[0]}")


def _entry(rank: int, ranks: int, store: str, timeout: float, errors: Tuple[str, ...], body, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=timeout))
    try:
        body(rank, ranks, *args)
    except BaseException:
        with open(errors[rank], "w") as f:
            f.write(f"rank {rank}:\n{traceback.format_exc()}")
        raise
    finally:
        dist.destroy_process_group()


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()
