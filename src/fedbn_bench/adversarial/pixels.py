"""The [0, 1] pixel space in which FedRBN's L∞ threat model is stated (Hong et al., §5).

Datasets are stored normalized (``x = (pixel - mean) / std``); attacks bound the perturbation
and clip to the image box in pixels, and the model sees the normalized perturbed pixels.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True, eq=False)
class PixelSpace:
    """Maps the model's (normalized) inputs to [0, 1] pixels and back: pixels = x * std + mean."""

    mean: torch.Tensor
    std: torch.Tensor
    _converted: dict = field(default_factory=dict, init=False, repr=False)
    """``mean``/``std`` already moved to an input's (device, dtype): an attack step then copies
    nothing from the host (on a GPU each copy would synchronise)."""

    def to_pixels(self, x: torch.Tensor) -> torch.Tensor:
        """Pixels of the model input ``x`` (``(N, C, ...)``, statistics broadcast over dim 1)."""
        return x * self._along(self.std, x) + self._along(self.mean, x)

    def from_pixels(self, p: torch.Tensor) -> torch.Tensor:
        """The model input of the pixels ``p``: ``(p - mean) / std``."""
        return (p - self._along(self.mean, p)) / self._along(self.std, p)

    def same_as(self, other: "PixelSpace") -> bool:
        """Whether ``other`` maps between model inputs and pixels exactly as this space does."""
        return torch.equal(self.mean, other.mean) and torch.equal(self.std, other.std)

    def _along(self, stat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        key = (id(stat), x.device, x.dtype, x.dim())
        if key not in self._converted:
            moved = stat.to(x)
            self._converted[key] = moved if moved.dim() == 0 else moved.reshape((1, -1) + (1,) * (x.dim() - 2))
        return self._converted[key]

    @classmethod
    def of(cls, mean: torch.Tensor | None, std: torch.Tensor | None, channels: int) -> "PixelSpace":
        """The space of a dataset normalized by ``mean``/``std`` (shape ``()`` or ``(channels,)``);
        ``None`` stands for the identity (mean 0, std 1)."""
        mean_t = torch.zeros(channels, device="cpu") if mean is None else torch.as_tensor(mean, dtype=torch.float32, device="cpu")
        std_t = torch.ones(channels, device="cpu") if std is None else torch.as_tensor(std, dtype=torch.float32, device="cpu")
        for name, stat in (("mean", mean_t), ("std", std_t)):
            if stat.shape not in (torch.Size([]), torch.Size([channels])):
                raise ValueError(f"{name} must have shape () or ({channels},), got {tuple(stat.shape)}")
        if not bool((std_t > 0).all()):
            raise ValueError(f"std must be positive, got {std_t.tolist()}")
        return cls(mean_t, std_t)
