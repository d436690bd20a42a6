"""The users' BN statistics of a layer projected on their first two principal components
(FedRBN App. C.4, Fig. 7 and Fig. 13: "BN parameters (mean and variance)" of every user, BN_a and
BN_c, visualized by PCA).

Option ``layer``: the module name of a BN layer of the model (``digit_cnn``: ``features.1`` after
the first convolution, the paper's bn1; ``classifier.1`` after the first linear layer, its bn4),
or a list of them, each projected on its own (list every layer in one entry: a run keeps one
instance of each metric class, ``engine/simulation.py``). A layer's branches are found by buffer
name in the model's state dict: ``<layer>.running_mean`` and ``running_var`` (branch ``clean``)
and, for dual BN, ``<layer>.adv_running_mean`` and ``adv_running_var`` (branch ``adv``); a layer
with the first pair only is one branch, ``bn``.

Each user's own statistics (``load_client``: the global state with its local keys; FedRBN's ST
users hold propagated BN_a) give one vector per (user, branch): the running mean followed by the
running variance. The paper does not say how it combines mean and variance; here they are
concatenated, unscaled. All vectors are centered together and projected on the first two right
singular vectors (``torch.linalg.svd`` in float64). Each axis is signed so that its loading of
largest magnitude is positive (the first such loading on ties): the coordinates are deterministic
wherever the singular values are distinct. Axes beyond the rank of the centered vectors give 0.

Columns: ``bn_pca/<layer>/<user>/<domain>/<branch>/pc1`` and ``pc2`` (domain ``-`` for a user
without one, ``/`` in a domain name read as ``-``), and ``bn_pca/<layer>/explained/pc1`` and ``pc2``:
the share of the total variance of the vectors along each axis. The model holds the global state
again afterwards.
"""
from __future__ import annotations

from typing import Mapping

import torch
import torch.nn.functional as F

from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric
from fedbn_bench.metrics.bn_layers import statistics_layer_names

BRANCH_PREFIXES = {"clean": "", "adv": "adv_"}
"""Branch name -> prefix of its ``running_mean`` / ``running_var`` buffers (``norms/dual_bn.py``)."""
COMPONENTS = 2


def layer_branches(state: Mapping[str, torch.Tensor], layer: str) -> dict[str, tuple[str, str]]:
    """``{branch: (mean key, variance key)}`` of ``layer`` in ``state``; a ``ConfigError`` naming
    ``metrics[].layer`` and the BN layers when ``layer`` is not one of them."""
    found = {branch: (f"{layer}.{prefix}running_mean", f"{layer}.{prefix}running_var")
             for branch, prefix in BRANCH_PREFIXES.items()}
    found = {branch: keys for branch, keys in found.items() if all(key in state for key in keys)}
    if "clean" not in found:
        raise ConfigError(f"metrics[].layer='{layer}' (bn_statistics_pca) is not a BN layer of the model; "
                          f"allowed: {', '.join(statistics_layer_names(state)) or 'none (the model has no BN layer)'}")
    return {"bn": found["clean"]} if len(found) == 1 else found


def principal_coordinates(vectors: torch.Tensor, components: int = COMPONENTS) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n, components)`` coordinates of the rows of ``vectors`` (n, d) on their first principal
    axes (centered, float64; signs as the module docstring says) and each axis's share of the
    total variance (0 for an axis beyond the rank, and for every axis when the rows are equal)."""
    x = vectors.to(torch.float64)
    centered = x - x.mean(0)
    _, singular, vh = torch.linalg.svd(centered, full_matrices=False)
    axes = vh[:components]
    signs = torch.sign(axes.gather(1, axes.abs().argmax(1, keepdim=True)))
    coordinates = centered @ (axes * signs).T
    power = singular[:components] ** 2
    total = (singular ** 2).sum()
    explained = power / total if total > 0 else torch.zeros_like(power)
    missing = components - len(axes)
    return F.pad(coordinates, (0, missing)), F.pad(explained, (0, missing))


@METRICS.register("bn_statistics_pca")
class BNStatisticsPCA(Metric):
    """PCA of every user's running mean ‖ variance of each of ``layer``, per statistics branch."""

    def __init__(self, layer: str | list[str] | None = None) -> None:
        layers = [layer] if isinstance(layer, str) else list(layer or [])
        if not layers or not all(isinstance(name, str) and name for name in layers):
            raise ConfigError("metrics entry 'bn_statistics_pca' needs a `layer`: "
                              "{name: bn_statistics_pca, layer: <BN module name, or a list of them>}")
        self.layers = layers

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        names: dict[str, list[str]] = {layer: [] for layer in self.layers}
        vectors: dict[str, list[torch.Tensor]] = {layer: [] for layer in self.layers}
        for client in range(len(ctx.client_test)):
            ctx.load_client(client)
            state = ctx.model.state_dict()
            domain = ((ctx.client_domain[client] if ctx.client_domain else None) or "-").replace("/", "-")
            for layer in self.layers:
                for branch, (mean, var) in layer_branches(state, layer).items():
                    names[layer].append(f"bn_pca/{layer}/{client}/{domain}/{branch}")
                    vectors[layer].append(torch.cat([state[mean].flatten(), state[var].flatten()]).to("cpu", torch.float64))
        ctx.load_global()
        row = {}
        for layer in self.layers:
            coordinates, explained = principal_coordinates(torch.stack(vectors[layer]))
            row.update({f"{name}/pc{k + 1}": value for name, point in zip(names[layer], coordinates.tolist())
                        for k, value in enumerate(point)})
            row.update({f"bn_pca/{layer}/explained/pc{k + 1}": explained[k].item() for k in range(COMPONENTS)})
        return row
