"""``scripts/download_data.py NAME --from DIR``: MNIST / Fashion-MNIST installed from a local folder of IDX
files (plain or ``.gz``, as Debian's ``dataset-fashion-mnist`` ships them) into torchvision's layout, read
back bit for bit; a folder lacking a file or a data set without IDX files is refused before anything is
written."""
from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from fedbn_bench.data import DatasetError, load_dataset
from fedbn_bench.data.mnist import install_idx_files
from fixtures_data import write_mnist


def download_data():
    spec = importlib.util.spec_from_file_location("download_data", ROOT / "scripts" / "download_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gzipped_copy(raw: Path, out: Path) -> Path:
    out.mkdir(parents=True)
    for path in raw.iterdir():
        (out / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
    return out


def test_fashion_mnist_from_a_folder_of_gz_files(tmp_path, capsys):
    data = write_mnist(tmp_path / "made", folder="FashionMNIST", n_train=12, n_test=6)
    source = gzipped_copy(tmp_path / "made" / "FashionMNIST" / "raw", tmp_path / "debian")
    root = tmp_path / "root"
    assert download_data().main(["fashion_mnist", "--from", str(source), "--root", str(root)]) == 0
    assert "ready: fashion_mnist" in capsys.readouterr().out
    made = tmp_path / "made" / "FashionMNIST" / "raw"
    for path in made.iterdir():
        assert (root / "FashionMNIST" / "raw" / path.name).read_bytes() == path.read_bytes()
    bundle = load_dataset("fashion_mnist", root=str(root))
    assert len(bundle.train.y) == 12 and np.array_equal(bundle.test.y.numpy(), data["test"][1].astype(np.int64))


def test_a_missing_file_is_named_and_nothing_is_written(tmp_path):
    write_mnist(tmp_path / "made", folder="MNIST")
    (tmp_path / "made" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError, match=r"lacks t10k-labels-idx1-ubyte\[\.gz\]"):
        install_idx_files("mnist", str(tmp_path / "made" / "MNIST" / "raw"), str(tmp_path / "root"))
    assert not (tmp_path / "root").exists()


def test_from_is_refused_for_data_sets_without_idx_files(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        download_data().main(["cifar10", "--from", str(tmp_path)])
    assert exit_info.value.code == 2 and "not cifar10" in capsys.readouterr().err
