"""Issue 52: a user's own runs never touch the committed evidence (``records/evidence.py``).

Each test runs ``run.py`` in a scratch project: ``run.py`` copied, ``conf/`` linked, and the committed run
folders it needs copied under its own ``results/``, with no data (a fresh clone's state), so a command that
wrote into the evidence changes the copy, never this checkout.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from fedbn_bench.records.run_dirs import STAGED
from fedbn_bench.records.sweep_report import FAILED_ATTEMPT

TABLE2 = Path("results/fedrbn/table2_digits/runs")
FATAVG = TABLE2 / "digits_20/fatavg-seed0"
ONE_JOB = ["+experiment/fedrbn/method=fatavg", "seed=0"]
"""table2_digits's FATAvg seed-0 cell: the README command's grid shrunk to the one job whose committed record
issue 52 saw replaced (``"status": "completed"`` 0.813 -> ``"failed"``, ``DatasetError``)."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch project without data, holding table2_digits's committed FATAvg seed-0 run."""
    shutil.copy(ROOT / "run.py", tmp_path / "run.py")
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    shutil.copytree(ROOT / FATAVG, tmp_path / FATAVG)
    return tmp_path


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "offline",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "run.py", *args, "progress=false"], cwd=project, capture_output=True,
                          text=True, timeout=300, env=env)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_preset_sweep_without_its_data_leaves_the_committed_records_as_they_are(project):
    before = snapshot(project / "results")
    result = run(project, "-m", "experiment=fedrbn/table2_digits", *ONE_JOB)
    assert snapshot(project / "results") == before, result.stderr
    assert result.returncode == 1, result.stderr  # the job failed (no MNIST), in the user's own folder
    own = list((project / "multirun/fedrbn/table2_digits").glob("*/*/digits_20/fatavg-seed0/summary.json"))
    assert len(own) == 1 and '"DatasetError"' in own[0].read_text(), result.stderr
    assert "writes to multirun/fedrbn/table2_digits/<date>/<time>" in result.stderr


def test_the_committed_folder_named_on_the_command_line_is_refused_without_record(project):
    before = snapshot(project)
    result = run(project, "-m", "experiment=fedrbn/table2_digits", *ONE_JOB, f"hydra.sweep.dir={TABLE2}",
                 "resume=auto")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {TABLE2} is under results/, the committed evidence: add record=true to record into it "
        "(docs/runs.md), or give hydra.sweep.dir a folder of your own"]
    assert snapshot(project) == before


def test_resuming_a_committed_run_is_refused_without_record(project):
    result = run(project, f"resume={FATAVG}", "rounds=40")
    assert result.returncode == 2 and "add record=true" in result.stderr and "give resume a folder" in result.stderr


def test_record_outside_results_is_refused(project):
    result = run(project, "record=true", "rounds=1", "logger=none")
    assert result.returncode == 2
    assert "record=true records into results/, but this command writes to outputs/" in result.stderr
    assert not (project / "outputs").exists()


def records(folder: Path) -> dict[str, bytes]:
    """The run records under ``folder``: its snapshot but ``run.log`` (which logs every attempt), the config
    of the attempt (``STAGED``), its failure (``FAILED_ATTEMPT``) and the sweep's config (``multirun.yaml``)."""
    return {k: v for k, v in snapshot(folder).items()
            if not k.endswith(("run.log", FAILED_ATTEMPT, "multirun.yaml")) and STAGED not in k}


def test_a_failed_job_never_replaces_a_completed_record_even_when_recording_over_it(project):
    before = snapshot(project / "results")
    result = run(project, "-m", "experiment=fedrbn/table2_digits", *ONE_JOB, "record=true", "overwrite=true")
    assert result.returncode == 1
    assert "digits_20/fatavg-seed0: DatasetError: digits5_standin reads MNIST" in result.stderr
    assert "(the completed run there is left as it was)" in result.stderr
    assert records(project / "results") == {k: v for k, v in before.items() if not k.endswith("run.log")}
    assert (project / FATAVG / FAILED_ATTEMPT).is_file()


def test_overwrite_replaces_a_run_once_the_new_one_trains(project):
    first = run(project, "debug=default", "hydra.run.dir=mine")
    assert first.returncode == 0, first.stderr
    again = run(project, "debug=default", "rounds=1", "hydra.run.dir=mine", "overwrite=true")
    assert again.returncode == 0, again.stderr
    assert json.loads((project / "mine/summary.json").read_text())["rounds_completed"] == 1
    assert "rounds: 1" in (project / "mine/.hydra/config.yaml").read_text()
    assert not (project / "mine" / STAGED).exists()
    assert (project / "mine/run.log").read_text().count("completed:") == 2  # issue 59: unlinked while written


@pytest.mark.parametrize("folder", ["hydra.run.dir=outputs/../results/mine", "hydra.run.dir=./results/x/../mine"])
def test_a_path_into_results_through_dots_is_refused_without_record(project, folder):
    """Issue 59: paths were compared without normalising: ``outputs/../results/mine`` wrote into results/."""
    result = run(project, "rounds=1", "logger=none", folder)
    assert result.returncode == 2, result.stderr
    assert "is under results/, the committed evidence" in result.stderr
    assert not (project / "results/mine").exists() and not (project / "outputs").exists()
