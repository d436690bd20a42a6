"""Run the FedBN authors' ``federated/fed_digits.py`` (github:med-air/FedBN, unmodified) on the Digits-5
stand-in and write its run record beside ours (results/parity/README.md, "FedBN (issue 26 §5)").

Their script runs as it is (``runpy``), from a checkout outside this repository (``--code``), in a scratch
working directory (``--workdir``; by default a temporary one, removed afterwards with their checkpoint).
FedBN's Digits-5 archive (Li et al., ICLR 2021, §5.1 and App. D.1) ships with no registry, so the wrapper
swaps the data on disk, not their code:

* ``<workdir>/data/{MNIST,SVHN,USPS,SynthDigits,MNIST_M}``: our ``dataset=digits5_standin`` for ``--seed``,
  ``--percent``, ``--part-size`` and ``--test-size`` (domains mnist, svhn_like, usps_like, synth_like,
  mnistm_like), in their layout: ``partitions/train_part<k>.pkl`` (parts of ``part_size`` in our order) and
  ``test.pkl``, each a pickled ``(images, labels)``; images uint8, N x 28 x 28 for their 1-channel domains
  (MNIST, USPS: all three of our channels are equal) and N x 28 x 28 x 3 otherwise. Our pixels
  ``(x - 0.5) / 0.5`` go back to ``round(255 x)``: exact for MNIST and usps_like, within 0.5 / 255 for
  the shifted domains' non-integer pixels; their transforms (a 28 x 28 resize, which is the identity here,
  ToTensor, Normalize(0.5, 0.5)) map them back. Below ``--percent 0.1`` a whole part 0 is written and
  their loader keeps its first rows. Their script runs in ``<workdir>/run``, so their ``../data`` is this.
* the seed: their main block seeds 1 (numpy, torch, CUDA) before it builds the model and the loaders; the
  three calls receive ``--seed`` instead (``--seed 1`` is their script's own run). A seed ``S`` is then the
  same stand-in images on both sides, and on their side ``S`` for the initialisation and the shuffles
  (ours draws those from its own streams of ``S``).
* ``numpy.long``: their loader casts labels with it; numpy 1.24-1.26 lack it (2.x has it again), and the
  wrapper sets it to ``numpy.int64`` only where it is missing.

``--mode`` goes to their argparse and names the record's method (``norm.name``: fedbn -> ``fedbn``, fedavg
and fedprox -> ``bn``, as our ``+experiment/fedbn/method=...``; ``compare.py`` groups by ``norm.name``, so
keep fedprox records apart from fedavg's). Every other argument after ``--`` goes to their argparse
(``--lr``, ``--batch``, ``--iters`` = rounds, ``--wk_iters``, ``--mu``). They pick CUDA when there is one.

    python scripts/parity/fedbn.py --code /tmp/FedBN --mode fedbn --seed 0 \
        --record results/fedbn/parity_code/authors/fedbn-seed0 -- --iters 100
"""
from __future__ import annotations

import argparse
import contextlib
import pickle
import runpy
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts" / "parity"))

from hybridbn import Tee  # noqa: E402
from fedbn_bench.records.reference_log import write_fedbn_record  # noqa: E402

MODES = {"fedavg": ("fedavg", "bn"), "fedprox": ("fedprox", "bn"), "fedbn": ("fedavg", "fedbn")}
"""``--mode`` -> our ``algo.name`` and ``norm.name`` of that method (conf/experiment/fedbn/method/)."""
THEIR_DOMAINS = {"mnist": ("MNIST", 1), "svhn_like": ("SVHN", 3), "usps_like": ("USPS", 1),
                 "synth_like": ("SynthDigits", 3), "mnistm_like": ("MNIST_M", 3)}
"""Our domain -> their data folder and the channels their ``DigitsDataset`` reads it with (fed_digits.py)."""
COMMIT = "2fa38adf627a8c8ba71c5fb515b1f2ba00aa8812"


def add_standin_options(parser: argparse.ArgumentParser, percent: float) -> None:
    """The options of a wrapper that writes the stand-in in FedBN's layout (``write_domains``) and runs their
    script in a scratch directory; ``percent`` is the default of their ``--percent``."""
    parser.add_argument("--percent", type=float, default=percent, help="their --percent (and the data written)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", required=True, type=Path, help="run directory to write (our layout)")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="our data root (MNIST/raw)")
    parser.add_argument("--part-size", type=int, default=150, help="the stand-in's part_size")
    parser.add_argument("--test-size", type=int, default=297, help="the stand-in's test_size")
    parser.add_argument("--workdir", type=Path, default=None, help="their data and outputs (default: temporary)")
    parser.add_argument("--threads", type=int, default=1)


def arguments_after(parser: argparse.ArgumentParser, extra: list[str], owned: tuple[str, ...]) -> list[str]:
    """The arguments left for their argparse (``extra`` without ``--``), refusing those the wrapper sets."""
    theirs = [a for a in extra if a != "--"]
    for option in owned:
        if option in theirs:
            parser.error(f"{option} is set by the wrapper; leave it out after --")
    return theirs


