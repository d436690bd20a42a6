"""Tiny-ImageNet-200 (3x64x64, 200 classes; FixBN §4 / App. A, Table A) from the official folder.

Layout (the official ``tiny-imagenet-200.zip`` extracted into ``<root>``)::

    <root>/tiny-imagenet-200/wnids.txt                       200 WordNet ids, one per line
    <root>/tiny-imagenet-200/train/<wnid>/images/*.JPEG      500 training images per class
    <root>/tiny-imagenet-200/val/images/*.JPEG               10,000 validation images
    <root>/tiny-imagenet-200/val/val_annotations.txt         "<file>\\t<wnid>\\t<box...>" per line

The labelled validation set is the test split (the official test images have no labels).  Class
``k`` is the ``k``-th wnid in sorted order (torchvision ImageFolder's convention).  Images are
decoded once into a uint8 cache (:mod:`fedbn_bench.data.cache`); grey JPEGs become RGB.
``download=true`` fetches the zip (md5-checked) and extracts it.
"""

from __future__ import annotations

import os

import numpy as np

from . import _files
from .base import DatasetBundle, DatasetError
from .fetch import download as download_file, extract_zip
from .images import ImageCollection, list_images, load_collection
from .registry import register_dataset

FOLDER = "tiny-imagenet-200"
URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
SIZE = 64


def fetch_tinyimagenet(root: str) -> None:
    """Download (md5-checked) and extract the official archive into ``root``."""
    archive = os.path.join(root, "tiny-imagenet-200.zip")
    download_file("tinyimagenet", URL, archive, MD5)
    extract_zip("tinyimagenet", archive, root)


def tinyimagenet_collection(base: str) -> tuple[ImageCollection, list[str]]:
    """The train and val files of the folder ``base`` with labels, and the sorted wnids."""
    with open(os.path.join(base, "wnids.txt")) as f:
        wnids = sorted({line.strip() for line in f if line.strip()})
    index = {w: i for i, w in enumerate(wnids)}
    files, labels = [], []
    for w in wnids:
        folder = os.path.join(base, "train", w, "images")
        if not os.path.isdir(folder):
            raise DatasetError(f"tinyimagenet: missing class folder {folder}; re-extract the archive")
        imgs = list_images(folder)
        files += imgs
        labels += [index[w]] * len(imgs)
    n_train = len(files)
    ann = os.path.join(base, "val", "val_annotations.txt")
    with open(ann) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split("\t")
            if len(parts) < 2 or parts[1].strip() not in index:
                raise DatasetError(
                    f"tinyimagenet: {ann} line {lineno} is not '<file>\\t<wnid>...' with a wnid of wnids.txt; re-extract the archive"
                )
            files.append(os.path.join(base, "val", "images", parts[0].strip()))
            labels.append(index[parts[1].strip()])
    train = np.zeros(len(files), dtype=bool)
    train[:n_train] = True
    return ImageCollection(files=files, labels=np.asarray(labels, dtype=np.int64), train=train), wnids


@register_dataset("tinyimagenet")
def load_tinyimagenet(
    *, root: str = "data", download: bool = False, seed: int = 0, lazy: bool = False, cache_dir: str | None = None
) -> DatasetBundle:
    """Tiny-ImageNet train (100,000) and val (10,000) images in [0, 1].

    ``lazy``: keep the images memory-mapped (:class:`~fedbn_bench.data.lazy.LazyImages`) instead
    of in RAM (about 4.9 GB as float32); ``cache_dir``: where the uint8 cache goes (default
    ``<root>/fedbn_cache``).
    """
    del seed
    root = os.path.expanduser(str(root))
    base = os.path.join(root, FOLDER)
    expected = [os.path.join(base, "wnids.txt"), os.path.join(base, "val", "val_annotations.txt")]
    missing = _files.missing_files(expected)
    if missing and not download:
        raise DatasetError(
            f"tinyimagenet: data not found, expected file {missing[0]} under root {root!r}; "
            + _files.fetch_hint("tinyimagenet", root)
        )
    if missing:
        fetch_tinyimagenet(root)
        missing = _files.missing_files(expected)
        if missing:
            raise DatasetError(f"tinyimagenet: {missing[0]} is still missing after extracting the archive into {root!r}")
    coll, wnids = tinyimagenet_collection(base)
    train, test = load_collection("tinyimagenet", root, coll, SIZE, "stretch", lazy, cache_dir)
    return DatasetBundle(name="tinyimagenet", train=train, test=test, num_classes=len(wnids), is_image=True)
