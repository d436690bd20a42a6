"""FedBN's toy example (fedbn_local_batch_normalization.txt §1, Fig. 1 and Fig. 2): a cosine model
on two clients whose inputs differ in scale, with and without a simplified BN.

Model ``f_w(x) = cos(w · x / γ)``: the simplified BN "normalizes the input by scaling it with γ, i.e.,
the local empirical standard deviation" (§1), so a client's BN parameter is ``γ_k* = σ̂_k``, the
(biased) standard deviation of its inputs, and "without BN" is ``γ = 1``. Squared loss
``L_k(w, γ) = mean_j (y_j − cos(w x_j / γ))²`` on the client's samples.

Data (the paper gives neither w_true, the variances nor the noise; chosen here): client ``k`` draws
``u ~ N(0, 1)`` and observes ``x = σ_k u`` with ``σ = (0.5, 2)``; ``y = cos(w_true · u) + ε``,
``w_true = 4``, ``ε ~ N(0, 0.1²)``, 500 samples per client, independent draws. That is, ``y =
cos(w_true x)`` holds for the standardized feature and the clients differ only in the scale of what
they observe (a feature shift, FedBN Assumption 4.1). Why: read with one ``w_true`` for the raw ``x``
of both clients, both clients' loss is minimal at ``w = w_true`` without BN, so averaging would be
harmless, and local BN would move their optima apart (to ``w_true σ_k``): the opposite of the
paper's observation. With the feature-shift reading the paper's points hold: without BN the
optima are ``w_true / σ_k`` (8 and 2), far apart, and their average is poor on both clients;
with local BN both loss curves are the same function of ``w`` (minimum at ``w_true``); on a client's
``(w, γ)`` surface (Fig. 2) the averaged ``(w̄, γ̄)`` of the two clients' optima lies off the
valley ``w = w_true γ / σ_k``, while ``(w̄, γ_1*)`` lies on it. ``σ`` and ``w_true`` put both
no-BN optima and client 1's valley inside the paper's ranges ``w ∈ [0.001, 12]``, ``γ ∈ [0.001, 4]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

W_TRUE = 4.0
SIGMAS = (0.5, 2.0)
NOISE = 0.1
SAMPLES = 500
W_RANGE = (0.001, 12.0)
GAMMA_RANGE = (0.001, 4.0)
CURVE_POINTS = 601
SURFACE_POINTS = (121, 81)
"""Grid of the recorded surface: points along w, along γ."""
SEARCH_POINTS = 1201
"""Grid along w on which the optima are searched (step 0.01), then refined to step 0.0001 around the best."""


@dataclass
class Client:
    """One client's inputs ``x`` and targets ``y`` (float64)."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def gamma(self) -> float:
        """The client's BN parameter: the biased empirical standard deviation of its inputs."""
        return self.x.std(correction=0).item()


def draw_clients(seed: int = 0, sigmas: tuple[float, ...] = SIGMAS, w_true: float = W_TRUE,
                 noise: float = NOISE, samples: int = SAMPLES) -> list[Client]:
    """Client ``k``: ``x = σ_k u``, ``y = cos(w_true u) + ε`` (module docstring), its own draws."""
    gen = torch.Generator().manual_seed(seed)
    clients = []
    for sigma in sigmas:
        u = torch.randn(samples, generator=gen, dtype=torch.float64)
        eps = noise * torch.randn(samples, generator=gen, dtype=torch.float64)
        clients.append(Client(sigma * u, torch.cos(w_true * u) + eps))
    return clients


def loss(client: Client, w: torch.Tensor | float, gamma: torch.Tensor | float = 1.0) -> torch.Tensor:
    """``L(w, γ) = mean (y − cos(w x / γ))²`` for every element of ``w`` and ``γ`` (broadcast)."""
    w, gamma = torch.broadcast_tensors(torch.as_tensor(w, dtype=torch.float64),
                                       torch.as_tensor(gamma, dtype=torch.float64))
    pred = torch.cos((w / gamma).unsqueeze(-1) * client.x)
    return (client.y - pred).square().mean(-1)


def grid(bounds: tuple[float, float], points: int) -> torch.Tensor:
    return torch.linspace(bounds[0], bounds[1], points, dtype=torch.float64)


