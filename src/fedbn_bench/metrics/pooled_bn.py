"""BN statistics re-estimated on the pooled training data (FixBN §3.4, App. B.1): a copy of the
global model has every BN layer's running statistics reset and re-accumulated by Eq. 1 over the
union of the clients' training data ``D = ∪_m D_m``, then is tested. Columns ``pooled_bn_test_acc``
and ``pooled_bn_test_loss`` (to compare with ``test_acc``/``test_loss``: FixBN reports 44.09% ->
44.87% on Tiny-ImageNet, Dir(0.1), E = 100). The run's model and state are never touched.

Eq. 1 as a cumulative average (torch's ``momentum=None``): the mean of the per-batch means and of
the per-batch unbiased variances, each batch weighted alike, every BN layer normalizing with its
batch statistics (the rest of the network in eval mode: no dropout). The paper is silent on the
batches; chosen: the pooled indices shuffled with a generator of the run's seed, cut into batches
of the run's training batch size (option ``batch_size`` to change it), the last one possibly
smaller (weighted like the others, as torch does) and dropped only when it holds a single sample
(no batch variance). FixBN's stage-II layers re-estimate by torch's BatchNorm rule too.

Supports the norms whose BN layers are torch BatchNorm modules (``norm=bn``, ``fedbn``, ``fixbn``);
a model whose statistics layers (``bn_layers``) include others (FBN's, the dual BN's: their own
training rules) or has none is a ``ConfigError`` at the first evaluation. The metric is computed at
every evaluation (one forward pass over the pooled data): FixBN's number is the last one.

Option ``per_layer`` (default ``False``): also, per BN layer, the channel mean of the averaged variance
the global model holds (``avg_var_<layer>``: the server's average of the clients' running variances,
FixBN Eq. 2) and of the pooled variance re-estimated here (``pooled_var_<layer>``), to test §3.4's
diagnosis of what separates them (claims_audit.md: "log averaged vs pooled variances per layer").
"""
from __future__ import annotations

import copy
from typing import Optional

import torch
from torch import nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, evaluate, seeded_generator
from fedbn_bench.metrics.bn_layers import batch_statistics_mode, statistics_layers

SHUFFLE_STREAM = 34
"""Key of the pooled data's shuffle, ``seeded_generator(seed, SHUFFLE_STREAM)``."""


def reestimate(model: nn.Module, x, y: torch.Tensor, idx: torch.Tensor, batch_size: int,
               generator: torch.Generator) -> nn.Module:
    """A copy of ``model`` whose BN layers (torch BatchNorm) hold the statistics of Eq. 1
    accumulated as a cumulative average over the samples ``idx`` of ``x``, shuffled with
    ``generator`` and cut into batches of ``batch_size``; in eval mode."""
    twin = copy.deepcopy(model)
    layers = statistics_layers(twin, "pooled_bn")
    others = sorted({type(m).__name__ for m in layers.values() if not isinstance(m, nn.modules.batchnorm._BatchNorm)})
    if others:
        raise ConfigError(f"metrics: pooled_bn re-estimates torch BatchNorm layers only (norm=bn, fedbn, fixbn); "
                          f"the model has {', '.join(others)}")
    for layer in layers.values():
        layer.reset_running_stats()
        layer.momentum = None
        layer.forward = nn.modules.batchnorm._BatchNorm.forward.__get__(layer)
    batch_statistics_mode(twin, layers)
    order = idx[torch.randperm(len(idx), generator=generator, device=generator.device).to(idx.device)]
    with torch.no_grad():
        for batch in order.split(batch_size):
            if len(batch) > 1:
                twin(x[batch])
    return twin.eval()


@METRICS.register("pooled_bn")
class PooledBN(Metric):
    def __init__(self, batch_size: Optional[int] = None, per_layer: bool = False) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 2):
            raise ConfigError(f"metrics: pooled_bn.batch_size={batch_size!r}: an integer >= 2 or null "
                              "(the run's training batch size)")
        if not isinstance(per_layer, bool):
            raise ConfigError(f"metrics: pooled_bn.per_layer={per_layer!r}: true or false")
        self.batch_size, self.per_layer = batch_size, per_layer

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        batch_size = self.batch_size or ctx.train_batch_size
        if batch_size is None:
            raise ConfigError("metrics: pooled_bn needs a batch size: the run gives none, set pooled_bn.batch_size")
        ctx.load_global()
        twin = reestimate(ctx.model, ctx.train_x, ctx.train_y, ctx.pooled_train(), batch_size,
                          seeded_generator(ctx.seed, SHUFFLE_STREAM))
        acc, loss = evaluate(twin, ctx.test_x, ctx.test_y, ctx.batch_size)
        row = {"pooled_bn_test_acc": acc, "pooled_bn_test_loss": loss}
        if self.per_layer:
            averaged, pooled = ctx.model.state_dict(), twin.state_dict()
            for name in statistics_layers(twin, "pooled_bn"):
                row[f"avg_var_{name}"] = averaged[f"{name}.running_var"].double().mean().item()
                row[f"pooled_var_{name}"] = pooled[f"{name}.running_var"].double().mean().item()
        return row
