"""What the vectorized backends share: the round's clients as one stack (``vmap``, ``packed``).

* **Stacked state.** Each sampled client is loaded exactly as ``loop`` loads it (start state +
  its local keys, load hooks included, then the norm's pre-training statistics); its parameters
  and buffers (statistics and counters included) are copied into tensors with a leading client
  axis, and so is the local tree the algorithm's ``start`` returns for it.
* **Statistics as explicit inputs and outputs.** A backend's ``forward_backward`` receives the
  stacked buffers of the active clients and leaves their updated values in the stack.
* **Unequal client sizes.** Batches are pre-drawn per client (``client_round_batches``, the same
  draws as ``loop``) and zero-padded to the longest client. Clients are ordered by their step
  count, so the clients still training at step ``s`` are a prefix of the stack: only that prefix
  is computed and updated. No client takes more or fewer steps than under ``loop``.
* **The algorithm's own hooks** (``engine/local_steps.py``) run on the stacks: nothing of the
  optimizer or the loss is written here.
* **Adversarial training** (``TrainingContext.adversarial``): the clients of each user role train
  as one stack (AT users replay each batch as Free-AT asks), and the role's objective
  (``adversarial/training.py``) runs on a ``StackedModel`` of the active clients, exactly the code
  ``loop`` runs on one client. Random draws (PGD's start, dropout) come from one stream per
  stack: the same distribution as ``loop``'s per-client streams, not the same numbers.

A backend subclasses ``StackedBackend`` and implements ``forward_backward``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.func import functional_call

from fedbn_bench.adversarial.training import LossOf
from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.core.roles import ADVERSARIAL, ROLES
from fedbn_bench.core.trees import Tree, prefix, unstack_tree
from fedbn_bench.core.updates import State
from fedbn_bench.engine.backends.base import Backend, ClientJob, ClientResult, TrainingContext
from fedbn_bench.engine.backends.stacked_model import StackedModel
from fedbn_bench.engine.graphs import CaptureFailed, GraphedSteps, StepGraph, step_graph_maker
from fedbn_bench.engine.local_steps import run_local_steps
from fedbn_bench.engine.sampling import client_round_batches, seed_global
from fedbn_bench.norms.base import NormMethod


def stack_unsupported_reason(norm: NormMethod, algo: Algorithm, model: nn.Module, backend: str) -> Optional[str]:
    """Why no stacked backend can run this combination (``None`` when it can), from what the
    algorithm, the norm and the model's modules declare."""
    if algo.stacked_unsupported:
        return f"algo={algo.cfg.name}: {algo.stacked_unsupported}"
    if backend in norm.unsupported_backends:
        return f"norm={norm.cfg.name}: {norm.unsupported_backends[backend]}"
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.track_running_stats and module.momentum is None:
            return "BatchNorm with momentum=None reads its batch counter as a Python number"
    return None


log = logging.getLogger(__name__)

Objective = Callable[[StackedModel, torch.Tensor, torch.Tensor, LossOf], torch.Tensor]
"""``(model, x, y, loss_of) -> (n,)`` losses: an adversarial-training objective of one user role."""


class _Call(nn.Module):
    """Wraps ``fn(model)`` as a module, so ``functional_call`` can run it on one client's state."""

    def __init__(self, model: nn.Module, fn: Callable[[nn.Module], Any]) -> None:
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self) -> Any:
        return self.fn(self.model)


