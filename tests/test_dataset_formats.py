"""Every dataset loader against tiny files in its exact on-disk format (written by fixtures_data.py).

For each format: the values read equal the values written (exactly where the format is lossless),
labels/domains/splits follow the documented rules, bad roots and files fail with one clear line,
and one round of training runs through ``run_experiment``.  No network is used, except checks that
an offline download fails fast (skipped when the machine is online).
"""
from __future__ import annotations

import bz2
import os
import pickle
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import fixtures_data as fx
from conftest import ROOT, compose_config
from fedbn_bench.data import DatasetError, LazyImages, _files, load_dataset, normalize_bundle
from fedbn_bench.data.abide import FEATURES, build_site_files, connectome_windows
from fedbn_bench.data.cache import image_cache
from fedbn_bench.data.digits5 import DOMAINS
from fedbn_bench.data.domainnet import DOMAINNET
from fedbn_bench.data.fetch import md5sum, verify_md5
from fedbn_bench.data.images import decode_image
from fedbn_bench.data.office_caltech10 import OFFICE
from fedbn_bench.data import svhn as svhn_module
from fedbn_bench.data.tinyimagenet import MD5 as TINY_MD5, fetch_tinyimagenet
from fedbn_bench.partition import make_partition
from fedbn_bench.runner import run_experiment


def one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


def pil_rgb(path) -> np.ndarray:
    with Image.open(path) as im:
        return np.array(im.convert("RGB")).transpose(2, 0, 1)


# --------------------------------------------------------------------------- torchvision formats


def test_svhn_mat_values_labels_and_cache(tmp_path, monkeypatch):
    written = fx.write_svhn(tmp_path)
    b = load_dataset("svhn", root=str(tmp_path), normalize=False)
    x, y = written["train"]
    assert b.train.x.shape == (40, 3, 32, 32) and b.test.x.shape == (20, 3, 32, 32)
    assert torch.equal(b.train.x[5], torch.from_numpy(x[:, :, :, 5].transpose(2, 0, 1).astype(np.float32) / 255))
    assert torch.equal(b.train.y, torch.from_numpy(y.reshape(-1).astype(np.int64) % 10))  # 10 -> 0
    assert sorted(b.train.y.unique().tolist()) == list(range(10))
    assert len(list((tmp_path / "fedbn_cache").glob("svhn-*"))) == 1
    # the second read comes from the uint8 cache, not the .mat files
    monkeypatch.setattr(svhn_module, "read_svhn_mat", lambda p: (_ for _ in ()).throw(AssertionError("re-parsed")))
    again = load_dataset("svhn", root=str(tmp_path), normalize=False)
    assert torch.equal(again.train.x, b.train.x)
    # replacing a source file invalidates the cache
    os.utime(tmp_path / "SVHN" / "test_32x32.mat", ns=(1, 1))
    with pytest.raises(AssertionError, match="re-parsed"):
        load_dataset("svhn", root=str(tmp_path))


def test_svhn_wrong_shape_is_one_clear_line(tmp_path):
    import scipy.io as sio

    fx.write_svhn(tmp_path)
    sio.savemat(tmp_path / "SVHN" / "test_32x32.mat", {"X": np.zeros((28, 28, 3, 4), np.uint8), "y": np.ones((4, 1))})
    with pytest.raises(DatasetError) as ei:
        load_dataset("svhn", root=str(tmp_path))
    msg = one_line(ei)
    assert "test_32x32.mat" in msg and "(32, 32, 3, N)" in msg


def test_usps_bz2_values_sparse_lines_and_labels(tmp_path):
    written = fx.write_usps(tmp_path)
    b = load_dataset("usps", root=str(tmp_path), normalize=False)
    values, labels = written["train"]
    assert b.train.x.shape == (30, 1, 16, 16) and b.test.x.shape == (20, 1, 16, 16)
    expected = ((values + 1.0) / 2.0 * 255.0).astype(np.uint8).reshape(-1, 1, 16, 16)  # torchvision's map
    assert torch.equal(b.train.x, torch.from_numpy(expected).float() / 255)
    assert b.train.x[0, 0].flatten()[0].item() == pytest.approx(127 / 255)  # omitted entry = value 0
    assert torch.equal(b.train.y, torch.from_numpy(labels - 1))


