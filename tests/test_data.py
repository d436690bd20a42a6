"""Tests for fedbn_bench.data: loaders, feature-shift domains, augmentation.

No network is used except for one check that a download attempt on an offline
machine fails quickly (skipped when the machine happens to be online).
"""

from __future__ import annotations

import math
import os
import pickle
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fedbn_bench.data as data
from fedbn_bench.data import (
    DATASETS,
    DOMAIN_TRANSFORMS,
    DatasetBundle,
    DatasetError,
    Split,
    load_dataset,
    random_crop_flip,
)
from fedbn_bench.data import _files

N_DIGITS = 1797


# --------------------------------------------------------------------------- containers


def test_split_and_bundle_basics():
    s = Split(x=torch.zeros(5, 1, 2, 2), y=torch.arange(5))
    assert len(s) == 5
    s2 = s.to("cpu")
    assert s2 is not s and torch.equal(s2.x, s.x) and s2.domain is None
    b = DatasetBundle("t", s, s, num_classes=5)
    assert b.input_shape == (1, 2, 2)
    assert b.num_domains == 0
    b.domain_names = ["a", "b"]
    assert b.num_domains == 2
    with pytest.raises(ValueError):
        Split(x=torch.zeros(5, 2), y=torch.arange(4))
    with pytest.raises(ValueError):
        Split(x=torch.zeros(5, 2), y=torch.arange(5), domain=torch.zeros(3, dtype=torch.long))


def test_registry_contents():
    for name in ("sklearn_digits", "toy_gaussian", "mnist", "fashion_mnist", "cifar10", "cifar100"):
        assert name in DATASETS


def test_unknown_dataset_lists_allowed_names():
    with pytest.raises(DatasetError) as ei:
        load_dataset("imagenet_nope")
    msg = str(ei.value)
    assert "imagenet_nope" in msg
    for name in DATASETS:
        assert name in msg
    assert "\n" not in msg


def test_unknown_option_is_named():
    with pytest.raises(DatasetError) as ei:
        load_dataset("sklearn_digits", test_frac=0.3)
    assert "test_frac" in str(ei.value) and "test_fraction" in str(ei.value)
    with pytest.raises(DatasetError, match="samples_per_klass"):
        load_dataset("toy_gaussian", samples_per_klass=3)
    with pytest.raises(DatasetError, match="test_fraction"):
        load_dataset("sklearn_digits", test_fraction=1.5)
    with pytest.raises(DatasetError, match="num_domains"):
        load_dataset("sklearn_digits", num_domains=-1)


# --------------------------------------------------------------------------- sklearn digits


@pytest.fixture(scope="module")
def digits_raw():
    return load_dataset("sklearn_digits", normalize=False)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("sklearn_digits")


def test_sklearn_digits_shapes_and_classes(digits):
    b = digits
    assert b.name == "sklearn_digits" and b.is_image and b.num_classes == 10
    assert len(b.test) == math.ceil(0.2 * N_DIGITS)
    assert len(b.train) + len(b.test) == N_DIGITS
    for s in (b.train, b.test):
        assert s.x.dtype == torch.float32 and s.y.dtype == torch.int64
        assert s.x.shape[1:] == (1, 8, 8) and s.x.device.type == "cpu"
        assert s.domain is None
        assert sorted(s.y.unique().tolist()) == list(range(10))
    assert b.input_shape == (1, 8, 8) and b.num_domains == 0 and b.domain_names is None
    # stratified: each class's test share is within one sample of 20 %
    all_counts = torch.bincount(torch.cat([b.train.y, b.test.y]), minlength=10)
    test_counts = torch.bincount(b.test.y, minlength=10)
    assert torch.all((test_counts.double() - 0.2 * all_counts.double()).abs() <= 1.0)


def test_sklearn_digits_raw_values(digits_raw):
    x = torch.cat([digits_raw.train.x, digits_raw.test.x])
    assert x.min() == 0.0 and x.max() == 1.0
    assert torch.equal(x * 16, (x * 16).round())  # pixels were integers 0..16
    assert digits_raw.norm_mean is None and digits_raw.norm_std is None
    # against scikit-learn's own array (as a multiset of images)
    from sklearn.datasets import load_digits

    ref = torch.from_numpy(load_digits().images.astype(np.float32) / 16).flatten(1)
    ours = x.flatten(1)
    assert torch.allclose(ref.sum(0), ours.sum(0), atol=1e-3)


