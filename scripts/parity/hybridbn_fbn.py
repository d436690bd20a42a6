"""Run the HBN authors' FBN baseline (HybridBN ``FBN_main.py``, unmodified) on Fashion-MNIST and write its
run record beside ours, for the claim ``fbn/parity_authors_code`` (scripts/parity/README.md).

Their ``FBN_main.py`` runs as it is (``runpy``), from a checkout outside this repository (``--code``),
in a scratch working directory (``--workdir``: their ``log.txt`` and pickled model). Before it runs,
this wrapper replaces only what their code cannot express:

* ``sampling.dataLoader.dataLoader``: Fashion-MNIST from ``--data`` (torchvision's files), pixels / 255
  (``ToTensor()``, no normalisation, no augmentation: what ``dataset=fashion_mnist`` gives us). Theirs
  knows CIFAR-10/100 and Tiny-ImageNet only.
* ``models.Nets.set_sever_net``: Simple-CNN on 1 × 28 × 28 (``hybridbn_models.py``, our ``simple_cnn``),
  whose BatchNorm2d layers become THEIR ``FederatedBatchNorm`` through THEIR ``replace_bn_with_fbn``.
* ``sampling.sampling.ClientShow``: nothing (a seaborn heat map; it draws no random numbers).
* the seed: their options module seeds 42 on import; ``--seed S`` re-seeds torch, numpy and random.

Every other argument goes to their argparse (``FedBaseline/options/options.py``); on a CPU it needs
``--gpu -1``. The record (``records/reference_log.py``) goes to ``--record``.

    python scripts/parity/hybridbn_fbn.py --code /tmp/HybridBN --seed 0 \
        --record results/fbn/parity_hbn_code/authors/authors-seed0 -- --communication_round 1 ...
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fedbn_bench.records.reference_log import write_hybridbn_record  # noqa: E402


class Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, terminal: io.TextIOBase) -> None:
        self.terminal, self.copy = terminal, io.StringIO()

    def write(self, text: str) -> int:
        self.terminal.write(text)
        self.terminal.flush()
        return self.copy.write(text)


def parse() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--code", required=True, type=Path, help="a HybridBN checkout (FBN_main.py at its top)")
    parser.add_argument("--commit", default="1c0e151007f5e08a9bf88efe5b94ee7151c4a926",
                        help="the checkout's commit, recorded in the run's config")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", required=True, type=Path, help="run directory to write (our layout)")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="torchvision root holding FashionMNIST/")
    parser.add_argument("--workdir", type=Path, default=None, help="their outputs (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=1)
    args, theirs = parser.parse_known_args()
    return args, [a for a in theirs if a != "--"]


def install_fashion_mnist(data_root: Path) -> None:
    import torch
    import torchvision

    import FedBaseline.sampling.dataLoader as loader

    class FashionMNIST(torch.utils.data.Dataset):
        def __init__(self, train: bool) -> None:
            ds = torchvision.datasets.FashionMNIST(root=str(data_root), train=train, download=False)
            self.x = ds.data.to(torch.float32).div_(255.0).unsqueeze(1)
            self.targets = ds.targets.clone()

        def __len__(self) -> int:
            return len(self.targets)

        def __getitem__(self, i: int):
            return self.x[i], int(self.targets[i])

    def load(args):
        print("Dataset:  fashion_mnist (parity wrapper)")
        return FashionMNIST(True), FashionMNIST(False)

    loader.dataLoader = load


def install_model() -> None:
    import FedBaseline.models.Nets as nets
    import FedBaseline.sampling.sampling as sampling
    import hybridbn_models

    def build(args):
        net = hybridbn_models.SimpleCNN28()
        nets.replace_bn_with_fbn(net)
        return net.to(args.device)

    nets.set_sever_net = build
    sampling.ClientShow = lambda *a, **k: None


def main() -> None:
    args, theirs = parse()
    import matplotlib
    matplotlib.use("Agg")
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(args.code.resolve()))
    sys.argv = [str(args.code / "FBN_main.py"), *theirs]
    import FedBaseline.options.options  # noqa: F401  (seeds 42 on import)

    install_fashion_mnist(args.data.resolve())
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
            runpy.run_path(str(args.code / "FBN_main.py"), run_name="__main__")
        finished = True
    finally:
        config = {"implementation": "HybridBN FBN_main.py", "code": "github:Hongyao-Chen/HybridBN",
                  "commit": args.commit, "seed": args.seed, "arguments": theirs, "dataset": "fashion_mnist",
                  "model": "simple_cnn", "threads": args.threads, "wall_time_s": round(time.time() - start, 1)}
        summary = write_hybridbn_record(record, tee.copy.getvalue(), config, finished)
        print(f"[parity] {summary['status']}: record in {record}", file=sys.stderr)


if __name__ == "__main__":
    main()
