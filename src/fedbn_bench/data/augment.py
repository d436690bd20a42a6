"""Batched, device-side data augmentation."""

from __future__ import annotations

import torch

__all__ = ["random_crop_flip"]


def random_crop_flip(
    x: torch.Tensor,
    generator: torch.Generator,
    padding: int = 4,
    flip: bool = True,
    fill: torch.Tensor | None = None,
) -> torch.Tensor:
    """Random crop of a padded image plus random horizontal flip, per sample.

    ``x`` is a batch (B, C, H, W) on any device.  Each sample is padded by ``padding`` pixels on
    every side, filled per channel with ``fill`` (shape (C,), in the units of ``x``; ``None``
    means 0), cropped back to H x W at an offset drawn uniformly from ``{0, ..., 2 * padding}`` in
    each direction, and, if ``flip``, mirrored left-right with probability 1/2.  All randomness
    comes from ``generator`` (which must live on ``x.device``), drawn in the order row offsets,
    column offsets, flips; the work is two ``gather`` calls, with no Python loop over samples.

    torchvision's ``RandomCrop(padding=p)`` before ``Normalize`` pads with black; on standardized
    data that is ``fill = (0 - mean) / std`` per channel (``Split.pad_value`` carries it).
    """
    if x.ndim != 4:
        raise ValueError(f"random_crop_flip expects a (B, C, H, W) batch, got shape {tuple(x.shape)}")
    padding = int(padding)
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    b, c, h, w = x.shape
    if fill is not None and fill.numel() != c:
        raise ValueError(f"fill must hold one value per channel ({c}), got shape {tuple(fill.shape)}")
    dev = x.device
    if padding > 0:
        xp = x.new_zeros(b, c, h + 2 * padding, w + 2 * padding)
        if fill is not None:
            xp.copy_(fill.to(x).view(1, c, 1, 1).expand_as(xp))
        xp[:, :, padding : padding + h, padding : padding + w] = x
        dy = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=dev)
        dx = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=dev)
    else:
        xp = x
        dy = torch.zeros(b, dtype=torch.long, device=dev)
        dx = torch.zeros(b, dtype=torch.long, device=dev)
    rows = dy[:, None] + torch.arange(h, device=dev)  # (B, H) source row of each output row
    cols = dx[:, None] + torch.arange(w, device=dev)  # (B, W) source column of each output column
    if flip:
        do_flip = torch.rand(b, generator=generator, device=dev) < 0.5
        cols = torch.where(do_flip[:, None], cols.flip(1), cols)
    wp = xp.shape[3]
    out = torch.gather(xp, 2, rows.view(b, 1, h, 1).expand(b, c, h, wp))
    return torch.gather(out, 3, cols.view(b, 1, 1, w).expand(b, c, h, w))
