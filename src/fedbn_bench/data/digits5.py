"""Digits-5, the feature-shift benchmark of FedBN (§5.1, App. D.1-D.2) and FedRBN (§5).

Five natural domains, in FedBN's code order: MNIST, SVHN, USPS, SynthDigits, MNIST-M.  Read from
FedBN's prepared release (see the FedBN repository's README, "Benchmark (Digits)")::

    <root>/<Domain>/partitions/train_part{0..9}.pkl     (~743 training digits each)
    <root>/<Domain>/test.pkl
    Domain in MNIST, SVHN, USPS, SynthDigits, MNIST_M

(``<root>`` plays the role of FedBN's ``data/`` folder, into which its archive unpacks; the
folders may sit beside torchvision's ``MNIST/raw``, ``SVHN/*.mat`` and ``USPS/*.bz2`` files.)  Each file is a pickled ``(images uint8, labels)`` tuple read with
``np.load(path, allow_pickle=True)`` as FedBN does; images are (N, 28, 28) grey (MNIST), (N, 16, 16)
grey (USPS), or (N, H, W, 3) colour (SVHN, SynthDigits 32x32; MNIST-M 28x28).  Pickles run code
when loaded: only read files you obtained yourself.

Preprocessing follows FedBN's ``fed_digits.py``: resize to 28x28 (bilinear, antialiased, rounded
to uint8 like PIL's resize), grey repeated to 3 channels, then ``(x - 0.5) / 0.5`` so pixels lie in
[-1, 1].  This dataset therefore registers ``normalize=False``: train-split standardization would
replace FedBN's fixed map (set ``normalize: true`` in the options to get it anyway).

``percent``: the fraction of a domain's original training data, as FedBN's ``--percent``: for
``percent >= 0.1`` the first ``int(percent * 10)`` parts are used (0.1 = one part, 0.3 = FedRBN's
setting), below 0.1 the first ``int(N * percent * 10)`` samples of part 0.  ``truncate``: every
domain's training set is then cut, by seeded random sampling, to the size of the smallest one
(FedBN §5.1 "truncate the sample size ... to their smallest number with random sampling";
FedBN App. E.6 reports the untruncated variant, ``truncate: false``).  Test sets are used whole.
Clients per domain are set by the partition (``partition=domains partition.clients_per_domain=10``,
FedRBN's 50 users; FedBN Fig. 4c varies it).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from .base import DatasetBundle, DatasetError, Split
from .cache import cached_arrays, default_cache_root
from .images import resize_uint8
from .registry import make_generator, register_dataset

__all__ = ["DOMAINS", "load_digits5", "read_digits_pkl"]

DOMAINS = ("MNIST", "SVHN", "USPS", "SynthDigits", "MNIST_M")
SIZE = 28
NUM_PARTS = 10


def _hint(root: str) -> str:
    return (f"get FedBN's prepared digits archive (see `python scripts/download_data.py digits5 --root {root}`) "
            f"and unpack its five domain folders into {root}")


def read_digits_pkl(path: str) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (N, 3, 28, 28) images and int64 labels from one FedBN ``(images, labels)`` pickle."""
    try:
        images, labels = np.load(path, allow_pickle=True)
    except (OSError, ValueError, TypeError, EOFError) as exc:
        raise DatasetError(
            f"digits5: could not read {path} ({type(exc).__name__}: {exc}); expected a pickled (images, labels) tuple"
        ) from None
    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    ok_grey = images.ndim == 3
    ok_rgb = images.ndim == 4 and images.shape[3] == 3
    if images.dtype != np.uint8 or not (ok_grey or ok_rgb) or images.shape[0] != labels.shape[0]:
        raise DatasetError(
            f"digits5: {path} holds images {images.dtype} {images.shape} and {labels.shape[0]} labels; "
            "expected uint8 (N, H, W) or (N, H, W, 3) and N labels"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise DatasetError(f"digits5: labels outside 0..9 in {path}")
    x = images[:, None] if ok_grey else images.transpose(0, 3, 1, 2)
    x = resize_uint8(np.ascontiguousarray(x), SIZE)
    if x.shape[1] == 1:
        x = np.repeat(x, 3, axis=1)
    return x, labels


def train_files(base: str, percent: float) -> tuple[list[str], float]:
    """The part files FedBN reads for ``percent`` and the fraction of the last one to keep."""
    if percent >= 0.1:
        parts = int(percent * 10 + 1e-9)
        return [os.path.join(base, "partitions", f"train_part{k}.pkl") for k in range(parts)], 1.0
    return [os.path.join(base, "partitions", "train_part0.pkl")], percent * 10


def _check_options(percent: float, domains: Sequence[str]) -> tuple[float, list[str]]:
    try:
        percent = float(percent)
    except (TypeError, ValueError):
        raise DatasetError(f"digits5: percent must be a number in (0, 1], got {percent!r}") from None
    if not 0.0 < percent <= 1.0:
        raise DatasetError(f"digits5: percent must be in (0, 1], got {percent}")
    domains = [domains] if isinstance(domains, str) else [str(d) for d in domains]
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown or not domains or len(set(domains)) != len(domains):
        raise DatasetError(f"digits5: domains must be distinct names from {', '.join(DOMAINS)}, got {domains}")
    return percent, domains


def read_domain(root: str, name: str, percent: float, cache_root: str) -> tuple[np.ndarray, ...]:
    """``(x_train, y_train, x_test, y_test)`` of one domain for ``percent`` (before truncation).

    The cache covers every part present, so changing ``percent`` reuses it.
    """
    base = os.path.join(root, name)
    files, last_fraction = train_files(base, percent)
    test_path = os.path.join(base, "test.pkl")
    for path in [*files, test_path]:
        if not os.path.isfile(path):
            raise DatasetError(f"digits5: data not found, expected file {path}; " + _hint(root))
    parts = [os.path.join(base, "partitions", f"train_part{k}.pkl") for k in range(NUM_PARTS)]
    sources = [p for p in parts if os.path.isfile(p)] + [test_path]

    def build() -> dict[str, np.ndarray]:
        out = {}
        for k, path in enumerate(sources):
            out[f"x{k}"], out[f"y{k}"] = read_digits_pkl(path)
        return out

    arr = cached_arrays(cache_root, f"digits5-{name}", {"size": SIZE}, sources, build)
    used = [sources.index(f) for f in files]
    x_tr = np.concatenate([arr[f"x{k}"] for k in used])
    y_tr = np.concatenate([arr[f"y{k}"] for k in used])
    keep = int(x_tr.shape[0] * last_fraction)
    last = len(sources) - 1
    return x_tr[:keep], y_tr[:keep], arr[f"x{last}"], arr[f"y{last}"]


@register_dataset("digits5", normalize=False, natural_domains=True)
def load_digits5(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    percent: float = 0.1,
    truncate: bool = True,
    domains: Sequence[str] = DOMAINS,
) -> DatasetBundle:
    """The five digit domains as 3x28x28 images in [-1, 1]; ``Split.domain`` = index in ``domains``.

    ``download`` is ignored: FedBN's prepared archive has no public checksum-verified URL
    (``scripts/download_data.py digits5`` prints where to get it).
    """
    del download
    percent, domains = _check_options(percent, domains)
    root = os.path.expanduser(str(root))
    cache_root = default_cache_root(root)
    xs_tr, ys_tr, xs_te, ys_te = [], [], [], []
    for name in domains:
        x_tr, y_tr, x_te, y_te = read_domain(root, name, percent, cache_root)
        xs_tr.append(x_tr)
        ys_tr.append(y_tr)
        xs_te.append(x_te)
        ys_te.append(y_te)

    if not isinstance(truncate, bool):
        raise DatasetError(f"digits5: dataset.options.truncate must be true or false, got {truncate!r}")
    if truncate:
        smallest = min(len(y) for y in ys_tr)
        for d in range(len(domains)):
            g = make_generator(seed, 31, d)
            keep = torch.randperm(len(ys_tr[d]), generator=g)[:smallest].sort().values.numpy()
            xs_tr[d], ys_tr[d] = xs_tr[d][keep], ys_tr[d][keep]
    if min(len(y) for y in ys_tr) == 0:
        raise DatasetError(f"digits5: percent={percent} leaves a domain without training samples")

    def split(xs: list[np.ndarray], ys: list[np.ndarray]) -> Split:
        x = torch.from_numpy(np.concatenate(xs)).to(torch.float32).div_(127.5).sub_(1.0)  # (u8/255 - 0.5) / 0.5
        d = torch.cat([torch.full((len(y),), i, dtype=torch.int64) for i, y in enumerate(ys)])
        black = torch.full((x.shape[1],), -1.0)  # FedBN's map sends a black pixel to -1
        return Split(x=x, y=torch.from_numpy(np.concatenate(ys)), domain=d, pad_value=black)

    return DatasetBundle(
        name="digits5", train=split(xs_tr, ys_tr), test=split(xs_te, ys_te), num_classes=10,
        domain_names=list(domains), is_image=True,
        norm_mean=torch.full((3,), 0.5), norm_std=torch.full((3,), 0.5),  # pixels = x * 0.5 + 0.5
    )

