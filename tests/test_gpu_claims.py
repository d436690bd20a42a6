"""``scripts/gpu_claims.sh``, the claims' deciders on a lent GPU, checked on a CPU through its dry run: it plans
exactly the cells of ``scripts/claims_queue.txt`` (the CPU queue's runs) that are neither finished nor held by the
CPU queue, costliest first, each with the queue's command (``record=true`` included) and ``device=cuda``; every job
composes as a run of its preset whose sweep writes the job's run directory (so the claims read it); a call plans no
more than its budget of at most 8 minutes, and a budget over 8 minutes is refused."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, compose_config, load_script

SCRIPT = ROOT / "scripts" / "gpu_claims.sh"
QUEUE = ROOT / "scripts" / "claims_queue.txt"
LINE = re.compile(r"^(run|later)\s+(\S+) \(estimate (\d+) s.*?\): \S+ \S+/run\.py (.*)$")
CPU_PER_GPU_SECOND = 10
queue = load_script("claims_queue")


def dry_run(root, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "ROOT": str(root), "PYTHON": sys.executable, **env})


def planned(out: str) -> list[tuple[str, str, int, list[str]]]:
    """The dry run's jobs: state (run, later), run directory, GPU estimate, the run's arguments."""
    jobs = []
    for line in out.splitlines():
        match = LINE.match(line)
        if match:
            state, run_dir, estimate, command = match.groups()
            jobs.append((state, run_dir, int(estimate), command.split()))
    return jobs


def subdir(cfg, overrides: list[str]) -> str:
    """The preset's ``hydra.sweep.subdir`` for this job: ``${hydra:runtime.choices.<group>}`` is the override
    of ``+<group>``, ``${<key>}`` the composed value."""
    chosen = dict(o.lstrip("+").split("=", 1) for o in overrides)
    template = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["subdir"]
    template = re.sub(r"\$\{hydra:runtime\.choices\.([^}]+)\}", lambda m: chosen[m.group(1)], template)
    return re.sub(r"\$\{([^}]+)\}", lambda m: str(OmegaConf.select(cfg, m.group(1))), template)


@pytest.fixture(scope="module")
def cells() -> list:
    """Every cell of the queue file, the costliest deciders' first (queue order among equals)."""
    every = [cell for decider in queue.read_queue(QUEUE) for cell in queue.expand(decider)]
    return sorted(every, key=lambda cell: -cell.decider.seconds)


def test_the_plan_is_the_queue_s_cells_each_composing_into_its_run_directory(tmp_path, cells):
    """Every job, this call's or a later one's."""
    result = dry_run(tmp_path)
    assert result.returncode == 0, result.stderr
    jobs = planned(result.stdout)
    assert [run_dir for _, run_dir, _, _ in jobs] == [cell.run_dir for cell in cells]
    assert f"not done: {len(cells)} job(s)" in result.stdout
    assert sum(estimate for state, _, estimate, _ in jobs if state == "run") <= 480
    assert any(state == "run" for state, _, _, _ in jobs)
    presets = {decider.preset for decider in queue.read_queue(QUEUE)}
    for (_, run_dir, estimate, command), cell in zip(jobs, cells):
        assert command == [*cell.command([]), "device=cuda"] and "record=true" in command, run_dir
        assert estimate == math.ceil(cell.decider.seconds / CPU_PER_GPU_SECOND)
        overrides = [w for w in command[1:] if w.split("=")[0] not in ("hydra.sweep.dir", "hydra.sweep.subdir")]
        preset = overrides[0].removeprefix("experiment=")
        assert preset in presets, f"{run_dir}: {preset} is not in {QUEUE.name}"
        cfg = compose_config(overrides, return_hydra_config=True)
        assert run_dir == f"{cfg.hydra.sweep.dir}/{subdir(cfg, overrides)}", run_dir


def test_finished_and_held_runs_leave_the_plan_and_the_budget_is_capped(tmp_path, cells):
    """A completed or diverged run is done, one the CPU queue's lock holds is running there; a failed one is
    run again."""
    for cell, status in zip(cells, ("completed", "diverged", "failed")):
        (tmp_path / cell.run_dir).mkdir(parents=True)
        (tmp_path / cell.run_dir / "summary.json").write_text(json.dumps({"status": status}))
    fd = queue.try_lock(queue.lock_path(tmp_path, cells[3]))
    try:
        result = dry_run(tmp_path, BUDGET="100")
    finally:
        os.close(fd)
    jobs = planned(result.stdout)
    assert [run_dir for _, run_dir, _, _ in jobs] == [cell.run_dir for cell in cells[2:3] + cells[4:]]
    assert sum(estimate for state, _, estimate, _ in jobs if state == "run") <= 100
    assert f"not done: {len(cells) - 3} job(s)" in result.stdout
    refused = dry_run(tmp_path, BUDGET="600")
    assert refused.returncode == 2 and "at most 480" in refused.stderr
