"""ABIDE I connectomes (FedBN §5.2, App. D.4): autism vs. control from four sites.

FedBN uses the four largest sites of the ABIDE I Preprocessed release (CPAC pipeline, Harvard-Oxford
atlas): NYU, UM (UM_1), USM, UCLA (UCLA_1), each a client.  Every sample is a 5995-dimensional
connectome vector: the upper triangle (diagonal excluded) of the 110 x 110 correlation matrix of
the ROI time series inside one sliding window (length 32, stride 1), so a subject gives
``frames - 31`` samples (FedBN Table 10).  Layout, one file per site::

    <root>/ABIDE/<SITE>.npz     SITE in NYU, UM, USM, UCLA
        x        float (N, 5995)   connectome vectors
        y        int (N,)          1 = autism spectrum disorder, 0 = healthy control
        subject  int (N,)          optional: subject id of each window
        train    bool (N,)         optional: a fixed train/test assignment

:func:`connectome_windows` computes ``x`` from one subject's (T, 110) ROI series, and
``scripts/download_data.py abide`` prints how to build the files from the public release.  Without
a ``train`` array, each site is split at random (``seed``) with ``test_fraction`` of its subjects
(of its samples when no ``subject`` array is given) held out; splitting by subject keeps the
overlapping windows of one person on one side.  FedBN does not state its split.  Vectors are
standardized per feature with train statistics (the default ``normalize``); ``Split.domain`` is the
site index.  Use ``model=mlp`` (FedBN: three fully connected layers, hidden size 16, BN after the
first two: ``+model.options.hidden_sizes=[16,16]``).
"""

from __future__ import annotations

import math
import os
from typing import Sequence

import numpy as np
import torch

from .base import DatasetBundle, DatasetError, Split
from .registry import make_generator, register_dataset

__all__ = ["FEATURES", "SITES", "build_site_files", "connectome_windows", "load_abide"]

FOLDER = "ABIDE"
SITES = ("NYU", "UM", "USM", "UCLA")
ROIS = 110
FEATURES = ROIS * (ROIS - 1) // 2  # 5995
WINDOW = 32


def connectome_windows(series: np.ndarray, window: int = WINDOW, stride: int = 1) -> np.ndarray:
    """(W, R(R-1)/2) float32: Pearson correlations of ``series`` (T, R) per sliding window.

    Row ``w`` is the strict upper triangle (row-major) of the R x R correlation matrix of frames
    ``w*stride .. w*stride + window - 1`` (FedBN App. D.4); constant ROIs give correlation 0.
    """
    series = np.asarray(series, dtype=np.float64)
    t, r = series.shape
    iu = np.triu_indices(r, k=1)
    out = []
    for start in range(0, t - window + 1, stride):
        seg = series[start : start + window]
        seg = seg - seg.mean(axis=0)
        norm = np.sqrt((seg * seg).sum(axis=0))
        z = np.divide(seg, norm, out=np.zeros_like(seg), where=norm > 0)
        out.append((z.T @ z)[iu])
    return np.asarray(out, dtype=np.float32).reshape(-1, len(iu[0]))


def _read_site(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError) as exc:
        raise DatasetError(f"abide: could not read {path} ({type(exc).__name__}: {exc}); expected an .npz file") from None
    x, y = arrays.get("x"), arrays.get("y")
    if x is None or y is None or x.ndim != 2 or x.shape[1] != FEATURES or y.shape != (x.shape[0],):
        raise DatasetError(
            f"abide: {path} must hold x (N, {FEATURES}) and y (N,), got "
            f"x {None if x is None else x.shape} and y {None if y is None else y.shape}"
        )
    if not np.isin(y, (0, 1)).all():
        raise DatasetError(f"abide: labels in {path} must be 0 (control) or 1 (autism)")
    n = x.shape[0]
    if "subject" in arrays and arrays["subject"].shape != (n,):
        raise DatasetError(f"abide: subject in {path} must have shape ({n},), got {arrays['subject'].shape}")
    if "train" in arrays and (arrays["train"].shape != (n,) or arrays["train"].dtype != np.bool_):
        raise DatasetError(f"abide: train in {path} must be a bool array of shape ({n},)")
    return arrays


def _train_mask(arrays: dict[str, np.ndarray], test_fraction: float, g: torch.Generator) -> np.ndarray:
    if "train" in arrays:
        return arrays["train"]
    groups = arrays["subject"] if "subject" in arrays else np.arange(len(arrays["y"]))
    ids = np.unique(groups)
    n_test = max(1, math.ceil(test_fraction * len(ids)))
    if n_test >= len(ids):
        raise DatasetError(f"abide: test_fraction={test_fraction} leaves no training subject in a site of {len(ids)}")
    test_ids = ids[torch.randperm(len(ids), generator=g)[:n_test].numpy()]
    return ~np.isin(groups, test_ids)


