"""The whole CUDA tier (``test_cuda.py`` and the device cases of ``test_data.py``) with the CPU
standing in for the GPU (``FEDBN_TEST_DEVICE=cpu``): the tier's own logic (every norm × engine ×
algorithm combination it builds, the headline runs, the checkpoint moves) is exercised on every
machine, so a GPU session finds only the GPU's own differences. Slow: ``pytest -m slow``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_cuda_tier_passes_with_the_cpu_standing_in():
    env = {**os.environ, "FEDBN_TEST_DEVICE": "cpu"}
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-n", "2",
               "tests/test_cuda.py", "tests/test_data.py"]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
