"""Metrics: the columns one evaluation adds to ``metrics.csv`` (and W&B).

A metric is a class registered in ``METRICS`` whose call maps an ``EvalContext`` to named
numbers; the engine's evaluator runs a list of them. A new metric (robust accuracy, calibration,
...) is one module here. The config's ``metrics`` list names them: ``[name, ...]``, or
``{name: ..., <option>: ...}`` for a metric whose constructor takes keyword options
(``build_metric``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.updates import State
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.client_batch import batched_client_outcomes
from fedbn_bench.registry import Registry


@dataclass
class EvalContext:
    """What a metric may use: the model, ways to load the global or a client's state into it,
    the test inputs and labels (on the device), the clients' test indices and the per-domain
    test indices; the training inputs and labels with the clients' validation indices into them
    (``None``: no validation split) and each client's domain name (``None``: no domain); the
    robust evaluation's attacks by column (``attack(model, x, y) -> x_adv``, the model in eval
    mode; empty without adversarial training) and each client's role (FedRBN's AT/ST users);
    each client's training indices into ``train_x`` (``client_train``, validation held out), the
    run's training batch size per client (``train_batch_size``; ``None``: not given) and the run's
    seed (``seed``, for metrics that draw samples: ``seeded_generator``)."""

    model: nn.Module
    test_x: torch.Tensor
    test_y: torch.Tensor
    load_global: Callable[[], None]
    load_client: Callable[[int], None]
    client_test: list[torch.Tensor | None]
    domain_test: dict[str, torch.Tensor] = field(default_factory=dict)
    batch_size: int = 128
    train_x: torch.Tensor | None = None
    train_y: torch.Tensor | None = None
    client_val: list[torch.Tensor | None] = field(default_factory=list)
    client_domain: list[str | None] = field(default_factory=list)
    robust_attacks: dict[str, Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]] = field(
        default_factory=dict)
    client_role: list[str] = field(default_factory=list)
    client_train: list[torch.Tensor] = field(default_factory=list)
    train_batch_size: int | None = None
    seed: int = 0
    robust_test: bool = True
    """Whether the robust evaluation attacks the test splits (``False``: only the validation
    attacks of the selection score; ``adversarial.robust_test=best_val``)."""
    clients: list[int] | None = None
    """The clients whose own models this evaluation tests (``None``: all; a sample per evaluation
    at scale, ``evaluation.clients``)."""
    batched: bool = False
    """Whether the clients' models are evaluated together (``client_batch.py``; needs ``shared``
    and ``client_own``) rather than one client at a time."""
    shared: State | None = field(default=None, repr=False)
    """The state every client's model starts from (the global one), for the batched evaluation."""
    client_own: Callable[[int], State] | None = field(default=None, repr=False)
    """A client's own keys (local state), laid over ``shared`` by the batched evaluation."""
    client_values: dict[str, dict[int, float]] = field(default_factory=dict, repr=False)
    """Per-client values of this evaluation by metric (``per_client``), written in long form
    (``client_metrics.csv``: round, client, metric, value)."""

    global_test: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)
    """Memo of ``global_test_outcomes``."""

    def global_test_outcomes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per test sample, whether the global model predicts it right and its loss: computed
        once per evaluation, for every metric that reads it (overall and per-domain accuracy)."""
        if self.global_test is None:
            self.load_global()
            self.global_test = outcomes(self.model, self.test_x, self.test_y, self.batch_size)
        return self.global_test

    client_evaluations: dict[tuple[int, str], tuple[float, float]] = field(default_factory=dict, repr=False)
    """Memo of ``client_evaluation``."""

    def client_data(self, client: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Client ``client``'s ``split``: ``"test"`` (its test split, the whole test set when it
        has none) or ``"val"`` (its validation data)."""
        if split == "test":
            idx = self.client_test[client]
            return (self.test_x, self.test_y) if idx is None else (self.test_x[idx], self.test_y[idx])
        idx = self.client_val[client]
        return self.train_x[idx], self.train_y[idx]

    def client_evaluation(self, client: int, split: str) -> tuple[float, float]:
        """(accuracy, mean loss) of client ``client``'s own model on its ``split`` (``client_data``):
        computed once per evaluation, for every metric that reads it (per-client accuracy, the
        robust evaluation's clean accuracy and selection score). It may load the client's state."""
        key = (client, split)
        if key not in self.client_evaluations:
            self.load_client(client)
            self.client_evaluations[key] = evaluate(self.model, *self.client_data(client, split), self.batch_size)
        return self.client_evaluations[key]

    def evaluate_clients(self, clients: list[int], split: str) -> list[tuple[float, float]]:
        """``client_evaluation`` of each of ``clients``; with ``batched``, those not yet computed
        in one vectorized pass (``client_batch.py``)."""
        missing = [c for c in clients if (c, split) not in self.client_evaluations]
        if self.batched and missing:
            results = batched_client_outcomes(self.model, self.shared, self.client_own, missing,
                                              [self.client_data(c, split) for c in missing], self.batch_size)
            self.client_evaluations.update({(c, split): r for c, r in zip(missing, results)})
        return [self.client_evaluation(c, split) for c in clients]

    @property
    def evaluated_clients(self) -> list[int]:
        """The clients this evaluation tests (``clients``, all by default)."""
        return list(range(len(self.client_test))) if self.clients is None else self.clients

    def domains_of(self, clients: list[int]) -> list[str | None]:
        """The domain of each of ``clients`` (empty when the clients have none)."""
        return [self.client_domain[c] for c in clients] if self.client_domain else []

    def per_client(self, metric: str, values: dict[int, float]) -> None:
        """Record ``metric``'s value per client (``client_values``)."""
        self.client_values.setdefault(metric, {}).update(values)

    def pooled_train(self) -> torch.Tensor:
        """The union of the clients' training indices, client after client (FixBN §3.4's
        ``D = ∪_m D_m``)."""
        return torch.cat([idx.to(self.train_y.device) for idx in self.client_train])

    @property
    def has_validation(self) -> bool:
        """Whether every client holds validation indices (``val_fraction > 0``)."""
        return bool(self.client_val) and all(idx is not None for idx in self.client_val)


