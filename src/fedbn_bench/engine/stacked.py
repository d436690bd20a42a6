"""What the vectorized backends share: the round's clients as one stack (``engine=vmap``, ``engine=packed``).

* **Stacked state.** Each sampled client is loaded exactly as the loop engine loads it (global
  state + its local keys, load hooks included, then ``before_local_training``); its parameters and
  buffers (normalization statistics included) are copied into tensors with a leading client axis.
* **Statistics as explicit inputs and outputs.** A backend's ``forward_backward`` receives the
  stacked buffers of the active clients and leaves their updated statistics in the stack.
* **Unequal client sizes.** Batches are pre-drawn per client (``client_round_batches``, the same
  draws as ``engine=loop``) and zero-padded to the longest client. Clients are ordered by their
  step count, so the clients still training at step ``s`` are a prefix of the stack: the mask of
  step ``s`` is ``steps > s`` and only that prefix is computed and updated. No client takes more
  or fewer steps than under ``loop``, and padding is never computed on.
* **Optimizers written out.** The algorithm's client update is re-expressed on the stack with the
  same floating-point operations: torch.optim.SGD (momentum, weight decay, ``momentum_carry``) for
  FedAvg-style local training, and DSGD's gradient with client momentum (FBN App. B, Alg. 3).
  Parameters with ``requires_grad=False`` (FixBN's frozen affine) are neither stepped nor decayed.

A backend subclasses ``StackedTrainer`` and implements ``forward_backward``; the two differ only
in how one step of all active clients is computed (``vmap.py``: torch.func; ``packed.py``: the
clients packed into the channels of one grouped network).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.func import functional_call

from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.algorithms.dsgd import DSGD
from fedbn_bench.engine.sampling import client_round_batches, seed_global
from fedbn_bench.norms.base import NormMethod

State = dict[str, torch.Tensor]
ClientResult = tuple[State, State, torch.Tensor]


def stack_unsupported_reason(norm: NormMethod, algo: Algorithm, model: nn.Module, checked_norms: tuple[str, ...],
                             backend: str) -> Optional[str]:
    """Why no stacked backend can run ``algo`` on ``model``, or why ``backend`` has not been checked
    with ``norm`` (``None`` when neither): the stack re-implements the default cross-entropy loss and
    the two local-training rules only."""
    algo_name = getattr(algo.cfg, "name", type(algo).__name__)
    if type(algo).loss is not Algorithm.loss:
        return f"algo={algo_name} defines its own loss"
    if type(algo).local_train not in (Algorithm.local_train, DSGD.local_train):
        return f"algo={algo_name} defines its own local training"
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.track_running_stats and module.momentum is None:
            return "BatchNorm with momentum=None reads its batch counter as a Python number"
    name = getattr(norm.cfg, "name", type(norm).__name__)
    if name not in checked_norms:
        return f"norm={name} has not been checked under engine={backend}"
    if name == "hbn" and getattr(norm.cfg, "stats_source", "separated") != "separated":
        return "HBN's moving-average ablation keeps each client's size in the norm object"
    return None


class _Call(nn.Module):
    """Wraps ``fn(model)`` as a module, so ``functional_call`` can run it on one client's state."""

    def __init__(self, model: nn.Module, fn: Callable[[nn.Module], Any]) -> None:
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self) -> Any:
        return self.fn(self.model)