@register_dataset("abide", natural_domains=True)
def load_abide(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    domains: Sequence[str] = SITES,
    test_fraction: float = 0.2,
) -> DatasetBundle:
    """The four sites' connectome vectors (N, 5995), binary labels; ``download`` is not available."""
    del download
    domains = [domains] if isinstance(domains, str) else [str(d) for d in domains]
    if not domains or len(set(domains)) != len(domains):
        raise DatasetError(f"abide: domains must be distinct site names, got {domains}")
    try:
        test_fraction = float(test_fraction)
    except (TypeError, ValueError):
        raise DatasetError(f"abide: test_fraction must be a number in (0, 1), got {test_fraction!r}") from None
    if not 0.0 < test_fraction < 1.0:
        raise DatasetError(f"abide: test_fraction must be in (0, 1), got {test_fraction}")
    root = os.path.expanduser(str(root))
    parts: dict[str, list] = {"train": [], "test": []}
    for d, site in enumerate(domains):
        path = os.path.join(root, FOLDER, f"{site}.npz")
        if not os.path.isfile(path):
            raise DatasetError(
                f"abide: data not found for site {site!r} of dataset.options.domains, expected file {path} under "
                "dataset.root; build it from ABIDE I Preprocessed "
                f"(`python scripts/download_data.py abide --root {root}` prints the steps)"
            )
        arrays = _read_site(path)
        train = _train_mask(arrays, test_fraction, make_generator(seed, 41, d))
        for name, mask in (("train", train), ("test", ~train)):
            if not mask.any():
                raise DatasetError(f"abide: the {name} split of site {site} is empty ({path})")
            parts[name].append((arrays["x"][mask], arrays["y"][mask], d))

    def split(items: list) -> Split:
        return Split(
            x=torch.from_numpy(np.concatenate([i[0] for i in items]).astype(np.float32)),
            y=torch.from_numpy(np.concatenate([i[1] for i in items]).astype(np.int64)),
            domain=torch.cat([torch.full((len(i[1]),), i[2], dtype=torch.int64) for i in items]),
        )

    return DatasetBundle(
        name="abide", train=split(parts["train"]), test=split(parts["test"]), num_classes=2,
        domain_names=domains, is_image=False,
    )


#: ABIDE I Preprocessed site ids -> the site file names used here (FedBN Table 10: NYU, UM1, USM, UCLA1)
PCP_SITES = {"NYU": "NYU", "UM_1": "UM", "USM": "USM", "UCLA_1": "UCLA"}


def build_site_files(rois_dir: str, phenotype_csv: str, out_dir: str, drop_columns: Sequence[int] = ()) -> dict[str, int]:
    """Write ``<out_dir>/<SITE>.npz`` from ABIDE I Preprocessed ROI series; returns samples per site.

    ``rois_dir`` holds the ``<SITE>_<SUBID>_rois_ho.1D`` files (whitespace-separated frames x ROIs,
    '#' header line) of the release's Harvard-Oxford derivative; ``phenotype_csv`` is its phenotypic
    table (columns ``SUB_ID``, ``SITE_ID``, ``DX_GROUP``: 1 autism, 2 control).  ``drop_columns``
    removes ROI columns (by 0-based index) so that 110 remain.  Subjects without a series file are
    skipped, as in FedBN App. D.4.
    """
    import csv

    rows: dict[str, list] = {s: [] for s in PCP_SITES.values()}
    with open(phenotype_csv, newline="") as f:
        for rec in csv.DictReader(f):
            site = PCP_SITES.get(rec.get("SITE_ID", ""))
            if site is None:
                continue
            sub = int(rec["SUB_ID"])
            path = os.path.join(rois_dir, f"{rec['SITE_ID']}_{sub:07d}_rois_ho.1D")
            if not os.path.isfile(path):
                continue
            series = np.delete(np.loadtxt(path, comments="#", ndmin=2), list(drop_columns), axis=1)
            if series.shape[1] != ROIS:
                raise DatasetError(
                    f"abide: {path} has {series.shape[1]} ROI columns after dropping {list(drop_columns)}; "
                    f"expected {ROIS} (pass the extra columns to drop)"
                )
            x = connectome_windows(series)
            rows[site].append((x, np.full(len(x), 1 if int(rec["DX_GROUP"]) == 1 else 0), np.full(len(x), sub)))
    os.makedirs(out_dir, exist_ok=True)
    counts = {}
    for site, items in rows.items():
        if not items:
            continue
        np.savez(
            os.path.join(out_dir, f"{site}.npz"),
            x=np.concatenate([i[0] for i in items]), y=np.concatenate([i[1] for i in items]),
            subject=np.concatenate([i[2] for i in items]),
        )
        counts[site] = sum(len(i[1]) for i in items)
    return counts
