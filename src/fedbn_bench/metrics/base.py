"""Metrics: the columns one evaluation adds to ``metrics.csv`` (and W&B).

A metric is a class registered in ``METRICS`` whose call maps an ``EvalContext`` to named
numbers; the engine's evaluator runs a list of them. A new metric (robust accuracy, calibration,
...) is one module here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.registry import Registry


@dataclass
class EvalContext:
    """What a metric may use: the model, ways to load the global or a client's state into it,
    the test inputs and labels (on the device), the clients' test indices and the per-domain
    test indices; the training inputs and labels with the clients' validation indices into them
    (``None``: no validation split) and each client's domain name (``None``: no domain); the
    robust evaluation's attacks by column (``attack(model, x, y) -> x_adv``, the model in eval
    mode; empty without adversarial training) and each client's role (FedRBN's AT/ST users)."""

    model: nn.Module
    test_x: torch.Tensor
    test_y: torch.Tensor
    load_global: Callable[[], None]
    load_client: Callable[[int], None]
    client_test: list[torch.Tensor | None]
    domain_test: dict[str, torch.Tensor] = field(default_factory=dict)
    batch_size: int = 1024
    train_x: torch.Tensor | None = None
    train_y: torch.Tensor | None = None
    client_val: list[torch.Tensor | None] = field(default_factory=list)
    client_domain: list[str | None] = field(default_factory=list)
    robust_attacks: dict[str, Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]] = field(
        default_factory=dict)
    client_role: list[str] = field(default_factory=list)

    @property
    def has_validation(self) -> bool:
        """Whether every client holds validation indices (``val_fraction > 0``)."""
        return bool(self.client_val) and all(idx is not None for idx in self.client_val)


class Metric:
    """Base class: ``__call__`` returns ``{column: value}``."""

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        raise NotImplementedError


@torch.inference_mode()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean loss) of ``model`` in eval mode on ``(x, y)``."""
    model.eval()
    correct = torch.zeros((), device=x.device)
    loss = torch.zeros((), device=x.device)
    for start in range(0, len(y), batch_size):
        logits = model(x[start : start + batch_size])
        target = y[start : start + batch_size]
        loss += F.cross_entropy(logits, target, reduction="sum")
        correct += (logits.argmax(1) == target).sum()
    n = max(len(y), 1)
    return correct.item() / n, loss.item() / n


def mean_over_domains(values: list[float], domains: list[str | None]) -> tuple[float, dict[str, float]]:
    """The unweighted mean over domains of the per-domain means of the clients' ``values`` (FedBN
    §5 reports each domain's accuracy and their plain average), with those per-domain means; the
    unweighted mean over clients (and no per-domain means) when a client has no domain."""
    if not domains or any(d is None for d in domains):
        return sum(values) / len(values), {}
    per_domain: dict[str, list[float]] = {}
    for value, domain in zip(values, domains):
        per_domain.setdefault(domain, []).append(value)
    means = {domain: sum(v) / len(v) for domain, v in per_domain.items()}
    return sum(means.values()) / len(means), means


METRICS: Registry[type[Metric]] = Registry("metric")
