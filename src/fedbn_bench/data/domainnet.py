"""DomainNet, FedBN's 10-class subset (FedBN §5.2, App. D.3): six sites (image styles).

Sites: clipart, infograph, painting, quickdraw, real, sketch.  Classes: the ten FedBN uses ("top-10
class based on data amount", listed in FedBN's code): bird, feather, headphones, ice_cream, teapot,
tiger, whale, windmill, wine_glass, zebra.  Layout (DomainNet's per-site zips unpacked into
``<root>/DomainNet`` plus FedBN's split files)::

    <root>/DomainNet/<site>/<class>/*.jpg
    <root>/DomainNet/<site>_train.pkl    FedBN's pickled (paths, class_names); paths relative to <root>
    <root>/DomainNet/<site>_test.pkl

or DomainNet's official ``<site>_train.txt`` / ``<site>_test.txt`` lists (``clipart/bird/x.jpg 17``
lines, filtered to the ten classes); see :mod:`fedbn_bench.data.site_images`.  Images are resized
to ``image_size`` squared (256) and kept in [0, 1] as in FedBN's code.  Each site's train set is
cut to ``int(percent * smallest site's train size)`` (FedBN: 105, ``percent=0.05``), drawn at random
or, with ``selection="first"``, the first in file order as FedBN's code does.  Read lazily by
default: the uint8 cache is memory-mapped and only indexed rows are read
(:class:`~fedbn_bench.data.lazy.LazyImages`).
"""

from __future__ import annotations

from typing import Sequence

from .base import DatasetBundle
from .registry import register_dataset
from .site_images import SiteDataset, load_site_dataset

DOMAINNET = SiteDataset(
    name="domainnet",
    folder="DomainNet",
    sites=("clipart", "infograph", "painting", "quickdraw", "real", "sketch"),
    classes=("bird", "feather", "headphones", "ice_cream", "teapot", "tiger", "whale", "windmill", "wine_glass", "zebra"),
    hint="get DomainNet's images and FedBN's split files (`python scripts/download_data.py domainnet` says where)",
)


@register_dataset("domainnet", normalize=False, natural_domains=True)
def load_domainnet(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    domains: Sequence[str] = DOMAINNET.sites,
    percent: float = 0.05,
    selection: str = "random",
    image_size: int = 256,
    lazy: bool = True,
    cache_dir: str | None = None,
) -> DatasetBundle:
    """The six sites as 3 x image_size x image_size images; ``download`` is not available."""
    del download
    return load_site_dataset(DOMAINNET, root, seed, domains, percent, str(selection), image_size, lazy, cache_dir)
