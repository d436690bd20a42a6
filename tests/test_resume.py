"""Checkpoint and resume: a run stopped after any round and resumed with ``resume=<run dir>``
writes the same ``metrics.csv`` (all columns but ``wall_s``) as the same run left alone —
in-process for several norm/algorithm states, and with a real ``SIGKILL`` of ``run.py``."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import ROOT, compose_config
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.engine.store_packing import unpack_store
from fedbn_bench.errors import ConfigError
from fedbn_bench.records.loggers import drop_earlier_segments
from fedbn_bench.runner import run_experiment

SMALL = ["model=simple_cnn", "num_clients=5", "clients_per_round=3", "batch_size=32", "eval_every=1"]


def metrics(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "metrics.csv").drop(columns="wall_s")


def stop_at(monkeypatch, round_idx: int) -> None:
    """Make the run stop (as if interrupted) when it starts round ``round_idx``."""
    original = RoundRunner.run_round

    def run_round(self, r):
        if r == round_idx:
            raise KeyboardInterrupt
        return original(self, r)

    monkeypatch.setattr(RoundRunner, "run_round", run_round)


@pytest.mark.parametrize("overrides", [
    ["norm=fedbn", "algo.momentum_carry=local"],
    ["norm=hbn", "algo.momentum_carry=global"],
    ["norm=fbn", "algo=dsgd", "algo.client_momentum=0.9"],
    ["norm=fixbn", "model=fbn_cnn", "dataset.augment=true"],
    ["norm=fedbn", "algo=scaffold"],
    ["norm=gn", "algo=fedadam"],
    ["norm=bn", "algo=fedavgm"],
    ["norm=bn", "algo=moon"],
    ["norm=fedrbn", "adversarial=pgd_at", "adversarial.at_fraction=0.4", "adversarial.steps=1",
     "adversarial.pnc_lambda=0.5", "adversarial.eval_attacks.0.steps=1", "val_fraction=0.5",
     "adversarial.robust_test=best_val"],
])
def test_resumed_run_matches_uninterrupted_run(overrides, tmp_path, monkeypatch):
    """Stopped during round 5 with a checkpoint after round 4 and a metrics row for round 5
    already written (it must be dropped and recomputed), then resumed."""
    common = [*SMALL, "rounds=6", "algo.local_steps=2", *overrides]
    whole = run_experiment(compose_config(common), tmp_path / "whole")
    with monkeypatch.context() as m:
        stop_at(m, 5)
        cut = run_experiment(compose_config([*common, "checkpoint_every=2"]), tmp_path / "cut")
    assert cut["status"] == "interrupted" and cut["rounds_completed"] == 5
    assert len(metrics(tmp_path / "cut")) == 5
    state = torch.load(tmp_path / "cut" / ckpt.FILENAME, weights_only=True)
    assert state["rounds_completed"] == 4
    resumed = run_experiment(compose_config([*common, "checkpoint_every=2", f"resume={tmp_path / 'cut'}"]),
                             tmp_path / "elsewhere")
    assert resumed["status"] == "completed" and resumed["rounds_completed"] == 6
    pd.testing.assert_frame_equal(metrics(tmp_path / "cut"), metrics(tmp_path / "whole"))
    assert resumed["final_test_acc"] == whole["final_test_acc"]
    assert not (tmp_path / "elsewhere" / "metrics.csv").exists()


def test_checkpoint_holds_the_whole_run_state_and_loads_weights_only(tmp_path):
    run_experiment(compose_config([*SMALL, "rounds=3", "norm=fedbn", "algo.momentum_carry=local",
                                   "checkpoint_every=2"]), tmp_path)
    state = torch.load(tmp_path / ckpt.FILENAME, weights_only=True)
    assert state["rounds_completed"] == 3  # the last round is always checkpointed
    assert len(state["history"]) == 3 and state["history"][-1]["round"] == 3
    store = unpack_store(state["store"])
    assert len(store["client_local"]) == 5 and all(store["client_local"])  # FedBN's local BN
    assert any("momentum" in s for s in store["client_algo_state"])  # carried momentum
    assert len(store["records"]) == 5 and all(len(r["indices"]) for r in store["records"])
    assert state["config"]["norm"]["name"] == "fedbn" and "torch" in state["rng"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_checkpoint_that_weights_only_loading_would_refuse_is_refused_when_written(tmp_path):
    """An object in the state (not its ``state_dict``) would be written and then refuse to resume."""
    with pytest.raises(TypeError, match="not pathlib.PosixPath"):
        ckpt.save_checkpoint(tmp_path, {"rounds_completed": 1, "kept": {"dir": tmp_path}})
    assert not (tmp_path / ckpt.FILENAME).exists()


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, {"rounds_completed": 1})

    def broken_save(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        ckpt.save_checkpoint(tmp_path, {"rounds_completed": 2})
    assert ckpt.load_checkpoint(tmp_path)["rounds_completed"] == 1


def test_resume_refuses_a_different_config_or_a_missing_checkpoint(tmp_path):
    run_experiment(compose_config([*SMALL, "rounds=2", "checkpoint_every=1"]), tmp_path / "run")
    with pytest.raises(ConfigError, match="norm.name"):
        run_experiment(compose_config([*SMALL, "rounds=2", "norm=gn", f"resume={tmp_path / 'run'}"]), tmp_path)
    with pytest.raises(ConfigError, match="no checkpoint.pt"):
        run_experiment(compose_config([*SMALL, "rounds=2", f"resume={tmp_path}"]), tmp_path)


def cli(run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), *SMALL, "rounds=12", "eval_every=3", "logger=none",
            "progress=false", "checkpoint_every=1", f"hydra.run.dir={run_dir}", *args]


@pytest.mark.slow  # three run.py processes per case: about a minute on 2 shared cores, mostly imports
@pytest.mark.parametrize("algo", [[], ["algo=scaffold"], ["algo=fedadam", "norm=gn"]], ids=["fedavg", "scaffold", "fedadam"])
def test_sigkill_mid_run_then_resume_gives_the_same_metrics(algo, tmp_path):
    """Server state (SCAFFOLD's c and each c_i, FedAdam's moments) survives a SIGKILL too."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "1"}
    killed_dir, whole_dir = tmp_path / "killed", tmp_path / "whole"
    proc = subprocess.Popen(cli(killed_dir, *algo), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    checkpoint, deadline = killed_dir / ckpt.FILENAME, time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists() and torch.load(checkpoint, weights_only=True)["rounds_completed"] >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"run.py ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = torch.load(checkpoint, weights_only=True)["rounds_completed"]
    assert 3 <= done < 12 and not (killed_dir / "summary.json").exists()

    resumed = subprocess.run(cli(tmp_path / "hydra_resume", *algo, f"resume={killed_dir}"), cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    whole = subprocess.run(cli(whole_dir, *algo), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert len(metrics(killed_dir)) == 4
    pd.testing.assert_frame_equal(metrics(killed_dir), metrics(whole_dir))


def test_a_finished_run_extended_with_more_rounds_equals_the_longer_run(tmp_path, caplog):
    """Issue 52 §6: ``resume=<dir> rounds=4`` on a finished 2-round run was refused (``rounds`` differs); it now
    continues it, says from which round, and its records equal those of a 4-round run (a constant learning rate)."""
    whole = run_experiment(compose_config([*SMALL, "rounds=4"]), tmp_path / "whole")
    first = run_experiment(compose_config([*SMALL, "rounds=2"]), tmp_path / "run")
    assert first["status"] == "completed"
    with caplog.at_level("INFO", logger="fedbn_bench"):
        extended = run_experiment(compose_config([*SMALL, "rounds=4", f"resume={tmp_path / 'run'}"]), tmp_path / "run")
    assert f"resumed {tmp_path / 'run'} after round 2 (its checkpoint), to round 4 (extended from 2)" in caplog.text
    assert extended["rounds_completed"] == 4 and extended["final_test_acc"] == whole["final_test_acc"]
    pd.testing.assert_frame_equal(metrics(tmp_path / "run"), metrics(tmp_path / "whole"))
    with pytest.raises(ConfigError, match="at rounds"):
        run_experiment(compose_config([*SMALL, "rounds=3", f"resume={tmp_path / 'run'}"]), tmp_path / "run")


def test_a_resumed_run_keeps_one_wandb_folder(tmp_path, monkeypatch):
    """Issue 52 §6: each resume added a ``wandb/offline-run-*`` folder of the same run (3 for one run)."""
    common = [*SMALL, "rounds=3", "logger=wandb", "logger.mode=offline"]
    with monkeypatch.context() as m:
        stop_at(m, 2)
        assert run_experiment(compose_config(common), tmp_path / "run")["status"] == "interrupted"
    resumed = run_experiment(compose_config([*common, f"resume={tmp_path / 'run'}"]), tmp_path / "run")
    assert resumed["status"] == "completed"
    run_id = (tmp_path / "run" / "wandb_id").read_text().strip()
    folders = [p.name for p in (tmp_path / "run" / "wandb").glob("offline-run-*")]
    assert len(folders) == 1 and re.fullmatch(rf"offline-run-\d{{8}}_\d{{6}}-{run_id}(-\d+)?", folders[0]), folders


def test_the_earlier_wandb_folders_of_a_run_go_also_when_wandb_numbered_them(tmp_path):
    """W&B appends ``-1`` to a folder whose second is taken (an interrupted run resumed within the second,
    as under ``pytest -n 2``): the run is named by its id, not by the folder name's last part."""
    names = ["offline-run-20261128_040101-ab12cd34", "offline-run-20261128_040101-ab12cd34-1",
             "offline-run-20261128_040102-ab12cd34-2", "offline-run-20261128_040101-ffff0000", "latest-run"]
    for name in names:
        (tmp_path / name).mkdir()
    drop_earlier_segments(tmp_path / names[2], "ab12cd34")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
