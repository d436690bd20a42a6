"""Run one of the HBN authors' main scripts (HybridBN ``FedAvg_main.py``, ``FBN_main.py``, ``FedHBN_main.py``
or ``FedFN_main.py``, unmodified) on Fashion-MNIST and write its run record beside ours (scripts/parity/README.md).

Their script runs as it is (``runpy``), from a checkout outside this repository (``--code``), in a scratch
working directory (``--workdir``: their ``log.txt`` and pickled model). Before it runs, this wrapper replaces
only what their code cannot express:

* ``sampling.dataLoader.dataLoader``: Fashion-MNIST from ``--data`` (torchvision's files), pixels / 255
  standardised with the kept training split's mean and population sd, no augmentation: what
  ``dataset=fashion_mnist`` gives us (``data/__init__.py``, ``normalize_bundle``), as their CIFAR loader
  normalises with CIFAR's constants. ``--inputs unit`` leaves pixels in [0, 1] (the committed runs before
  this option, ``results/parity/README.md``). Theirs knows CIFAR-10/100 and Tiny-ImageNet only.
  ``--train-samples``/``--test-samples`` keep the first N (smoke runs).
* ``models.Nets.set_sever_net``: THEIR builder (their Simple-CNN and their ``replace_bn_with_*`` for
  ``--model``), after which the first convolution takes 1 channel instead of 3 and the three max-pools round
  up (``ceil_mode``: 28 -> 14 -> 7 -> 4, so their ``view(-1, 1024)`` holds): our ``model=simple_cnn`` on
  1 x 28 x 28. Nothing else of the model changes (their layers, forward and FedFN feature normalisation).
* ``sampling.sampling.ClientShow``: nothing (a seaborn heat map over the whole data; no random numbers).
* the seed: their options module seeds 42 on import; ``--seed S`` re-seeds torch, numpy and random.

``--main`` picks the script, ``--model`` its model (their names; each script runs the models listed in
``MODELS``). Every other argument after ``--`` goes to their argparse (``FedBaseline/options/options.py``);
``--gpu -1`` is added when there is no GPU (their evaluation calls ``.cuda()`` otherwise). The record
(``records/reference_log.py``) goes to ``--record``, with ``norm.name`` set to our name of the method.

    python scripts/parity/hybridbn.py --code /tmp/HybridBN --main hbn --model cnn-hbn --seed 0 \
        --record results/hbn/parity_code/authors/hbn-seed0 -- --communication_round 1 ...
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import runpy
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from fedbn_bench.records.reference_log import write_hybridbn_record  # noqa: E402

MAINS = {"fedavg": "FedAvg_main.py", "fbn": "FBN_main.py", "hbn": "FedHBN_main.py", "fn": "FedFN_main.py"}
"""``--main`` -> their script."""
MODELS = {"fedavg": {"cnn-bn": "bn", "cnn-gn": "gn", "cnn-ln": "ln", "cnn-nn": "none"},
          "fbn": {"cnn-fbn": "fbn"}, "hbn": {"cnn-hbn": "hbn"}, "fn": {"cnn-fn": "fedfn"}}
"""The models each script runs (their options.py: "FedAvg_main can only run gn, bn and ln"), with our norm's name."""
COMMIT = "1c0e151007f5e08a9bf88efe5b94ee7151c4a926"


class Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, terminal: io.TextIOBase) -> None:
        self.terminal, self.copy = terminal, io.StringIO()

    def write(self, text: str) -> int:
        self.terminal.write(text)
        self.terminal.flush()
        return self.copy.write(text)