class StackedBackend(Backend):
    """Trains a round's clients as one stack; subclasses compute one step of the active clients."""

    def __init__(self, ctx: TrainingContext) -> None:
        super().__init__(ctx)
        self.eager_reasons: set[str] = set()
        self.make_graph: Optional[Callable[[], StepGraph]] = None
        """The run's maker of step graphs (one side stream and memory pool), made at the first round."""

    def empty_stack(self, count: int, like: torch.Tensor) -> torch.Tensor:
        """Storage for ``count`` clients' copies of ``like`` (a backend may choose the layout)."""
        return like.new_empty((count, *like.shape))

    @torch.no_grad()
    def stack(self, trees: list[Tree]) -> Tree:
        """The clients' trees as one tree of stacks in this backend's layouts (one copy per leaf)."""
        first = trees[0]
        if isinstance(first, dict):
            return {k: self.stack([t[k] for t in trees]) for k in first}
        return self.empty_stack(len(trees), first).copy_(torch.stack(trees))

    @torch.no_grad()
    def _copy_into(self, stack: State, i: int, count: int, tensors: State) -> None:
        for k, v in tensors.items():
            if k not in stack:
                stack[k] = self.empty_stack(count, v)
            stack[k][i].copy_(v)

    def step_batches(self, x: torch.Tensor, y: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each step's batches ``(clients, B, ...)`` of the round's ``x``, ``y`` ``(clients, steps, B, ...)``."""
        return list(zip(x.unbind(1), y.unbind(1)))

    def empty_batches(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """Zeroed storage for the round's batches ``(clients, steps, B, ...)`` (a backend may
        choose the layout)."""
        return like.new_zeros(shape)

    def forward_backward(self, params: State, buffers: State, x: torch.Tensor, y: torch.Tensor, n: int):
        """One step of the first ``n`` clients (``params``: their views) on ``x``, ``y``: gradients of
        the trainable parameters (leading client axis) and the ``n`` losses; their new buffers
        (statistics) are left in ``buffers`` (a backend may update them in place)."""
        raise NotImplementedError

    runner: nn.Module
    """The module whose train/eval mode ``logits`` runs in."""

    def logits(self, state: State, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, B, K)`` of ``n`` clients with parameters and buffers ``state`` on their
        batches ``x`` ``(n, B, ...)``, differentiable; running statistics updated in place."""
        raise NotImplementedError

    def objective_forward_backward(self, objective: Objective, params: State, buffers: State, x: torch.Tensor,
                                   y: torch.Tensor, n: int):
        """``forward_backward`` with the loss of an adversarial-training objective."""
        leaves = {k: v.detach().requires_grad_() for k, v in params.items() if k in self.trainable}
        frozen = {k: v for k, v in params.items() if k not in self.trainable}
        model = StackedModel(self.ctx.model, self.runner, self.logits, {**leaves, **frozen}, prefix(buffers, n), n)
        self.runner.train()
        with torch.enable_grad():
            losses = objective(model, x.flatten(0, 1), y.flatten(0, 1),
                               lambda xb: self.ctx.algo.loss(model.logits(xb), y))
            losses.sum().backward()  # also reaches the objective's own leaves (Free-AT's δ)
        return {k: v.grad for k, v in leaves.items() if v.grad is not None}, losses.detach()

    def train(self, jobs: list[ClientJob], round_idx: int, lr: float) -> list[ClientResult]:
        """Local training of ``jobs``; the same results as ``loop``'s. Under adversarial training
        each user role trains as its own stack, with its objective."""
        adversarial = self.ctx.adversarial
        if adversarial is None or not adversarial.active:
            return self.train_stack(jobs, round_idx, lr)
        results: list[Optional[ClientResult]] = [None] * len(jobs)
        for stream, role in enumerate(ROLES):
            members = [i for i, job in enumerate(jobs) if job.role == role]
            if not members:
                continue
            adversarial.begin_client(jobs[members[0]].client)

            def objective(model, x, y, loss_of, role=role):
                return adversarial.client_loss(model, self.ctx.norm, x, y, role, loss_of, round_idx)

            replays = adversarial.replays if role == ADVERSARIAL else 1
            trained = self.train_stack([jobs[i] for i in members], round_idx, lr, objective, replays, stream)
            for i, result in zip(members, trained):
                results[i] = result
        return results

    def train_stack(self, jobs: list[ClientJob], round_idx: int, lr: float, objective: Optional[Objective] = None,
                    replays: int = 1, stream: int = 0) -> list[ClientResult]:
        """Local training of ``jobs`` as one stack, each batch taken ``replays`` times, with the
        algorithm's loss or ``objective``'s; ``stream`` selects the stack's random stream."""
        ctx = self.ctx
        model, algo = ctx.model, ctx.algo
        given = jobs
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i].steps)
        jobs = [jobs[i] for i in order]
        xs, ys, locals_ = [], [], []
        params: State = {}
        buffers: State = {}
        for i, job in enumerate(jobs):
            data = job.data
            x, y = client_round_batches(data.x, data.y, job.indices, ctx.batch_size, job.steps,
                                        (job.seed, round_idx, job.client), ctx.augment, data.crop_padding,
                                        data.pad_value, job.strata)
            xs.append(x)
            ys.append(y)
            self.load(job)
            with torch.no_grad():
                own = dict(model.named_parameters())
                locals_.append(algo.start(own, job.algo_state))
            self._copy_into(params, i, len(jobs), own)
            self._copy_into(buffers, i, len(jobs), dict(model.named_buffers()))
        local = self.stack(locals_)
        x, y = self.pad_stack(xs), self.pad_stack(ys)
        model.train()
        self.trainable = {k for k, p in model.named_parameters() if p.requires_grad}
        seed_global(jobs[0].seed, round_idx, ctx.num_clients + stream)
        counts = [job.steps for job in jobs]
        loss_sum = x.new_zeros(len(jobs))

        def forward_backward(active, _local, xb, yb, n, update_statistics):
            own = buffers if update_statistics else {k: v[:n].clone() for k, v in buffers.items()}
            if objective is None:
                return self.forward_backward(active, own, xb, yb, n)
            return self.objective_forward_backward(objective, active, own, xb, yb, n)

        steps = ((sum(c > s for c in counts), xb, yb) for s, (xb, yb) in enumerate(self.step_batches(x, y))
                 for _ in range(replays))
        graphed = self.graphed_steps(round_idx)
        try:
            run_local_steps(algo, forward_backward, params, local,
                            ((n, prefix(xb, n), prefix(yb, n)) for n, xb, yb in steps), lr, loss_sum, graphed)
        except CaptureFailed as failure:
            self.turn_graphs_off(failure, round_idx)
            return self.train_stack(given, round_idx, lr, objective, replays, stream)
        if ctx.graph_record is not None and ctx.cuda_graphs is not None:
            self.note_eager(ctx.graph_record.count(graphed), round_idx)
        upload, extras, algo_state = algo.finish(params, local)
        rows = {k: v.unbind() for k, v in {**params, **buffers}.items()}
        uploads = {k: v.unbind() for k, v in upload.items()}  # views of a fresh stack, consumed this round
        results: list[Optional[ClientResult]] = [None] * len(jobs)
        for i, job in enumerate(jobs):
            stats = self.statistics({k: v[i] for k, v in rows.items()}, len(job.indices))
            own = {k: rows[k][i].clone() for k in ctx.local_keys}
            loss = loss_sum[i] / max(job.steps * replays, 1)
            upload_i = {k: v[i] for k, v in uploads.items()}
            results[order[i]] = self.result(job, upload_i, unstack_tree(extras, i), unstack_tree(algo_state, i),
                                            stats, own, loss)
        return results

    def graphed_steps(self, round_idx: int) -> Optional[GraphedSteps]:
        """Round ``round_idx``'s step runner under ``engine.cuda_graphs`` (``engine/graphs.py``), or ``None``
        (eager) when the run cannot be captured or its graphs were turned off (also when the graphs' memory
        pool cannot be set up: its anchor graph's capture failed)."""
        mode, record = self.ctx.cuda_graphs, self.ctx.graph_record
        if mode is None or (record is not None and record.off):
            return None
        if self.make_graph is None:
            try:
                self.make_graph = step_graph_maker(mode, next(self.ctx.model.parameters()).device)
            except RuntimeError as error:
                failure = CaptureFailed(f"the anchor graph's capture failed ({str(error).splitlines()[0]})")
                failure.__cause__ = error
                self.turn_graphs_off(failure, round_idx)
                return None
        return GraphedSteps(self.make_graph)

    def turn_graphs_off(self, failure: CaptureFailed, round_idx: int) -> None:
        """After a failed capture: the step's own error in the log, the graphs off for the rest of the
        run (``engine.cuda_graphs=on`` refuses to go on eagerly), the round re-run by the caller."""
        mode, cause = self.ctx.cuda_graphs, failure.__cause__
        if mode == "on":
            raise RuntimeError(f"engine.cuda_graphs=on, but round {round_idx + 1}'s {failure}; "
                               "use engine.cuda_graphs=auto (eager after a failed capture) or off") from cause
        if self.ctx.graph_record is not None:
            self.ctx.graph_record.off = str(failure)
        log.warning("engine.cuda_graphs=%s: %s in round %d: %s: %s; the round runs eagerly and so does the rest of "
                    "the run", mode, failure, round_idx + 1, type(cause).__name__, cause)

    def note_eager(self, reason: Optional[str], round_idx: int) -> None:
        """Say once per run and reason why a round's steps fell back to eager (``on``: refuse to)."""
        if reason is None:
            return
        if self.ctx.cuda_graphs == "on":
            raise RuntimeError(f"engine.cuda_graphs=on, but round {round_idx + 1}'s local steps ran eagerly: "
                               f"{reason}; use engine.cuda_graphs=auto or off")
        if reason not in self.eager_reasons:
            self.eager_reasons.add(reason)
            log.info("engine.cuda_graphs=%s: eager local steps in a round (%s)", self.ctx.cuda_graphs, reason)

    def statistics(self, state: State, num_samples: int):
        """A client's upload after training: the norm's ``client_statistics`` run on the model
        carrying the client's final ``state``."""
        norm, model = self.ctx.norm, self.ctx.model
        client_state = {f"model.{k}": v for k, v in state.items()}
        return functional_call(_Call(model, lambda m: norm.client_statistics(m, num_samples)), client_state, ())

    def pad_stack(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """Stack ``(steps_i, ...)`` tensors along a new client axis, zero-padding the step axis."""
        longest = max(len(t) for t in tensors)
        out = self.empty_batches((len(tensors), longest, *tensors[0].shape[1:]), tensors[0])
        for i, t in enumerate(tensors):
            out[i, : len(t)] = t
        return out
