"""How many threads a run's torch kernels use (``engine.threads``).

``auto``: the machine's cores divided by the number of runs that execute at once (a joblib sweep's
``n_jobs``; 1 for a single run or a sequential sweep), at least 1. Without it every job of a
parallel sweep would use every core: on 2 cores a 2-job joblib sweep was no faster than running the
jobs one after the other (23.2 s vs 21.2 s, issue "Speed and scale"), and on 16 cores 16 jobs would
start 256 threads. A number sets the count directly. Applied before any tensor work.
"""
from __future__ import annotations

import os
from typing import Union

import torch

from fedbn_bench.errors import ConfigError


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_threads(setting: Union[int, str], jobs_at_once: int, cores: int) -> int:
    """The thread count of one run for ``engine.threads = setting``."""
    if setting == "auto":
        return max(1, cores // max(1, jobs_at_once))
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ConfigError(f"engine.threads={setting!r} is invalid: `auto` or a number of threads >= 1")
    return setting


def apply_threads(setting: Union[int, str], jobs_at_once: int = 1) -> int:
    """Set torch's intra-op thread count for this process; returns it."""
    threads = resolve_threads(setting, jobs_at_once, available_cores())
    torch.set_num_threads(threads)
    return threads