def parse() -> tuple[argparse.Namespace, list[str]]:
    """The wrapper's options, and the arguments for their argparse."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--code", required=True, type=Path, help="a HybridBN checkout (the main scripts at its top)")
    parser.add_argument("--main", required=True, choices=sorted(MAINS), help="which of their main scripts")
    parser.add_argument("--model", required=True, help="their model name (MODELS), passed to their --model")
    parser.add_argument("--commit", default=COMMIT, help="the checkout's commit, recorded in the run's config")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", required=True, type=Path, help="run directory to write (our layout)")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="torchvision root holding FashionMNIST/")
    parser.add_argument("--train-samples", type=int, default=None, help="keep the first N training images")
    parser.add_argument("--test-samples", type=int, default=None, help="keep the first N test images")
    parser.add_argument("--workdir", type=Path, default=None, help="their outputs (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--inputs", choices=("standardized", "unit"), default="standardized",
                        help="standardized: the training split's mean and sd, as ours; unit: pixels in [0, 1]")
    args, theirs = parser.parse_known_args()
    if args.model not in MODELS[args.main]:
        parser.error(f"--main {args.main} runs --model {' | '.join(MODELS[args.main])}, not {args.model}")
    theirs = [a for a in theirs if a != "--"]
    if "--model" in theirs:
        parser.error("give the model as the wrapper's --model, not after --")
    return args, theirs


def their_arguments(theirs: list[str], model: str, cuda: bool) -> list[str]:
    """Their argv: the arguments given, ``--model``, and ``--gpu -1`` without a GPU unless ``--gpu`` is given."""
    out = [*theirs, "--model", model]
    if not cuda and "--gpu" not in theirs:
        out += ["--gpu", "-1"]
    return out


def install_fashion_mnist(data_root: Path, train_samples: Optional[int], test_samples: Optional[int],
                          standardize: bool = True) -> None:
    """Their ``dataLoader`` returns Fashion-MNIST as 1 x 28 x 28 tensors (the first N of each split), in
    [0, 1] or, with ``standardize``, standardised with the training split's statistics (ours exactly)."""
    import torch
    import torchvision

    import FedBaseline.sampling.dataLoader as loader
    from fedbn_bench.data import channel_stats

    class FashionMNIST(torch.utils.data.Dataset):
        def __init__(self, train: bool, keep: Optional[int]) -> None:
            ds = torchvision.datasets.FashionMNIST(root=str(data_root), train=train, download=False)
            self.x = ds.data[:keep].to(torch.float32).div_(255.0).unsqueeze(1)
            self.targets = ds.targets[:keep].clone()

        def __len__(self) -> int:
            return len(self.targets)

        def __getitem__(self, i: int) -> tuple[Any, int]:
            return self.x[i], int(self.targets[i])

    def load(args: argparse.Namespace) -> tuple[FashionMNIST, FashionMNIST]:
        train, test = FashionMNIST(True, train_samples), FashionMNIST(False, test_samples)
        if standardize:
            mean, std = channel_stats(train.x)
            for split in (train, test):
                split.x = ((split.x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)).to(torch.float32)
        print(f"Dataset:  fashion_mnist (parity wrapper), train/test {len(train)} / {len(test)}")
        return train, test

    loader.dataLoader = load


def one_channel_input(net: Any) -> Any:
    """``net`` (their Simple-CNN) with a fresh 1-channel first convolution (``conv1[0]``, its other settings
    kept) and every max-pool rounding up, so that 1 x 28 x 28 flattens to 64 x 4 x 4 as 3 x 32 x 32 does."""
    from torch import nn

    first = net.conv1[0]
    net.conv1[0] = nn.Conv2d(1, first.out_channels, first.kernel_size, first.stride, first.padding)
    for module in net.modules():
        if isinstance(module, nn.MaxPool2d):
            module.ceil_mode = True
    return net


def install_model() -> None:
    """Their ``set_sever_net``, then ``one_channel_input``; their client heat map off (module docstring)."""
    import FedBaseline.models.Nets as nets
    import FedBaseline.sampling.sampling as sampling

    build_theirs = nets.set_sever_net

    def build(args: argparse.Namespace) -> Any:
        return one_channel_input(build_theirs(args)).to(args.device)

    nets.set_sever_net = build
    sampling.ClientShow = lambda *a, **k: None


def main() -> None:
    args, theirs = parse()
    import matplotlib
    matplotlib.use("Agg")
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    script = args.code.resolve() / MAINS[args.main]
    theirs = their_arguments(theirs, args.model, torch.cuda.is_available())
    sys.path.insert(0, str(script.parent))
    sys.argv = [str(script), *theirs]
    import FedBaseline.options.options  # noqa: F401  (seeds 42 on import)

    install_fashion_mnist(args.data.resolve(), args.train_samples, args.test_samples, args.inputs == "standardized")
    install_model()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)

    record = args.record.resolve()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hybridbn-"))
    (workdir / "Savedmodel").mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    tee, finished, start = Tee(sys.stdout), False, time.time()
    try:
        with contextlib.redirect_stdout(tee):
            runpy.run_path(str(script), run_name="__main__")
        finished = True
    finally:
        config = {"implementation": f"HybridBN {script.name}", "code": "github:Hongyao-Chen/HybridBN",
                  "commit": args.commit, "seed": args.seed, "arguments": theirs, "dataset": "fashion_mnist",
                  "train_samples": args.train_samples, "test_samples": args.test_samples, "inputs": args.inputs,
                  "model": "simple_cnn",
                  "norm": {"name": MODELS[args.main][args.model]}, "threads": args.threads,
                  "wall_time_s": round(time.time() - start, 1)}
        summary = write_hybridbn_record(record, tee.copy.getvalue(), config, finished)
        print(f"[parity] {summary['status']}: record in {record}", file=sys.stderr)


if __name__ == "__main__":
    main()
