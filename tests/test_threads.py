"""``engine.threads``: a joblib sweep's jobs share the cores; a single run uses them all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbn_bench.engine.threads import available_cores, resolve_threads
from fedbn_bench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_auto_divides_the_cores_among_the_jobs_at_once():
    assert resolve_threads("auto", 1, 16) == 16
    assert resolve_threads("auto", 16, 16) == 1
    assert resolve_threads("auto", 3, 16) == 5
    assert resolve_threads("auto", 4, 2) == 1  # never below one
    assert resolve_threads(3, 4, 2) == 3
    for bad in (0, -1, "many", True):
        with pytest.raises(ConfigError, match="engine.threads"):
            resolve_threads(bad, 1, 2)


@pytest.mark.slow  # a real joblib sweep of run.py processes (about 25 s); the thread rule has its unit tests above
def test_a_joblib_job_gets_its_share_and_a_single_run_every_core(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = [sys.executable, str(ROOT / "run.py"), "debug=default", "rounds=1", "eval_every=1"]
    subprocess.run([common[0], common[1], "-m", *common[2:], "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "norm=bn,gn",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], check=True, cwd=ROOT, env=env, capture_output=True)
    subprocess.run([*common, f"hydra.run.dir={tmp_path / 'single'}"], check=True, cwd=ROOT, env=env,
                   capture_output=True)
    cores = available_cores()
    sweep = [json.loads(p.read_text())["threads"] for p in sorted((tmp_path / "sweep").glob("*/summary.json"))]
    assert sweep == [max(1, cores // 2)] * 2
    assert json.loads((tmp_path / "single" / "summary.json").read_text())["threads"] == cores