class Metric:
    """Base class: ``__call__`` returns ``{column: value}``; ``tests_clients``: it tests the
    clients' own models (``EvalContext.evaluated_clients``)."""

    tests_clients: bool = False

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        raise NotImplementedError


@contextmanager
def channels_last_weights(model: nn.Module, x: Any) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
    """For image batches on the CPU: the model's convolution weights in channels-last layout for
    the duration (its own tensors are put back after), and a map of inputs to that layout. The
    CPU's convolution kernels run several times faster that way (``results/bench/README.md``,
    evaluation); the values are the same, only the order of the floating-point sums differs."""
    if len(x.shape) != 4 or x.device.type != "cpu":  # x may be a lazy image store (data/lazy.py)
        yield lambda batch: batch
        return
    originals = [(p, p.data) for p in model.parameters() if p.dim() == 4]
    with torch.no_grad():
        for p, data in originals:
            p.data = data.contiguous(memory_format=torch.channels_last)
    try:
        yield lambda batch: batch.contiguous(memory_format=torch.channels_last)
    finally:
        for p, data in originals:
            p.data = data


def outcomes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample of ``(x, y)``: whether ``model`` (in eval mode) predicts it right, and its loss."""
    model.eval()
    correct, losses = [], []
    with channels_last_weights(model, x) as layout, torch.inference_mode():
        for start in range(0, len(y), batch_size):
            logits = model(layout(x[start : start + batch_size]))
            target = y[start : start + batch_size]
            losses.append(F.cross_entropy(logits, target, reduction="none"))
            correct.append(logits.argmax(1) == target)
    if not correct:
        return torch.zeros(0, dtype=torch.bool, device=x.device), torch.zeros(0, device=x.device)
    return torch.cat(correct), torch.cat(losses)


def seeded_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU generator of its own for ``(seed, *keys)``: a metric's draws never touch the global
    random state, and repeat across evaluations and resumptions."""
    entropy = np.random.SeedSequence([int(seed) % 2**32, *(int(k) % 2**32 for k in keys)])
    return torch.Generator(device="cpu").manual_seed(int(entropy.generate_state(1)[0]))


def accuracy_and_loss(correct: torch.Tensor, losses: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean loss) from per-sample ``outcomes``."""
    n = max(len(correct), 1)
    return correct.sum().item() / n, losses.sum().item() / n


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 128) -> tuple[float, float]:
    """(accuracy, mean loss) of ``model`` in eval mode on ``(x, y)``."""
    return accuracy_and_loss(*outcomes(model, x, y, batch_size))


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


def build_metric(entry: str | Mapping[str, Any]) -> Metric:
    """The metric of one ``metrics`` entry: a registered name, or a mapping with ``name`` and
    the metric's keyword options; an unknown name or option is one ``ConfigError``."""
    if isinstance(entry, str):
        if entry not in METRICS.names():
            raise ConfigError(f"metrics: unknown metric '{entry}'; allowed: {', '.join(METRICS.names())}")
        return METRICS.get(entry)()
    options = dict(entry)
    name = options.pop("name", None)
    if not isinstance(name, str):
        raise ConfigError(f"metrics entry {dict(entry)} has no `name`: give a metric name or {{name: ..., options}}")
    cls = METRICS.get(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"metrics entry '{name}': invalid options {options} ({exc})") from None
