"""Shared pieces of every architecture: the classifier base class and small shape helpers.

Conventions for all models in this package:

* ``forward_features(x)`` returns the penultimate features, flattened to (N, F);
  ``head`` is the final ``nn.Linear``; ``forward(x) == head(forward_features(x))`` are raw logits.
* Normalization layers come only from the ``norm_layer`` factory (via ``make_norm``), placed where
  the source paper's table has BatchNorm; nowhere else.
* Flatten sizes are measured by a dummy forward (``probe_shape``), never hard-coded, so one
  architecture serves 8x8 digits as well as 64x64 Tiny-ImageNet.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.models.registry import NormFactory, as_num_classes, as_shape


class FeatureClassifier(nn.Module):
    """Base class: a feature extractor followed by a linear classifier ``head``.

    Subclasses set ``self.head`` (an ``nn.Linear``) and implement ``forward_features``. The
    attributes ``input_shape``, ``num_classes`` and ``feature_dim`` describe the built model.
    """

    head: nn.Linear
    input_shape: tuple[int, ...]
    num_classes: int
    feature_dim: int

    def forward_features(self, x: Tensor) -> Tensor:
        """Penultimate features of ``x``, shape (N, feature_dim)."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """Raw logits, shape (N, num_classes)."""
        return self.head(self.forward_features(x))


def make_norm(norm_layer: NormFactory, num_features: int, dims: int) -> nn.Module:
    """Call the factory and check that it returned a module."""
    layer = norm_layer(num_features, dims)
    if not isinstance(layer, nn.Module):
        raise TypeError(
            f"norm_layer({num_features}, {dims}) must return an nn.Module, got {type(layer).__name__}"
        )
    return layer


def without_affine(layer: nn.Module) -> nn.Module:
    """``layer`` with its affine ``weight`` and ``bias`` removed (re-registered as ``None``), in place.

    For architectures whose source normalizes without a learned scale and shift (a Caffe
    ``BatchNorm`` layer not followed by a ``Scale`` layer). Works on any norm method's layer: every
    layer here treats ``weight is None`` as "no affine", and the ``affine`` flag of torch's layers
    is cleared to match. Other parameters (HBN's hybrid factor) and the statistics stay.
    """
    for name in ("weight", "bias"):
        if name in layer._parameters:
            layer.register_parameter(name, None)
    if hasattr(layer, "affine"):
        layer.affine = False
    return layer


def image_shape(input_shape: tuple[int, ...], model: str) -> tuple[int, int, int]:
    """Validate an image shape (C, H, W) for ``model`` and return it as a tuple of ints."""
    shape = as_shape(input_shape)
    if len(shape) != 3:
        raise ConfigError(f"model={model} takes images (C, H, W), but the dataset's inputs have shape "
                          f"{tuple(input_shape)!r}: use a model for flat features (model=mlp)")
    return shape  # type: ignore[return-value]


def check_num_classes(num_classes: int) -> int:
    """Validate ``num_classes`` (re-exported so models can be built without ``build_model``)."""
    return as_num_classes(num_classes)


def zero_pad_to(min_side: int, height: int, width: int) -> nn.Module:
    """A module that zero-pads (N, C, H, W) maps symmetrically up to at least ``min_side``.

    Returns ``nn.Identity`` when no padding is needed. When the padding is odd the extra row /
    column goes to the bottom / right. Zero is the mean of normalized inputs, so padding with it
    adds a neutral border, as LeNet-5 did when it fed 28x28 digits into a 32x32 field.
    """
    pad_h = max(0, min_side - height)
    pad_w = max(0, min_side - width)
    if pad_h == 0 and pad_w == 0:
        return nn.Identity()
    return nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))


@torch.no_grad()
def probe_shape(module: nn.Module, input_shape: tuple[int, ...]) -> torch.Size:
    """Output shape (without batch axis) of ``module`` on a zero batch of two inputs.

    The probe runs in eval mode so that normalization layers do not update running statistics or
    any other state; every submodule's train/eval flag is restored afterwards.
    """
    flags = [(m, m.training) for m in module.modules()]
    param = next(module.parameters(), None)
    kwargs = {} if param is None else {"dtype": param.dtype, "device": param.device}
    module.eval()
    try:
        out = module(torch.zeros(2, *input_shape, **kwargs))
    finally:
        for m, flag in flags:
            m.training = flag
    return out.shape[1:]


def flat_size(module: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Number of features after flattening ``module``'s output (measured by ``probe_shape``)."""
    return int(probe_shape(module, input_shape).numel())
