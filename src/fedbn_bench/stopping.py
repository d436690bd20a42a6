"""Stops that wait for the round under way: a job told it will soon lose its allocation.

SLURM warns a job before its time limit (``--signal=USR2@<signal_delay_s>``, submitit's
``signal_delay_s``) and asks a preempted or requeued job to end with SIGTERM, ``KillWait`` seconds
before SIGKILL. A run then has time to finish its round: ``stop_after_round`` (installed as the
signal's handler in a SLURM job, ``hydra_plugins/fedbn_bench_launcher/slurm_launcher.py``) only
records the request; the run loop, after the round, writes a checkpoint of that round and stops
(``engine/run_loop.py``: ``drive``), so a requeued job redoes no round. A second signal while the
round is still under way (SLURM's SIGTERM at the limit itself, after its warning) abandons it at
once, as Ctrl-C does: the run then resumes from its last checkpoint. The same signal again (SLURM
sends SIGTERM both to the job step and through ``srun``) changes nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional

from fedbn_bench.errors import Stopped

_requested: Optional[int] = None


def stop_after_round(signum: int, frame: Optional[FrameType] = None) -> None:
    """Signal handler: stop after the round under way; another signal after it stops at once."""
    global _requested
    if _requested is None:
        _requested = signum
    elif signum != _requested:
        raise Stopped(signum, signal.Signals(signum).name)


def requested_stop() -> Optional[Stopped]:
    """The stop asked for by ``stop_after_round`` (``None``: none), to raise after a round."""
    return None if _requested is None else Stopped(_requested, signal.Signals(_requested).name)


def clear_stop_request() -> None:
    """Forget a stop request (a new job in the same process starts with none)."""
    global _requested
    _requested = None


@contextmanager
def signals_deferred(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Run a write that an exception must not cut (``torch.save``: its C++ zip writer turns an exception a
    signal handler raises inside one of its writes into "unexpected pos", a ``RuntimeError``, and the run
    read as failed) with ``signums`` recorded, not handled; after it each recorded signal goes to its own
    handler, in order (``Stopped`` then ends the run as it would have). Outside the main thread, where
    handlers cannot change, the write runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda got, frame: caught.append(got)) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
