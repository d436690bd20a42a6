"""The BN layers the statistics metrics (``pooled_bn``, ``bn_statistics_drift``) read, found without
naming a norm (``metrics/`` may not import ``norms/``): the modules whose running mean and variance
are part of the model's state, i.e. ``<name>.running_mean`` and ``<name>.running_var`` are keys of
its ``state_dict`` (the statistics FedAvg averages, FixBN Eq. 2). These are torch's BatchNorm and
its subclasses (``norm=bn``, ``fedbn``, ``fixbn``), FBN's layer (``norm=fbn``) and the clean branch
of the dual BN (``norm=dual_bn``, ``fedrbn``); HBN keeps its statistics as ``global_mean`` /
``global_var`` and has none. A model without any (GN, LN, HBN) is a ``ConfigError`` at the metric's
first evaluation: the model does not exist when the metric is built."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch import nn

from fedbn_bench.errors import ConfigError


def statistics_layer_names(state: Mapping[str, torch.Tensor]) -> list[str]:
    """The modules of ``state`` holding a ``running_mean`` and a ``running_var``, in state order."""
    names = [key.removesuffix(".running_mean") for key in state if key.endswith(".running_mean")]
    return [name for name in names if f"{name}.running_var" in state]


def statistics_layers(model: nn.Module, metric: str, names: Sequence[str] | None = None) -> dict[str, nn.Module]:
    """``{module name: module}`` of ``model``'s BN layers (module docstring), in model order, or of
    those named in ``names`` (the metric's ``layers`` option); ``metric`` names the metric in errors."""
    modules = dict(model.named_modules())
    found = {name: modules[name] for name in statistics_layer_names(model.state_dict())}
    if not found:
        kinds = sorted({type(m).__name__ for m in model.modules() if m is not model and not list(m.children())})
        raise ConfigError(f"metrics: {metric} needs BN layers with running statistics (norm=bn, fixbn, fedbn, fbn, "
                          f"dual_bn, fedrbn); the model has none (its layers: {', '.join(kinds)})")
    if names is None:
        return found
    unknown = [name for name in names if name not in found]
    if unknown:
        raise ConfigError(f"metrics: {metric}.layers names {unknown}, not BN layers of the model; "
                          f"its BN layers: {list(found)}")
    return {name: found[name] for name in names}


def batch_statistics_mode(model: nn.Module, layers: dict[str, nn.Module]) -> None:
    """Eval mode for ``model`` except ``layers``, in training mode: the BN layers normalize with
    batch statistics (as in local training) and dropout stays off (no draw from the global
    random state)."""
    model.eval()
    for layer in layers.values():
        layer.train()
