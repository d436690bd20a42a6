"""Core data containers shared by every loader.

A dataset is held entirely as tensors: one :class:`Split` per train/test part,
grouped in a :class:`DatasetBundle`.  Nothing here does per-sample Python work;
moving a split to an accelerator is a single ``.to(device)`` per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedbn_bench.errors import UserError

__all__ = ["DatasetError", "Split", "DatasetBundle"]


class DatasetError(UserError):
    """Raised when a dataset cannot be loaded; the message says what to do about it."""


def require_positive_integers(dataset: str, **options: object) -> None:
    """One ``DatasetError`` naming the first of ``options`` that is not a positive integer."""
    for name, value in options.items():
        if int(value) != value or int(value) < 1:
            raise DatasetError(f"{dataset}: {name} must be a positive integer, got {value!r}")


@dataclass
class Split:
    """One part (train or test) of a dataset.

    ``x`` is float32 with shape ``(N, C, H, W)`` for images or ``(N, D)`` for
    vectors, ``y`` holds int64 class labels of shape ``(N,)`` and ``domain``
    (optional) the int64 domain id of every sample for feature-shift data.

    The training split's random crops (``dataset.augment``) pad ``crop_padding``
    pixels per side with ``pad_value``: a black pixel per channel, shape ``(C,)``,
    in the units of ``x`` (``None``: 0, i.e. raw pixels in [0, 1]), as
    torchvision's ``RandomCrop`` does before ``Normalize``.
    """

    x: torch.Tensor
    y: torch.Tensor
    domain: torch.Tensor | None = None
    pad_value: torch.Tensor | None = None
    crop_padding: int = 4

    def __post_init__(self) -> None:
        n = self.x.shape[0]
        if self.y.ndim != 1 or self.y.shape[0] != n:
            raise ValueError(f"Split: y must have shape ({n},), got {tuple(self.y.shape)}")
        if self.domain is not None and (self.domain.ndim != 1 or self.domain.shape[0] != n):
            raise ValueError(
                f"Split: domain must have shape ({n},), got {tuple(self.domain.shape)}"
            )

    def to(self, device: torch.device | str) -> "Split":
        """Return a copy of this split whose tensors live on ``device``."""
        return Split(
            x=self.x.to(device),
            y=self.y.to(device),
            domain=None if self.domain is None else self.domain.to(device),
            pad_value=None if self.pad_value is None else self.pad_value.to(device),
            crop_padding=self.crop_padding,
        )

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def take(self, index: torch.Tensor) -> "Split":
        """The samples at ``index`` (an index tensor), as a split of their own."""
        return Split(
            x=self.x[index],
            y=self.y[index],
            domain=None if self.domain is None else self.domain[index],
            pad_value=self.pad_value,
            crop_padding=self.crop_padding,
        )


@dataclass
class DatasetBundle:
    """A named dataset: train and test splits plus metadata.

    ``norm_mean`` / ``norm_std`` (extra, optional) record the per-channel (or
    per-feature) statistics that :func:`fedbn_bench.data.load_dataset` used to
    normalize ``x``; ``x_pixels = x * std + mean`` (broadcast over channels)
    recovers the [0, 1] pixel scale, e.g. for attacks with a pixel-space
    budget.  They are ``None`` when the data was not normalized.
    """

    name: str
    train: Split
    test: Split
    num_classes: int
    domain_names: list[str] | None = None
    is_image: bool = True
    norm_mean: torch.Tensor | None = field(default=None, repr=False)
    norm_std: torch.Tensor | None = field(default=None, repr=False)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.train.x.shape[1:])

    @property
    def num_domains(self) -> int:
        return 0 if not self.domain_names else len(self.domain_names)

    def to(self, device: torch.device | str) -> "DatasetBundle":
        """Return a copy of the bundle with both splits on ``device``."""
        return DatasetBundle(
            name=self.name,
            train=self.train.to(device),
            test=self.test.to(device),
            num_classes=self.num_classes,
            domain_names=None if self.domain_names is None else list(self.domain_names),
            is_image=self.is_image,
            norm_mean=self.norm_mean,
            norm_std=self.norm_std,
        )
