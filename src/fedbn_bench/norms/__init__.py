"""Normalization methods: one module per method, each registered in ``NORMS`` (see ``base``)."""
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod
from fedbn_bench.registry import import_submodules

import_submodules(__name__, __path__)


def build_norm(cfg) -> NormMethod:
    """Instantiate the norm method named by ``cfg.name`` with its config."""
    return NORMS.get(cfg.name)(cfg)


__all__ = ["NORMS", "NormConfig", "NormMethod", "build_norm"]