def test_usps_bad_line_is_one_clear_line(tmp_path):
    fx.write_usps(tmp_path)
    with bz2.open(tmp_path / "USPS" / "usps.t.bz2", "wt") as f:
        f.write("3 1:0.5 2:oops\n")
    with pytest.raises(DatasetError) as ei:
        load_dataset("usps", root=str(tmp_path))
    assert "usps.t.bz2 line 1" in one_line(ei)


# --------------------------------------------------------------------------- Tiny-ImageNet


def test_tinyimagenet_folder_labels_and_pixels(tmp_path):
    w = fx.write_tinyimagenet(tmp_path)
    b = load_dataset("tinyimagenet", root=str(tmp_path), normalize=False)
    wnids = sorted(w["wnids"])
    assert b.num_classes == 3 and b.train.x.shape == (12, 3, 64, 64) and b.test.x.shape == (6, 3, 64, 64)
    train_labels = sorted(wnids.index(c) for _, c in w["train"])
    assert sorted(b.train.y.tolist()) == train_labels
    assert b.test.y.tolist() == [wnids.index(c) for _, c in w["val"]]  # annotation order
    # the grey JPEG (first image of the first listed wnid) is replicated to 3 equal channels
    first = [i for i, (p, _) in enumerate(sorted(w["train"], key=lambda t: (wnids.index(t[1]), t[0].name)))
             if p.name.endswith("_0.JPEG") and p.parent.parent.name == w["wnids"][0]][0]
    grey = b.train.x[first]
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[1], grey[2])
    path, _ = w["val"][3]
    assert torch.equal(b.test.x[3], torch.from_numpy(pil_rgb(path)).float() / 255)


def test_tinyimagenet_lazy_equals_eager(tmp_path):
    fx.write_tinyimagenet(tmp_path)
    eager = load_dataset("tinyimagenet", root=str(tmp_path))
    lazy = load_dataset("tinyimagenet", root=str(tmp_path), lazy=True)
    assert isinstance(lazy.train.x, LazyImages)
    assert torch.allclose(lazy.train.x[torch.arange(12)], eager.train.x, atol=1e-5)
    assert torch.allclose(lazy.norm_mean, eager.norm_mean, atol=1e-5) and torch.allclose(lazy.norm_std, eager.norm_std, atol=1e-5)


def test_tinyimagenet_bad_annotation_and_checksum(tmp_path):
    fx.write_tinyimagenet(tmp_path)
    ann = tmp_path / "tiny-imagenet-200" / "val" / "val_annotations.txt"
    ann.write_text("val_0.JPEG\tn99\t0\t0\t1\t1\n")
    with pytest.raises(DatasetError) as ei:
        load_dataset("tinyimagenet", root=str(tmp_path))
    assert "val_annotations.txt line 1" in one_line(ei)
    archive = tmp_path / "tiny-imagenet-200.zip"  # a corrupt archive already in place: no network needed
    archive.write_bytes(b"not the archive")
    with pytest.raises(DatasetError) as ei:
        fetch_tinyimagenet(str(tmp_path))
    msg = one_line(ei)
    assert "checksum mismatch" in msg and TINY_MD5 in msg and md5sum(str(archive)) in msg and "delete the file" in msg
    verify_md5("x", str(archive), md5sum(str(archive)))  # the matching checksum passes


# --------------------------------------------------------------------------- Digits-5


