"""HBN Fig. 2 (hbn_hybrid_batch_normalisation.txt §3.3): two clients' activations, normalised
locally, globally and by HBN's hybrid mix.

Setting (HBN's code README): cluster 1 = 300 points at (5, 5) with std 0.4 per coordinate, cluster 2
= 200 points at (−1, −1) with std 1.2; the hybrid weights are 70 % local / 30 % global for cluster 1
and 30 % / 70 % for cluster 2.

Every panel runs the project's HBN layer (``norms/hbn.py``, ``affine: false``, float64) the way a
round runs it, one coordinate per channel:

* global statistics: each client's statistics pass (Eq. 7) and the server's Eq. 8 with λ = 1
  (``fresh_statistics``), i.e. the union's mean and unbiased variance;
* (b) local: ``mixing: batch_only``, each cluster by its own mean and biased variance (Eq. 1);
* (c) global: ``mixing: global_only``, every point by the global statistics;
* (d) hybrid: ``mixing: learned`` with the client's hybrid factor set so that Eq. 9's global weight
  ``1 / (1 + e^{−α})`` is 0.3 (cluster 1) or 0.7 (cluster 2): Eq. 9 mixes the *means* and the
  *variances* (not the normalised outputs), then Eq. 10 normalises with the mixed moments.

Each cluster's whole set of points is one batch (the client's batch statistics are its cluster's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from omegaconf import OmegaConf
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.norms import NORMS, build_norm
from fedbn_bench.norms.hbn import HybridBN

CENTERS = ((5.0, 5.0), (-1.0, -1.0))
STDS = (0.4, 1.2)
SIZES = (300, 200)
LOCAL_WEIGHTS = (0.7, 0.3)
"""Share of the local (batch) statistics in each cluster's hybrid mix (the global share is 1 − it)."""
PANELS = ("raw", "local", "global", "hybrid")


def draw_clusters(seed: int = 0) -> list[torch.Tensor]:
    """The two clusters (float64, (n, 2) each): ``center + std · N(0, I₂)``."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.tensor(c, dtype=torch.float64) + s * torch.randn(n, 2, generator=gen, dtype=torch.float64)
            for c, s, n in zip(CENTERS, STDS, SIZES)]


def hbn(mixing: str) -> HybridBN:
    """The project's HBN norm method (paper variant) with ``mixing`` and no affine map."""
    cfg = OmegaConf.structured(NORMS.get("hbn").config_class(mixing=mixing, affine=False))
    return build_norm(cfg)


def layer(norm: HybridBN, state: dict[str, torch.Tensor]) -> nn.Sequential:
    """One HBN layer over two channels (the coordinates), float64, loaded with ``state``."""
    model = nn.Sequential(norm.norm_layer(2, 1)).double()
    model.load_state_dict(state, strict=False)
    return model


def global_statistics(clusters: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Eq. 7 on every client, Eq. 8 on the server with λ = 1: ``{"0.global_mean", "0.global_var"}``."""
    norm = hbn("learned")
    model = layer(norm, {})
    start = {k: v.clone() for k, v in model.state_dict().items()}
    stats = []  # one layer: one stage, one upload per client
    norm.pass_statistics(model, clusters, lambda i: model.load_state_dict(start), stats.extend)
    weights = torch.full((len(clusters),), 1.0 / len(clusters), dtype=torch.float64)
    with norm.fresh_statistics():
        return norm.aggregate_statistics(stats, weights, Aggregator(), start)


def logit(p: float) -> float:
    """The hybrid factor α whose Eq. 9 global weight ``1 / (1 + e^{−α})`` is ``p``."""
    return math.log(p / (1.0 - p))


@dataclass
class ClusterToy:
    """The raw clusters, each panel's normalised clusters and the global statistics."""

    panels: dict[str, list[torch.Tensor]]
    global_mean: torch.Tensor
    global_var: torch.Tensor


@torch.no_grad()
def run_clusters(seed: int = 0) -> ClusterToy:
    """HBN Fig. 2's four panels (module docstring)."""
    clusters = draw_clusters(seed)
    stats = global_statistics(clusters)
    out = {"raw": clusters}
    for panel, mixing in (("local", "batch_only"), ("global", "global_only")):
        model = layer(hbn(mixing), stats).train()
        out[panel] = [model(x) for x in clusters]
    hybrid = []
    for x, local in zip(clusters, LOCAL_WEIGHTS):
        model = layer(hbn("learned"), stats).train()
        model[0].hybrid_factor.fill_(logit(1.0 - local))
        hybrid.append(model(x))
    out["hybrid"] = hybrid
    return ClusterToy(out, stats["0.global_mean"], stats["0.global_var"])


def rows(toy: ClusterToy) -> list[dict[str, object]]:
    """One row per point and panel: ``panel, cluster (1, 2), x, y``."""
    return [{"panel": panel, "cluster": k + 1, "x": float(p[0]), "y": float(p[1])}
            for panel in PANELS for k, points in enumerate(toy.panels[panel]) for p in points]


def params(seed: int, toy: ClusterToy) -> dict[str, object]:
    """The setting and the global statistics, for the record's summary."""
    return {"seed": seed, "centers": [list(c) for c in CENTERS], "stds": list(STDS), "sizes": list(SIZES),
            "local_weights": list(LOCAL_WEIGHTS), "global_mean": toy.global_mean.tolist(),
            "global_var": toy.global_var.tolist(), "eps": NORMS.get("hbn").config_class().eps}