def test_sklearn_digits_normalization_uses_train_stats(digits, digits_raw):
    x = digits.train.x
    assert abs(x.mean().item()) < 1e-5
    assert abs(x.std(unbiased=False).item() - 1.0) < 1e-5
    mean, std = digits.norm_mean, digits.norm_std
    assert mean.shape == (1,) and std.shape == (1,)
    assert torch.allclose(mean, digits_raw.train.x.mean().reshape(1), atol=1e-6)
    expected_test = (digits_raw.test.x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)
    assert torch.allclose(digits.test.x, expected_test, atol=1e-5)
    assert torch.equal(digits.test.y, digits_raw.test.y)


def test_sklearn_digits_split_determinism():
    a = load_dataset("sklearn_digits", seed=3)
    b = load_dataset("sklearn_digits", seed=3)
    c = load_dataset("sklearn_digits", seed=4)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert not torch.equal(a.test.y, c.test.y)
    d = load_dataset("sklearn_digits", test_fraction=0.5)
    assert len(d.test) == math.ceil(0.5 * N_DIGITS)


def test_sklearn_digits_cache_holds_each_seeds_split(tmp_path):
    from fedbn_bench.data.sklearn_digits import split_digits

    for seed in (5, 6, 5):  # the second seed-5 load reads the cache
        b = load_dataset("sklearn_digits", seed=seed, root=str(tmp_path), normalize=False)
        ref = split_digits(seed, 0.2)
        pixels = torch.from_numpy(ref["pixels"].astype(np.float32) / 16).unsqueeze(1)
        assert torch.equal(b.train.x, pixels[ref["train_idx"]]) and torch.equal(b.test.x, pixels[ref["test_idx"]])
        assert torch.equal(b.test.y, torch.from_numpy(ref["labels"][ref["test_idx"]]))
    assert len(list((tmp_path / "fedbn_cache").iterdir())) == 2


def test_sklearn_digits_from_the_cache_without_importing_scikit_learn(tmp_path):
    load_dataset("sklearn_digits", seed=1, root=str(tmp_path))
    code = ("import sys; from fedbn_bench.data import load_dataset; "
            f"load_dataset('sklearn_digits', seed=1, root={str(tmp_path)!r}); print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- toy gaussian


def test_toy_gaussian_defaults():
    b = load_dataset("toy_gaussian")
    assert not b.is_image and b.input_shape == (2,) and b.num_classes == 10
    assert len(b.train) == 300 and len(b.test) == 1000
    assert b.norm_mean is None  # raw coordinates, never normalized by default
    assert torch.equal(torch.bincount(b.train.y), torch.full((10,), 30))
    assert b.train.x.dtype == torch.float32 and b.train.y.dtype == torch.int64
    # raw: the overall mean is near the origin, the spread is about the radius
    assert b.train.x.abs().max() > 8


def test_toy_gaussian_class_means_and_std():
    b = load_dataset("toy_gaussian", samples_per_class=3000, seed=1)
    for k in range(10):
        mu = torch.tensor([10 * math.cos(2 * math.pi * k / 10), 10 * math.sin(2 * math.pi * k / 10)])
        pts = b.train.x[b.train.y == k]
        assert pts.shape == (3000, 2)
        assert torch.linalg.norm(pts.mean(0) - mu) < 0.1  # s.e. ~ 0.018 per coordinate
        assert torch.allclose(pts.std(0), torch.ones(2), atol=0.06)
    b2 = load_dataset("toy_gaussian", radius=5.0, std=0.5, samples_per_class=2000, test_samples_per_class=7)
    assert len(b2.test) == 70
    pts = b2.train.x[b2.train.y == 0]
    assert torch.allclose(pts.mean(0), torch.tensor([5.0, 0.0]), atol=0.06)
    assert torch.allclose(pts.std(0), torch.full((2,), 0.5), atol=0.03)


def test_toy_gaussian_determinism_and_streams():
    a = load_dataset("toy_gaussian", seed=5)
    b = load_dataset("toy_gaussian", seed=5)
    c = load_dataset("toy_gaussian", seed=6)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.x, b.test.x)
    assert not torch.allclose(a.train.x, c.train.x)
    n = load_dataset("toy_gaussian", normalize=True)
    assert torch.allclose(n.train.x.mean(0), torch.zeros(2), atol=1e-5)