def test_digits5_domains_range_percent_and_truncation(tmp_path):
    w = fx.write_digits5(tmp_path)  # parts of 10 samples, USPS parts of 8; 3 parts; tests of 12
    b = load_dataset("digits5", root=str(tmp_path), percent=0.2)
    assert b.domain_names == list(DOMAINS) and b.input_shape == (3, 28, 28)
    # FedBN's fixed [-1, 1] map, no train-stat normalization; pixels = x * 0.5 + 0.5 (attacks in pixels)
    assert torch.equal(b.norm_mean, torch.full((3,), 0.5)) and torch.equal(b.norm_std, torch.full((3,), 0.5))
    assert float(b.train.x.min()) >= -1.0 and float(b.train.x.max()) <= 1.0
    assert torch.bincount(b.train.domain).tolist() == [16] * 5  # 2 parts, truncated to USPS's 2 * 8
    assert torch.bincount(b.test.domain).tolist() == [12] * 5  # test sets whole
    # MNIST test images: 28x28 grey, exactly (u8 / 255 - 0.5) / 0.5 on all three channels
    x_mnist, y_mnist = w["MNIST"]["test"]
    got = b.test.x[b.test.domain == 0]
    want = torch.from_numpy(x_mnist).float().div(127.5).sub(1.0)
    assert torch.equal(got[:, 0], want) and torch.equal(got[:, 1], want) and torch.equal(got[:, 2], want)
    assert torch.equal(b.test.y[b.test.domain == 0], torch.from_numpy(y_mnist))
    # MNIST-M is colour 28x28: channels move first, no resize
    x_mm = w["MNIST_M"]["test"][0]
    assert torch.equal(b.test.x[b.test.domain == 4], torch.from_numpy(x_mm.transpose(0, 3, 1, 2)).float().div(127.5).sub(1.0))
    # truncation draws a seeded subset of the 20 MNIST training samples
    pool = np.concatenate([w["MNIST"][k][0] for k in (0, 1)])
    mnist_train = (b.train.x[b.train.domain == 0, 0] + 1.0) * 127.5
    matches = [int(np.flatnonzero((pool == img.round().numpy().astype(np.uint8)).all(axis=(1, 2)))[0]) for img in mnist_train]
    assert len(set(matches)) == 16
    untruncated = load_dataset("digits5", root=str(tmp_path), percent=0.2, truncate=False)
    assert torch.bincount(untruncated.train.domain).tolist() == [20, 20, 16, 20, 20]
    small = load_dataset("digits5", root=str(tmp_path), percent=0.05, truncate=False)  # half of part 0
    assert torch.bincount(small.train.domain).tolist() == [5, 5, 4, 5, 5]
    sub = load_dataset("digits5", root=str(tmp_path), domains=["SVHN", "USPS"])
    assert sub.domain_names == ["SVHN", "USPS"] and torch.bincount(sub.train.domain).tolist() == [8, 8]


def test_digits5_resize_of_svhn_and_usps(tmp_path):
    w = fx.write_digits5(tmp_path)
    b = load_dataset("digits5", root=str(tmp_path), truncate=False)
    for d, name in ((1, "SVHN"), (2, "USPS")):
        src = w[name]["test"][0]
        src = src[:, None] if src.ndim == 3 else src.transpose(0, 3, 1, 2)
        ref = torch.nn.functional.interpolate(torch.from_numpy(src).float(), size=(28, 28), mode="bilinear", antialias=True)
        got = (b.test.x[b.test.domain == d] + 1.0) * 127.5
        assert torch.allclose(got, ref.round().clamp(0, 255).expand(-1, 3, -1, -1), atol=1e-3)


def test_digits5_errors(tmp_path):
    fx.write_digits5(tmp_path, parts=1)
    with pytest.raises(DatasetError) as ei:
        load_dataset("digits5", root=str(tmp_path), percent=0.2)  # needs train_part1.pkl
    msg = one_line(ei)
    assert str(tmp_path / "MNIST" / "partitions" / "train_part1.pkl") in msg and "download_data.py digits5" in msg
    with open(tmp_path / "USPS" / "test.pkl", "wb") as f:
        pickle.dump((np.zeros((3, 16, 16), np.float32), np.zeros(3)), f)
    with pytest.raises(DatasetError) as ei:
        load_dataset("digits5", root=str(tmp_path))
    assert "USPS/test.pkl" in one_line(ei) and "uint8" in str(ei.value)
    for bad in ({"percent": 0}, {"percent": 1.5}, {"domains": ["MNIST", "Foo"]}):
        with pytest.raises(DatasetError):
            load_dataset("digits5", root=str(tmp_path), **bad)


def test_natural_domains_refuse_synthetic_shift(tmp_path):
    fx.write_digits5(tmp_path, parts=1)
    with pytest.raises(DatasetError) as ei:
        load_dataset("digits5", root=str(tmp_path), num_domains=3)
    assert "natural domains" in one_line(ei)


# --------------------------------------------------------------------------- Office-Caltech10 / DomainNet


