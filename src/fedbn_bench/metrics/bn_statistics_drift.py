"""Dynamics of the BN statistics during FedAvg (FixBN §4.1, Fig. 2 (a) and (b)). With ``S`` the
concatenated running means and variances of the BN layers (``bn_layers``), per evaluation:

* ``bn_global_change``: ``‖S̄(t) − S̄(t')‖₁``, the global statistics against those of the previous
  evaluation ``t'`` (Fig. 2a, global curve; the per-round change when evaluating every round; NaN at
  the first evaluation);
* ``bn_local_distance_<m>``: ``‖S_{m,B} − S̄(t)‖₁`` (Fig. 2a, local curve): client ``m``'s mini-batch
  statistics under the global model against the global statistics; ``bn_local_distance``, the mean
  over the clients;
* ``bn_local_var_<m>``: the variance of client ``m``'s local statistics over the last ``window``
  evaluations (Fig. 2b: "running over t − 200 to t"; population variance per coordinate, summed over
  the coordinates; NaN until two evaluations are in), ``bn_local_var`` the mean over the clients.

A client's mini-batch: ``train_batch_size`` of its training samples drawn without replacement by a
generator of ``(seed, client)`` only, the same batch at every evaluation (the changes come from the
model, not from resampling). Its statistics: each BN layer's input mean and unbiased variance per
channel (what Eq. 1 accumulates) in a forward pass of a copy of the global model with every BN layer
in training mode (batch statistics, as in local training) and everything else in eval mode; the
run's model and buffers stay as they are. The local statistics of Fig. 2b are taken as these
mini-batch statistics (with E = 1 a client's accumulated statistics after its round are the fixed
mix ``α S̄ + (1 − α) S_{m,B}`` of Eq. 1).

The history (the previous ``S̄``, the window) lives in the metric only: a resumed run starts it anew.

Not stated by the paper, chosen: the layers (option ``layers``: module names, default every BN layer,
concatenated in model order), the batch (above), ``window`` counted in evaluations (default 200:
Fig. 2b's 200 rounds when evaluating every round). Supported norms: ``bn_layers``.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from typing import Optional, Sequence

import torch
from torch import nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, seeded_generator
from fedbn_bench.metrics.bn_layers import batch_statistics_mode, statistics_layers

BATCH_STREAM = 35
"""Key of a client's mini-batch, ``seeded_generator(seed, BATCH_STREAM, client)``."""


def running_statistics(layers: dict[str, nn.Module]) -> torch.Tensor:
    """``S``: the layers' running means and variances, concatenated (float64)."""
    return torch.cat([t.detach().reshape(-1).double()
                      for m in layers.values() for t in (m.running_mean, m.running_var)])


def batch_statistics(model: nn.Module, layers: dict[str, nn.Module], x: torch.Tensor) -> torch.Tensor:
    """``S_B``: each layer's input mean and unbiased variance per channel on the batch ``x`` (float64),
    concatenated in the order of ``running_statistics``."""
    seen: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_pre_hook(lambda m, inputs, name=name: seen.setdefault(name, inputs[0].detach()))
             for name, m in layers.items()]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    parts = []
    for name in layers:
        h = seen[name].double()
        dims = [d for d in range(h.dim()) if d != 1]
        parts += [h.mean(dims).reshape(-1), h.var(dims, unbiased=True).reshape(-1)]
    return torch.cat(parts)


def client_batch(indices: torch.Tensor, size: int, seed: int, client: int) -> torch.Tensor:
    """``size`` of a client's ``indices`` (all when fewer), drawn without replacement by a generator
    of ``(seed, client)`` only."""
    pick = torch.randperm(len(indices), generator=seeded_generator(seed, BATCH_STREAM, client), device="cpu")[:size]
    return indices[pick.to(indices.device)]


@METRICS.register("bn_statistics_drift")
class BNStatisticsDrift(Metric):
    def __init__(self, layers: Optional[Sequence[str]] = None, window: int = 200) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 2:
            raise ConfigError(f"metrics: bn_statistics_drift.window={window!r}: an integer >= 2 (evaluations)")
        if layers is not None and (isinstance(layers, str) or not all(isinstance(n, str) for n in layers)):
            raise ConfigError(f"metrics: bn_statistics_drift.layers={layers!r}: a list of BN module names or null")
        self.layers = None if layers is None else list(layers)
        self.window = window
        self.previous: Optional[torch.Tensor] = None
        self.history: dict[int, deque[torch.Tensor]] = {}

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        if ctx.train_batch_size is None:
            raise ConfigError("metrics: bn_statistics_drift needs the run's training batch size (none given)")
        ctx.load_global()
        twin = copy.deepcopy(ctx.model)
        layers = statistics_layers(twin, "bn_statistics_drift", self.layers)
        global_stats = running_statistics(layers).cpu()
        change = math.nan if self.previous is None else (global_stats - self.previous).abs().sum().item()
        row = {"bn_global_change": change}
        self.previous = global_stats
        batch_statistics_mode(twin, statistics_layers(twin, "bn_statistics_drift"))
        distances, variances = [], []
        for client, indices in enumerate(ctx.client_train):
            idx = client_batch(indices, ctx.train_batch_size, ctx.seed, client)
            local = batch_statistics(twin, layers, ctx.train_x[idx]).cpu()
            history = self.history.setdefault(client, deque(maxlen=self.window))
            history.append(local)
            distances.append((local - global_stats).abs().sum().item())
            variances.append(torch.stack(list(history)).var(0, unbiased=False).sum().item()
                             if len(history) > 1 else math.nan)
            row[f"bn_local_distance_{client}"], row[f"bn_local_var_{client}"] = distances[-1], variances[-1]
        row["bn_local_distance"] = sum(distances) / len(distances)
        row["bn_local_var"] = sum(variances) / len(variances)
        return row