def test_toy_gaussian_rejects_domains():
    with pytest.raises(DatasetError, match="num_domains"):
        load_dataset("toy_gaussian", num_domains=2)


# --------------------------------------------------------------------------- feature-shift domains

K_ALL = len(DOMAIN_TRANSFORMS)


@pytest.fixture(scope="module")
def shifted_raw():
    return load_dataset("sklearn_digits", num_domains=K_ALL, normalize=False, seed=0)


def _dom(split: Split, d: int) -> torch.Tensor:
    return (split.domain == d).nonzero(as_tuple=True)[0]


def test_domain_metadata(shifted_raw):
    b = shifted_raw
    assert b.domain_names == list(DOMAIN_TRANSFORMS)
    assert b.domain_names[:2] == ["identity", "invert"]
    assert b.num_domains == K_ALL
    for s in (b.train, b.test):
        assert s.domain.dtype == torch.int64 and s.domain.shape == s.y.shape
        assert sorted(s.domain.unique().tolist()) == list(range(K_ALL))
        assert s.x.min() >= 0.0 and s.x.max() <= 1.0


@pytest.mark.parametrize("k", [2, 3, K_ALL])
def test_domain_assignment_is_stratified(k):
    b = load_dataset("sklearn_digits", num_domains=k, seed=2)
    for s in (b.train, b.test):
        counts = torch.zeros(10, k, dtype=torch.long)
        counts.index_put_((s.y, s.domain), torch.ones_like(s.y), accumulate=True)
        spread = counts.max(dim=1).values - counts.min(dim=1).values
        assert torch.all(spread <= 1), counts
        sizes = counts.sum(0)
        assert sizes.max() - sizes.min() <= 1


def test_assign_domains_direct():
    y = torch.tensor([0] * 7 + [1] * 5 + [2] * 1)
    g = torch.Generator().manual_seed(0)
    d = data.assign_domains(y, 3, g)
    for c in range(3):
        cnt = torch.bincount(d[y == c], minlength=3)
        assert cnt.max() - cnt.min() <= 1


def test_each_transform_changes_images_except_identity(shifted_raw, digits_raw):
    # same seed => same train/test split, so sample i is the same digit in both bundles
    for split, raw in ((shifted_raw.train, digits_raw.train), (shifted_raw.test, digits_raw.test)):
        assert torch.equal(split.y, raw.y)
        for d, name in enumerate(shifted_raw.domain_names):
            idx = _dom(split, d)
            diff = (split.x[idx] - raw.x[idx]).abs().flatten(1).amax(1)
            if name == "identity":
                assert torch.equal(split.x[idx], raw.x[idx])
            else:
                assert torch.all(diff > 1e-3), name  # every single image is changed


