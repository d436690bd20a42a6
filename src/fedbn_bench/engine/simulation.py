"""The round loop: broadcast → local training → aggregate → evaluate → record → checkpoint.

Local training runs on one of three backends. ``engine=loop`` (this file, the readable
reference): one model object serves every client, its state loaded from the server's global state
plus the client's own local state (no deep copies, no DataLoader); a client's batches for the
round are gathered at once from data that already lives on the device (``client_round_batches``).
``engine=vmap`` (``vmap.py``) and ``engine=packed`` (``packed.py``) train the round's clients as
one stack (``stacked.py``). Statistics travel as explicit tensors (see ``norms/base.py``). Every
``checkpoint_every`` rounds the whole run state is written atomically (``checkpoint.py``);
``restore`` continues from it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import torch
from torch import nn
from tqdm.auto import tqdm

from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.algorithms.schedules import learning_rate
from fedbn_bench.data import DatasetBundle
from fedbn_bench.engine.checkpoint import plain_attributes, restore_attributes, save_checkpoint
from fedbn_bench.engine.evaluation import evaluate
from fedbn_bench.engine.options import channels_last_input, to_channels_last
from fedbn_bench.engine.packed import PackedTrainer
from fedbn_bench.engine.sampling import client_round_batches, generator, sample_clients, seed_global
from fedbn_bench.engine.vmap import VmapTrainer
from fedbn_bench.norms.base import NormMethod
from fedbn_bench.records.loggers import Logger
from fedbn_bench.records.run_records import RunRecorder

State = dict[str, torch.Tensor]


@dataclass
class RunSettings:
    """The scalar settings of a simulation (resolved from the Hydra config)."""

    rounds: int
    clients_per_round: int
    batch_size: int
    lr: float
    schedule: Any
    seed: int
    eval_every: int
    augment: bool = False
    eval_batch_size: int = 1024
    progress: bool = True
    checkpoint_every: int = 0
    channels_last: bool = False


@dataclass
class Federation:
    """What is simulated: data on the device, the clients' indices and test splits, strategies."""

    data: DatasetBundle
    client_indices: list[torch.Tensor]
    model: nn.Module
    norm: NormMethod
    algo: Algorithm
    client_test: Optional[list[torch.Tensor]] = None
    domain_test: dict[str, torch.Tensor] = field(default_factory=dict)


def clone_state(state: State) -> State:
    return {k: v.detach().clone() for k, v in state.items()}


