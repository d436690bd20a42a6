"""Image files → uint8 arrays, and cached image collections → ``Split`` objects (eager or lazy)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
import numpy as np
import torch

from .base import DatasetError, Split
from .cache import default_cache_root, image_cache
from .lazy import LazyImages

__all__ = ["ImageCollection", "decode_image", "list_images", "load_collection", "resize_uint8"]

MAX_IMAGE_SIZE = 4096
"""Largest side an image data set is resized to (beyond it an image cannot be decoded or stored)."""
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".gif", ".tif", ".tiff", ".webp")


def decode_image(path: str, size: int, mode: str = "stretch") -> np.ndarray:
    """Read ``path`` as RGB uint8 (3, size, size).

    ``stretch``: resize to size x size ignoring the aspect ratio, bilinear (PIL), as
    ``transforms.Resize([256, 256])`` in FedBN's Office/DomainNet code (FedBN App. D.3).
    ``center_crop``: scale the shorter side to ``size`` (bilinear), then crop the centre square.
    Grey or palette images are converted to RGB (grey replicated to three channels).
    """
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if mode == "center_crop":
                w, h = im.size
                s = size / min(w, h)
                nw, nh = max(size, round(w * s)), max(size, round(h * s))
                if (nw, nh) != (w, h):
                    im = im.resize((nw, nh), Image.BILINEAR)
                left, top = (nw - size) // 2, (nh - size) // 2
                im = im.crop((left, top, left + size, top + size))
            elif im.size != (size, size):
                im = im.resize((size, size), Image.BILINEAR)
            arr = np.asarray(im, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"could not read image {path} ({type(exc).__name__}: {exc}); replace or delete the file") from None
    return np.ascontiguousarray(arr.transpose(2, 0, 1))


def resize_uint8(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear, antialiased resize of uint8 (N, C, H, W) to (N, C, size, size), rounded back to uint8.

    Used for the small digit images; matches PIL's bilinear resize to within rounding.
    """
    if images.shape[2:] == (size, size):
        return images
    out = np.empty((images.shape[0], images.shape[1], size, size), dtype=np.uint8)
    for start in range(0, images.shape[0], 8192):
        x = torch.from_numpy(np.ascontiguousarray(images[start : start + 8192])).to(torch.float32)
        y = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        out[start : start + 8192] = y.round_().clamp_(0, 255).to(torch.uint8).numpy()
    return out


@dataclass
class ImageCollection:
    """The image files of a dataset with their labels, domains and train/test membership."""

    files: list[str]
    labels: np.ndarray  # int64 (M,)
    train: np.ndarray  # bool (M,)
    domains: np.ndarray | None = None  # int64 (M,)

    def check(self, name: str) -> None:
        m = len(self.files)
        for arr, what in ((self.labels, "labels"), (self.train, "train"), (self.domains, "domains")):
            if arr is not None and arr.shape != (m,):
                raise DatasetError(f"{name}: internal error, {what} has shape {arr.shape} for {m} files")


def load_collection(
    name: str,
    root: str,
    coll: ImageCollection,
    size: int,
    mode: str,
    lazy: bool,
    cache_dir: str | None,
) -> tuple[Split, Split]:
    """Decode ``coll`` once into the image cache and return ``(train, test)`` splits.

    ``lazy`` returns :class:`LazyImages` views on the memory-mapped cache; otherwise the rows are
    read into float32 tensors in [0, 1].
    """
    if not isinstance(lazy, bool):
        raise DatasetError(f"{name}: dataset.options.lazy must be true or false, got {lazy!r}")
    coll.check(name)
    if not coll.files:
        raise DatasetError(f"{name}: no image files found under {root!r}")
    images, moments = image_cache(
        default_cache_root(root, cache_dir), name, {"size": size, "mode": mode}, coll.files,
        partial(decode_image, size=size, mode=mode), (3, size, size),
    )
    rows_tr, rows_te = np.flatnonzero(coll.train), np.flatnonzero(~coll.train)
    full = LazyImages(images, moments)
    splits = []
    for rows in (rows_tr, rows_te):
        view = full.subset(rows)
        x = view if lazy else view.materialize()
        y = torch.from_numpy(coll.labels[rows].astype(np.int64))
        d = None if coll.domains is None else torch.from_numpy(coll.domains[rows].astype(np.int64))
        splits.append(Split(x=x, y=y, domain=d))
    return splits[0], splits[1]


def list_images(folder: str) -> list[str]:
    """Image files directly inside ``folder``, sorted by name."""
    with os.scandir(folder) as it:
        return sorted(e.path for e in it if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS))