def test_transform_definitions(shifted_raw, digits_raw):
    names = shifted_raw.domain_names
    s, r = shifted_raw.train, digits_raw.train

    def pair(name):
        idx = _dom(s, names.index(name))
        return s.x[idx], r.x[idx]

    out, raw = pair("invert")
    assert torch.allclose(out, 1 - raw)

    out, raw = pair("color")  # one affine map g*x+b for the single channel
    A = torch.stack([raw.flatten(), torch.ones(raw.numel())], 1).double()
    sol = torch.linalg.lstsq(A, out.flatten().double().unsqueeze(1)).solution.squeeze(1)
    g, bias = sol.tolist()
    assert 0.35 - 1e-6 <= g <= 0.65 + 1e-6 and 0 <= bias <= 1 - g + 1e-6
    assert torch.allclose(out, g * raw + bias, atol=1e-5)

    out, raw = pair("blur")

    def tv(z):
        return (z[..., 1:, :] - z[..., :-1, :]).abs().sum((1, 2, 3)) + (z[..., :, 1:] - z[..., :, :-1]).abs().sum((1, 2, 3))

    assert torch.all(tv(out) <= tv(raw) + 1e-4)
    assert tv(out).sum() < 0.8 * tv(raw).sum()

    out, raw = pair("noise")
    inside = (out > 0) & (out < 1)
    resid = (out - raw)[inside]
    assert 0.15 < resid.std().item() < 0.25 and abs(resid.mean().item()) < 0.05

    out, raw = pair("texture")  # x + a (1 - x) t with one fixed texture t
    assert torch.all(out >= raw - 1e-6)
    assert torch.allclose(out[raw == 1], raw[raw == 1])
    t = (out - raw) / (1 - raw).clamp_min(1e-6)
    dark = raw == 0
    tex_est = torch.where(dark, t, torch.nan)
    first = tex_est.nan_to_num(0).sum(0) / dark.sum(0).clamp_min(1)
    # wherever a pixel is dark in two images, the texture value there is identical
    assert torch.allclose(torch.where(dark, t, first.expand_as(t)), first.expand_as(t), atol=1e-5)
    assert first[dark.any(0)].std() > 0.05  # and it is a real texture, not a constant

    out, raw = pair("pixelate")
    blocks = out.unfold(2, 2, 2).unfold(3, 2, 2)  # (n,1,4,4,2,2)
    assert torch.all(blocks.amax((-1, -2)) == blocks.amin((-1, -2)))
    assert torch.allclose(blocks[..., 0, 0], F.avg_pool2d(raw, 2), atol=1e-6)


def test_transform_parameters_shared_by_train_and_test(shifted_raw, digits_raw):
    names = shifted_raw.domain_names
    fits = []
    for s, r in ((shifted_raw.train, digits_raw.train), (shifted_raw.test, digits_raw.test)):
        idx = _dom(s, names.index("color"))
        out, raw = s.x[idx].flatten(), r.x[idx].flatten()
        A = torch.stack([raw, torch.ones_like(raw)], 1).double()
        fits.append(torch.linalg.lstsq(A, out.double().unsqueeze(1)).solution.squeeze(1))
    assert torch.allclose(fits[0], fits[1], atol=1e-5)


def test_domains_determinism_and_normalization():
    a = load_dataset("sklearn_digits", num_domains=4, seed=7)
    b = load_dataset("sklearn_digits", num_domains=4, seed=7)
    c = load_dataset("sklearn_digits", num_domains=4, seed=8)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.domain, b.test.domain)
    assert torch.equal(a.train.domain, b.train.domain)
    assert not torch.equal(a.train.domain, c.train.domain)
    assert abs(a.train.x.mean().item()) < 1e-5
    assert abs(a.train.x.std(unbiased=False).item() - 1) < 1e-5


def test_explicit_domain_transforms_and_limits():
    b = load_dataset("sklearn_digits", domain_transforms=["blur", "invert"], normalize=False)
    assert b.domain_names == ["blur", "invert"] and b.num_domains == 2
    raw = load_dataset("sklearn_digits", normalize=False)
    idx = _dom(b.train, 1)
    assert torch.allclose(b.train.x[idx], 1 - raw.train.x[idx])
    with pytest.raises(DatasetError) as ei:
        load_dataset("sklearn_digits", num_domains=K_ALL + 1)
    assert "num_domains" in str(ei.value) and str(K_ALL) in str(ei.value)
    with pytest.raises(DatasetError, match="sepia"):
        load_dataset("sklearn_digits", domain_transforms=["sepia"])
    with pytest.raises(DatasetError, match="num_domains"):
        load_dataset("sklearn_digits", num_domains=3, domain_transforms=["blur"])