def test_office_split_files_truncation_and_resize(tmp_path):
    w = fx.write_office(tmp_path, train_per_class={"amazon": 4})  # dslr: 3 train images, the smallest
    b = load_dataset("office_caltech10", root=str(tmp_path), image_size=24, percent=1.0)
    assert b.domain_names == list(OFFICE.sites) and b.num_classes == 10 and b.input_shape == (3, 24, 24)
    assert torch.bincount(b.train.domain).tolist() == [3, 3, 3, 3]  # int(1.0 * 3) per site
    assert torch.bincount(b.test.domain).tolist() == [3, 3, 3, 3]
    assert b.norm_mean is None and 0.0 <= float(b.train.x.min()) and float(b.train.x.max()) <= 1.0
    paths, names = w["webcam"]["test"]
    got = b.test.x[b.test.domain == 3]
    assert b.test.y[b.test.domain == 3].tolist() == [OFFICE.classes.index(n) for n in names]
    assert torch.equal(got[1], torch.from_numpy(decode_image(str(tmp_path / paths[1]), 24)).float() / 255)
    with Image.open(tmp_path / paths[1]) as im:  # FedBN's Resize([s, s]): bilinear, aspect ratio dropped
        ref = np.array(im.convert("RGB").resize((24, 24), Image.BILINEAR)).transpose(2, 0, 1)
    assert torch.equal(got[1], torch.from_numpy(ref).float() / 255)
    half = load_dataset("office_caltech10", root=str(tmp_path), image_size=8, percent=0.5, selection="first")
    assert torch.bincount(half.train.domain).tolist() == [1, 1, 1, 1]
    assert half.train.y.tolist() == [0, 0, 0, 0]  # first entry of each (class-sorted) split file


def test_office_default_image_size_is_256(tmp_path):
    fx.write_office(tmp_path, classes=["mug"], train_per_class={s: 1 for s in OFFICE.sites}, test_per_class=1)
    b = load_dataset("office_caltech10", root=str(tmp_path), percent=1.0)
    assert b.input_shape == (3, 256, 256) and len(b.train) == 4 and b.train.y.tolist() == [8] * 4


def test_office_missing_split_file_and_image(tmp_path):
    fx.write_office(tmp_path)
    (tmp_path / "office_caltech_10" / "dslr_test.pkl").unlink()
    with pytest.raises(DatasetError) as ei:
        load_dataset("office_caltech10", root=str(tmp_path))
    msg = one_line(ei)
    assert str(tmp_path / "office_caltech_10" / "dslr_test.pkl") in msg and "download_data.py office_caltech10" in msg
    fx.write_office(tmp_path)
    victim = next((tmp_path / "office_caltech_10" / "amazon").rglob("te0.jpg"))
    victim.unlink()
    with pytest.raises(DatasetError) as ei:
        load_dataset("office_caltech10", root=str(tmp_path))
    assert str(victim) in one_line(ei)


def test_domainnet_pkl_and_txt_lists_lazy(tmp_path):
    fx.write_domainnet(tmp_path)  # clipart has 3 train images per class, the others 2
    b = load_dataset("domainnet", root=str(tmp_path), image_size=16, percent=1.0)
    assert b.domain_names == list(DOMAINNET.sites) and b.num_classes == 10
    assert isinstance(b.train.x, LazyImages) and isinstance(b.test.x, LazyImages)
    assert torch.bincount(b.train.domain).tolist() == [6] * 6  # truncated to the smallest site (6)
    assert torch.bincount(b.test.domain).tolist() == [3] * 6  # aircraft_carrier entries skipped
    assert set(b.train.y.tolist()) <= {0, 1, 2}
    assert b.train.x.shape == (36, 3, 16, 16) and len(b.test.x) == 18
    eager = load_dataset("domainnet", root=str(tmp_path), image_size=16, percent=1.0, lazy=False)
    assert torch.equal(b.test.x[torch.arange(18)], eager.test.x) and torch.equal(b.test.y, eager.test.y)


# --------------------------------------------------------------------------- LazyImages


