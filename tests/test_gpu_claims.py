"""``scripts/gpu_claims.sh``, the long claims on a lent GPU, checked on a CPU through its dry run: every job it
plans composes as a run of its preset whose sweep writes the job's run directory (so the claims read it), a
call plans no more than its budget of at most 8 minutes, a job whose directory holds a completed run is skipped,
and a budget over 8 minutes is refused."""
from __future__ import annotations

import json
import os
import re
import subprocess

from omegaconf import OmegaConf

from conftest import ROOT, compose_config

SCRIPT = ROOT / "scripts" / "gpu_claims.sh"
LINE = re.compile(r"^(run|later|done)\s+(.+?) \(estimate (\d+) s.*?\): python3 run.py (.*)$")


def dry_run(root, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "ROOT": str(root), **env})


def planned(out: str) -> list[tuple[str, str, int, list[str]]]:
    jobs = []
    for line in out.splitlines():
        match = LINE.match(line)
        if match:
            state, name, estimate, command = match.groups()
            jobs.append((state, name, int(estimate), command.split()))
    return jobs


def subdir(cfg, overrides: list[str]) -> str:
    """The preset's ``hydra.sweep.subdir`` for this job: ``${hydra:runtime.choices.<group>}`` is the override
    of ``+<group>``, ``${<key>}`` the composed value."""
    chosen = dict(o.lstrip("+").split("=", 1) for o in overrides)
    template = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["subdir"]
    template = re.sub(r"\$\{hydra:runtime\.choices\.([^}]+)\}", lambda m: chosen[m.group(1)], template)
    return re.sub(r"\$\{([^}]+)\}", lambda m: str(OmegaConf.select(cfg, m.group(1))), template)


def test_the_plan_fits_the_budget_and_every_job_composes_into_its_sweep_directory(tmp_path):
    """Every job, this call's or a later one's."""
    result = dry_run(tmp_path)
    assert result.returncode == 0, result.stderr
    jobs = planned(result.stdout)
    assert len(jobs) == 18 and "not done: 18 job(s)" in result.stdout
    assert sum(e for state, _, e, _ in jobs if state == "run") <= 480
    assert jobs[0][1].startswith("hbn/table1 phi 0.6 100 rounds") and jobs[0][0] == "run"
    for _, name, _, command in jobs:
        overrides = [w for w in command if not w.startswith(("hydra.run.dir=", "device=", "engine.threads=", "resume="))]
        run_dir = next(w for w in command if w.startswith("hydra.run.dir=")).split("=", 1)[1]
        cfg = compose_config(overrides, return_hydra_config=True)
        assert run_dir == f"{tmp_path}/{cfg.hydra.sweep.dir}/{subdir(cfg, overrides)}", name
        assert "device=cuda" in command


def test_a_completed_run_is_skipped_and_the_budget_is_capped(tmp_path):
    first = planned(dry_run(tmp_path).stdout)[0]
    run_dir = next(w for w in first[3] if w.startswith("hydra.run.dir=")).split("=", 1)[1]
    os.makedirs(run_dir)
    with open(f"{run_dir}/summary.json", "w") as f:
        json.dump({"status": "completed"}, f)
    out = dry_run(tmp_path).stdout
    assert planned(out)[0][0] == "done" and "not done: 17 job(s)" in out
    assert [s for s, *_ in planned(dry_run(tmp_path, BUDGET="100").stdout)].count("run") == 0
    refused = dry_run(tmp_path, BUDGET="600")
    assert refused.returncode == 2 and "at most 480" in refused.stderr
