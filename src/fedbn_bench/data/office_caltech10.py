"""Office-Caltech10 (FedBN §5.2, App. D.3): 10 classes, four sites (Amazon, Caltech, DSLR, Webcam).

Layout (FedBN's ``office_caltech_10_dataset.zip``, unpacked into ``<root>`` = FedBN's ``data/``)::

    <root>/office_caltech_10/<site>/<class>/*.jpg
    <root>/office_caltech_10/<site>_train.pkl    pickled (paths, class_names); paths relative to <root>
    <root>/office_caltech_10/<site>_test.pkl

(or ``<site>_{train,test}.txt`` lists, see :mod:`fedbn_bench.data.site_images`).  Images are
resized to ``image_size`` squared (FedBN: 256) and kept in [0, 1] without standardization, as in
FedBN's code (``normalize: true`` in the options standardizes with train statistics instead).
Every site's train set is cut to ``int(percent * smallest site's train size)`` (FedBN: 62 images,
``percent=0.5``), drawn at random (``selection="random"``) or the first in file order as FedBN's
code (``selection="first"``); ``Split.domain`` is the site index.
"""

from __future__ import annotations

from typing import Sequence

from .base import DatasetBundle
from .registry import register_dataset
from .site_images import SiteDataset, load_site_dataset

OFFICE = SiteDataset(
    name="office_caltech10",
    folder="office_caltech_10",
    sites=("amazon", "caltech", "dslr", "webcam"),
    classes=("back_pack", "bike", "calculator", "headphones", "keyboard",
             "laptop_computer", "monitor", "mouse", "mug", "projector"),
    hint="get FedBN's office_caltech_10 archive (`python scripts/download_data.py office_caltech10` says where)",
)


@register_dataset("office_caltech10", normalize=False, natural_domains=True)
def load_office_caltech10(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    domains: Sequence[str] = OFFICE.sites,
    percent: float = 0.5,
    selection: str = "random",
    image_size: int = 256,
    lazy: bool = False,
    cache_dir: str | None = None,
) -> DatasetBundle:
    """The four sites as 3 x image_size x image_size images; ``download`` is not available."""
    del download
    return load_site_dataset(OFFICE, root, seed, domains, percent, str(selection), image_size, lazy, cache_dir)
