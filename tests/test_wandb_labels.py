"""W&B for sweeps: runs grouped by the sweep directory, tagged with the values the sweep varies and
named with them (they used to share one name, ``bn-fedavg-dirichlet-s0``); the sync script finds
the offline runs that ``wandb sync`` from the repository root does not."""
from __future__ import annotations

import importlib.util
from unittest import mock

from omegaconf import OmegaConf

from conftest import ROOT, compose_config
from fedbn_bench.records.sweep_labels import label_sweep_run, sweep_tags
from fedbn_bench.runner import run_experiment

spec = importlib.util.spec_from_file_location("wandb_sync", ROOT / "scripts" / "wandb_sync.py")
wandb_sync = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wandb_sync)


def hydra_job(sweep_dir, started: list[str], job: list[str], params=None):
    """The ``hydra`` node of one sweep job: the sweep as started (``multirun.yaml``) and the job's overrides."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": started}}}), sweep_dir / "multirun.yaml")
    return OmegaConf.create({"sweep": {"dir": str(sweep_dir)}, "sweeper": {"params": params},
                             "overrides": {"task": job}})


def test_a_sweep_job_is_grouped_by_its_sweep_and_tagged_with_its_swept_values(tmp_path):
    job = hydra_job(tmp_path / "sweep", ["norm=bn,fbn", "alpha=0.1", "seed=range(2)"], ["norm=fbn", "alpha=0.1", "seed=1"],
                    params={"lr": "0.01,0.1"})
    assert sweep_tags(job) == ["norm=fbn", "seed=1"]
    cfg = compose_config(["logger=wandb", "logger.tags=[mine]"])
    label_sweep_run(cfg, job)
    assert cfg.logger.group == str(tmp_path / "sweep") and list(cfg.logger.tags) == ["mine", "norm=fbn", "seed=1"]
    preset = hydra_job(tmp_path / "p", [], ["+experiment=x", "lr=0.1"], params={"lr": "0.01,0.1"})
    assert sweep_tags(preset) == ["lr=0.1"]  # a preset's hydra.sweeper.params are swept too
    cfg = compose_config(["logger=wandb", "logger.group=mine"])
    label_sweep_run(cfg, preset)
    assert cfg.logger.group == "mine"  # a group set by the user stays


def test_the_run_name_carries_the_swept_values(tmp_path):
    cfg = compose_config(["logger=wandb", "rounds=1", "algo.local_steps=1", "logger.tags=['norm=bn',first]"])
    with mock.patch("wandb.init") as init:
        run_experiment(cfg, tmp_path)
    kwargs = init.call_args.kwargs
    assert kwargs["name"] == "bn-fedavg-dirichlet-s0 norm=bn" and kwargs["tags"] == ["norm=bn", "first"]


def test_the_sync_script_finds_every_offline_run(tmp_path, capsys):
    for run in ("outputs/d/t_bn/wandb/offline-run-1-a", "multirun/d/t/0_norm=bn/wandb/offline-run-2-b"):
        (tmp_path / run).mkdir(parents=True)
    (tmp_path / "outputs/d/t_bn/wandb/latest-run").mkdir()
    found = wandb_sync.offline_runs([tmp_path / "outputs", tmp_path / "multirun"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "multirun/d/t/0_norm=bn/wandb/offline-run-2-b", "outputs/d/t_bn/wandb/offline-run-1-a"]
    assert wandb_sync.main([str(tmp_path / "multirun"), "--dry-run"]) == 0
    assert capsys.readouterr().out.strip().endswith("sync " + str(found[0]))
    assert wandb_sync.main([str(tmp_path / "nothing")]) == 2
