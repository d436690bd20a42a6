"""FedRBN's normalization: local dual BN with robustness propagation (Hong et al., "Federated
Robustness Propagation", §4, Eq. 3-4; code ``illidanlab/FedRBN``, ``copy_multi_dual_noise_bn``).

Layer rule: dual BN (``norms/dual_bn.py``). Client statistics: none uploaded — every dual-BN
entry (shared affine, both branches' statistics) is a local key, FedBN-style ("LBN"), so the
algorithm averages only the other weights. Server step (``propagate``, after every round, so
before the next local training and before testing): each standard-training (ST) user k receives
adversarial running statistics from the adversarial-training (AT) users j,

    μ_a^k, σ²_a^k := Σ_j α_kj (μ_a^j, σ²_a^j),
    α_k· = softmax_j( s_kj / T ),  s_kj = mean over layers l of [cos(μ_c,l^k, μ_c,l^j) + cos(σ²_c,l^k, σ²_c,l^j)] / 2

with the users' clean statistics (Eq. 3-4; T = 0.01), or uniformly (``propagation: uniform``,
Table 1's "uni"), or not at all (``propagation: none``, "FedRBN w/o prop" of Fig. 1). Only
running statistics move; AT users keep their own. Cosines use ``F.cosine_similarity`` with
eps 1e-8, as the code does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.roles import ADVERSARIAL, STANDARD
from fedbn_bench.core.updates import State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS
from fedbn_bench.norms.dual_bn import DBNConfig, DualBN

PROPAGATIONS = ("cosine", "uniform", "none")


@dataclass
class FedRBNConfig(DBNConfig):
    name: str = "fedrbn"
    propagation: str = "cosine"
    """How ST users get adversarial statistics: ``cosine`` (Eq. 3-4), ``uniform`` or ``none``."""
    temperature: float = 0.01
    """T of Eq. 4's softmax (the code: ``a * 1e2``)."""


@NORMS.register("fedrbn")
class FedRBN(DualBN):
    config_class = FedRBNConfig
    local_state_in_evaluation = True

    def __init__(self, cfg: FedRBNConfig) -> None:
        super().__init__(cfg)
        if cfg.propagation not in PROPAGATIONS:
            raise ConfigError(f"norm.propagation='{cfg.propagation}' is unknown; allowed: {', '.join(PROPAGATIONS)}")
        if not cfg.temperature > 0:
            raise ConfigError(f"norm.temperature={cfg.temperature} is invalid: it must be > 0")

    def local_keys(self, model: nn.Module) -> list[str]:
        """Every state entry of every dual-BN module (FedBN's rule applied to DBN)."""
        return self.norm_state_keys(model)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        return {}

    def propagation_weights(self, client_local: list[State], targets: list[int], sources: list[int]) -> torch.Tensor:
        """``(len(targets), len(sources))`` weights α, each row summing to one (Eq. 4)."""
        if self.cfg.propagation == "uniform":
            device = next(iter(client_local[targets[0]].values())).device
            return torch.full((len(targets), len(sources)), 1.0 / len(sources), dtype=torch.float64, device=device)
        sims = []
        for layer in dual_layers(client_local[targets[0]]):
            per_layer = []
            for field in ("running_mean", "running_var"):
                dst = torch.stack([client_local[k][f"{layer}.{field}"] for k in targets]).to(torch.float64)
                src = torch.stack([client_local[j][f"{layer}.{field}"] for j in sources]).to(torch.float64)
                per_layer.append(F.cosine_similarity(dst[:, None], src[None], dim=-1, eps=1e-8))
            sims.append((per_layer[0] + per_layer[1]) / 2)
        return torch.softmax(torch.stack(sims).mean(0) / self.cfg.temperature, dim=1)

    def propagate(self, client_local: list[State], roles: list[str]) -> None:
        """Adversarial statistics of the AT users into every ST user's own state (Eq. 3)."""
        sources = [c for c, role in enumerate(roles) if role == ADVERSARIAL]
        targets = [c for c, role in enumerate(roles) if role == STANDARD]
        if self.cfg.propagation == "none" or not sources or not targets:
            return
        alpha = self.propagation_weights(client_local, targets, sources)
        mixed_rows: dict[int, State] = {k: {} for k in targets}
        for layer in dual_layers(client_local[targets[0]]):
            for field in ("adv_running_mean", "adv_running_var"):
                key = f"{layer}.{field}"
                src = torch.stack([client_local[j][key] for j in sources]).to(torch.float64)
                mixed = alpha.to(src.device) @ src
                for row, k in enumerate(targets):
                    mixed_rows[k][key] = mixed[row]
        for k, mixed_k in mixed_rows.items():
            own = client_local[k]
            client_local[k] = {**own, **{key: value.to(own[key].dtype) for key, value in mixed_k.items()}}


def dual_layers(state: State) -> list[str]:
    """The dual-BN modules of a client's own state (those with adversarial statistics)."""
    suffix = ".adv_running_mean"
    return [key[: -len(suffix)] for key in state if key.endswith(suffix)]
