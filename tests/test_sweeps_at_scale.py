"""Sweeps at scale: the SLURM and Ray launcher configs and the Optuna lr search compose with our
defaults (no cluster needed); the SLURM launcher writes the sbatch script they ask for; the lr
search runs 3 tiny trials locally and reports the best lr."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import CONF, ROOT

LR_RANGE = (1e-3, 1e-1)


def compose_hydra(overrides: list[str]):
    """The composed config with its ``hydra`` node, as ``run.py <overrides>`` would see it."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=["logger=none", *overrides], return_hydra_config=True)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args, "progress=false"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def test_slurm_launcher_composes_with_our_defaults():
    launcher = compose_hydra(["hydra/launcher=slurm", "hydra.launcher.partition=gpu"]).hydra.launcher
    assert launcher._target_ == "hydra_plugins.fedbn_bench_launcher.slurm_launcher.RequeueingSlurmLauncher"
    assert (launcher.partition, launcher.gpus_per_node, launcher.cpus_per_task) == ("gpu", 1, 8)
    assert (launcher.mem_gb, launcher.timeout_min, launcher.array_parallelism) == (32, 240, 64)


def site_without_submitit(tmp_path: Path) -> Path:
    """A copy of this venv's site-packages (links) without the optional submitit plugin and submitit."""
    site, packages = Path(sysconfig.get_paths()["purelib"]), tmp_path / "site"
    (packages / "hydra_plugins").mkdir(parents=True)
    for entry in site.iterdir():
        if entry.name not in ("hydra_plugins", "submitit") and not entry.name.endswith(".pth"):
            (packages / entry.name).symlink_to(entry)
    for plugin in (site / "hydra_plugins").iterdir():
        if plugin.name != "hydra_submitit_launcher":
            (packages / "hydra_plugins" / plugin.name).symlink_to(plugin)
    return packages


def test_without_the_submitit_plugin_a_run_says_nothing_of_it_and_slurm_is_one_line(tmp_path):
    """Issue 59: every start without the optional plugin warned "Plugin is incompatible with this Hydra version"."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(site_without_submitit(tmp_path))])}
    command = [sys.executable, "-S", str(ROOT / "run.py"), "logger=none", "progress=false"]
    run = subprocess.run([*command, "rounds=1", "dataset=sklearn_digits", f"hydra.run.dir={tmp_path / 'run'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and "Warning" not in run.stderr and "Plugin" not in run.stderr, run.stderr
    slurm = subprocess.run([*command, "-m", "hydra/launcher=slurm"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=env)
    assert (slurm.returncode, slurm.stderr.splitlines()) == (2, [
        "error: hydra/launcher=slurm needs the Hydra plugin `hydra-submitit-launcher`, which is not installed: "
        "pip install hydra-submitit-launcher"])


def test_slurm_launcher_writes_the_sbatch_array_script(tmp_path):
    """A fake `sbatch` that refuses the job: submitit has written the script it would submit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "srun"):  # submitit checks that srun exists before submitting
        (bin_dir / name).write_text("#!/bin/sh\necho 'no cluster here' >&2\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    sweep = tmp_path / "sweep"
    result = cli("-m", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "norm=bn,gn", "logger=none",
                 f"hydra.sweep.dir={sweep}", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode != 0 and "no cluster here" in result.stderr, result.stderr
    [script] = (sweep / ".submitit").glob(".submission_file_*.sh")
    flags = {line.removeprefix("#SBATCH ") for line in script.read_text().splitlines() if line.startswith("#SBATCH")}
    assert {"--array=0-1%2", "--partition=gpu", "--gpus-per-node=1", "--cpus-per-task=8", "--mem=32GB",
            "--time=240"} <= flags, flags
    assert not list(sweep.glob("*/summary.json"))  # nothing ran here


def test_ray_launcher_composes_with_our_defaults():
    pytest.importorskip("hydra_plugins.hydra_ray_launcher",
                        reason="hydra-ray-launcher is not installed (pip install hydra-ray-launcher; README)")
    launcher = compose_hydra(["hydra/launcher=ray_cluster"]).hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    assert launcher.ray.init.address == "auto"
    assert dict(launcher.ray.remote) == {"num_cpus": 4, "num_gpus": 1, "max_calls": 1}


def test_optuna_lr_sweeper_composes():
    sweeper = compose_hydra(["hydra/sweeper=optuna_lr"]).hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert (sweeper.direction, sweeper.n_trials, sweeper.sampler._target_, sweeper.sampler.seed) == (
        "maximize", 20, "optuna.samplers.TPESampler", 0)
    lr = OverridesParser.create().parse_override(f"lr={sweeper.params.lr}").value()
    assert (lr.start, lr.end, lr.tags) == (*LR_RANGE, {"log"})


def test_hbn_lr_search_is_table1_mnist_with_one_row_searched():
    cfg = compose_hydra(["experiment=hbn/lr_search"])
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert sweeper.direction == "maximize" and sweeper.params.lr == "tag(log, interval(0.001, 0.1))"
    assert sweeper.params["+experiment/hbn/table1_method"] == "hbn"  # one row, not table1_mnist's list
    assert (cfg.dataset.name, cfg.model.name, cfg.num_clients, cfg.clients_per_round, cfg.alpha) == (
        "mnist", "simple_cnn", 100, 10, 0.1)  # HBN Table 1 on MNIST
    assert cfg.hydra.sweep.dir == "results/hbn/lr_search/runs"


@pytest.mark.slow  # three real Optuna trials through run.py (about 15-35 s); the search space is checked above
def test_optuna_lr_search_runs_three_tiny_trials(tmp_path):
    result = cli("-m", "experiment=hbn/lr_search", "hydra.sweeper.n_trials=3", "debug=default", "rounds=1",
                 "dataset=sklearn_digits", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    runs = sorted(p.parent for p in tmp_path.glob("*/summary.json"))
    assert len(runs) == 3, runs
    accs = {}
    for run in runs:
        cfg = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
        assert cfg["norm"]["name"] == "hbn" and cfg["rounds"] == 1
        assert LR_RANGE[0] <= cfg["lr"] <= LR_RANGE[1]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "completed"
        accs[cfg["lr"]] = summary["final_test_acc"]
    assert len(accs) == 3  # three different lr proposals
    best = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert best["name"] == "optuna" and LR_RANGE[0] <= best["best_params"]["lr"] <= LR_RANGE[1]
    assert math.isclose(best["best_value"], max(accs.values()))
    assert math.isclose(accs[best["best_params"]["lr"]], best["best_value"])
