"""Run the FedRBN authors' ``fedat.py`` (github:illidanlab/FedRBN, unmodified) on the Digits-5 stand-in, test
its best checkpoint on clean and attacked data, and write the run record beside ours (results/parity/README.md,
"FedRBN (issue 26 §5)").

Their script runs as it is (``runpy``), from a checkout outside this repository (``--code``), in a scratch
working directory (``--workdir``; by default a temporary one, removed afterwards with their checkpoint). A run
is three invocations in one process, as their two sweeps (``sweeps/benchmark/digits.yaml``, ``digits_test.yaml``)
run it in three: training (their best validation round is saved), then ``--test --test_noise none`` (SA) and
``--test --test_noise LinfPGD`` (RA) on that checkpoint. The data:

* ``<workdir>/run/data/Digits/{MNIST,SVHN,USPS,SynthDigits,MNIST_M}``: our ``dataset=digits5_standin`` for
  ``--seed``, ``--percent``, ``--part-size`` and ``--test-size`` in FedBN's layout, which their ``DigitsDataset``
  reads (written by ``fedbn.write_domains``; the pixels and the percent rule are in fedbn.py's docstring).
  Their users are contiguous slices of a domain's parts (``--pd_nuser`` per domain, half of each for validation,
  ``--val_ratio``), their test shards contiguous slices of its test set.
* ``--seed`` is their own ``--seed`` (their ``set_seed``: torch, numpy, random), so a seed ``S`` is the same
  stand-in images on both sides and ``S`` for their initialisation, shuffles and attack starts.

What this host lacks, shimmed and nothing more (none of it changes a number they compute):

* the hostname: their ``utils/config.py`` reads ``int(hostname.split('-')[-1])`` on import, which fails for a
  hostname without a numeric suffix. Their module is imported once, as it is, with ``os.uname`` answering the
  host ``parity-0`` during that import only; their own last branch then applies (data under ``./data``,
  checkpoints under ``./checkpoint``, both in ``<workdir>/run``).
* ``torch.autograd.gradcheck.zero_gradients`` (gone from torch 2.x; advertorch 0.2.3, its last release, imports
  it for its FAB attack, which they never use) and ``torchvision.models.resnet.model_urls`` (gone from
  torchvision 0.29; their ``nets/models.py`` imports it and never reads it): each set only where missing, the
  first to a helper that zeroes a tensor's gradient, the second to an empty mapping.
* ``numpy.long``, as for FedBN's code (``fedbn.numpy_long``): only where missing.
* Weights & Biases: their ``wandb.init`` receives ``mode="disabled"`` (``--no_log`` would only make it
  offline, a background process writing into the working directory).
* data-loader workers: their loaders ask for 2-4 worker processes each; they get ``num_workers=0``. Their
  datasets draw no random numbers and a loader draws its base seed with or without workers, so the batches and
  every random stream are unchanged; it keeps the run on the one core it is given.

advertorch (``pip install --no-deps --target <dir> advertorch==0.2.3``) is found on ``sys.path`` or in
``--deps <dir>``. ``--mode`` goes to their argparse and names the record's method (``MODES``: their ``fedavg``
with AT users is FATAvg). The tests use ``--test-branch`` (``TEST_BRANCHES``; default ``adv``, as our
``adversarial.test_branch``). Every other argument after ``--`` goes to their argparse (``--rounds``,
``--pd_nuser``, ``--n_noise_domain``, ``--noise_ratio``, ``--pnc``, ...). ``--pnc`` only with ``--mode fedrbn``:
a PNC weight >= 0 also turns on their propagation at the start of every round (and validation through BN_a),
which stops with an error in every other mode (it needs local dual BN); without it (their default -1) their
FedRBN neither propagates while training nor uses PNC. They pick CUDA when there is one.

    python scripts/parity/fedrbn.py --code /tmp/FedRBN --mode fedrbn --seed 0 --deps /tmp/fedrbn-deps \\
        --record results/fedrbn/parity_code/authors/fedrbn-seed0 -- --rounds 100 --pd_nuser 5 --pnc 0.5
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import runpy
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts" / "parity"))

from fedbn import add_standin_options, arguments_after, numpy_long, write_domains  # noqa: E402
from hybridbn import Tee  # noqa: E402
from fedbn_bench.records.reference_log import write_fedrbn_record  # noqa: E402

MODES = {"fedavg": ("fatavg", "bn"), "fedbn": ("fatbn", "fedbn"), "fedravg": ("fatavg_dbn", "dbn"),
         "fedrbn": ("fedrbn", "fedrbn")}
"""Their ``--mode`` (with AT users) -> our method (conf/experiment/fedrbn/method/) and its ``norm.name``."""
TESTS = {"clean": "none", "robust": "LinfPGD"}
"""Each test of the checkpoint -> their ``--test_noise`` (their test sweep's SA and RA)."""
TEST_BRANCHES = {"adv": ["--te_att_BNn", "--oracle_detector", "noised"], "clean": [], "sweep": ["--te_att_BNn"]}
"""Which dual-BN branch their test attacks and predicts with: ``adv`` BN_a for both, ``clean`` BN_c for both,
``sweep`` their test sweep's (attack through BN_a, predict with BN_c). No effect on a plain-BN mode."""
OWNED = ("--mode", "--percent", "--seed", "--test", "--test_noise", "--te_att_BNn", "--oracle_detector")
"""Their options the wrapper sets."""
HOST = "parity-0"
COMMIT = "b18846cf9fe536f74613479eab2c7de713cd6fd0"


def parse() -> tuple[argparse.Namespace, list[str]]:
    """The wrapper's options, and the arguments for their argparse."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--code", required=True, type=Path, help="a FedRBN checkout (fedat.py at its top)")
    parser.add_argument("--mode", required=True, choices=sorted(MODES), help="their --mode")
    parser.add_argument("--test-branch", choices=sorted(TEST_BRANCHES), default="adv", help="TEST_BRANCHES")
    parser.add_argument("--deps", type=Path, default=None, help="a directory holding advertorch (pip --target)")
    parser.add_argument("--commit", default=COMMIT, help="the checkout's commit, recorded in the run's config")
    add_standin_options(parser, percent=1.0)
    args, extra = parser.parse_known_args()
    theirs = arguments_after(parser, extra, OWNED)
    if args.deps is not None:
        sys.path.insert(0, str(args.deps.resolve()))
    if importlib.util.find_spec("advertorch") is None:
        parser.error("advertorch is missing: pip install --no-deps --target <dir> advertorch==0.2.3, then --deps <dir>")
    return args, [*theirs, "--mode", args.mode, "--percent", str(args.percent), "--seed", str(args.seed)]


def test_arguments(train: list[str], test: str, branch: str) -> list[str]:
    """Their argv for the test ``test`` (``TESTS``) of the checkpoint that ``train`` saved."""
    return [*train, "--test", "--test_noise", TESTS[test], *TEST_BRANCHES[branch]]


def zero_gradients(x: Any) -> None:
    """Zero the gradient of a tensor, or of each tensor in a sequence (what torch < 1.9 exported)."""
    import torch

    if isinstance(x, torch.Tensor):
        if x.grad is not None:
            x.grad.detach_().zero_()
        return
    for item in x:
        zero_gradients(item)


def fill_removed_names() -> None:
    """The names their imports need that this torch, torchvision and numpy removed, where missing (module
    docstring; by module path: ``torch.autograd.gradcheck`` as an attribute is the function, not the module)."""
    for path, name, value in (("torch.autograd.gradcheck", "zero_gradients", zero_gradients),
                              ("torchvision.models.resnet", "model_urls", {})):
        module = importlib.import_module(path)
        if not hasattr(module, name):
            setattr(module, name, value)
    numpy_long()


def import_their_config() -> None:
    """Their ``utils.config``, imported in the working directory with the host ``HOST``."""
    real = os.uname()
    host = os.uname_result((real.sysname, HOST, real.release, real.version, real.machine))
    with mock.patch.object(os, "uname", lambda: host):
        importlib.import_module("utils.config")


def serial(loader: Callable[..., Any]) -> Callable[..., Any]:
    """``loader`` (torch's DataLoader) built without worker processes."""
    return lambda *args, **kwargs: loader(*args, **{**kwargs, "num_workers": 0})


def disabled(init: Callable[..., Any]) -> Callable[..., Any]:
    """``init`` (``wandb.init``) in the disabled mode whatever mode they ask for."""
    return lambda *args, **kwargs: init(*args, **{**kwargs, "mode": "disabled"})


@contextlib.contextmanager
def on_this_host() -> Iterator[None]:
    """W&B disabled and serial data loaders while their script runs (module docstring)."""
    import torch.utils.data
    import wandb

    with mock.patch.object(wandb, "init", disabled(wandb.init)), \
            mock.patch.object(torch.utils.data, "DataLoader", serial(torch.utils.data.DataLoader)):
        yield


def run_phase(script: Path, argv: list[str], seconds: dict[str, float]) -> tuple[str, bool]:
    """Their script with ``argv`` in the working directory: its output, and whether it returned normally (their
    test exits with status 0); ``seconds`` receives its ``wall_s`` and ``cpu_s`` (this process, all threads)."""
    tee, finished, wall, cpu = Tee(sys.stdout), False, time.time(), time.process_time()
    sys.argv = [str(script), *argv]
    try:
        with contextlib.redirect_stdout(tee), on_this_host():
            runpy.run_path(str(script), run_name="__main__")
        finished = True
    except SystemExit as stop:
        finished = stop.code in (None, 0)
    finally:
        seconds.update(wall_s=round(time.time() - wall, 1), cpu_s=round(time.process_time() - cpu, 1))
    return tee.copy.getvalue(), finished


def run_all(script: Path, train: list[str], branch: str, seconds: dict[str, dict]) -> tuple[dict[str, str], bool]:
    """Training, then each test of its checkpoint (``TESTS``): the logs by phase, and whether all returned;
    ``seconds`` receives each phase's times."""
    logs: dict[str, str] = {}
    logs["train"], finished = run_phase(script, train, seconds.setdefault("train", {}))
    for test in TESTS:
        if not finished:
            break
        logs[test], finished = run_phase(script, test_arguments(train, test, branch), seconds.setdefault(test, {}))
    return logs, finished


def main() -> None:
    args, theirs = parse()
    import torch

    torch.set_num_threads(args.threads)
    script = args.code.resolve() / "fedat.py"
    record = args.record.resolve()
    with contextlib.ExitStack() as stack:
        workdir = (args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fedrbn-")))).resolve()
        written = write_domains(workdir / "run" / "data" / "Digits", args)
        logs, finished, start, seconds = {}, False, time.time(), {}
        sys.path.insert(0, str(script.parent))
        os.chdir(workdir / "run")
        try:
            fill_removed_names()
            import_their_config()
            logs, finished = run_all(script, theirs, args.test_branch, seconds)
        finally:
            os.chdir(ROOT)
            method, norm = MODES[args.mode]
            config = {"implementation": "FedRBN fedat.py", "code": "github:illidanlab/FedRBN", "commit": args.commit,
                      "seed": args.seed, "arguments": theirs, "test_arguments": {
                          test: test_arguments(theirs, test, args.test_branch)[len(theirs):] for test in TESTS},
                      "dataset": {"name": "digits5_standin", "options": {
                          "percent": args.percent, "part_size": args.part_size, "test_size": args.test_size}},
                      "train_images": written, "model": "digit_cnn", "method": method, "algo": {"name": "fedavg"},
                      "norm": {"name": norm}, "adversarial": {"test_branch": args.test_branch},
                      "device": "cuda" if torch.cuda.is_available() else "cpu", "threads": args.threads,
                      "wall_time_s": round(time.time() - start, 1), "phase_seconds": seconds}
            summary = write_fedrbn_record(record, logs, config, finished)
            print(f"[parity] {summary['status']}: record in {record}", file=sys.stderr)


if __name__ == "__main__":
    main()