def test_blur_matches_conv2d_reference():
    from fedbn_bench.data.domains import gaussian_blur

    x = torch.rand(4, 3, 9, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sigma = 1.3
    r = math.ceil(2 * sigma)
    t = torch.arange(-r, r + 1, dtype=torch.float64)
    k1 = torch.exp(-0.5 * (t / sigma) ** 2)
    k1 = k1 / k1.sum()
    k2 = torch.outer(k1, k1).expand(3, 1, 2 * r + 1, 2 * r + 1)
    ref = F.conv2d(F.pad(x, (r, r, r, r), mode="replicate"), k2, groups=3)
    ours = gaussian_blur(x.float(), sigma).double()
    assert torch.allclose(ours, ref, atol=1e-5)


def test_transforms_on_colour_images():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6, 3, 32, 32, generator=g)
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    out, dom = data.apply_feature_shift(x, y, list(DOMAIN_TRANSFORMS), seed=0, split_id=0)
    assert out.shape == x.shape and dom.shape == (6,)
    assert out.min() >= 0 and out.max() <= 1
    idx = (dom == DOMAIN_TRANSFORMS.index("color")).nonzero(as_tuple=True)[0]
    if idx.numel():
        # per-channel gains differ (colour cast), so channels are mapped differently
        gains = []
        for ch in range(3):
            A = torch.stack([x[idx, ch].flatten(), torch.ones(x[idx, ch].numel())], 1)
            gains.append(torch.linalg.lstsq(A, out[idx, ch].flatten().unsqueeze(1)).solution[0, 0])
        assert len({round(float(v), 4) for v in gains}) == 3


# --------------------------------------------------------------------------- random_crop_flip


def _reference_crop(x: torch.Tensor, p: int, dy: int, dx: int, flip: bool) -> torch.Tensor:
    """Per-sample reference: place x in a zero canvas, cut the window, maybe mirror."""
    c, h, w = x.shape
    canvas = torch.zeros(c, h + 2 * p, w + 2 * p, dtype=x.dtype)
    canvas[:, p : p + h, p : p + w] = x
    out = canvas[:, dy : dy + h, dx : dx + w]
    return out.flip(-1) if flip else out


def _match(x_b, out_b, p, flips):
    hits = []
    for dy in range(2 * p + 1):
        for dx in range(2 * p + 1):
            for f in flips:
                if torch.equal(_reference_crop(x_b, p, dy, dx, f), out_b):
                    hits.append((dy, dx, f))
    return hits


def test_random_crop_flip_flip_only():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 3, 5, 7, generator=g)
    out = random_crop_flip(x, torch.Generator().manual_seed(1), padding=0, flip=True)
    assert out.shape == x.shape and out.dtype == x.dtype
    same = (out == x).flatten(1).all(1)
    flipped = (out == x.flip(-1)).flatten(1).all(1)
    assert torch.all(same ^ flipped)
    assert 10 < int(flipped.sum()) < 54  # both outcomes happen
    out2 = random_crop_flip(x, torch.Generator().manual_seed(1), padding=0, flip=False)
    assert torch.equal(out2, x)


@pytest.mark.parametrize("flip", [True, False])
def test_random_crop_is_a_translation(flip):
    g = torch.Generator().manual_seed(0)
    p = 2
    x = torch.rand(40, 2, 6, 5, generator=g) + 0.5  # strictly positive, so padding is visible
    out = random_crop_flip(x, torch.Generator().manual_seed(3), padding=p, flip=flip)
    assert out.shape == x.shape
    offsets, flips = set(), []
    for b in range(x.shape[0]):
        hits = _match(x[b], out[b], p, [False, True] if flip else [False])
        assert len(hits) == 1, (b, hits)  # exactly one translation (+flip) reproduces it
        dy, dx, f = hits[0]
        offsets.add((dy, dx))
        flips.append(f)
    assert len(offsets) > 5  # offsets really vary
    if flip:
        assert 0 < sum(flips) < len(flips)


