"""uint8 caches under the data root: parsed once, then read back (or memory-mapped) on every run.

Layout: ``<cache_root>/<dataset>-<key>/`` where ``cache_root`` defaults to ``<root>/fedbn_cache``
and ``key`` is a hash of the cache format version, the loader's decoding parameters (e.g. the
image size) and the name, size and modification time of every source file.  Replacing, adding or
removing a source file therefore yields a new key and a fresh cache; old cache folders can be
deleted at any time.

* :func:`cached_arrays` — small datasets (SVHN, USPS, Digits-5, scikit-learn digits' split): a
  dict of arrays saved as ``.npy`` files and read back whole.  If the root is read-only the arrays are simply rebuilt each time.
* :func:`image_cache` — image folders (Tiny-ImageNet, Office-Caltech10, DomainNet, ImageNet): every
  image decoded and resized once into ``images.npy`` (uint8 (M, 3, H, W), written through
  ``numpy.lib.format.open_memmap`` so it never has to fit in RAM) plus ``moments.npy`` (per image
  and channel the sum and sum of squares of the pixel values, for exact channel statistics of any
  subset).  Loaders memory-map it (:class:`fedbn_bench.data.lazy.LazyImages`) or read the rows they
  need.  A build goes to a ``.partial`` folder first and is renamed when complete, so an
  interrupted build is never mistaken for a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from .base import DatasetError

__all__ = ["CACHE_VERSION", "cache_key", "cached_arrays", "default_cache_root", "image_cache"]

CACHE_VERSION = 1
_META = "meta.json"
_CHUNK = 1024  # images decoded per batch of thread-pool work


def default_cache_root(root: str, cache_dir: str | None = None) -> str:
    return os.path.expanduser(str(cache_dir)) if cache_dir else os.path.join(root, "fedbn_cache")


def cache_key(name: str, params: dict, files: Sequence[str]) -> str:
    """Hash of the format version, ``params`` and every file's path, size and mtime."""
    h = hashlib.sha1()
    h.update(json.dumps([CACHE_VERSION, name, params], sort_keys=True, default=str).encode())
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            raise DatasetError(f"{name}: missing file {path}; re-download or restore the dataset") from None
        h.update(f"\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _complete(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, _META))


def _publish(tmp: str, folder: str, meta: dict) -> None:
    with open(os.path.join(tmp, _META), "w") as f:
        json.dump(meta, f)
    try:
        os.replace(tmp, folder)
    except OSError:  # another process published the same cache first
        shutil.rmtree(tmp, ignore_errors=True)
        if not _complete(folder):
            raise


def cached_arrays(
    cache_root: str, name: str, params: dict, files: Sequence[str], build: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Arrays from the cache for (``params``, ``files``), or ``build()`` them and try to save them."""
    folder = os.path.join(cache_root, f"{name}-{cache_key(name, params, files)}")
    if _complete(folder):
        with open(os.path.join(folder, _META)) as f:
            keys = json.load(f)["arrays"]
        return {k: np.load(os.path.join(folder, f"{k}.npy")) for k in keys}
    arrays = build()
    tmp = f"{folder}.partial-{uuid.uuid4().hex[:8]}"
    try:
        os.makedirs(tmp)
        for k, v in arrays.items():
            np.save(os.path.join(tmp, f"{k}.npy"), v)
        _publish(tmp, folder, {"arrays": list(arrays), "params": params})
    except OSError:  # read-only root: keep working without a cache
        shutil.rmtree(tmp, ignore_errors=True)
    return arrays


def image_cache(
    cache_root: str,
    name: str,
    params: dict,
    files: Sequence[str],
    decode: Callable[[str], np.ndarray],
    image_shape: tuple[int, int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """``(images, moments)`` for ``files``: the memory-mapped uint8 cache, built on first use.

    ``decode(path)`` must return a uint8 array of ``image_shape`` (C, H, W).
    """
    folder = os.path.join(cache_root, f"{name}-{cache_key(name, params, files)}")
    if not _complete(folder):
        _build_image_cache(folder, name, params, files, decode, image_shape)
    images = np.load(os.path.join(folder, "images.npy"), mmap_mode="r")
    moments = np.load(os.path.join(folder, "moments.npy"))
    if images.shape != (len(files), *image_shape) or moments.shape != (len(files), image_shape[0], 2):
        raise DatasetError(
            f"{name}: cache {folder} holds images of shape {images.shape}, expected "
            f"{(len(files), *image_shape)}; delete that folder to rebuild it"
        )
    return images, moments


def _build_image_cache(
    folder: str, name: str, params: dict, files: Sequence[str],
    decode: Callable[[str], np.ndarray], image_shape: tuple[int, int, int],
) -> None:
    tmp = f"{folder}.partial-{uuid.uuid4().hex[:8]}"
    try:
        os.makedirs(tmp)
    except OSError as exc:
        raise DatasetError(
            f"{name}: cannot create the image cache {tmp} ({exc.strerror}); "
            "set dataset.options.cache_dir to a writable folder"
        ) from None
    n, c = len(files), image_shape[0]
    try:
        images = np.lib.format.open_memmap(os.path.join(tmp, "images.npy"), mode="w+", dtype=np.uint8, shape=(n, *image_shape))
        moments = np.zeros((n, c, 2), dtype=np.float64)
        workers = max(1, min(8, os.cpu_count() or 1))
        with ThreadPoolExecutor(workers) as pool, tqdm(
            total=n, desc=f"{name}: caching images", unit="img", disable=n < 5000, mininterval=5
        ) as bar:
            for start in range(0, n, _CHUNK):
                chunk = files[start : start + _CHUNK]
                for i, img in enumerate(pool.map(decode, chunk), start):
                    if img.shape != image_shape or img.dtype != np.uint8:
                        raise DatasetError(f"{name}: decoding {files[i]} gave {img.dtype} {img.shape}, expected uint8 {image_shape}")
                    images[i] = img
                    flat = img.reshape(c, -1).astype(np.float64)
                    moments[i, :, 0] = flat.sum(axis=1)
                    moments[i, :, 1] = (flat * flat).sum(axis=1)
                bar.update(len(chunk))
        images.flush()
        del images
        np.save(os.path.join(tmp, "moments.npy"), moments)
        _publish(tmp, folder, {"arrays": ["images", "moments"], "params": params, "count": n})
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
