"""HBN's learned hybrid factor per layer (hbn_hybrid_batch_normalisation.txt §3, Eq. 9: a layer normalizes
with ``w · global + (1 − w) · batch`` statistics, ``w = sigmoid(α)``, α learned per channel, initialised to 0,
so w starts at 0.5). Read from each client's model (``load_client``: with ``variant=paper`` every client keeps
its own α, and a client not yet sampled still holds the start), to see whether the factor moves at all in a
reduced run (claims_audit.md, hbn/table1_phi0.1 and table6: with 10 of 100 clients a round each client trains
about 3 times in 30 rounds).

Columns, per layer holding a ``hybrid_factor`` (its state key's module name): ``hbn_w_<layer>``, the mean
over clients of the channel mean of w, and ``hbn_w_sd_<layer>``, its sample sd over clients (0 for one
client); and how single channels spread, which a channel mean hides (issue 49: client means within
0.496-0.501 while single channels moved by up to 0.023): ``hbn_w_ch_sd_<layer>``, the mean over clients of the
sample sd of w over the layer's channels, and ``hbn_w_ch_move_<layer>``, the largest |w − 0.5| (its distance
from the start) over every client and channel. Found by state key, without naming the norm (``metrics/`` may not import ``norms/``); a model
without any is a ``ConfigError`` at the first evaluation.
"""
from __future__ import annotations

import statistics

import torch

from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric

SUFFIX = ".hybrid_factor"


@METRICS.register("hybrid_factor")
class HybridFactor(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        per_layer: dict[str, list[torch.Tensor]] = {}
        for client in range(len(ctx.client_test)):
            ctx.load_client(client)
            for key, alpha in ctx.model.state_dict().items():
                if key.endswith(SUFFIX):
                    per_layer.setdefault(key.removesuffix(SUFFIX), []).append(torch.sigmoid(alpha.double()).flatten())
        if not per_layer:
            raise ConfigError("metrics: hybrid_factor needs HBN layers with a learned factor (norm=hbn, "
                              "norm.mixing=learned); the model has none")
        row = {}
        for layer, channels in per_layer.items():
            w = [c.mean().item() for c in channels]
            row[f"hbn_w_{layer}"] = sum(w) / len(w)
            row[f"hbn_w_sd_{layer}"] = statistics.stdev(w) if len(w) > 1 else 0.0
            row[f"hbn_w_ch_sd_{layer}"] = sum(c.std().item() if c.numel() > 1 else 0.0 for c in channels) / len(w)
            row[f"hbn_w_ch_move_{layer}"] = max((c - 0.5).abs().max().item() for c in channels)
        return row