def parse() -> tuple[argparse.Namespace, list[str]]:
    """The wrapper's options, and the arguments for their argparse."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--code", required=True, type=Path, help="a FedBN checkout (federated/fed_digits.py)")
    parser.add_argument("--mode", required=True, choices=sorted(MODES), help="their --mode")
    parser.add_argument("--commit", default=COMMIT, help="the checkout's commit, recorded in the run's config")
    add_standin_options(parser, percent=0.1)
    args, extra = parser.parse_known_args()
    theirs = arguments_after(parser, extra, ("--mode", "--percent"))
    return args, [*theirs, "--mode", args.mode, "--percent", str(args.percent)]


def their_images(x: Any, channels: int) -> Any:
    """Our N x 3 x 28 x 28 pixels in [-1, 1] as their uint8 images: N x 28 x 28 (``channels`` 1, our three
    channels equal) or N x 28 x 28 x 3."""
    import torch

    pixels = x.add(1.0).mul(127.5).round().clamp(0, 255).to(torch.uint8)
    if channels == 3:
        return pixels.permute(0, 2, 3, 1).contiguous().numpy()
    if not torch.equal(pixels, pixels[:, :1].expand_as(pixels)):
        raise ValueError("a 1-channel domain of theirs received a colour image")
    return pixels[:, 0].contiguous().numpy()


def dump(path: Path, images: Any, labels: Any) -> None:
    """One pickled ``(images, labels)`` file, as their ``np.load(..., allow_pickle=True)`` reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump((images, labels), f)


def write_domains(data: Path, args: argparse.Namespace) -> dict[str, int]:
    """The stand-in's five domains in their layout under ``data`` (module docstring); training images per
    domain as written."""
    from fedbn_bench.data.digits5_standin import DOMAINS, load_digits5_standin

    bundle = load_digits5_standin(root=str(args.data), seed=args.seed, percent=max(args.percent, 0.1),
                                  part_size=args.part_size, test_size=args.test_size)
    written = {}
    for d, name in enumerate(DOMAINS):
        folder, channels = THEIR_DOMAINS[name]
        train, test = (split.domain == d for split in (bundle.train, bundle.test))
        images, labels = their_images(bundle.train.x[train], channels), bundle.train.y[train].numpy()
        for k, start in enumerate(range(0, len(labels), args.part_size)):
            stop = start + args.part_size
            dump(data / folder / "partitions" / f"train_part{k}.pkl", images[start:stop], labels[start:stop])
        dump(data / folder / "test.pkl", their_images(bundle.test.x[test], channels), bundle.test.y[test].numpy())
        written[name] = len(labels)
    return written


@contextlib.contextmanager
def seeded_with(seed: int) -> Iterator[None]:
    """Their seeding calls (numpy, torch, CUDA) receive ``seed`` whatever value they pass."""
    import numpy as np
    import torch

    calls = [(np.random, "seed"), (torch, "manual_seed"), (torch.cuda, "manual_seed_all")]
    with contextlib.ExitStack() as stack:
        for owner, name in calls:
            original = getattr(owner, name)
            stack.enter_context(mock.patch.object(owner, name, lambda _theirs, original=original: original(seed)))
        yield


def numpy_long() -> None:
    """``numpy.long`` as ``numpy.int64`` where numpy lacks it (module docstring)."""
    import numpy as np

    if not hasattr(np, "long"):
        np.long = np.int64


def run_theirs(script: Path, theirs: list[str], workdir: Path, seed: int, tee: Tee) -> None:
    """Their script in ``workdir/run`` with ``theirs`` as its argv, its output into ``tee``."""
    import os

    numpy_long()
    sys.path.insert(0, str(script.parents[1]))
    sys.argv = [str(script), *theirs]
    (workdir / "run").mkdir(parents=True, exist_ok=True)
    os.chdir(workdir / "run")
    try:
        with contextlib.redirect_stdout(tee), seeded_with(seed):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        os.chdir(ROOT)


def main() -> None:
    args, theirs = parse()
    import torch

    torch.set_num_threads(args.threads)
    script = args.code.resolve() / "federated" / "fed_digits.py"
    record = args.record.resolve()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fedbn-")))
        written = write_domains(workdir.resolve() / "data", args)
        tee, finished, start = Tee(sys.stdout), False, time.time()
        try:
            run_theirs(script, theirs, workdir.resolve(), args.seed, tee)
            finished = True
        finally:
            config = {"implementation": "FedBN federated/fed_digits.py", "code": "github:med-air/FedBN",
                      "commit": args.commit, "seed": args.seed, "arguments": theirs, "dataset": {
                          "name": "digits5_standin", "options": {"percent": args.percent, "part_size": args.part_size,
                                                                 "test_size": args.test_size}},
                      "train_images": written, "model": "digit_cnn", "algo": {"name": MODES[args.mode][0]},
                      "norm": {"name": MODES[args.mode][1]}, "device": "cuda" if torch.cuda.is_available() else "cpu",
                      "threads": args.threads, "wall_time_s": round(time.time() - start, 1)}
            summary = write_fedbn_record(record, tee.copy.getvalue(), config, finished)
            print(f"[parity] {summary['status']}: record in {record}", file=sys.stderr)


if __name__ == "__main__":
    main()
