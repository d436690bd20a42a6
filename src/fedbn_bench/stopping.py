"""Stops that wait for the round under way: a job told it will soon lose its allocation.

SLURM warns a job before its time limit (``--signal=USR2@<signal_delay_s>``, submitit's
``signal_delay_s``) and asks a preempted or requeued job to end with SIGTERM, ``KillWait`` seconds
before SIGKILL. A run then has time to finish its round: ``stop_after_round`` (installed as the
signal's handler in a SLURM job, ``hydra_plugins/fedbn_bench_launcher/slurm_launcher.py``) only
records the request; the run loop, after the round, writes a checkpoint of that round and stops
(``engine/run_loop.py``: ``drive``), so a requeued job redoes no round. A second signal while the
round is still under way (SLURM's SIGTERM at the limit itself, after its warning) abandons it at
once, as Ctrl-C does: the run then resumes from its last checkpoint; a job that was warned is
requeued whichever signal stopped it (``warned``). The same signal again (SLURM sends SIGTERM both
to the job step and through ``srun``) changes nothing. A round longer than the warning's lead
(``expect_rounds_within``) is named once in the log (``round_took``).
"""
from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional

from fedbn_bench.errors import Stopped

log = logging.getLogger(__name__)
WARNING = signal.SIGUSR2
"""SLURM's warning before the time limit (``--signal=USR2@<signal_delay_s>``)."""
_requested: Optional[int] = None
_warned = False
_round_budget_s: Optional[float] = None


def stop_after_round(signum: int, frame: Optional[FrameType] = None) -> None:
    """Signal handler: stop after the round under way; another signal after it stops at once."""
    global _requested, _warned
    _warned = _warned or signum == WARNING
    if _requested is None:
        _requested = signum
    elif signum != _requested:
        raise Stopped(signum, signal.Signals(signum).name)


def requested_stop() -> Optional[Stopped]:
    """The stop asked for by ``stop_after_round`` (``None``: none), to raise after a round."""
    return None if _requested is None else Stopped(_requested, signal.Signals(_requested).name)


def warned() -> bool:
    """Whether the warning before the time limit came (then the job is requeued, whatever stopped it)."""
    return _warned


def clear_stop_request() -> None:
    """Forget a stop request and a warning (a new job in the same process starts with none)."""
    global _requested, _warned, _round_budget_s
    _requested, _warned, _round_budget_s = None, False, None


def expect_rounds_within(seconds: Optional[float]) -> None:
    """A round must fit in ``seconds`` (``signal_delay_s``: the warning's lead before the time limit)."""
    global _round_budget_s
    _round_budget_s = seconds or None


def round_took(seconds: float) -> None:
    """Name, once, a round longer than ``expect_rounds_within``'s lead: the time limit then abandons it."""
    global _round_budget_s
    if _round_budget_s is not None and seconds > _round_budget_s:
        log.warning(f"a round took {seconds:.1f} s, longer than hydra.launcher.signal_delay_s={_round_budget_s:g}: "
                    "SLURM's time limit will abandon the round under way (the job resumes from its last checkpoint); "
                    "raise signal_delay_s above a round's time")
        _round_budget_s = None


@contextmanager
def signals_deferred(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, WARNING)) -> Iterator[None]:
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