class Simulation:
    """Runs the rounds of one federated simulation and writes its records."""

    def __init__(
        self,
        fed: Federation,
        settings: RunSettings,
        recorder: RunRecorder,
        logger: Logger,
        engine: str = "loop",
        config: Optional[dict[str, Any]] = None,
    ) -> None:
        """``engine`` is ``loop``, ``vmap`` or ``packed`` (already checked, see ``engine/select.py``);
        ``config`` (the resolved run config) is stored in checkpoints to check a resumption."""
        self.fed, self.s, self.recorder, self.logger = fed, settings, recorder, logger
        self.config = config
        model, algo = fed.model, fed.algo
        if settings.channels_last and engine == "loop":
            to_channels_last(model)
        self.global_state = clone_state(model.state_dict())
        self.local_keys = list(self.global_state) if algo.keeps_models_local else fed.norm.local_keys(model)
        self.personalized = bool(self.local_keys) and (algo.keeps_models_local or fed.norm.local_state_in_evaluation)
        num_clients = len(fed.client_indices)
        self.client_local: list[State] = [
            {k: self.global_state[k].clone() for k in self.local_keys} for _ in range(num_clients)
        ]
        self.client_algo_state: list[dict[str, Any]] = [{} for _ in range(num_clients)]
        self.client_sizes = torch.tensor([len(i) for i in fed.client_indices])
        self.batch_size = algo.batch_size(settings.batch_size, settings.clients_per_round)
        self.rounds_completed = 0
        self.samples_seen = 0
        self.train_seconds = 0.0
        self.history: list[dict[str, Any]] = []
        self.pending_losses: list[torch.Tensor] = []
        self.best, self.last, self.elapsed = -math.inf, {}, 0.0
        stacked = {"vmap": VmapTrainer, "packed": PackedTrainer}.get(engine)
        self.stacked = stacked(self) if stacked else None

    # -- one client ----------------------------------------------------------------------------
    def load_client(self, client: int) -> None:
        model = self.fed.model
        model.load_state_dict(self.global_state)
        if self.local_keys:
            model.load_state_dict(self.client_local[client], strict=False)

    def before_training(self, client: int) -> Optional[State]:
        """The norm's pre-training statistics of ``client`` (HBN Eq. 7); the client's data is
        gathered only for methods that define the hook."""
        norm = self.fed.norm
        if type(norm).before_local_training is NormMethod.before_local_training:
            return None
        return norm.before_local_training(self.fed.model, self.fed.data.train.x[self.fed.client_indices[client]])

    def batches(self, x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The steps of pre-gathered ``(steps, B, ...)`` batches (channels-last when enabled)."""
        for xb, yb in zip(x, y):
            yield (channels_last_input(xb) if self.s.channels_last else xb), yb

    def train_client(self, round_idx: int, client: int, lr: float) -> tuple[State, State, torch.Tensor]:
        fed, train = self.fed, self.fed.data.train
        self.load_client(client)
        indices = fed.client_indices[client]
        steps = fed.algo.num_steps(len(indices), self.batch_size)
        x, y = client_round_batches(train.x, train.y, indices, self.batch_size, steps,
                                    (self.s.seed, round_idx, client), self.s.augment)
        pre_stats = self.before_training(client)
        seed_global(self.s.seed, round_idx, client)
        payload, loss = fed.algo.local_train(fed.model, self.batches(x, y), lr, self.client_algo_state[client])
        stats = fed.norm.client_statistics(fed.model) if pre_stats is None else pre_stats
        if self.local_keys:
            state = fed.model.state_dict()
            self.client_local[client] = {k: state[k].detach().clone() for k in self.local_keys}
        self.samples_seen += steps * self.batch_size
        return payload, stats, loss

    # -- one round -----------------------------------------------------------------------------
    def sample(self, round_idx: int) -> list[int]:
        return sample_clients(len(self.fed.client_indices), self.s.clients_per_round, generator(self.s.seed, round_idx))

    def statistics_round(self, round_idx: int) -> None:
        """A statistics-only round (no training): HBN Alg. 1 at t = T + 1."""
        fed, stats = self.fed, []
        fed.norm.on_round_start(round_idx, self.s.rounds, fed.model)
        clients = self.sample(round_idx)
        for client in clients:
            self.load_client(client)
            stats.append(self.before_training(client))
        weights = fed.algo.client_weights(self.client_sizes[clients])
        self.global_state.update(fed.norm.aggregate_statistics(stats, weights))

    def run_round(self, round_idx: int) -> torch.Tensor:
        fed, s = self.fed, self.s
        lr = learning_rate(s.lr, s.schedule, round_idx, s.rounds)
        fed.norm.on_round_start(round_idx, s.rounds, fed.model)
        clients = self.sample(round_idx)
        if self.stacked is not None:
            results = self.stacked.train_round(round_idx, clients, lr)
        else:
            results = [self.train_client(round_idx, client, lr) for client in clients]
        payloads, stats, losses = [], [], []
        for payload, client_stats, loss in results:
            payloads.append({k: v for k, v in payload.items() if k not in self.local_keys})
            stats.append({k: v for k, v in client_stats.items() if k not in self.local_keys})
            losses.append(loss)
        weights = fed.algo.client_weights(self.client_sizes[clients])
        params = {k: self.global_state[k] for k in payloads[0]}
        self.global_state.update(fed.algo.server_update(params, payloads, weights, lr))
        self.global_state.update(fed.norm.aggregate_statistics(stats, weights))
        return torch.stack(losses).mean()

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        fed, test = self.fed, self.fed.data.test
        bs = self.s.eval_batch_size
        if self.personalized:
            accs, losses = [], []
            for client in range(len(fed.client_indices)):
                self.load_client(client)
                idx = fed.client_test[client] if fed.client_test is not None else slice(None)
                acc, loss = evaluate(fed.model, test.x[idx], test.y[idx], bs)
                accs.append(acc)
                losses.append(loss)
            mean_acc, mean_loss = sum(accs) / len(accs), sum(losses) / len(losses)
            return {"test_acc": mean_acc, "test_loss": mean_loss, "client_acc_mean": mean_acc,
                    "client_acc_min": min(accs)}
        fed.model.load_state_dict(self.global_state)
        acc, loss = evaluate(fed.model, test.x, test.y, bs)
        row = {"test_acc": acc, "test_loss": loss}
        for name, idx in fed.domain_test.items():
            row[f"acc_{name}"] = evaluate(fed.model, test.x[idx], test.y[idx], bs)[0]
        return row

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the remaining rounds (all of them, or those after a restored checkpoint)."""
        s = self.s
        start = time.perf_counter() - self.elapsed
        status = "running"
        rounds = range(self.rounds_completed, s.rounds)
        bar = tqdm(rounds, desc="rounds", unit="round", disable=not s.progress, dynamic_ncols=True,
                   initial=self.rounds_completed, total=s.rounds)
        try:
            for round_idx in bar:
                t0 = time.perf_counter()
                loss = self.run_round(round_idx)
                self.train_seconds += time.perf_counter() - t0
                self.pending_losses.append(loss)
                self.rounds_completed = round_idx + 1
                if self.rounds_completed == s.rounds and self.fed.norm.final_statistics_round:
                    self.statistics_round(s.rounds)
                diverged = not torch.isfinite(loss).item()
                if diverged or self.rounds_completed % s.eval_every == 0 or self.rounds_completed == s.rounds:
                    self.last = self.record(round_idx + 1, self.pending_losses, start)
                    self.pending_losses = []
                    self.best = max(self.best, self.last["test_acc"])
                    bar.set_postfix(acc=f"{self.last['test_acc']:.3f}", loss=f"{self.last['train_loss']:.3f}")
                if diverged:
                    status = "diverged"
                    break
                if s.checkpoint_every and (self.rounds_completed % s.checkpoint_every == 0 or self.rounds_completed == s.rounds):
                    self.elapsed = time.perf_counter() - start
                    save_checkpoint(self.recorder.run_dir, self.checkpoint_state())
            else:
                status = "completed"
        except KeyboardInterrupt:
            status = "interrupted"
        except Exception:
            status = "failed"
            raise
        finally:
            bar.close()
            summary = self.summary(status, self.last, self.best, start)
            self.recorder.write_summary(summary)
            self.logger.finish(summary)
        return summary

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue after ``rounds_completed`` rounds (see ``checkpoint.py``):
        server state, per-client state, the strategies' own state, metric rows and counters, RNG."""
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return {
            "config": self.config,
            "rounds_completed": self.rounds_completed,
            "global_state": self.global_state,
            "client_local": self.client_local,
            "client_algo_state": self.client_algo_state,
            "algo_state": plain_attributes(self.fed.algo),
            "norm_state": plain_attributes(self.fed.norm),
            "history": self.history,
            "pending_losses": self.pending_losses,
            "best": self.best,
            "last": self.last,
            "elapsed": self.elapsed,
            "samples_seen": self.samples_seen,
            "train_seconds": self.train_seconds,
            "rng": rng,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint: restore every piece of ``checkpoint_state`` and rewrite
        metrics.csv with the rows recorded up to the checkpoint (later rows are dropped: they
        will be recorded again)."""
        self.rounds_completed = state["rounds_completed"]
        self.global_state = state["global_state"]
        self.client_local = state["client_local"]
        self.client_algo_state = state["client_algo_state"]
        restore_attributes(self.fed.algo, state["algo_state"])
        restore_attributes(self.fed.norm, state["norm_state"])
        self.history, self.pending_losses = [], state["pending_losses"]
        self.best, self.last, self.elapsed = state["best"], state["last"], state["elapsed"]
        self.samples_seen, self.train_seconds = state["samples_seen"], state["train_seconds"]
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if "cuda" in state["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])
        self.recorder.metrics_path.unlink(missing_ok=True)
        for row in state["history"]:
            self.recorder.append_metrics(row)
            self.history.append(row)

    def record(self, round_number: int, losses: list[torch.Tensor], start: float) -> dict[str, float]:
        row = {"round": round_number, **self.evaluate()}
        row["train_loss"] = torch.stack(losses).mean().item()
        row["lr"] = learning_rate(self.s.lr, self.s.schedule, round_number - 1, self.s.rounds)
        row["wall_s"] = time.perf_counter() - start
        self.recorder.append_metrics(row)
        self.history.append(row)
        self.logger.log(row, step=round_number)
        return row

    def summary(self, status: str, last: dict[str, float], best: float, start: float) -> dict[str, Any]:
        return {
            "status": status,
            "final_test_acc": last.get("test_acc"),
            "best_test_acc": best if last else None,
            "final_test_loss": last.get("test_loss"),
            "rounds_completed": self.rounds_completed,
            "wall_time_s": time.perf_counter() - start,
            "samples_per_s": self.samples_seen / self.train_seconds if self.train_seconds else 0.0,
        }
