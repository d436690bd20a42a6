"""Evaluation metrics: one module per metric, each registered in ``METRICS`` (see ``base``)."""
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, build_metric, evaluate
from fedbn_bench.registry import import_submodules

import_submodules(__name__, __path__)

__all__ = ["METRICS", "EvalContext", "Metric", "build_metric", "evaluate"]
