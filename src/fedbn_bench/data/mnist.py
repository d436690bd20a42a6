"""MNIST and Fashion-MNIST through torchvision (raw IDX files, 1x28x28)."""

from __future__ import annotations

import gzip
import os
import shutil

import torch

from . import _files
from .base import DatasetBundle, DatasetError, Split
from .registry import register_dataset

_IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


IDX_FOLDERS = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}
"""torchvision's folder of each IDX data set under the data root."""


def install_idx_files(name: str, source: str, root: str) -> list[str]:
    """Copy the four IDX files of ``name`` from a local folder ``source`` (plain or ``.gz``, e.g. Debian's
    ``dataset-fashion-mnist`` in ``/usr/share/datasets/fashion-mnist``) into torchvision's layout
    ``<root>/<Folder>/raw/``, decompressing; the paths written. A missing file is a ``DatasetError``
    naming it, before anything is written."""
    if name not in IDX_FOLDERS:
        raise DatasetError(f"{name}: --from takes a folder of IDX files only for {', '.join(IDX_FOLDERS)}")
    found = {}
    for stem in _IDX_FILES:
        candidates = [os.path.join(source, stem + ext) for ext in ("", ".gz")]
        found[stem] = next((c for c in candidates if os.path.isfile(c)), None)
    missing = [stem for stem, path in found.items() if path is None]
    if missing:
        raise DatasetError(f"{name}: {source} lacks {', '.join(m + '[.gz]' for m in missing)}")
    raw = os.path.join(os.path.expanduser(str(root)), IDX_FOLDERS[name], "raw")
    os.makedirs(raw, exist_ok=True)
    written = []
    for stem, path in found.items():
        target = os.path.join(raw, stem)
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        written.append(target)
    return written


def _load_mnist_like(name: str, tv_class: str, root: str, download: bool) -> DatasetBundle:
    root = os.path.expanduser(str(root))
    raw = os.path.join(root, tv_class, "raw")
    expected = [os.path.join(raw, f) for f in _IDX_FILES]

    def fetch() -> None:
        cls = getattr(_files.import_torchvision_datasets(), tv_class)
        cls(root, train=True, download=True)  # fetches all four files

    _files.ensure_files(name, root, expected, download, fetch)
    cls = getattr(_files.import_torchvision_datasets(), tv_class)
    splits = []
    for train in (True, False):
        try:
            ds = cls(root, train=train, download=False)
        except Exception as exc:
            raise DatasetError(
                f"{name}: could not read the IDX files in {raw} ({type(exc).__name__}: {exc}); "
                + _files.fetch_hint(name, root)
            ) from exc
        # ds.data: uint8 (N, 28, 28); ds.targets: int64 (N,)
        x = torch.as_tensor(ds.data).to(torch.float32).div_(255.0).unsqueeze(1)
        y = torch.as_tensor(ds.targets).to(torch.int64)
        splits.append(Split(x=x, y=y))
    return DatasetBundle(name=name, train=splits[0], test=splits[1], num_classes=10, is_image=True)


@register_dataset("mnist")
def load_mnist(*, root: str = "data", download: bool = False, seed: int = 0) -> DatasetBundle:
    """MNIST from ``<root>/MNIST/raw/*-ubyte`` (torchvision layout)."""
    del seed
    return _load_mnist_like("mnist", "MNIST", root, download)


@register_dataset("fashion_mnist")
def load_fashion_mnist(*, root: str = "data", download: bool = False, seed: int = 0) -> DatasetBundle:
    """Fashion-MNIST from ``<root>/FashionMNIST/raw/*-ubyte`` (torchvision layout)."""
    del seed
    return _load_mnist_like("fashion_mnist", "FashionMNIST", root, download)
