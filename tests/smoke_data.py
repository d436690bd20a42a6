"""Fixture data for a preset whose dataset files are absent: ``fixture_root(cfg, tmp)`` writes tiny
files in the dataset loader's exact on-disk format (``fixtures_data.py``) into ``tmp`` and returns that
root (for ``dataset.root=<root>``), or ``None`` when the files are under the preset's own root or the
dataset needs no files (sklearn_digits, toy_gaussian).

Sizes follow the composed config, so that every client of the preset's partition can get full
batches: about ``FACTOR * batch_size / (1 - val_fraction)`` training samples per client (per domain:
times its clients), capped for the image datasets (``CAP``); test sets stay small.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Optional

import torch

import fixtures_data as fx
from fedbn_bench.data.digits5 import DOMAINS as DIGIT_DOMAINS
from fedbn_bench.data.digits5_standin import NUM_PARTS, SHIFTS as STANDIN_SHIFTS
from fedbn_bench.data.domainnet import DOMAINNET
from fedbn_bench.data.office_caltech10 import OFFICE
from fedbn_bench.models.pretrained import TORCHVISION_ARCH, weights_path

FACTOR = 3
CAP = 4000

# files whose presence under the configured root means the real dataset is there
PROBES: dict[str, str] = {
    "cifar10": "cifar-10-batches-py/test_batch",
    "cifar100": "cifar-100-python/test",
    "mnist": "MNIST/raw/t10k-labels-idx1-ubyte",
    "fashion_mnist": "FashionMNIST/raw/t10k-labels-idx1-ubyte",
    "svhn": "SVHN/test_32x32.mat",
    "usps": "USPS/usps.t.bz2",
    "tinyimagenet": "tiny-imagenet-200/wnids.txt",
    "imagenet": "imagenet/val",
    "digits5": "MNIST_M/test.pkl",
    "digits5_standin": "MNIST/raw/t10k-labels-idx1-ubyte",
    "office_caltech10": "office_caltech_10/amazon_test.pkl",
    "domainnet": "DomainNet/clipart_test.pkl",
    "abide": "ABIDE/NYU.npz",
}
NO_FILES = {"sklearn_digits", "toy_gaussian", "fedbn_gaussians"}


def per_client(cfg) -> int:
    """Training samples a client should hold: ``FACTOR`` full batches after the validation share."""
    keep = max(1.0 - float(cfg.get("val_fraction", 0.0) or 0.0), 0.1)
    return math.ceil(FACTOR * int(cfg.batch_size) / keep)


def clients_per_domain(cfg, domains: int) -> int:
    per = cfg.partition.get("clients_per_domain", None)
    return int(per) if per else math.ceil(int(cfg.num_clients) / domains)


POOLED = {"cifar10": 10, "cifar100": 100, "mnist": 10, "fashion_mnist": 10, "svhn": 10, "usps": 10,
          "tinyimagenet": 10, "imagenet": 10}
"""Pooled image sets (split among clients by the partition) and their fixtures' class counts."""
SITES = {"office_caltech10": OFFICE, "domainnet": DOMAINNET}
TRAIN_CAPS = {"cifar100": 2 * CAP, "tinyimagenet": 2000, "imagenet": 1000}
"""Training-set caps of the pooled image sets other than ``CAP`` (bigger images, more classes)."""
SITE_CAP = 60
"""Training images per class and site of the Office-Caltech10 / DomainNet fixtures."""


def _train_size(cfg) -> int:
    """Training samples of a pooled set's fixture: every client's share, capped."""
    num_classes = POOLED[cfg.dataset.name]
    n = max(20 * num_classes, int(cfg.num_clients) * per_client(cfg))
    return min(math.ceil(n / num_classes) * num_classes, TRAIN_CAPS.get(cfg.dataset.name, CAP))