def best_w(client: Client, gamma: float) -> float:
    """The ``w ∈ [0.001, 12]`` of least loss at ``γ``: the best of a grid of step 0.01, then of a grid
    of step 0.0001 within one coarse step of it."""
    ws = grid(W_RANGE, SEARCH_POINTS)
    w0, step = ws[loss(client, ws, gamma).argmin()].item(), (W_RANGE[1] - W_RANGE[0]) / (SEARCH_POINTS - 1)
    fine = grid((max(W_RANGE[0], w0 - step), min(W_RANGE[1], w0 + step)), 201)
    return fine[loss(client, fine, gamma).argmin()].item()


@dataclass
class CosToy:
    """The clients, Fig. 1's curves, Fig. 2's surface (client 1) and the optima."""

    clients: list[Client]
    curves: list[dict[str, float]]
    """Rows ``w, client (1, 2), bn (0, 1), loss``."""
    surface_w: torch.Tensor
    surface_gamma: torch.Tensor
    surface: torch.Tensor
    """Client 1's loss, ``(len(surface_gamma), len(surface_w))``."""
    optima: dict[str, object]


def optima(clients: list[Client]) -> dict[str, object]:
    """Each client's optimum without BN (``γ = 1``) and with its local BN (``γ_k* = σ̂_k``), the
    averages, and client 1's loss at the points Fig. 2 discusses."""
    no_bn = [best_w(c, 1.0) for c in clients]
    gammas = [c.gamma for c in clients]
    bn = [best_w(c, g) for c, g in zip(clients, gammas)]
    w_avg_no_bn, w_avg, gamma_avg = sum(no_bn) / len(no_bn), sum(bn) / len(bn), sum(gammas) / len(gammas)
    first = clients[0]

    def at(w: float, gamma: float, client: Client = first) -> float:
        return loss(client, w, gamma).item()

    return {
        "no_bn_w": no_bn, "bn_w": bn, "bn_gamma": gammas,
        "no_bn_w_avg": w_avg_no_bn, "bn_w_avg": w_avg, "bn_gamma_avg": gamma_avg,
        "no_bn_loss_at_avg": [at(w_avg_no_bn, 1.0, c) for c in clients],
        "no_bn_loss_at_own": [at(w, 1.0, c) for w, c in zip(no_bn, clients)],
        "bn_loss_at_own": [at(w, g, c) for w, g, c in zip(bn, gammas, clients)],
        "client1_loss": {"own": at(bn[0], gammas[0]), "avg_w_avg_gamma": at(w_avg, gamma_avg),
                         "avg_w_local_gamma": at(w_avg, gammas[0])},
    }


def run_cos(seed: int = 0) -> CosToy:
    """FedBN Fig. 1 and 2 on the clients of ``draw_clients(seed)``."""
    clients = draw_clients(seed)
    ws = grid(W_RANGE, CURVE_POINTS)
    curves = []
    for k, client in enumerate(clients, start=1):
        for bn, gamma in ((0, 1.0), (1, client.gamma)):
            curves += [{"w": w, "client": k, "bn": bn, "loss": v}
                       for w, v in zip(ws.tolist(), loss(client, ws, gamma).tolist())]
    sw, sg = grid(W_RANGE, SURFACE_POINTS[0]), grid(GAMMA_RANGE, SURFACE_POINTS[1])
    surface = loss(clients[0], sw.unsqueeze(0), sg.unsqueeze(1))
    return CosToy(clients, curves, sw, sg, surface, optima(clients))


def surface_rows(toy: CosToy) -> list[dict[str, float]]:
    """The surface as a matrix: one row per γ, one column ``w=<value>`` per w."""
    return [{"gamma": g, **{f"w={w:.6g}": v for w, v in zip(toy.surface_w.tolist(), row)}}
            for g, row in zip(toy.surface_gamma.tolist(), toy.surface.tolist())]


def params(seed: int, toy: CosToy) -> dict[str, object]:
    """The setting and the optima, for the record's summary."""
    return {"seed": seed, "w_true": W_TRUE, "sigmas": list(SIGMAS), "noise": NOISE, "samples": SAMPLES,
            "w_range": list(W_RANGE), "gamma_range": list(GAMMA_RANGE), **toy.optima}
