"""The run loop: the rounds' cadence, evaluation and records, divergence, checkpoints, summary."""
from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Callable, Optional, Sequence

import torch
from tqdm.auto import tqdm

from fedbn_bench.algorithms.schedules import learning_rate
from fedbn_bench.engine.checkpoint import (check_data_fingerprint, data_fingerprint, plain_attributes,
                                           restore_attributes, save_checkpoint)
from fedbn_bench.engine.client_states import ClientStates
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.flops import flop_counter
from fedbn_bench.engine.evaluator import Evaluator
from fedbn_bench.engine.federation import Federation
from fedbn_bench.engine.graphs import GraphRecord, graphs_set_aside
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.errors import ConfigError, Stopped
from fedbn_bench.norms.base import NormMethod
from fedbn_bench.records.loggers import Logger
from fedbn_bench.records.machine import machine_record
from fedbn_bench.records.provenance import code_record
from fedbn_bench.records.run_dirs import kept_new_run, record_unfinished
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.records.selection import REPORTED_AT_BEST, best_validation, selection_key
from fedbn_bench.stopping import requested_stop, round_took, signals_deferred

log = logging.getLogger(__name__)


class RunLoop:
    """Runs the rounds of one simulation, evaluates every ``eval_every`` rounds, writes records."""

    def __init__(self, fed: Federation, store: ClientStore, rounds: RoundRunner, evaluator: Evaluator,
                 settings: RunSettings, recorder: RunRecorder, logger: Logger, config: dict | None = None,
                 engine: dict[str, str] | None = None, graphs: GraphRecord | None = None) -> None:
        """``engine``: the backend's record for the summary (``EngineChoice.record``); ``graphs``: what the
        local steps did under ``engine.cuda_graphs`` (``graphs.GraphRecord``), in the summary and checkpoints."""
        self.fed, self.store, self.rounds, self.evaluator, self.s = fed, store, rounds, evaluator, settings
        self.recorder, self.logger, self.config = recorder, logger, config
        self.engine = engine or {}
        self.graphs = graphs
        self.rounds_completed = 0
        self.train_seconds = 0.0
        self.history: list[dict[str, Any]] = []
        self.pending_losses: list[torch.Tensor] = []
        self.best, self.last, self.elapsed = -math.inf, {}, 0.0
        self.start = time.perf_counter()
        self.code = code_record()
        """The code that makes this run (``records/provenance.py``), read when the run is built."""
        self.reestimate = reestimates_statistics(settings.eval_statistics, fed.norm)
        self.best_selection: dict[str, Any] | None = None
        """With ``evaluator.defers_robust_test``: the score and state (global and clients' local
        keys) of the best validation evaluation so far, robust-tested by ``finish``."""
        self.checkpoint_round = 0
        """The round of the last checkpoint written or restored (0: none)."""
        self._data_fingerprint: str | None = None
        self.train_macs_per_round: float | None = None
        """MACs of one round's local training (FedRBN Tables 2 and 4, ``T``: with one local epoch
        and every user per round, the per-epoch cost), counted by ``torch.utils.flop_counter`` (``flops.py``)
        (forward and backward, attack steps included; 2 FLOPs per MAC) on the first round."""

    def run(self) -> dict[str, Any]:
        """Run the remaining rounds (all of them, or those after a restored checkpoint)."""
        return drive([self], lambda active, round_idx: [self.run_round(round_idx)], self.s.progress)[0]

    def begin(self) -> None:
        """Start the clock (continuing a restored run's elapsed time)."""
        self.start = time.perf_counter() - self.elapsed

    def after_round(self, round_idx: int, loss: Optional[torch.Tensor], seconds: float) -> bool:
        """Everything after training round ``round_idx`` (which took ``seconds`` and gave the mean
        ``loss``, ``None`` when no client trained): HBN's final statistics round, evaluation and
        records, the checkpoint. Returns whether the run diverged (a non-finite loss; recorded,
        nothing saved after it)."""
        s = self.s
        self.train_seconds += seconds
        if loss is not None:
            self.pending_losses.append(loss)
        self.rounds_completed = round_idx + 1
        fresh = self.rounds_completed == s.rounds and self.fed.norm.final_statistics_round
        if fresh:
            self.rounds.statistics_round(s.rounds)
        diverged = loss is not None and not torch.isfinite(loss).item()
        if diverged or self.rounds_completed % s.eval_every == 0 or self.rounds_completed == s.rounds:
            self.last = self.record(round_idx + 1, reestimate=self.reestimate and not fresh and not diverged)
            self.best = max(self.best, self.last["test_acc"])
        if not diverged and s.checkpoint_every and (self.rounds_completed % s.checkpoint_every == 0
                                                    or self.rounds_completed == s.rounds):
            self.checkpoint()
        kept_new_run(self.recorder.run_dir)
        return diverged

    def checkpoint(self) -> None:
        """Write the checkpoint of the rounds completed so far (once per round)."""
        if self.checkpoint_round == self.rounds_completed:
            return
        self.elapsed = time.perf_counter() - self.start
        with signals_deferred():  # a stop during the write acts after checkpoint_round names it
            save_checkpoint(self.recorder.run_dir, self.checkpoint_state())
            self.checkpoint_round = self.rounds_completed

    def finish(self, status: str, cause: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write and log the summary of the run, ended with ``status`` (``cause``: what a failed
        run records of its exception, ``failure_record``, or the signal that stopped it)."""
        tested = self.best_round_robust_test() if status in ("completed", "diverged") else {}
        summary = {**self.summary(status), **tested, **(cause or {})}
        if self.rounds_completed == 0:
            record_unfinished(self.recorder.run_dir, summary)
        else:
            self.recorder.write_summary(summary)
        self.logger.finish(summary)
        return summary

    def run_round(self, round_idx: int) -> Optional[torch.Tensor]:
        """One round (its mean loss, ``None`` when no client trained); with ``count_macs``, the first one this run
        trains is counted, eagerly (``graphs_set_aside``: a replayed CUDA graph's work is seen by no counter)."""
        if not self.s.count_macs or self.train_macs_per_round is not None:
            return self.rounds.run_round(round_idx)
        with flop_counter() as counter, graphs_set_aside(self.rounds.backend.ctx):
            loss = self.rounds.run_round(round_idx)
        self.train_macs_per_round = counter.get_total_flops() / 2
        return loss

    def record(self, round_number: int, reestimate: bool = False) -> dict[str, float]:
        """Evaluate after ``round_number`` rounds; with ``reestimate``, on the global weights with
        statistics re-estimated on that round's clients (HBN §4.1), leaving the stored ones."""
        state = None
        if reestimate:
            state = {**self.store.global_state, **self.rounds.fresh_statistics(round_number - 1)}
        row = {"round": round_number, **self.s.labels, **self.evaluator.evaluate(state, round_number=round_number)}
        self.recorder.append_client_metrics(round_number, self.evaluator.client_rows)
        if self.evaluator.defers_robust_test:
            self.keep_if_best_selection(row, state)
        row["train_loss"] = torch.stack(self.pending_losses).mean().item() if self.pending_losses else math.nan
        self.pending_losses = []
        row["lr"] = learning_rate(self.s.lr, self.s.schedule, round_number - 1, self.s.rounds)
        row["wall_s"] = time.perf_counter() - self.start
        self.recorder.append_metrics(row)
        self.history.append(row)
        self.logger.log(row, step=round_number)
        log.debug("round %d: %s", round_number, ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                         for k, v in row.items() if k != "round"))
        return row

    def keep_if_best_selection(self, row: dict[str, float], global_state: dict | None) -> None:
        """Keep the evaluated state when ``row`` has the best selection score so far (strictly:
        the earliest round wins ties, on the score ``records/selection.py`` picks by)."""
        key = selection_key([row])
        score = row[key] if key else None
        if score is None or (self.best_selection is not None and score <= self.best_selection["score"]):
            return
        state = self.store.global_state if global_state is None else global_state
        self.best_selection = {
            "score": score,
            "global_state": {k: v.detach().clone() for k, v in state.items()},
            "client_local": self.store.client_local.clone(),
        }

    def best_round_robust_test(self) -> dict[str, float]:
        """The robust columns of the kept best-validation state (``robust_acc_at_best_val`` and
        each attack's ``<label>_acc_at_best_val``), tested on the full test splits; the store is
        left as it was. Empty unless robust testing is deferred to that round."""
        best = self.best_selection
        if best is None:
            return {}
        store = self.store
        current = store.global_state, store.client_local
        store.global_state, store.client_local = best["global_state"], best["client_local"]
        try:
            row = self.evaluator.evaluate(robust_test=True, round_number=self.rounds_completed)
        finally:
            store.global_state, store.client_local = current
        return {f"{column}_at_best_val": row[column] for column in self.evaluator.robust_attacks}

    def summary(self, status: str) -> dict[str, Any]:
        """The run's summary; with a validation split also the round of the best ``val_acc`` and
        the test accuracy recorded there, and each robust evaluation's (``records/selection.py``)."""
        last = self.last
        return {
            "status": status,
            "final_test_acc": last.get("test_acc"),
            "best_test_acc": self.best if last else None,
            "final_test_loss": last.get("test_loss"),
            "rounds_completed": self.rounds_completed,
            "wall_time_s": time.perf_counter() - self.start,
            "samples_per_s": self.rounds.samples_seen / self.train_seconds if self.train_seconds else 0.0,
            **({"threads": self.s.threads} if self.s.threads else {}),
            **({"cuda_visible_devices": os.environ["CUDA_VISIBLE_DEVICES"]} if "CUDA_VISIBLE_DEVICES" in os.environ else {}),
            "evaluation": self.evaluator.describe(),
            **self.store.memory.describe(),
            **self.engine,
            **(self.graphs.summary() if self.graphs is not None else {}),
            **machine_record(next(self.fed.model.parameters()).device),
            **self.code,
            **({"final_robust_acc": last["robust_acc"]} if "robust_acc" in last else {}),
            **({"train_macs_per_round": self.train_macs_per_round} if self.train_macs_per_round is not None else {}),
            **best_validation(self.history, (*REPORTED_AT_BEST, *self.evaluator.robust_attacks)),
            **({"checkpoint_round": self.checkpoint_round} if self.checkpoint_round else {}),
            **self.s.labels,
        }

    @property
    def data_fingerprint(self) -> str:
        """The fingerprint of the run's data (``checkpoint.data_fingerprint``), computed once."""
        if self._data_fingerprint is None:
            self._data_fingerprint = data_fingerprint(self.fed.data)
        return self._data_fingerprint

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue after ``rounds_completed`` rounds (see ``checkpoint.py``):
        the client store, the strategies' own state, metric rows and counters, RNG."""
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return {
            "config": self.config,
            "data_fingerprint": self.data_fingerprint,
            "rounds_completed": self.rounds_completed,
            "store": self.store.state_dict(),
            "algo_state": plain_attributes(self.fed.algo),
            "norm_state": plain_attributes(self.fed.norm),
            "history": self.history,
            "pending_losses": self.pending_losses,
            "best": self.best,
            "last": self.last,
            "elapsed": self.elapsed,
            "samples_seen": self.rounds.samples_seen,
            "train_seconds": self.train_seconds,
            "train_macs_per_round": self.train_macs_per_round,
            **({"cuda_graphs_ran": self.graphs.state()} if self.graphs is not None else {}),
            "best_selection": self.best_selection and {
                **self.best_selection, "client_local": self.best_selection["client_local"].state_dict()},
            "rng": rng,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint (on the same data: its fingerprint is checked): restore
        every piece of ``checkpoint_state``, rewrite metrics.csv with the rows recorded up to the
        checkpoint (later rows are dropped: they will be recorded again) and log those rows again
        (a W&B run resumed under its id then holds the whole history even where the killed
        process never flushed its own)."""
        check_data_fingerprint(self.recorder.run_dir, state["data_fingerprint"], self.data_fingerprint)
        self.rounds_completed = self.checkpoint_round = state["rounds_completed"]
        self.store.load_state_dict(state["store"])
        restore_attributes(self.fed.algo, state["algo_state"])
        restore_attributes(self.fed.norm, state["norm_state"])
        self.history, self.pending_losses = [], state["pending_losses"]
        self.best, self.last, self.elapsed = state["best"], state["last"], state["elapsed"]
        self.rounds.samples_seen, self.train_seconds = state["samples_seen"], state["train_seconds"]
        self.train_macs_per_round = state.get("train_macs_per_round")
        graphs = state.get("cuda_graphs_ran")
        if self.graphs is not None and graphs is not None and graphs["planned"] == self.graphs.planned:
            self.graphs.restore(graphs)
        self.best_selection = state.get("best_selection")
        if self.best_selection:
            self.best_selection["client_local"] = ClientStates.from_state_dict(self.best_selection["client_local"])
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if "cuda" in state["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
        self.recorder.metrics_path.unlink(missing_ok=True)
        self.recorder.keep_client_metrics(self.rounds_completed)
        for row in state["history"]:
            self.recorder.append_metrics(row)
            self.history.append(row)
            self.logger.log(row, step=row["round"])


TrainRound = Callable[[list[int], int], list[Optional[torch.Tensor]]]
"""``(active, round_idx) -> losses``: trains round ``round_idx`` of the loops at indices ``active``
and returns the mean loss of each (``None`` for a loop none of whose sampled clients trained)."""


def drive(loops: Sequence[RunLoop], train_round: TrainRound, progress: bool, desc: str = "rounds") -> list[dict[str, Any]]:
    """Drive ``loops`` (one run, or replicas in lockstep, ``replicas.py``) from their first remaining
    round to the last, and return their summaries. After each round every trained loop records
    (``after_round``). A loop that diverges stops there and the others go on. Each summary is
    written with the status that ended its loop: completed, diverged, interrupted (Ctrl-C, or a
    signal raised as ``Stopped``: the round under way is abandoned, ``stopped_by`` names the signal)
    or failed (the exception is raised after the summaries are written). A stop that waits for the
    round (``stopping.py``: SLURM's warning before the time limit, a preemption) is taken after the
    round: each running loop writes its checkpoint there first (``checkpoint_every=0`` too: the requeued job
    resumes from it)."""
    start, total = loops[0].rounds_completed, loops[0].s.rounds
    status = ["running"] * len(loops)
    failure: dict[str, Any] = {}
    stop: dict[str, Any] = {}
    round_idx = start
    for loop in loops:
        loop.begin()
    bar = tqdm(range(start, total), desc=desc, unit="round", disable=not progress, dynamic_ncols=True,
               initial=start, total=total)
    try:
        for round_idx in bar:
            active = [i for i, st in enumerate(status) if st == "running"]
            if not active:
                break
            t0 = time.perf_counter()
            losses = train_round(active, round_idx)
            seconds = time.perf_counter() - t0
            round_took(seconds)
            for i, loss in zip(active, losses):
                if loops[i].after_round(round_idx, loss, seconds):
                    status[i] = "diverged"
                    if len(loops) > 1:
                        tqdm.write(f"replica seed={loops[i].s.seed} diverged after round {round_idx + 1}")
            if len(loops) == 1 and loops[0].last:
                bar.set_postfix(acc=f"{loops[0].last['test_acc']:.3f}", loss=f"{loops[0].last['train_loss']:.3f}")
            if round_idx + 1 < total and (stop_now := requested_stop()) is not None:
                for i in [i for i in active if status[i] == "running"]:
                    loops[i].checkpoint()
                raise stop_now
        status = ["completed" if st == "running" else st for st in status]
    except KeyboardInterrupt as err:
        status = ["interrupted" if st == "running" else st for st in status]
        stop = {"stopped_by": err.name if isinstance(err, Stopped) else "SIGINT"}
    except Exception as err:
        status = ["failed" if st == "running" else st for st in status]
        failure = failure_record(err, round_idx + 1)
        raise
    finally:
        bar.close()
        summaries = [loop.finish(st, failure if st == "failed" else stop if st == "interrupted" else None)
                     for loop, st in zip(loops, status)]
    return summaries


def failure_record(err: BaseException, round_number: int) -> dict[str, Any]:
    """What ``summary.json`` of a failed run says about why: the exception's type and message and
    the round it happened in (1-based; 0: while the run was built, before the first round)."""
    return {"error_type": type(err).__name__, "error": str(err), "error_round": round_number}


EVAL_STATISTICS = ("auto", "stored", "reestimate")


def reestimates_statistics(option: str, norm: NormMethod) -> bool:
    """Whether evaluations re-estimate the statistics first (``eval_statistics``): ``auto`` does
    where the norm has a pre-training statistics pass (HBN §4.1 and its code)."""
    if option not in EVAL_STATISTICS:
        raise ConfigError(f"eval_statistics='{option}' is unknown; allowed: {', '.join(EVAL_STATISTICS)}")
    if option == "reestimate" and not norm.statistics_before_training:
        raise ConfigError("eval_statistics='reestimate' needs a norm with a statistics pass (norm=hbn with "
                          "stats_source=separated); use eval_statistics=auto or stored")
    return option == "reestimate" or (option == "auto" and norm.statistics_before_training)
