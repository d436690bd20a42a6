"""Packing rules: how a layer runs ``n`` clients packed into the channel blocks of one network.

``engine=packed`` (``engine/backends/packed.py``) trains a round's clients as one network in
which client ``i`` owns channel block ``i`` of every layer. Each layer type with parameters or
buffers needs a *packing rule*: a ``PackedLayer`` subclass registered here for that exact type.
The rules of torch's own layers live in this module; a normalization method registers the rule
of its own layers in its own module (``@register_packing_rule(MyNorm2d)``), so the engine never
names a norm. Parameter-free layers that act on each channel separately are declared with
``register_per_channel``.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

PACKING_RULES: dict[type, type["PackedLayer"]] = {}
"""Exact module type -> its packed layer (subclasses with their own forward need their own rule)."""

PER_CHANNEL: set[type] = {
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Identity,
    nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d, nn.Dropout, nn.Dropout2d, nn.Flatten,
}
"""Parameter-free layers that act on each channel (or element) separately."""


def register_packing_rule(*module_types: type) -> Callable[[type["PackedLayer"]], type["PackedLayer"]]:
    """Class decorator: ``rule`` packs modules of exactly these types."""

    def decorate(rule: type["PackedLayer"]) -> type["PackedLayer"]:
        for kind in module_types:
            PACKING_RULES[kind] = rule
        return rule

    return decorate


def register_per_channel(*module_types: type) -> None:
    """Declare parameter-free module types that act on each channel separately."""
    PER_CHANNEL.update(module_types)


class PackedLayer(nn.Module):
    """A layer of the packed network: runs ``source``'s layer for ``n`` packed clients.

    It has the same parameter and buffer names as ``source`` (placeholders, replaced by the
    stacked tensors in ``functional_call``), and reads ``source``'s settings at call time, so
    switches a norm method sets on the model (FixBN's stage II) reach it.

    Its forward accepts each tensor stacked (``(n, *shape)``) or in the *packed form* ``pack``
    gives, a view of the stack with the same elements in the same order (``(n * C,)`` for the
    per-channel tensors named in ``flat_names``), which ``engine=packed`` makes once per round
    instead of once per step (a small step is bound by the host issuing operations).
    """

    flat_names: tuple[str, ...] = ()
    """The per-channel tensors ``(n, C)`` that the forward reads flat (``flat``)."""

    def __init__(self, source: nn.Module) -> None:
        super().__init__()
        self.__dict__["source"] = source  # a reference, not a submodule
        for name, p in source._parameters.items():  # None entries too (e.g. affine=False)
            self.register_parameter(name, None if p is None else nn.Parameter(p.detach().clone(), p.requires_grad))
        for name, b in source._buffers.items():
            persistent = name not in source._non_persistent_buffers_set
            self.register_buffer(name, None if b is None else b.detach().clone(), persistent=persistent)

    def flat(self, name: str) -> Optional[torch.Tensor]:
        """The stacked per-channel tensor ``name`` ``(n, C)`` viewed as ``(n * C,)`` (a view, so
        in-place statistics updates land in the stack), or ``None`` when the layer has none
        (absent parameters may also be plain ``None`` attributes)."""
        t = getattr(self, name, None)
        return t if t is None or t.dim() == 1 else t.view(-1)

    def pack(self, name: str, stacked: torch.Tensor) -> torch.Tensor:
        """Tensor ``name``'s packed form: a view of ``stacked`` that the forward reads without a
        layout operation (``.view(stacked.shape)`` turns it, or its gradient, back)."""
        return stacked.view(-1) if name in self.flat_names else stacked


@register_packing_rule(nn.Conv2d)
class PackedConv2d(PackedLayer):
    """The clients' filters as the ``n * groups`` groups of one convolution; packed form of the
    weight ``(n * C_out, C_in / groups, k, k)``."""

    flat_names = ("bias",)

    def pack(self, name: str, stacked: torch.Tensor) -> torch.Tensor:
        return stacked.flatten(0, 1) if name == "weight" else super().pack(name, stacked)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, w = self.source, self.weight
        w = w if w.dim() == 4 else w.flatten(0, 1)
        return F.conv2d(x, w, self.flat("bias"), s.stride, s.padding, s.dilation,
                        s.groups * (w.shape[0] // s.out_channels))


@register_packing_rule(nn.Linear)
class PackedLinear(PackedLayer):
    """One batched product over the client axis; packed form of the bias ``(n, 1, out)``."""

    def pack(self, name: str, stacked: torch.Tensor) -> torch.Tensor:
        return stacked.unsqueeze(1) if name == "bias" else stacked

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.weight, self.bias
        n, out_features, in_features = w.shape
        lead = x.shape[:-1]
        h = self.prepare(x.reshape(-1, n, in_features).transpose(0, 1))
        if b is None:
            y = torch.bmm(h, w.transpose(1, 2))
        else:
            y = torch.baddbmm(b if b.dim() == 3 else b.unsqueeze(1), h, w.transpose(1, 2))
        return y.transpose(0, 1).reshape(*lead, n * out_features)

    def prepare(self, h: torch.Tensor) -> torch.Tensor:
        """The per-client input ``(n, rows, in_features)`` of the linear map."""
        return h


@register_packing_rule(nn.BatchNorm1d, nn.BatchNorm2d)
class PackedBatchNorm(PackedLayer):
    """``nn.BatchNorm1d/2d`` over ``n * C`` channels, as ``_BatchNorm.forward``: a channel's batch
    and running statistics come from its own client's batch only."""

    flat_names = ("weight", "bias", "running_mean", "running_var")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        weight, bias, mean, var = (self.flat(k) for k in ("weight", "bias", "running_mean", "running_var"))
        if self.training and s.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        batch_stats = self.training or mean is None
        keep = not self.training or s.track_running_stats
        # F.batch_norm's own kernel, without the empty reserve tensor its wrapper allocates per call
        return torch.native_batch_norm(x, weight, bias, mean if keep else None, var if keep else None, batch_stats,
                                       s.momentum, s.eps)[0]


@register_packing_rule(nn.GroupNorm)
class PackedGroupNorm(PackedLayer):
    """``GroupNorm(g, C)`` as ``GroupNorm(n * g, n * C)``."""

    flat_names = ("weight", "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        n = x.shape[1] // s.num_channels
        return F.group_norm(x, s.num_groups * n, self.flat("weight"), self.flat("bias"), s.eps)
