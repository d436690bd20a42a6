"""UCI / scikit-learn handwritten digits: 1,797 real 8x8 grey images, 10 classes.

Shipped inside scikit-learn, so it works offline; the project's default dataset. The split is
cached under ``<root>/fedbn_cache`` (``cache.py``): importing scikit-learn takes longer than a
15-round run's first rounds, so only the first run of a (seed, test fraction) pays for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import numpy as np
import torch

from .base import DatasetBundle, DatasetError, Split
from .cache import cached_arrays, default_cache_root
from .registry import register_dataset


def digits_file() -> str:
    """The digits data file inside the installed scikit-learn (found without importing it)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("sklearn_digits needs scikit-learn: pip install scikit-learn")
    return os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")


def split_digits(seed: int, test_size: float | int, train_size: int | None = None) -> dict[str, np.ndarray]:
    """``sklearn.datasets.load_digits`` split by ``train_test_split`` (stratified, ``seed``; ``test_size``
    a fraction or a count, ``train_size`` a count or ``None``: the rest): pixels as uint8 0..16, labels,
    and the train and test indices."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    labels = np.asarray(digits.target, dtype=np.int64)
    train_idx, test_idx = train_test_split(
        np.arange(labels.shape[0]), test_size=test_size, train_size=train_size, stratify=labels,
        random_state=seed % 2**32, shuffle=True,
    )
    return {"pixels": np.asarray(digits.images, dtype=np.uint8), "labels": labels,
            "train_idx": np.asarray(train_idx, dtype=np.int64), "test_idx": np.asarray(test_idx, dtype=np.int64)}


@register_dataset("sklearn_digits")
def load_sklearn_digits(
    *, root: str = "data", download: bool = False, seed: int = 0, test_fraction: float = 0.2
) -> DatasetBundle:
    """Stratified train/test split of ``sklearn.datasets.load_digits``.

    Pixels (integers 0..16) are divided by 16, giving (N, 1, 8, 8) in [0, 1].
    The split is determined by ``seed`` and ``test_fraction``; ``download`` is ignored (the data
    ships with scikit-learn) and ``root`` only holds the cache.
    """
    del download
    try:
        test_fraction = float(test_fraction)
    except (TypeError, ValueError):
        raise DatasetError(f"sklearn_digits: test_fraction must be a number in (0, 1), got {test_fraction!r}") from None
    if not 0.0 < test_fraction < 1.0:
        raise DatasetError(f"sklearn_digits: test_fraction must be in (0, 1), got {test_fraction}")
    sources = [digits_file()]  # first: its clear error when scikit-learn is missing
    params = {"seed": int(seed), "test_fraction": test_fraction,
              "scikit-learn": importlib.metadata.version("scikit-learn")}
    arrays = cached_arrays(default_cache_root(root), "sklearn_digits", params, sources,
                           lambda: split_digits(int(seed), test_fraction))
    x = torch.from_numpy(arrays["pixels"].astype(np.float32) / 16.0).unsqueeze(1)  # (N, 1, 8, 8)
    y = torch.from_numpy(arrays["labels"])
    tr, te = torch.from_numpy(arrays["train_idx"]), torch.from_numpy(arrays["test_idx"])
    return DatasetBundle(
        name="sklearn_digits",
        train=Split(x=x[tr].contiguous(), y=y[tr].contiguous()),
        test=Split(x=x[te].contiguous(), y=y[te].contiguous()),
        num_classes=10,
        is_image=True,
    )