class StackedTrainer:
    """Trains the sampled clients of a round of a ``Simulation`` as one stack."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.model = sim.fed.model
        self.is_dsgd = type(sim.fed.algo).local_train is DSGD.local_train
        self.default_statistics = type(sim.fed.norm).client_statistics is NormMethod.client_statistics
        self.trainable: set[str] = set()

    def empty_stack(self, count: int, like: torch.Tensor) -> torch.Tensor:
        """Storage for ``count`` clients' copies of ``like`` (a backend may choose the layout)."""
        return like.new_empty((count, *like.shape))

    def _copy_into(self, stack: State, i: int, count: int, tensors: dict[str, torch.Tensor]) -> None:
        for k, v in tensors.items():
            if k not in stack:
                stack[k] = self.empty_stack(count, v)
            stack[k][i].copy_(v.detach())

    def forward_backward(self, params: State, buffers: State, x: torch.Tensor, y: torch.Tensor, n: int):
        """One step of the first ``n`` clients of the stack on their batches ``x[:n]``, ``y[:n]``:
        gradients of the trainable parameters (leading client axis) and the ``n`` losses; their
        new buffers (statistics) are left in ``buffers``."""
        raise NotImplementedError

    # -- one round -----------------------------------------------------------------------------
    def train_round(self, round_idx: int, clients: list[int], lr: float) -> list[ClientResult]:
        """Local training of ``clients`` (in their order); same results as the loop engine's."""
        sim, fed = self.sim, self.sim.fed
        data, batch_size = fed.data.train, sim.batch_size
        steps = [fed.algo.num_steps(len(fed.client_indices[c]), batch_size) for c in clients]
        order = sorted(range(len(clients)), key=lambda i: -steps[i])
        clients = [clients[i] for i in order]
        steps = [steps[i] for i in order]
        xs, ys, pre_stats = [], [], []
        params: State = {}
        buffers: State = {}
        for i, client in enumerate(clients):
            indices = fed.client_indices[client]
            x, y = client_round_batches(data.x, data.y, indices, batch_size, steps[i],
                                        (sim.s.seed, round_idx, client), sim.s.augment)
            xs.append(x)
            ys.append(y)
            sim.load_client(client)
            pre_stats.append(sim.before_training(client))
            self._copy_into(params, i, len(clients), dict(self.model.named_parameters()))
            self._copy_into(buffers, i, len(clients), dict(self.model.named_buffers()))
        x, y = _pad_stack(xs), _pad_stack(ys)
        self.model.train()
        self.trainable = {k for k, p in self.model.named_parameters() if p.requires_grad}
        seed_global(sim.s.seed, round_idx, len(fed.client_indices))
        if self.is_dsgd:
            payloads, losses = self._dsgd(clients, params, buffers, x[:, 0], y[:, 0])
        else:
            payloads, losses = self._sgd(clients, order, steps, params, buffers, x, y, lr)
        state = {**params, **buffers}
        results: list[Optional[ClientResult]] = [None] * len(clients)
        for i, client in enumerate(clients):
            stats = pre_stats[i] if pre_stats[i] is not None else self._statistics(state, i)
            if sim.local_keys:
                sim.client_local[client] = {k: state[k][i].clone() for k in sim.local_keys}
            sim.samples_seen += steps[i] * batch_size
            results[order[i]] = (payloads[i], stats, losses[i])
        return results

    # -- FedAvg-style local SGD (Algorithm.local_train) ----------------------------------------
    @torch.no_grad()
    def _sgd(self, clients, order, steps, params, buffers, x, y, lr):
        algo = self.sim.fed.algo
        cfg, carry = algo.cfg, getattr(algo, "momentum_carry", "none")
        momentum, decay = cfg.momentum, cfg.weight_decay
        bufs = {k: torch.zeros_like(v) for k, v in params.items()}
        has = {k: [False] * len(clients) for k in params}
        for k, per_client in self._start_momentum(clients, params, carry).items():
            for i, m in per_client.items():
                bufs[k][i].copy_(m)
                has[k][i] = True
        loss_sum = None
        for s in range(max(steps)):
            n = sum(count > s for count in steps)
            with torch.enable_grad():
                grads, loss = self.forward_backward(params, buffers, x[:, s], y[:, s], n)
            loss_sum = loss.new_zeros(len(clients)) if loss_sum is None else loss_sum
            loss_sum[:n] += loss
            _sgd_step(grads, params, bufs, has, n, lr, momentum, decay)
        self._save_momentum(clients, order, bufs, has, carry)
        payloads = [{k: v[i].clone() for k, v in params.items()} for i in range(len(clients))]
        losses = [loss_sum[i] / max(steps[i], 1) for i in range(len(clients))]
        return payloads, losses

    def _start_momentum(self, clients, params, carry) -> dict[str, dict[int, torch.Tensor]]:
        """Initial SGD momentum per parameter and client index (``momentum_carry``, FixBN App. C.4)."""
        algo, out = self.sim.fed.algo, {}
        for i, client in enumerate(clients):
            if carry == "local":
                source = self.sim.client_algo_state[client].get("momentum_buffer", {})
            elif carry == "global":
                source = algo.server_momentum
            else:
                source = {}
            for k, m in source.items():
                if k in params:
                    out.setdefault(k, {})[i] = m
        return out

    def _save_momentum(self, clients, order, bufs, has, carry) -> None:
        """Keep (``local``) or upload (``global``, in the round's client order) the final buffers."""
        if carry == "none":
            return
        algo = self.sim.fed.algo
        for i in sorted(range(len(clients)), key=order.__getitem__):
            client = clients[i]
            saved = {k: bufs[k][i].clone() for k in bufs if has[k][i]}
            if carry == "local":
                self.sim.client_algo_state[client]["momentum_buffer"] = saved
            else:
                algo._momentum_uploads.append(saved)

    # -- DSGD (FBN App. B, Alg. 3) -------------------------------------------------------------
    @torch.no_grad()
    def _dsgd(self, clients, params, buffers, x, y):
        cfg = self.sim.fed.algo.cfg
        beta, decay = cfg.client_momentum, cfg.weight_decay
        with torch.enable_grad():
            grads, loss = self.forward_backward(params, buffers, x, y, len(clients))
        states = [self.sim.client_algo_state[c].setdefault("momentum", {}) for c in clients]
        sent = {}
        for k, p in params.items():
            g = grads[k] + decay * p if k in grads else torch.zeros_like(p)
            if beta:
                flag = torch.tensor([k in st for st in states], device=p.device)
                m = torch.stack([st[k] if k in st else torch.zeros_like(p[0]) for st in states])
                g = torch.where(_expand(flag, g), beta * m + (1 - beta) * g, g)
                for i, st in enumerate(states):
                    st[k] = g[i].clone()
            sent[k] = g
        payloads = [{k: v[i].clone() for k, v in sent.items()} for i in range(len(clients))]
        return payloads, [loss[i] for i in range(len(clients))]

    # -- statistics ----------------------------------------------------------------------------
    def _statistics(self, state: State, i: int) -> State:
        """Client ``i``'s upload after training: its statistic buffers, or the norm's own
        ``client_statistics`` run on the model carrying client ``i``'s final state."""
        norm = self.sim.fed.norm
        if self.default_statistics:
            return {k: state[k][i].clone() for k in norm.statistic_keys(self.model)}
        client_state = {f"model.{k}": v[i] for k, v in state.items()}
        return functional_call(_Call(self.model, norm.client_statistics), client_state, ())


