"""The model registry and the ``build_model`` entry point.

A model is one module in this folder that decorates its builder (usually the model class itself)
with ``@register_model("name")``. A builder has the signature
``builder(norm_layer, input_shape, num_classes, *, option=default, ...)``: the three shared
arguments come first and every architecture-specific option is keyword-only with a default, so
``build_model`` can list and check the options of any model from its signature alone.
"""
from __future__ import annotations

import inspect
import operator
from collections.abc import Iterable
from typing import Any, Callable, TypeVar

from torch import nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.registry import Registry

NormFactory = Callable[[int, int], nn.Module]
"""``norm_layer(num_features, dims) -> layer``; ``dims`` 2 for maps (N, C, H, W), 1 for (N, C)."""

ModelBuilder = Callable[..., nn.Module]

_SHARED_ARGS = ("norm_layer", "input_shape", "num_classes")

B = TypeVar("B", bound=ModelBuilder)


def _check_builder(name: str, builder: B) -> B:
    """Registry check, at import time, so that a malformed new model fails loudly rather than
    when someone first selects it."""
    params = list(inspect.signature(builder).parameters.values())
    head = tuple(p.name for p in params[: len(_SHARED_ARGS)])
    if head != _SHARED_ARGS:
        raise TypeError(f"builder of model '{name}' must start with the parameters {_SHARED_ARGS}, got {head}")
    for p in params[len(_SHARED_ARGS):]:
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.default is inspect.Parameter.empty:
            raise TypeError(f"option '{p.name}' of model '{name}' must be keyword-only and have a default")
    return builder


MODELS: Registry[ModelBuilder] = Registry("model", error=ConfigError, check=_check_builder)
"""Registry: model name -> ``builder(norm_layer, input_shape, num_classes, **options)``."""

register_model = MODELS.register
"""Class/function decorator adding a builder to ``MODELS``: ``@register_model("name")``."""


def model_options(name: str) -> dict[str, Any]:
    """The options accepted by model ``name`` and their default values."""
    builder = MODELS.get(name)
    params = list(inspect.signature(builder).parameters.values())[len(_SHARED_ARGS):]
    return {p.name: p.default for p in params}


def build_model(
    name: str,
    norm_layer: NormFactory,
    input_shape: tuple[int, ...],
    num_classes: int,
    **options: Any,
) -> nn.Module:
    """Build the registered model ``name``.

    Args:
        name: a name registered in ``MODELS``.
        norm_layer: factory called once per normalization layer of the architecture.
        input_shape: shape of one example without the batch axis: (C, H, W) for images,
            (D,) for vectors. Any iterable of integers (e.g. an OmegaConf list) is accepted.
        num_classes: number of output logits.
        **options: architecture-specific options (see ``model_options(name)``).

    Raises:
        ConfigError: unknown model name (a ``ValueError``).
        ValueError: an invalid shape, class count or option value.
        TypeError: an option the model does not accept, or a non-callable ``norm_layer``.
    """
    builder = MODELS.get(name)
    allowed = model_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        listed = ", ".join(f"{k}={v!r}" for k, v in allowed.items()) or "none"
        raise TypeError(
            f"unknown option(s) {', '.join(repr(k) for k in unknown)} for model '{name}'; "
            f"allowed options (with defaults): {listed}"
        )
    if not callable(norm_layer):
        raise TypeError(f"norm_layer must be callable as norm_layer(num_features, dims), got {norm_layer!r}")
    return builder(norm_layer, as_shape(input_shape), as_num_classes(num_classes), **options)


def as_shape(input_shape: Iterable[int]) -> tuple[int, ...]:
    """Normalize ``input_shape`` to a tuple of positive Python ints."""
    try:
        shape = tuple(operator.index(s) for s in input_shape)
    except TypeError as exc:
        raise ValueError(f"input_shape must be a sequence of integers, got {input_shape!r}") from exc
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"input_shape must be non-empty with positive sizes, got {input_shape!r}")
    return shape


def as_num_classes(num_classes: int) -> int:
    """Validate and return ``num_classes`` as a positive int."""
    if isinstance(num_classes, bool):
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
    try:
        n = operator.index(num_classes)
    except TypeError as exc:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}") from exc
    if n < 1:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
    return n
