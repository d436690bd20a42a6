"""ImageNet-1K (FixBN §4 "Results on ImageNet", App. A Table A: 1,000 classes, 224x224) from an
ImageFolder layout, read lazily.

Layout (train as distributed; val sorted into class folders, e.g. with the usual valprep script)::

    <root>/imagenet/train/<wnid>/*.JPEG
    <root>/imagenet/val/<wnid>/*.JPEG

Class ``k`` is the ``k``-th train folder in sorted order (torchvision ImageFolder's convention);
every val folder must be one of them.  Each image is decoded once: shorter side scaled to
``image_size`` (bilinear), centre crop of ``image_size`` squared, stored as uint8 in a memory-mapped
cache under ``<root>/fedbn_cache`` (or ``cache_dir``): about 150 KB per image at 224, i.e. roughly
200 GB for train + val; a smaller ``image_size`` shrinks it quadratically.  The splits are
:class:`~fedbn_bench.data.lazy.LazyImages` views (``lazy=false`` loads them into RAM, only sensible
for small subsets).  FixBN trains with random-resized crops; here the engine's augmentation
(``dataset.augment``: pad-crop and flip) acts on the fixed centre crops.  ImageNet needs a
registration: ``download`` is not available.
"""

from __future__ import annotations

import os

import numpy as np

from .base import DatasetBundle, DatasetError
from .images import MAX_IMAGE_SIZE, ImageCollection, list_images, load_collection
from .registry import register_dataset

FOLDER = "imagenet"


def imagefolder_collection(base: str) -> tuple[ImageCollection, list[str]]:
    """Files, labels and train flags of ``base/train/<class>/*`` and ``base/val/<class>/*``."""
    dirs = {}
    for split in ("train", "val"):
        folder = os.path.join(base, split)
        if not os.path.isdir(folder):
            raise DatasetError(
                f"imagenet: data not found under dataset.root, expected folder {folder} with one sub-folder per "
                "class; "
                "`python scripts/download_data.py imagenet` prints how to obtain ImageNet"
            )
        with os.scandir(folder) as it:
            dirs[split] = sorted(e.name for e in it if e.is_dir())
    classes = dirs["train"]
    if not classes:
        raise DatasetError(f"imagenet: no class folders in {os.path.join(base, 'train')}")
    index = {c: i for i, c in enumerate(classes)}
    stray = [c for c in dirs["val"] if c not in index]
    if stray:
        raise DatasetError(
            f"imagenet: val class folder {os.path.join(base, 'val', stray[0])} has no train counterpart; "
            "sort the val images into the train wnids"
        )
    files, labels, train = [], [], []
    for split in ("train", "val"):
        for c in dirs[split]:
            imgs = list_images(os.path.join(base, split, c))
            files += imgs
            labels += [index[c]] * len(imgs)
            train += [split == "train"] * len(imgs)
    coll = ImageCollection(files=files, labels=np.asarray(labels, dtype=np.int64), train=np.asarray(train, dtype=bool))
    return coll, classes


@register_dataset("imagenet")
def load_imagenet(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    image_size: int = 224,
    lazy: bool = True,
    cache_dir: str | None = None,
) -> DatasetBundle:
    """ImageNet train and val as 3 x image_size x image_size images in [0, 1]."""
    del download, seed
    try:
        image_size = int(image_size)
    except (TypeError, ValueError):
        raise DatasetError(f"imagenet: image_size must be a positive integer, got {image_size!r}") from None
    if not 1 <= image_size <= MAX_IMAGE_SIZE:
        raise DatasetError(f"imagenet: image_size must be an integer in [1, {MAX_IMAGE_SIZE}], got {image_size}")

    root = os.path.expanduser(str(root))
    coll, classes = imagefolder_collection(os.path.join(root, FOLDER))
    if not coll.train.any() or coll.train.all():
        raise DatasetError(f"imagenet: no images in the {'train' if not coll.train.any() else 'val'} folder under {root}")
    train, test = load_collection("imagenet", root, coll, image_size, "center_crop", lazy, cache_dir)
    return DatasetBundle(name="imagenet", train=train, test=test, num_classes=len(classes), is_image=True)
