"""Multi-site image classification read through per-site split files (FedBN App. D.3).

Shared by ``office_caltech10`` and ``domainnet``.  For every site and split, ``<root>/<folder>/``
holds one split file, looked up in this order:

``<site>_<split>.pkl``
    FedBN's release: a pickled ``(paths, class_names)`` pair read with
    ``np.load(path, allow_pickle=True)`` (FedBN's ``OfficeDataset`` / ``DomainNetDataset``).
``<site>_<split>.txt``
    one ``relative/path/to/image.jpg [label]`` per line (DomainNet's official lists); the class is
    the name of the image's parent folder and any trailing label is ignored.

Image paths are taken relative to ``<root>`` (FedBN's ``data/`` folder, e.g.
``office_caltech_10/amazon/back_pack/frame_0001.jpg``) and, failing that, relative to
``<root>/<folder>`` (DomainNet's lists: ``clipart/bird/clipart_001_000001.jpg``).  Only the dataset's
classes are kept (label = index in the class tuple).  Images are resized to ``image_size`` squared
(FedBN: 256x256, aspect ratio not kept) and cached once as uint8; only the images in use (the
truncated train sets and the test sets) are decoded, so the cache depends on ``percent``.

Training sets are truncated as in FedBN's ``fed_office.py`` / ``fed_domainnet.py``: every site keeps
``int(percent * n_min)`` entries of its train split file, ``n_min`` being the smallest site's train
size (FedBN App. D.3: 62 samples per site for Office-Caltech10 with ``percent=0.5``, 105 for
DomainNet with ``percent=0.05``).  Which entries: ``selection="random"`` (default) draws them with
``seed``; ``selection="first"`` keeps the first ones in file order, as FedBN's code does (the paper
does not say; "first" only makes sense for shuffled lists such as FedBN's pickles, DomainNet's
official txt lists are sorted by class).  Test splits are used whole.  FedBN's code also holds
out the last ``0.4 n_min`` (Office) / ``0.05 n_min`` (DomainNet) train entries for model selection;
that validation split is not built here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .base import DatasetBundle, DatasetError
from .images import MAX_IMAGE_SIZE, ImageCollection, load_collection
from .registry import make_generator

__all__ = ["SELECTIONS", "SiteDataset", "load_site_dataset", "read_split_file"]

SELECTIONS = ("random", "first")


@dataclass(frozen=True)
class SiteDataset:
    name: str  # registry name
    folder: str  # folder under root holding the split files
    sites: tuple[str, ...]
    classes: tuple[str, ...]
    hint: str  # how to obtain the data


def _resolve(root: str, base: str, rel: str) -> str:
    rel = str(rel).replace("\\", "/").lstrip("/")
    for candidate in (os.path.join(root, rel), os.path.join(base, rel)):
        if os.path.isfile(candidate):
            return candidate
    return os.path.join(root, rel)  # reported as missing by the cache's file check


def read_split_file(ds: SiteDataset, root: str, site: str, split: str) -> tuple[list[str], list[int]]:
    """Absolute image paths and labels of one site's split, only the dataset's classes."""
    base = os.path.join(root, ds.folder)
    pkl, txt = (os.path.join(base, f"{site}_{split}.{ext}") for ext in ("pkl", "txt"))
    index = {c: i for i, c in enumerate(ds.classes)}
    if os.path.isfile(pkl):
        try:
            paths, names = np.load(pkl, allow_pickle=True)
            paths, names = [str(p) for p in paths], [str(n) for n in names]
        except (OSError, ValueError, TypeError, EOFError) as exc:
            raise DatasetError(
                f"{ds.name}: could not read {pkl} ({type(exc).__name__}: {exc}); expected a pickled (paths, class_names) pair"
            ) from None
        if len(paths) != len(names):
            raise DatasetError(f"{ds.name}: {pkl} has {len(paths)} paths but {len(names)} class names")
    elif os.path.isfile(txt):
        paths = []
        with open(txt) as f:
            for line in f:
                if line.strip():
                    paths.append(line.split()[0])
        names = [os.path.basename(os.path.dirname(p.replace("\\", "/"))) for p in paths]
    else:
        raise DatasetError(f"{ds.name}: data not found under dataset.root, expected split file {pkl} (or {txt}); "
                           f"{ds.hint}")
    keep = [k for k, n in enumerate(names) if n in index]
    if not keep:
        raise DatasetError(
            f"{ds.name}: {pkl if os.path.isfile(pkl) else txt} lists no image of the classes {', '.join(ds.classes)}"
        )
    return [_resolve(root, base, paths[k]) for k in keep], [index[names[k]] for k in keep]


def _check_sites(ds: SiteDataset, domains: Sequence[str]) -> list[str]:
    domains = [domains] if isinstance(domains, str) else [str(d) for d in domains]
    if not domains or len(set(domains)) != len(domains) or any(d not in ds.sites for d in domains):
        raise DatasetError(f"{ds.name}: domains must be distinct names from {', '.join(ds.sites)}, got {domains}")
    return domains


def load_site_dataset(
    ds: SiteDataset, root: str, seed: int, domains: Sequence[str], percent: float, selection: str,
    image_size: int, lazy: bool, cache_dir: str | None,
) -> DatasetBundle:
    """Read the split files of ``domains``, truncate the train sets, decode (cached) and split."""
    sites = _check_sites(ds, domains)
    if selection not in SELECTIONS:
        raise DatasetError(f"{ds.name}: selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    try:
        percent, image_size = float(percent), int(image_size)
    except (TypeError, ValueError):
        raise DatasetError(f"{ds.name}: percent must be a number and image_size an integer") from None
    if not 0.0 < percent <= 1.0:
        raise DatasetError(f"{ds.name}: percent must be in (0, 1], got {percent}")
    if not 1 <= image_size <= MAX_IMAGE_SIZE:
        raise DatasetError(f"{ds.name}: image_size must be an integer in [1, {MAX_IMAGE_SIZE}], got {image_size}")
    root = os.path.expanduser(str(root))
    lists = {(s, sp): read_split_file(ds, root, s, sp) for s in sites for sp in ("train", "test")}
    n_train = max(1, int(percent * min(len(lists[s, "train"][0]) for s in sites)))

    files: list[str] = []
    labels: list[int] = []
    domain: list[int] = []
    train: list[bool] = []
    for d, s in enumerate(sites):
        for sp in ("train", "test"):
            paths, ys = lists[s, sp]
            if sp == "train":
                keep = np.arange(min(n_train, len(paths)))
                if selection == "random":
                    keep = torch.randperm(len(paths), generator=make_generator(seed, 51, d))[:n_train].sort().values.numpy()
                paths, ys = [paths[k] for k in keep], [ys[k] for k in keep]
            files += paths
            labels += ys
            domain += [d] * len(paths)
            train += [sp == "train"] * len(paths)
    coll = ImageCollection(
        files=files, labels=np.asarray(labels, dtype=np.int64), train=np.asarray(train, dtype=bool),
        domains=np.asarray(domain, dtype=np.int64),
    )
    tr, te = load_collection(ds.name, root, coll, image_size, "stretch", lazy, cache_dir)
    return DatasetBundle(
        name=ds.name, train=tr, test=te, num_classes=len(ds.classes), domain_names=sites, is_image=True,
    )