def test_lazy_images_index_stats_and_devices(tmp_path):
    rng = np.random.default_rng(0)
    files = []
    for i in range(7):
        p = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)).save(p)
        files.append(str(p))
    images, moments = image_cache(str(tmp_path / "c"), "t", {}, files, lambda p: decode_image(p, 4), (3, 4, 4))
    assert isinstance(images, np.memmap)
    full = LazyImages(images, moments)
    dense = torch.from_numpy(np.array(images)).float() / 255
    assert torch.equal(full[torch.tensor([5, 0, 5, 2])], dense[[5, 0, 5, 2]])
    assert torch.equal(full[1:6:2], dense[1:6:2]) and torch.equal(full[-1], dense[-1])
    view = full.subset(np.array([6, 1, 3]))
    assert view.shape == (3, 3, 4, 4) and len(view) == 3
    assert torch.equal(view[torch.tensor([True, False, True])], dense[[6, 3]])
    mean, std = view.channel_stats()
    d = dense[[6, 1, 3]].double()
    assert torch.allclose(mean.double(), d.mean(dim=(0, 2, 3)), atol=1e-6)
    assert torch.allclose(std.double(), d.std(dim=(0, 2, 3), unbiased=False), atol=1e-6)
    z = view.standardized(mean, std)
    assert torch.allclose(z.materialize(), (dense[[6, 1, 3]] - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1), atol=1e-5)
    moved = view.to("meta" if not torch.cuda.is_available() else "cuda")
    assert moved.device != view.device and view.device == torch.device("cpu")
    with pytest.raises(TypeError):
        view.to(dtype=torch.float64)
    with pytest.raises(IndexError):
        view[torch.zeros(2, 2, dtype=torch.long)]