def test_random_crop_flip_determinism():
    x = torch.rand(32, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    a = random_crop_flip(x, torch.Generator().manual_seed(11))
    b = random_crop_flip(x, torch.Generator().manual_seed(11))
    c = random_crop_flip(x, torch.Generator().manual_seed(12))
    assert torch.equal(a, b) and not torch.equal(a, c)
    g = torch.Generator().manual_seed(11)
    first = random_crop_flip(x, g)
    second = random_crop_flip(x, g)  # generator state advances
    assert torch.equal(first, a) and not torch.equal(first, second)
    with pytest.raises(ValueError):
        random_crop_flip(x[0], g)


TEST_DEVICE = os.environ.get("FEDBN_TEST_DEVICE", "cuda")
"""The CUDA tier's device (``tests/test_cuda.py``): ``cpu`` stands in for the GPU."""


@pytest.mark.cuda
@pytest.mark.skipif(TEST_DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs CUDA")
def test_random_crop_flip_cuda_generator():
    x = torch.rand(16, 3, 8, 8, device=TEST_DEVICE)
    g1 = torch.Generator(device=TEST_DEVICE).manual_seed(0)
    g2 = torch.Generator(device=TEST_DEVICE).manual_seed(0)
    a, b = random_crop_flip(x, g1), random_crop_flip(x, g2)
    assert a.device.type == TEST_DEVICE and torch.equal(a, b)
    for i in range(16):
        assert _match(x[i].cpu(), a[i].cpu(), 4, [False, True])


# --------------------------------------------------------------------------- torchvision-layout loaders

_EXPECTED = {
    "mnist": os.path.join("MNIST", "raw", "train-images-idx3-ubyte"),
    "fashion_mnist": os.path.join("FashionMNIST", "raw", "train-images-idx3-ubyte"),
    "cifar10": os.path.join("cifar-10-batches-py", "data_batch_1"),
    "cifar100": os.path.join("cifar-100-python", "train"),
}


@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_missing_root_names_path_and_download(name, tmp_path):
    root = tmp_path / "nodata"
    with pytest.raises(DatasetError) as ei:
        load_dataset(name, root=str(root))
    msg = str(ei.value)
    assert str(root / _EXPECTED[name]) in msg
    assert "download" in msg and "scripts/download_data.py" in msg
    assert "\n" not in msg
    assert not root.exists()  # reading never creates directories


def _online(host: str) -> bool:
    try:
        with socket.create_connection((host, 443), timeout=3):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    "name,host",
    [("mnist", "ossci-datasets.s3.amazonaws.com"), ("cifar10", "www.cs.toronto.edu")],
)
def test_download_offline_fails_fast(name, host, tmp_path, monkeypatch):
    if _online(host):
        pytest.skip("machine is online; the offline failure path cannot be exercised")
    monkeypatch.setattr(_files, "DOWNLOAD_TIMEOUT", 3.0)
    before = socket.getdefaulttimeout()
    t0 = time.monotonic()
    with pytest.raises(DatasetError) as ei:
        load_dataset(name, root=str(tmp_path), download=True)
    elapsed = time.monotonic() - t0
    assert elapsed < 20, elapsed
    msg = str(ei.value)
    assert "download" in msg and "failed" in msg
    assert str(tmp_path / os.path.dirname(_EXPECTED[name])) in msg
    assert socket.getdefaulttimeout() == before  # timeout restored


def _write_idx(path, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    magic = 0x0800 + arr.ndim  # 0x08 = unsigned byte
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(arr.tobytes())


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_like_from_idx_fixture(name, folder, tmp_path):
    rng = np.random.default_rng(0)
    raw = tmp_path / folder / "raw"
    raw.mkdir(parents=True)
    xtr = rng.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    ytr = rng.integers(0, 10, size=12).astype(np.uint8)
    xte = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    yte = rng.integers(0, 10, size=5).astype(np.uint8)
    _write_idx(raw / "train-images-idx3-ubyte", xtr)
    _write_idx(raw / "train-labels-idx1-ubyte", ytr)
    _write_idx(raw / "t10k-images-idx3-ubyte", xte)
    _write_idx(raw / "t10k-labels-idx1-ubyte", yte)

    b = load_dataset(name, root=str(tmp_path), normalize=False)
    assert b.name == name and b.num_classes == 10 and b.input_shape == (1, 28, 28)
    assert b.train.x.dtype == torch.float32 and b.train.y.dtype == torch.int64
    assert torch.equal(b.train.x, torch.from_numpy(xtr).float().div(255).unsqueeze(1))
    assert torch.equal(b.test.x, torch.from_numpy(xte).float().div(255).unsqueeze(1))
    assert torch.equal(b.train.y, torch.from_numpy(ytr).long())
    assert torch.equal(b.test.y, torch.from_numpy(yte).long())

    n = load_dataset(name, root=str(tmp_path))
    assert abs(n.train.x.mean().item()) < 1e-5 and abs(n.train.x.std(unbiased=False).item() - 1) < 1e-4

    s = load_dataset(name, root=str(tmp_path), num_domains=2, normalize=False)
    assert s.domain_names == ["identity", "invert"]
    idx = (s.train.domain == 1).nonzero(as_tuple=True)[0]
    assert torch.allclose(s.train.x[idx], 1 - b.train.x[idx])


def _write_pickle(path, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def test_cifar10_from_pickle_fixture(tmp_path):
    rng = np.random.default_rng(1)
    base = tmp_path / "cifar-10-batches-py"
    base.mkdir()
    xs, ys = [], []
    for i in range(1, 6):
        x = rng.integers(0, 256, size=(3, 3072), dtype=np.uint8)
        y = rng.integers(0, 10, size=3).tolist()
        xs.append(x)
        ys += y
        _write_pickle(base / f"data_batch_{i}", {"batch_label": f"training batch {i} of 5", "data": x, "labels": y, "filenames": ["a", "b", "c"]})
    xte = rng.integers(0, 256, size=(4, 3072), dtype=np.uint8)
    yte = [9, 0, 3, 3]
    # torchvision's real files are Python-2 pickles: keys come back as bytes without latin1 decoding
    _write_pickle(base / "test_batch", {b"data": xte, b"labels": yte})
    _write_pickle(base / "batches.meta", {"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072})

    b = load_dataset("cifar10", root=str(tmp_path), normalize=False)
    assert b.input_shape == (3, 32, 32) and b.num_classes == 10
    xtr = np.concatenate(xs)
    assert len(b.train) == 15 and len(b.test) == 4
    assert torch.equal(b.train.x, torch.from_numpy(xtr).float().div(255).view(15, 3, 32, 32))
    # channel-major: the first 1024 bytes of a row are the red plane
    assert torch.equal(b.train.x[0, 0].flatten(), torch.from_numpy(xtr[0, :1024]).float().div(255))
    assert torch.equal(b.train.y, torch.tensor(ys))
    assert torch.equal(b.test.y, torch.tensor(yte))
    assert torch.equal(b.test.x, torch.from_numpy(xte).float().div(255).view(4, 3, 32, 32))

    n = load_dataset("cifar10", root=str(tmp_path))
    m = n.train.x.mean(dim=(0, 2, 3))
    sd = n.train.x.std(dim=(0, 2, 3), unbiased=False)
    assert torch.allclose(m, torch.zeros(3), atol=1e-5) and torch.allclose(sd, torch.ones(3), atol=1e-4)
    assert n.norm_mean.shape == (3,)

    # a corrupt batch gives a DatasetError naming the file
    (base / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="data_batch_3"):
        load_dataset("cifar10", root=str(tmp_path))


def test_cifar100_from_pickle_fixture(tmp_path):
    rng = np.random.default_rng(2)
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    xtr = rng.integers(0, 256, size=(6, 3072), dtype=np.uint8)
    ytr = [0, 99, 50, 7, 7, 1]
    xte = rng.integers(0, 256, size=(2, 3072), dtype=np.uint8)
    yte = [98, 2]
    _write_pickle(base / "train", {"data": xtr, "fine_labels": ytr, "coarse_labels": [0] * 6})
    _write_pickle(base / "test", {"data": xte, "fine_labels": yte, "coarse_labels": [1, 1]})
    _write_pickle(base / "meta", {"fine_label_names": [str(i) for i in range(100)]})
    b = load_dataset("cifar100", root=str(tmp_path), normalize=False)
    assert b.num_classes == 100
    assert torch.equal(b.train.y, torch.tensor(ytr)) and torch.equal(b.test.y, torch.tensor(yte))
    assert torch.equal(b.train.x, torch.from_numpy(xtr).float().div(255).view(6, 3, 32, 32))


# --------------------------------------------------------------------------- crop padding: black, configurable (audit #10)


def _reference_crop_fill(x: torch.Tensor, p: int, dy: int, dx: int, flip: bool, fill: torch.Tensor) -> torch.Tensor:
    """Per-sample reference: x placed in a canvas of ``fill`` (per channel), window cut, maybe mirrored."""
    c, h, w = x.shape
    canvas = fill.view(c, 1, 1).expand(c, h + 2 * p, w + 2 * p).clone()
    canvas[:, p : p + h, p : p + w] = x
    out = canvas[:, dy : dy + h, dx : dx + w]
    return out.flip(-1) if flip else out


def test_random_crop_pads_with_the_fill_value_exactly():
    x = torch.rand(48, 3, 6, 6, generator=torch.Generator().manual_seed(0)) + 0.5  # all > 0
    fill = torch.tensor([-1.9894, -0.25, -3.0])  # all < 0: every negative output value is padding
    out = random_crop_flip(x, torch.Generator().manual_seed(5), padding=3, fill=fill)
    for ch in range(3):
        border = out[:, ch][out[:, ch] < 0]
        assert border.numel() > 0 and torch.all(border == fill[ch])  # bit-exact black, per channel
    for b in range(48):  # and the image part is an exact translation (+ flip) of the input
        hits = [(dy, dx, f) for dy in range(7) for dx in range(7) for f in (False, True)
                if torch.equal(_reference_crop_fill(x[b], 3, dy, dx, f, fill), out[b])]
        assert len(hits) == 1
    # same draws as without a fill: only the border values differ
    zero = random_crop_flip(x, torch.Generator().manual_seed(5), padding=3)
    assert torch.equal(out.clamp(min=0), zero)
    with pytest.raises(ValueError, match="one value per channel"):
        random_crop_flip(x, torch.Generator(), padding=3, fill=torch.zeros(2))


@pytest.mark.parametrize("p", [2, 4])
def test_crop_padding_sets_the_offset_range(p):
    x = torch.rand(200, 1, 5, 5, generator=torch.Generator().manual_seed(1)) + 0.5
    out = random_crop_flip(x, torch.Generator().manual_seed(2), padding=p, flip=False)
    offsets = set()
    for b in range(200):
        hits = _match(x[b], out[b], p, [False])
        assert len(hits) == 1
        offsets.add(hits[0][:2])
    assert {dy for dy, _ in offsets} == set(range(2 * p + 1)) == {dx for _, dx in offsets}


def test_normalized_data_pads_black_and_raw_data_pads_zero(digits, digits_raw):
    # sklearn digits have black (raw 0) pixels: standardized black is their minimum, exactly
    mean, std = digits.norm_mean, digits.norm_std
    assert torch.equal(digits.train.pad_value, (0 - mean) / std)
    assert torch.equal(digits.train.pad_value, digits.train.x.amin(dim=(0, 2, 3)))
    assert digits_raw.train.pad_value is None  # raw pixels in [0, 1]: black is 0
    moved = digits.train.to("cpu")
    assert torch.equal(moved.pad_value, digits.train.pad_value) and moved.crop_padding == 4


def test_crop_padding_option_reaches_the_engines_batches(digits):
    from fedbn_bench.engine.sampling import AUGMENT_STREAM, client_round_batches, draw_batches, generator

    two = load_dataset("sklearn_digits", crop_padding=2).train
    assert two.crop_padding == 2
    idx = torch.arange(64)
    xb, _ = client_round_batches(two.x, two.y, idx, 8, 3, (0, 1, 2), True, two.crop_padding, two.pad_value)
    flat = draw_batches(idx, 8, 3, generator(0, 1, 2)).reshape(-1)
    want = random_crop_flip(two.x[flat], generator(0, 1, 2, AUGMENT_STREAM), 2, fill=two.pad_value)
    assert torch.equal(xb.reshape(want.shape), want)
    black = float(two.pad_value[0])
    assert bool((xb == black).any())  # padding is visible, and it is black
    with pytest.raises(DatasetError, match=r"crop_padding must be an integer >= 0 \(dataset.options.crop_padding\)"):
        load_dataset("sklearn_digits", crop_padding=-1)


@pytest.mark.parametrize("name, option", [("toy_gaussian", "samples_per_class"), ("toy_gaussian", "num_classes"),
                                          ("fedbn_gaussians", "dim"), ("fedbn_gaussians", "test_samples_per_class")])
@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_synthetic_sizes_must_be_positive_integers(name, option, bad):
    with pytest.raises(DatasetError, match=f"{name}: {option} must be a positive integer, got {bad}"):
        load_dataset(name, **{option: bad})
