"""The offline Digits-5 stand-in (``data/digits5_standin.py``): five domains in FedBN's order, 3x28x28 in [-1, 1],
equal training and test counts per domain, FedBN's ``percent`` parts, one draw per seed, ``usps_like`` made of
scikit-learn's real digits and ``mnist`` of MNIST's images, and one error line for each bad option. MNIST is a
fixture in torchvision's IDX layout (``fixtures_data.write_mnist``); scikit-learn's digits are the real ones."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import fixtures_data as fx
from fedbn_bench.data import DatasetError, load_dataset
from fedbn_bench.data.digits5_standin import DOMAINS, NUM_PARTS, SHIFTS, shift

PART, TEST = 12, 10


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """MNIST for the four MNIST domains: 10 parts of ``PART`` and ``TEST`` test images each."""
    path = tmp_path_factory.mktemp("standin")
    fx.write_mnist(path, "MNIST", len(SHIFTS) * NUM_PARTS * PART, len(SHIFTS) * TEST)
    return path


def standin(root, **options):
    return load_dataset("digits5_standin", root=str(root), part_size=PART, test_size=TEST, **options)


def test_shapes_range_domains_and_fedbn_pixel_map(root):
    b = standin(root)
    assert b.domain_names == list(DOMAINS) and b.num_classes == 10 and b.is_image
    assert b.train.x.shape == (5 * PART, 3, 28, 28) and b.test.x.shape == (5 * TEST, 3, 28, 28)
    for split, per_domain in ((b.train, PART), (b.test, TEST)):
        assert split.x.min() >= -1.0 and split.x.max() <= 1.0
        assert torch.bincount(split.domain).tolist() == [per_domain] * 5
        assert split.y.min() >= 0 and split.y.max() <= 9
    assert torch.equal(b.train.pad_value, torch.full((3,), -1.0))  # black, not standardized (normalize=False)
    assert b.norm_mean.tolist() == [0.5] * 3 and b.norm_std.tolist() == [0.5] * 3


def test_percent_selects_fedbn_parts(root):
    one, two = standin(root, percent=0.1), standin(root, percent=0.2)
    assert torch.bincount(two.train.domain).tolist() == [2 * PART] * 5
    for d in range(5):  # 0.1 is the first of 0.2's two parts (the noise of synth_like is drawn per split)
        if "noise" not in SHIFTS.get(DOMAINS[d], ()):
            assert torch.equal(one.train.x[one.train.domain == d], two.train.x[two.train.domain == d][:PART])
    assert torch.bincount(standin(root, percent=0.05).train.domain).tolist() == [PART // 2] * 5
    assert torch.equal(one.test.x, two.test.x)  # test sets whole


def test_each_seed_draws_its_own_data_deterministically(root):
    a, b, c = standin(root, seed=3), standin(root, seed=3), standin(root, seed=4)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.train.x, c.train.x)


def matches(x: torch.Tensor, pool: torch.Tensor) -> torch.Tensor:
    """For each row of ``x``, the index of the row of ``pool`` it equals (to float rounding); asserts there is one."""
    nearest = torch.cdist(x, pool).argmin(1)
    assert torch.allclose(x, pool[nearest], atol=1e-5)
    return nearest


def test_usps_like_is_scikit_learns_digits_and_mnist_is_mnist(root):
    from sklearn.datasets import load_digits

    b = standin(root)
    digits = load_digits()
    pixels = torch.from_numpy(np.rint(digits.images * (255 / 16))).float()[:, None]
    upsampled = torch.nn.functional.interpolate(pixels, size=(28, 28), mode="bilinear", antialias=True,
                                                align_corners=False).round().clamp(0, 255) / 255
    usps = DOMAINS.index("usps_like")
    found = []
    for split in (b.train, b.test):
        x = (split.x[split.domain == usps] + 1) / 2
        assert torch.equal(x[:, 0], x[:, 2])  # grey repeated to three channels
        found.append(matches(x[:, 0].flatten(1), upsampled.flatten(1)))
        assert torch.equal(split.y[split.domain == usps], torch.from_numpy(digits.target)[found[-1]])
    assert not set(found[0].tolist()) & set(found[1].tolist())  # train and test images differ
    images = fx.write_mnist(root / "again", "MNIST", len(SHIFTS) * NUM_PARTS * PART, len(SHIFTS) * TEST)["train"][0]
    x = (b.train.x[b.train.domain == DOMAINS.index("mnist")][:, 0].flatten(1) + 1) / 2
    matches(x, torch.from_numpy(images).float().flatten(1) / 255)  # the same seed writes the fixture's images again


def test_the_shifts_of_the_mnist_domains():
    black = torch.zeros(2, 1, 28, 28)
    assert torch.equal(shift(black, DOMAINS.index("mnist"), 0, 0), black.expand(-1, 3, -1, -1))
    assert shift(black, DOMAINS.index("svhn_like"), 0, 0).min() > 0.3   # a colour cast, inverted: a light ground
    textured = shift(black, DOMAINS.index("mnistm_like"), 0, 0)
    assert textured.std() > 0.05 and torch.equal(textured[0], textured[1])  # one texture for the domain
    noisy = shift(black, DOMAINS.index("synth_like"), 0, 0)
    assert not torch.equal(noisy[0], noisy[1])  # per-image noise


@pytest.mark.parametrize("options, named", [
    ({"percent": 0}, "percent"), ({"percent": 1.5}, "percent"), ({"part_size": 0}, "part_size"),
    ({"part_size": 0.5}, "part_size"), ({"test_size": 5}, "test_size"), ({"part_size": 170}, "part_size"),
])
def test_bad_options_are_one_error_line(root, options, named):
    with pytest.raises(DatasetError) as err:
        load_dataset("digits5_standin", root=str(root), **{"part_size": PART, "test_size": TEST, **options})
    assert named in str(err.value) and "\n" not in str(err.value)


def test_missing_or_too_small_mnist_says_what_to_do(tmp_path):
    with pytest.raises(DatasetError, match="mnist_from_hub.py") as err:
        load_dataset("digits5_standin", root=str(tmp_path / "none"))
    assert str(tmp_path / "none" / "MNIST" / "raw") in str(err.value)
    fx.write_mnist(tmp_path, "MNIST", 100, 100)
    with pytest.raises(DatasetError, match="part_size or test_size"):
        load_dataset("digits5_standin", root=str(tmp_path), part_size=PART, test_size=TEST)