def test_normalize_bundle_on_lazy_splits(tmp_path):
    fx.write_imagefolder(tmp_path)
    raw = load_dataset("imagenet", root=str(tmp_path), image_size=12, normalize=False)
    z = normalize_bundle(load_dataset("imagenet", root=str(tmp_path), image_size=12, normalize=False))
    assert isinstance(z.train.x, LazyImages)
    x = z.train.x[torch.arange(len(z.train))].double()
    assert torch.allclose(x.mean(dim=(0, 2, 3)), torch.zeros(3, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(x.std(dim=(0, 2, 3), unbiased=False), torch.ones(3, dtype=torch.float64), atol=1e-5)
    t_raw = raw.test.x[torch.arange(len(raw.test))]
    want = (t_raw - z.norm_mean.view(1, 3, 1, 1)) / z.norm_std.view(1, 3, 1, 1)
    assert torch.allclose(z.test.x[torch.arange(len(z.test))], want, atol=1e-5)


# --------------------------------------------------------------------------- ImageNet


def test_imagenet_imagefolder_center_crop_and_labels(tmp_path):
    w = fx.write_imagefolder(tmp_path)
    b = load_dataset("imagenet", root=str(tmp_path), image_size=20, normalize=False)
    assert isinstance(b.train.x, LazyImages) and b.num_classes == 3
    classes = sorted({c for _, c in w["train"]})
    order = sorted(w["val"], key=lambda t: (t[1], t[0].name))
    assert b.test.y.tolist() == [classes.index(c) for _, c in order]
    path = order[0][0]
    with Image.open(path) as im:
        im = im.convert("RGB")
        s = 20 / min(im.size)
        nw, nh = max(20, round(im.size[0] * s)), max(20, round(im.size[1] * s))
        im = im.resize((nw, nh), Image.BILINEAR)
        l, t = (nw - 20) // 2, (nh - 20) // 2
        ref = np.array(im.crop((l, t, l + 20, t + 20))).transpose(2, 0, 1)
    assert torch.equal(b.test.x[0], torch.from_numpy(ref).float() / 255)


def test_imagenet_missing_and_stray_folders(tmp_path):
    with pytest.raises(DatasetError) as ei:
        load_dataset("imagenet", root=str(tmp_path / "none"))
    assert str(tmp_path / "none" / "imagenet" / "train") in one_line(ei) and "download_data.py imagenet" in str(ei.value)
    assert not (tmp_path / "none").exists()
    fx.write_imagefolder(tmp_path)
    (tmp_path / "imagenet" / "val" / "n99").mkdir()
    with pytest.raises(DatasetError) as ei:
        load_dataset("imagenet", root=str(tmp_path))
    assert "n99" in one_line(ei)


# --------------------------------------------------------------------------- ABIDE


def test_abide_vectors_subject_split_and_train_mask(tmp_path):
    w = fx.write_abide(tmp_path, subjects=5, windows=4)
    b = load_dataset("abide", root=str(tmp_path), normalize=False)
    assert not b.is_image and b.input_shape == (FEATURES,) and b.num_classes == 2
    assert b.domain_names == ["NYU", "UM", "USM", "UCLA"]
    assert torch.bincount(b.test.domain).tolist() == [4] * 4  # ceil(0.2 * 5) = 1 subject of 4 windows per site
    x_nyu = torch.from_numpy(w["NYU"]["x"])
    test_rows = b.test.x[b.test.domain == 0]
    hits = [int(torch.nonzero((x_nyu == r).all(dim=1))[0]) for r in test_rows]
    assert len({h // 4 for h in hits}) == 1  # all windows of one subject
    train_rows = b.train.x[b.train.domain == 0]
    assert not any(bool((train_rows == r).all(dim=1).any()) for r in test_rows)
    mask = np.zeros(20, dtype=bool)
    mask[:15] = True
    np.savez(tmp_path / "ABIDE" / "UM.npz", x=w["UM"]["x"], y=w["UM"]["y"], train=mask)
    fixed = load_dataset("abide", root=str(tmp_path), normalize=False)
    assert torch.equal(fixed.test.x[fixed.test.domain == 1], torch.from_numpy(w["UM"]["x"][15:]))


def test_abide_errors(tmp_path):
    with pytest.raises(DatasetError) as ei:
        load_dataset("abide", root=str(tmp_path))
    assert str(tmp_path / "ABIDE" / "NYU.npz") in one_line(ei) and "download_data.py abide" in str(ei.value)
    fx.write_abide(tmp_path)
    np.savez(tmp_path / "ABIDE" / "USM.npz", x=np.zeros((4, 100), np.float32), y=np.zeros(4, np.int64))
    with pytest.raises(DatasetError) as ei:
        load_dataset("abide", root=str(tmp_path))
    assert "USM.npz" in one_line(ei) and "5995" in str(ei.value)


def test_connectome_windows_and_site_builder(tmp_path):
    rng = np.random.default_rng(1)
    series = rng.normal(size=(40, 110))
    x = connectome_windows(series)
    assert x.shape == (9, 5995)
    ref = np.corrcoef(series[3:35].T)[np.triu_indices(110, 1)]
    assert np.allclose(x[3], ref, atol=1e-5)
    rois = tmp_path / "rois"
    rois.mkdir()
    rows = ["SUB_ID,SITE_ID,DX_GROUP"]
    for sub, site, dx in ((50001, "NYU", 1), (50002, "NYU", 2), (50003, "UM_1", 2), (50004, "CMU", 1), (50005, "USM", 1)):
        rows.append(f"{sub},{site},{dx}")
        if sub != 50005:  # USM subject without a series file: skipped
            body = "\n".join(" ".join(f"{v:.5f}" for v in r) for r in rng.normal(size=(33, 111)))
            (rois / f"{site}_{sub:07d}_rois_ho.1D").write_text("#" + "\t".join(f"#{i}" for i in range(111)) + "\n" + body + "\n")
    (tmp_path / "pheno.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(DatasetError, match="111 ROI columns"):
        build_site_files(str(rois), str(tmp_path / "pheno.csv"), str(tmp_path / "out"))
    counts = build_site_files(str(rois), str(tmp_path / "pheno.csv"), str(tmp_path / "out"), drop_columns=[110])
    assert counts == {"NYU": 4, "UM": 2}
    with np.load(tmp_path / "out" / "NYU.npz") as f:
        assert f["x"].shape == (4, 5995) and f["y"].tolist() == [1, 1, 0, 0] and f["subject"].tolist() == [50001] * 2 + [50002] * 2


# --------------------------------------------------------------------------- missing roots, offline downloads

NEW = ("svhn", "usps", "tinyimagenet", "digits5", "office_caltech10", "domainnet", "abide", "imagenet")


@pytest.mark.parametrize("name", NEW)
def test_missing_root_names_path_and_fix(name, tmp_path):
    root = tmp_path / "nodata"
    with pytest.raises(DatasetError) as ei:
        load_dataset(name, root=str(root))
    msg = one_line(ei)
    assert str(root) in msg and f"download_data.py {name}" in msg
    assert not root.exists()


def _offline() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        socket.getaddrinfo("cs231n.stanford.edu", 80)
        return False
    except OSError:
        return True


@pytest.mark.parametrize("name", ["svhn", "usps", "tinyimagenet"])
def test_download_offline_fails_fast(name, tmp_path, monkeypatch):
    if not _offline():
        pytest.skip("machine is online; the offline failure path cannot be exercised")
    monkeypatch.setattr(_files, "DOWNLOAD_TIMEOUT", 3.0)
    t0 = time.monotonic()
    with pytest.raises(DatasetError) as ei:
        load_dataset(name, root=str(tmp_path), download=True)
    assert time.monotonic() - t0 < 20
    msg = one_line(ei)
    assert "download" in msg and "failed" in msg and str(tmp_path) in msg


def test_cli_download_offline_fails_fast_with_one_line(tmp_path):
    if not _offline():
        pytest.skip("machine is online; the offline failure path cannot be exercised")
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "offline"}
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "logger=none", "progress=false", f"hydra.run.dir={tmp_path / 'run'}",
         "dataset=cifar10", f"dataset.root={tmp_path / 'data'}", "dataset.download=true"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 2 and time.monotonic() - t0 < 90
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "download" in last and "failed" in last and "offline" in last, result.stderr
    assert "download_data.py cifar10" in last


# --------------------------------------------------------------------------- one round through the runner

TINY = ["rounds=1", "eval_every=1", "batch_size=2", "algo.local_steps=2", "device=cpu"]

RUNS = {
    "svhn": (fx.write_svhn, ["partition=iid", "num_clients=2"]),
    "usps": (fx.write_usps, ["partition=iid", "num_clients=2"]),
    "tinyimagenet": (fx.write_tinyimagenet, ["partition=iid", "num_clients=2"]),
    "digits5": (fx.write_digits5, ["partition=domains", "num_clients=10", "partition.clients_per_domain=2"]),
    "office_caltech10": (fx.write_office, ["partition=domains", "num_clients=4", "dataset.options.percent=1.0", "dataset.options.image_size=16"]),
    "domainnet": (fx.write_domainnet, ["partition=domains", "num_clients=6", "dataset.options.percent=1.0", "dataset.options.image_size=16"]),
    "abide": (fx.write_abide, ["partition=domains", "num_clients=4", "model=mlp", "+model.options.hidden_sizes=[16,16]"]),
    "imagenet": (fx.write_imagefolder, ["partition=iid", "num_clients=2", "dataset.options.image_size=16"]),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_one_round_of_training(name, tmp_path):
    writer, extra = RUNS[name]
    writer(tmp_path / "data")
    cfg = compose_config([f"dataset={name}", f"dataset.root={tmp_path / 'data'}", *TINY, *extra])
    summary = run_experiment(cfg, tmp_path / "run")
    assert summary["status"] == "completed" and summary["rounds_completed"] == 1
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert np.isfinite(metrics["train_loss"]).all() and 0.0 <= metrics["test_acc"].iloc[-1] <= 1.0
    partition = pd.read_csv(tmp_path / "run" / "partition.csv", index_col="client")
    bundle = load_dataset(name, root=str(tmp_path / "data"), **dict(cfg.dataset.options))
    assert partition["total"].sum() == len(bundle.train)  # every training sample, once
    per_domain = [c for c in metrics.columns if c.startswith("acc_")]
    assert per_domain == [f"acc_{n}" for n in (bundle.domain_names or [])]  # natural domains, no synthetic ones


def test_domains_partition_groups_digits5_clients_by_domain(tmp_path):
    fx.write_digits5(tmp_path)
    b = load_dataset("digits5", root=str(tmp_path), percent=0.3)
    parts = make_partition("domains", b.train.y, 10, 0, domains=b.train.domain, clients_per_domain=2)
    assert [set(b.train.domain[p].tolist()) for p in parts] == [{c // 2} for c in range(10)]
    assert sorted(torch.cat(parts).tolist()) == list(range(len(b.train)))
