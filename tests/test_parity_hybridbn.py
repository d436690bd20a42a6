"""``scripts/parity/hybridbn.py`` without the authors' code: the arguments it hands to their argparse, the
models each of their scripts runs, and the input swap that lets their Simple-CNN take 1 x 28 x 28."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wrapper():
    spec = importlib.util.spec_from_file_location("parity_hybridbn", ROOT / "scripts" / "parity" / "hybridbn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_their_arguments_name_the_model_and_the_cpu(wrapper):
    assert wrapper.their_arguments(["--lr", "0.01"], "cnn-hbn", cuda=False) == [
        "--lr", "0.01", "--model", "cnn-hbn", "--gpu", "-1"]
    assert wrapper.their_arguments(["--gpu", "0"], "cnn-bn", cuda=False) == ["--gpu", "0", "--model", "cnn-bn"]
    assert wrapper.their_arguments([], "cnn-bn", cuda=True) == ["--model", "cnn-bn"]


def test_each_main_runs_its_models_under_our_norm_names(wrapper):
    assert set(wrapper.MODELS) == set(wrapper.MAINS)
    assert {m: sorted(v.values()) for m, v in wrapper.MODELS.items()} == {
        "fedavg": ["bn", "gn", "ln", "none"], "fbn": ["fbn"], "hbn": ["hbn"], "fn": ["fedfn"]}


@pytest.mark.parametrize("argv", [["--main", "fedavg", "--model", "cnn-hbn"],
                                  ["--main", "hbn", "--model", "cnn-hbn", "--", "--model", "cnn-bn"]])
def test_a_model_its_main_does_not_run_or_a_second_model_is_refused(wrapper, monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", ["hybridbn.py", "--code", "x", "--record", "y", *argv])
    with pytest.raises(SystemExit):
        wrapper.parse()


class ThreeBlocks(nn.Module):
    """Stands in for their Simple-CNN: ``conv1`` a block whose first layer is a 3-channel convolution,
    three 2x2 max-pools, a 1024-wide flatten."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.rest = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.MaxPool2d(2, 2), nn.MaxPool2d(2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rest(self.conv1(x)).view(-1, 64 * 4 * 4)


def test_one_channel_input_takes_fashion_mnist_to_the_1024_flatten(wrapper):
    net = wrapper.one_channel_input(ThreeBlocks())
    first = net.conv1[0]
    assert (first.in_channels, first.out_channels, first.kernel_size, first.padding) == (1, 16, (3, 3), (1, 1))
    assert all(m.ceil_mode for m in net.modules() if isinstance(m, nn.MaxPool2d))
    assert net(torch.zeros(5, 1, 28, 28)).shape == (5, 1024)
