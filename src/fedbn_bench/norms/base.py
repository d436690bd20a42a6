"""The normalization-method strategy: layer rule, client statistics, server aggregation.

Every paper in ``shared/papers`` differs along three questions (see docs/ARCHITECTURE.md):

1. *Layer rule* — which module normalizes a layer (``norm_layer``) during training and evaluation,
   and, for ``engine=packed``, its packing rule, registered beside the layer in the method's own
   module (``core.packing.register_packing_rule``).
2. *Client statistics* — what a client uploads (``client_statistics`` after training, or a
   separate pass under the received weights before it, ``pass_statistics``, in stages; as
   ``core.updates.Statistics``: per layer mean, var, count, declared metadata) and which state
   never leaves it (``local_keys``).
3. *Server aggregation* — how the server turns the uploads into new global state
   (``aggregate_statistics``), always through the run's ``Aggregator``, so that a robust rule
   applies to statistics without touching the method.

Per-client state that changes during training lives in buffers (never Python attributes), so the
stacked backends can carry it per client. Normalization modules are found by module type, never
by a substring of a parameter name.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import LayerStatistics, State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.registry import Registry


@dataclass
class NormConfig:
    name: str = "none"


class NormMethod:
    """Base class of every normalization method; subclasses override the three hooks."""

    config_class: type = NormConfig
    layer_types: tuple[type[nn.Module], ...] = ()
    uses_batch_statistics: bool = False
    """Whether training normalizes with statistics over the batch (so batches need two samples)."""
    final_statistics_round: bool = False
    """When true, the engine runs one statistics-only round after the last update (HBN Alg. 1)."""
    local_state_in_evaluation: bool = True
    """Whether ``local_keys`` change evaluation, so the engine evaluates each client with its own
    state (FedBN); false when they are unused in eval mode (HBN's hybrid factor, §3.3)."""
    unsupported_backends: dict[str, str] = {}
    """Backend name -> why this method cannot run on it (empty: every backend)."""
    statistics_before_training: bool = False
    """When true, the clients' statistics come from a separate pass under the received weights
    before training (``pass_statistics``, HBN Eq. 7), aggregated stage by stage, instead of from
    ``client_statistics``; the pass can also re-estimate them for testing."""
    shares_local_keys: bool = False
    """When true, ``local_keys`` are also uploaded and averaged, and a client that never trained
    starts from that average (HBN's code, its hybrid factor)."""
    branches: tuple[str, ...] = ()
    """Named statistics branches a context (``branch``) selects, e.g. dual BN's ``clean`` and
    ``adv`` (FedRBN §4); empty: one set of statistics serves clean and adversarial inputs."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        eps, momentum = getattr(cfg, "eps", None), getattr(cfg, "momentum", None)
        if eps is not None and not eps > 0:
            raise ConfigError(f"norm.eps={eps} is invalid: must be > 0 (it keeps the division by the "
                              "standard deviation finite)")
        if momentum is not None and not 0 < momentum <= 1:
            raise ConfigError(f"norm.momentum={momentum} is invalid: the running statistics' momentum β is in "
                              "(0, 1] (0 would never update them)")

    # 1. Layer rule ------------------------------------------------------------------------
    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        """Build the layer that normalizes ``num_features`` channels (``dims`` 2: maps, 1: flat)."""
        return nn.Identity()

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """Adapt a freshly built model (e.g. FedFN's feature normalization before the head)."""
        return model

    def norm_modules(self, model: nn.Module) -> dict[str, nn.Module]:
        """The model's normalization modules (selected by type), keyed by module name."""
        if not self.layer_types:
            return {}
        return {n: m for n, m in model.named_modules() if isinstance(m, self.layer_types)}

    def norm_state_keys(self, model: nn.Module) -> list[str]:
        """Every state entry (parameters and buffers) of every normalization module."""
        return [f"{name}.{key}" for name, module in self.norm_modules(model).items() for key in module.state_dict()]

    @contextlib.contextmanager
    def no_statistics_update(self, model: nn.Module) -> Iterator[None]:
        """Forward passes inside leave every buffer (running statistics, counters) as it was:
        for passes that must not count as training data (MOON's extra models, SAM's second pass,
        PGD's attack steps).

        The buffers get back exactly the values an earlier forward pass left and saved for its
        backward (``batch_norm`` saves its running statistics), so they are written through
        ``.data``: a backward through that earlier pass (the clean term of an adversarial loss
        whose attack ran in train mode) stays valid."""
        saved = {k: b.detach().clone() for k, b in model.named_buffers()}
        try:
            yield
        finally:
            for k, b in model.named_buffers():
                b.data.copy_(saved[k])

    @contextlib.contextmanager
    def branch(self, model: nn.Module, name: str, frozen: bool = False) -> Iterator[None]:
        """Forward passes inside use statistics branch ``name`` (``clean`` or ``adv``), with
        ``frozen`` its running statistics even in training mode. Without ``branches`` a no-op:
        clean and adversarial inputs share the layers (FATAvg, FATBN)."""
        yield

    # 2. Client statistics -------------------------------------------------------------------
    def local_keys(self, model: nn.Module) -> list[str]:
        """State-dict keys that stay on their client and are never averaged (FedBN)."""
        return []

    def statistics_inputs(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The part of a client's data ``x`` its pre-training pass reads (``generator``: this
        round's and client's draw); all of it by default."""
        return x

    def pass_statistics(self, model: nn.Module, inputs: list[torch.Tensor], load_client: Callable[[int], None],
                        aggregate: Callable[[list[Statistics]], None]) -> None:
        """The pre-training statistics pass of the clients holding ``inputs`` (client ``i``: the
        samples ``inputs[i]``), in stages: each stage ends with ``aggregate`` of one ``Statistics``
        per client, which aggregates them and loads the result into ``model`` before the pass
        goes on. ``load_client(i)`` loads what client ``i`` received (and the statistics of the
        stages before); every client receives the same weights."""

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        """Statistics a client holding ``num_samples`` samples uploads after local training."""
        return {}

    # 3. Server aggregation ------------------------------------------------------------------
    def client_weights(self, weights: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
        """The round's aggregation weights given the algorithm's ``weights`` and the sampled
        clients' data ``sizes`` (default: the algorithm's; FedBN Alg. 1 averages uniformly)."""
        return weights

    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        """New global state entries from the clients' statistics (``weights`` sum to one)."""
        return {}

    @contextlib.contextmanager
    def fresh_statistics(self) -> Iterator[None]:
        """Aggregations inside replace the global statistics instead of smoothing them (HBN's
        statistics round and test-time re-estimation; a no-op for other methods)."""
        yield

    def propagate(self, client_local: list[State], roles: list[str]) -> None:
        """Server step on the clients' own state after aggregation, in place (FedRBN Eq. 3-4:
        adversarial statistics of ``adversarial`` users copied to ``standard`` users); no-op."""

    # Lifecycle --------------------------------------------------------------------------------
    def on_round_start(self, round_idx: int, total_rounds: int, model: nn.Module) -> None:
        """Called by the engine before each round (e.g. FixBN's stage switch)."""


def running_statistics(modules: dict[str, nn.Module], num_samples: int) -> Statistics:
    """Each module's ``running_mean``/``running_var`` as its upload (naive BN, FBN)."""
    out = {}
    for name, m in modules.items():
        count = torch.tensor(float(num_samples), dtype=torch.float64, device=m.running_mean.device)
        out[name] = LayerStatistics(m.running_mean.detach().clone(), m.running_var.detach().clone(), count)
    return out


def stacked(stats: list[Statistics], layer: str, field: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The clients' ``field`` (``mean``, ``var``, ``count`` or a ``meta`` key) of ``layer`` as one
    ``(n, ...)`` tensor."""
    values = [getattr(s[layer], field) if field in ("mean", "var", "count") else s[layer].meta[field] for s in stats]
    return torch.stack(values).to(dtype)


NORMS: Registry[type[NormMethod]] = Registry("norm")
