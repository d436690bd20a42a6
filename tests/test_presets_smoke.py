"""Every preset end to end at ``scale=smoke``: for each ``conf/experiment/<paper>/<id>.yaml`` with a
sweep, the first value of each sweep parameter is run through ``run.py -m`` (one run, into a temporary
sweep dir; the dataset from fixture files when its files are absent, ``smoke_data.py``), then every
figure declared for that preset (``figures/catalog``) is drawn from that run with ``make_figures``'s
``draw``: its files must exist and the run must be in it (completed, its row named), not dropped.

New presets are picked up by the glob. The default run keeps the presets in ``FAST``; the others
(a single smoke run above ~10 s, ``--durations``) run under ``-m slow``.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from conftest import CONF, compose_config, sweep_presets as presets
from fedbn_bench.figures import recipes  # noqa: F401  (registers the recipes)
from fedbn_bench.figures.base import row_key
from fedbn_bench.figures.catalog import CATALOG
from fedbn_bench.figures.cli import draw
from fedbn_bench.records.reader import read_runs
from smoke_data import fixture_overrides, fixture_root, fixture_torch_home, has_files

ROOT = CONF.parent
SMOKE = OmegaConf.load(CONF / "scale" / "smoke.yaml")
SMOKE_KEYS = {"rounds": 1, "eval_every": 1, "progress": False, "checkpoint_every": 0, "count_macs": False,
              "algo.local_steps": 1}
"""What ``scale=smoke`` promises (conf/scale/smoke.yaml)."""


FAST: set[str] = {"fbn/fig3a_toy", "fbn/fig12", "fedbn/table12", "hbn/fig3", "hbn/table4"}
"""Presets whose smoke run is in the default test run (one of each kind: toy Gaussian, CIFAR-10 with
Byzantine defense, Digits-5 domains with FedBN, HBN's Dirichlet split; 6-8 s each on an idle 2-core
machine, ``--durations``). Every other one (and every preset added later, picked up by the glob) runs
under ``-m slow``: the full set takes far beyond the ~3 min of the default run (a few are 1-4 min on
their own: real MNIST under data/, FedRBN's adversarial training and attacks)."""


@functools.lru_cache(maxsize=None)
def first_values(preset: str) -> tuple[tuple[str, ...], bool]:
    """``key=first value`` for each parameter of the preset's composed sweep (choice, range and
    comma lists; a distribution such as optuna's ``interval`` is left to its sweeper) and whether the
    sweeper is a search (``n_trials``: cut to one trial)."""
    sweeper = compose_config([f"experiment={preset}"], return_hydra_config=True).hydra.sweeper
    parser = OverridesParser.create()
    out = []
    for key, value in (sweeper.get("params") or {}).items():
        override = parser.parse_override(f"{key}={value}")
        if not override.is_sweep_override():
            out.append(f"{key}={override.get_value_element_as_str()}")
            continue
        try:
            first = next(iter(override.sweep_string_iterator()))
        except Exception:  # a distribution (interval, tag): the search sweeper draws it
            continue
        out.append(f"{key}={first}")
    return tuple(out), "n_trials" in sweeper


@functools.lru_cache(maxsize=None)
def scaled(preset: str) -> tuple[tuple[str, ...], object]:
    """``scale=smoke``, the first sweep values, and a plain ``key=value`` for each smoke key that a sweep
    value file (appended after `scale`) overrides: FedRBN's table4_row/* set rounds, a method file that
    switches ``/algo`` (e.g. FedBN's centralized) brings its own local_steps; and the composed config."""
    values, _ = first_values(preset)
    overrides = ["scale=smoke", *values]
    cfg = compose_config([f"experiment={preset}", *overrides])
    extra = [f"{k}={v}" for k, v in SMOKE_KEYS.items() if OmegaConf.select(cfg, k) != v]
    if extra:
        overrides += extra
        cfg = compose_config([f"experiment={preset}", *overrides])
    return tuple(overrides), cfg


def smoke_env(preset: str, tmp: Path) -> dict[str, str]:
    """The smoke run's environment: a fixture ``TORCH_HOME`` where the preset wants ImageNet weights
    that are not cached here."""
    home = fixture_torch_home(scaled(preset)[1], tmp)
    return {**os.environ, **({"TORCH_HOME": str(home)} if home else {})}


def smoke_overrides(preset: str, tmp: Path) -> list[str]:
    """The command-line overrides of the preset's smoke run (``run.py -m`` arguments after the preset)."""
    overrides, cfg = scaled(preset)
    overrides = list(overrides)
    if not has_files(cfg, ROOT):
        # fixture data is a few thousand samples: fewer clients where the preset's would get less
        # than a batch each, and a skewed split (Dirichlet 0.1) can still leave a client without a
        # full batch, which the preset refuses on real data only if it happens there too
        overrides += fixture_overrides(cfg)
        cfg = compose_config([f"experiment={preset}", *overrides])
        overrides += [f"dataset.root={fixture_root(cfg, tmp, ROOT)}", "small_clients=skip"]
    if first_values(preset)[1]:
        overrides += ["hydra.sweeper.n_trials=1", "hydra.sweeper.n_jobs=1"]
    return overrides


def figures_of(preset: str) -> list:
    return [fig for fig in CATALOG.values() if (fig.preset or fig.id) == preset]


def test_presets_are_found():
    found = presets()
    assert {"hbn/table4", "fbn/fig3a", "fedrbn/table2"} <= set(found)
    assert not FAST - set(found), "FAST names presets that no longer exist"


@pytest.mark.parametrize("preset", presets())
def test_smoke_scale_shrinks_the_preset(preset):
    """Composition only: ``scale=smoke`` after the experiment leaves one round of one local step,
    evaluated, without logger."""
    small = compose_config([f"experiment={preset}", "scale=smoke"])
    assert {k: OmegaConf.select(small, k) for k in SMOKE_KEYS} == SMOKE_KEYS
    assert small.logger.name == "none"


def test_smoke_scale_keeps_the_federation():
    """smoke.yaml touches only run length, evaluation and output keys: never the dataset, partition,
    clients, model, norm, algorithm choice, lr or batch size."""
    smoke = OmegaConf.to_container(SMOKE)
    assert smoke.pop("defaults") == [{"override /logger": "none"}]
    assert set(smoke) == {"rounds", "eval_every", "progress", "checkpoint_every", "count_macs", "algo"}
    assert smoke["algo"] == {"local_steps": 1}


def test_smoke_scale_wins_over_an_experiment():
    """`scale` comes after `experiment` in conf/config.yaml: without it the preset's values stay."""
    cfg = compose_config(["experiment=hbn/table4", "scale=smoke"])
    assert (cfg.rounds, cfg.eval_every, cfg.algo.local_steps, cfg.logger.name) == (1, 1, 1, "none")
    assert (cfg.num_clients, cfg.clients_per_round, cfg.batch_size) == (100, 10, 4)
    plain = compose_config(["experiment=hbn/table4"])
    assert (plain.rounds, plain.algo.local_steps) == (500, None)


@pytest.mark.parametrize("preset", [p if p in FAST else pytest.param(p, marks=pytest.mark.slow) for p in presets()])
def test_preset_smoke_run_and_figures(preset, tmp_path):
    # a sweep value file may set some smoke keys again (FixBN's epochs/*: rounds, eval_every; a method file
    # switching /algo: local_steps); the smoke run names those on the command line
    assert {k: OmegaConf.select(scaled(preset)[1], k) for k in SMOKE_KEYS} == SMOKE_KEYS
    runs_dir, out = tmp_path / "runs", tmp_path / "out"
    cmd = [sys.executable, "run.py", "-m", f"experiment={preset}", *smoke_overrides(preset, tmp_path),
           f"hydra.sweep.dir={runs_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=smoke_env(preset, tmp_path))
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    runs = read_runs(runs_dir)
    assert len(runs) == 1, [r.path for r in runs]
    run = runs[0]
    assert run.status == "completed", (run.path, run.summary)
    assert run.rows and run.rows[-1]["round"] == SMOKE_KEYS["rounds"]
    assert (run.path / "partition.csv").exists()
    for fig in figures_of(preset):
        job = draw(fig, ROOT, CONF, runs=runs_dir, out=out / fig.name)
        assert job is not None, fig.id
        assert job.written and all(p.exists() and p.stat().st_size > 0 for p in job.written), job.written
        assert [r.path for r in job.runs] == [run.path]
        assert not [p for p in job.problems if run.path.name in p], job.problems
        key = row_key(run, fig.rows)
        if key is not None and job.md_path.exists():
            md = job.md_path.read_text()
            names = {key, fig.options.get("labels", {}).get(key), job.paper_rows().get(key, {}).get("label")}
            assert any(n and n in md for n in names), (fig.id, key, names)


def test_fixture_cifar_and_mnist_files_read_back_exactly(tmp_path):
    """The new writers produce the loaders' exact formats (values, labels, class counts)."""
    import torch

    import fixtures_data as fx
    from fedbn_bench.data.cifar import load_cifar10, load_cifar100
    from fedbn_bench.data.mnist import load_fashion_mnist, load_mnist

    for k, load in ((10, load_cifar10), (100, load_cifar100)):
        written = fx.write_cifar(tmp_path, k, n_train=3 * k, n_test=k)
        bundle = load(root=str(tmp_path))
        assert bundle.num_classes == k
        for split, x, y in (("train", bundle.train.x, bundle.train.y), ("test", bundle.test.x, bundle.test.y)):
            assert torch.equal(x, torch.from_numpy(written[split][0]).view(-1, 3, 32, 32).float() / 255.0), split
            assert y.tolist() == written[split][1].tolist()
    for folder, load in (("MNIST", load_mnist), ("FashionMNIST", load_fashion_mnist)):
        written = fx.write_mnist(tmp_path, folder, n_train=30, n_test=10)
        bundle = load(root=str(tmp_path))
        assert torch.equal(bundle.train.x, torch.from_numpy(written["train"][0]).float().unsqueeze(1) / 255.0)
        assert bundle.test.y.tolist() == written["test"][1].tolist()


def test_fixture_root_only_for_absent_data_and_sized_for_the_preset(tmp_path):
    cfg = compose_config(["experiment=hbn/table4", "scale=smoke"])
    root = fixture_root(cfg, tmp_path, tmp_path / "repo")  # no data/ there
    from fedbn_bench.data.cifar import load_cifar10

    bundle = load_cifar10(root=str(root))
    # 100 clients x 3 batches of 4, balanced over 10 classes
    assert len(bundle.train.y) == 1200 and bundle.train.y.bincount().tolist() == [120] * 10
    assert fixture_root(cfg, tmp_path / "again", tmp_path) is None  # tmp_path/data now holds CIFAR-10
    assert fixture_root(compose_config(["dataset=sklearn_digits"]), tmp_path, tmp_path) is None