def _pad_stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Stack ``(steps_i, ...)`` tensors along a new client axis, zero-padding the step axis."""
    longest = max(len(t) for t in tensors)
    out = tensors[0].new_zeros((len(tensors), longest, *tensors[0].shape[1:]))
    for i, t in enumerate(tensors):
        out[i, : len(t)] = t
    return out


def _sgd_step(grads: State, params: State, bufs: State, has: dict[str, list[bool]], n: int, lr: float,
              momentum: float, decay: float) -> None:
    """One torch.optim.SGD step (dampening 0, no Nesterov) of the first ``n`` clients' parameters.

    Parameters whose momentum buffers are all started and whose stacks are dense take PyTorch's
    fused SGD kernel (one pass over memory instead of four: the stacks are large, so this is
    memory-bound). The fused CPU kernel of torch 2.x computes wrong values on non-contiguous
    tensors (measured), so it receives the tensors permuted into their memory order
    (``_memory_order_views``), where they are contiguous. The others take the same update in
    ``foreach`` operations, where a client's buffer that is not started yet is set to the update
    direction.
    """
    fused: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    rest = []
    for k, g in grads.items():
        views = _memory_order_views(params[k][:n], g, bufs[k][:n]) if momentum != 0 and all(has[k][:n]) else None
        if views is None:
            rest.append(k)
        else:
            fused.append(views)
    if fused:
        weights, directions, buffers = (list(t) for t in zip(*fused))
        torch._fused_sgd_(weights, directions, buffers, weight_decay=decay, momentum=momentum, lr=lr,
                          dampening=0.0, nesterov=False, maximize=False, is_first_step=False)
    if not rest:
        return
    weights = [params[k][:n] for k in rest]
    d = [grads[k] for k in rest]
    if decay != 0:
        torch._foreach_add_(d, weights, alpha=decay)
    if momentum != 0:
        d = _momentum_step(rest, d, bufs, has, n, momentum)
    torch._foreach_add_(weights, d, alpha=-lr)


def _memory_order_views(p: torch.Tensor, g: torch.Tensor, buf: torch.Tensor):
    """``(p, g, buf)`` permuted into ``p``'s memory order, where all three are contiguous (the
    gradient is first copied into ``p``'s layout if it has another); ``None`` if ``p`` is not dense."""
    order = sorted(range(p.dim()), key=lambda d: -p.stride(d))
    if not p.permute(order).is_contiguous() or not buf.permute(order).is_contiguous():
        return None
    if not g.permute(order).is_contiguous():
        g = torch.empty_like(p).copy_(g)
    return p.permute(order), g.permute(order), buf.permute(order)


def _momentum_step(keys: list[str], d: list[torch.Tensor], bufs: State, has: dict[str, list[bool]], n: int,
                   momentum: float) -> list[torch.Tensor]:
    """torch.optim.SGD's momentum update of the first ``n`` clients' buffers with the update
    directions ``d``: ``buf = momentum * buf + d``, or ``buf = d`` where a client's buffer is not
    started yet (``has``, updated here). Returns the buffers, the new directions."""
    out = [bufs[k][:n] for k in keys]
    started = [i for i, k in enumerate(keys) if all(has[k][:n])]
    if started:
        chosen = [out[i] for i in started]
        torch._foreach_mul_(chosen, momentum)
        torch._foreach_add_(chosen, [d[i] for i in started])
    for i, k in enumerate(keys):
        if not all(has[k][:n]):
            flag = torch.tensor(has[k][:n], device=d[i].device)
            out[i].copy_(torch.where(_expand(flag, d[i]), out[i] * momentum + d[i], d[i]))
            has[k][:n] = [True] * n
    return out


def _expand(flag: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return flag.view(-1, *([1] * (like.dim() - 1)))