def fixture_overrides(cfg) -> list[str]:
    """What a smoke run on capped fixture data adds so that its clients still hold full batches:
    fewer clients splitting a pooled set (HBN's 500 Tiny-ImageNet clients would get 4 images each),
    or all of a site's data for Office-Caltech10 / DomainNet (FedBN's 10 % of DomainNet)."""
    name = cfg.dataset.name
    if name in ("office_caltech10", "domainnet"):
        return ["dataset.options.percent=1.0"] if _site_need(cfg) > SITE_CAP else []
    if name not in POOLED or cfg.partition.name == "domains":
        return []
    clients = max(1, _train_size(cfg) // per_client(cfg))
    if clients >= int(cfg.num_clients):
        return []
    return [f"num_clients={clients}", f"clients_per_round={min(int(cfg.clients_per_round), clients)}"]


def _site_need(cfg) -> int:
    """Training images per class and site that a site's clients need (FedBN keeps ``percent``)."""
    options = cfg.dataset.options
    sites = list(options.get("domains", SITES[cfg.dataset.name].sites))
    need = clients_per_domain(cfg, len(sites)) * per_client(cfg) / float(options.get("percent", 0.5))
    return math.ceil(need / 3)


def _digits5(root: Path, cfg) -> None:
    options = cfg.dataset.options
    domains = list(options.get("domains", DIGIT_DOMAINS))
    percent = float(options.get("percent", 0.1))
    parts = max(1, int(percent * 10 + 1e-9))
    used = 1.0 if percent >= 0.1 else percent * 10
    need = clients_per_domain(cfg, len(domains)) * per_client(cfg)
    size = math.ceil(need / (parts * used))
    fx.write_digits5(root, part_sizes={d: size for d in DIGIT_DOMAINS}, parts=parts,
                     test_size=max(40, 4 * clients_per_domain(cfg, len(domains))))


def _digits5_standin(root: Path, cfg) -> None:
    """MNIST for the stand-in's four MNIST domains: 10 parts of ``part_size`` and ``test_size`` images each
    (its fifth domain is scikit-learn's digits, installed with scikit-learn)."""
    part, test = int(cfg.dataset.options.part_size), int(cfg.dataset.options.test_size)
    fx.write_mnist(root, "MNIST", len(STANDIN_SHIFTS) * NUM_PARTS * part, len(STANDIN_SHIFTS) * test)


def _sites(site_data, writer: Callable) -> Callable:
    def write(root: Path, cfg) -> None:
        per_class = min(_site_need(cfg), SITE_CAP)
        if writer is fx.write_office:
            writer(root, train_per_class={s: per_class for s in site_data.sites}, test_per_class=2)
        else:
            writer(root, train_per_class=per_class, test_per_class=2)
    return write


def _abide(root: Path, cfg) -> None:
    sites = tuple(cfg.dataset.options.get("domains", ("NYU", "UM", "USM", "UCLA")))
    rows = clients_per_domain(cfg, len(sites)) * per_client(cfg) / 0.8
    fx.write_abide(root, sites=sites, subjects=max(10, math.ceil(rows / 4)), windows=4)


WRITERS: dict[str, Callable] = {
    "cifar10": lambda root, cfg: fx.write_cifar(root, 10, _train_size(cfg), 100),
    "cifar100": lambda root, cfg: fx.write_cifar(root, 100, _train_size(cfg), 200),
    "mnist": lambda root, cfg: fx.write_mnist(root, "MNIST", _train_size(cfg), 100),
    "fashion_mnist": lambda root, cfg: fx.write_mnist(root, "FashionMNIST", _train_size(cfg), 100),
    "svhn": lambda root, cfg: fx.write_svhn(root, _train_size(cfg), 100),
    "usps": lambda root, cfg: fx.write_usps(root, _train_size(cfg), 100),
    "tinyimagenet": lambda root, cfg: fx.write_tinyimagenet(
        root, wnids=tuple(f"n{i:02d}" for i in range(10)), per_class=_train_size(cfg) // 10, val_per_class=5),
    "imagenet": lambda root, cfg: fx.write_imagefolder(
        root, classes=tuple(f"n{i:02d}" for i in range(10)), train_per_class=_train_size(cfg) // 10,
        val_per_class=3),
    "digits5": _digits5,
    "digits5_standin": _digits5_standin,
    "office_caltech10": _sites(OFFICE, fx.write_office),
    "domainnet": _sites(DOMAINNET, fx.write_domainnet),
    "abide": _abide,
}


def has_files(cfg, repo: Path) -> bool:
    """Whether the dataset's files are under the configured root (relative roots: from ``repo``)."""
    name = cfg.dataset.name
    if name in NO_FILES:
        return True
    root = Path(str(cfg.dataset.get("root", "data"))).expanduser()
    root = root if root.is_absolute() else repo / root
    return (root / PROBES[name]).exists()


def fixture_root(cfg, tmp: Path, repo: Path) -> Optional[Path]:
    """``None`` when the preset's data is present (or needs no files); else a root under ``tmp`` with
    fixture files of ``cfg.dataset.name`` sized for ``cfg``. An unknown dataset raises ``KeyError``."""
    if has_files(cfg, repo):
        return None
    root = Path(tmp) / "data"
    WRITERS[cfg.dataset.name](root, cfg)
    return root


def fixture_torch_home(cfg, tmp: Path) -> Optional[Path]:
    """``None`` unless the config asks for ImageNet weights that the torch hub cache lacks; else a
    ``TORCH_HOME`` under ``tmp`` holding the torchvision network's freshly initialized weights under
    the cached file's name (the loading path runs; the values are not ImageNet's)."""
    if not cfg.model.get("options", {}).get("pretrained", False) or weights_path(cfg.model.name).is_file():
        return None
    import torchvision

    home = Path(tmp) / "torch_home"
    target = home / "hub" / "checkpoints" / weights_path(cfg.model.name).name
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torchvision.models.get_model(TORCHVISION_ARCH[cfg.model.name]).state_dict(), target)
    return home

