"""``scripts/gpu_check.sh``, the one command for a lent GPU, checked on a CPU through its dry run: it
lists the install, the CUDA tier and a bench run for every preset of ``scripts/bench.py``, and it
refuses to start (naming the wheel) when a wheel of ``scripts/gpu_wheels.txt`` is not in the folder
that travels with the working tree."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def requirements() -> list[str]:
    lines = (ROOT / "scripts" / "gpu_wheels.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def fake_wheels(folder, skip: str = "") -> None:
    folder.mkdir(exist_ok=True)
    for requirement in requirements():
        name, version = requirement.split("==")
        if name != skip:
            (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")


def dry_run(wheels, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "WHEELS": str(wheels)}, timeout=60)


def bench_presets() -> list[str]:
    """The synthetic presets: the GPU check times the engines on them; a real-data preset (with an
    ``experiment``, timed by ``robust_eval`` only) needs data the GPU machine does not hold."""
    spec = importlib.util.spec_from_file_location("bench_for_gpu_check", ROOT / "scripts" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return sorted(name for name, preset in module.PRESETS.items() if not preset.experiment)


def test_the_dry_run_lists_every_step_when_all_wheels_are_there(tmp_path):
    fake_wheels(tmp_path / "whl")
    done = dry_run(tmp_path / "whl", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pytest -m cuda" in done.stdout and "--no-index" in done.stdout
    for preset in bench_presets():
        assert f"--preset {preset} --device cuda" in done.stdout and f"gpu_{preset}.csv" in done.stdout, preset
    assert f"all {len(requirements())} wheels present" in done.stdout


@pytest.mark.parametrize("missing", ["hydra-core", "torchattacks"])
def test_a_missing_wheel_is_named_and_stops_it(missing, tmp_path):
    fake_wheels(tmp_path / "whl", skip=missing)
    done = dry_run(tmp_path / "whl", "--dry-run")
    assert done.returncode == 1
    assert [line for line in done.stdout.splitlines() if line.startswith("missing wheel")] == [
        next(f"missing wheel: {r} (in {tmp_path / 'whl'}/; scripts/gpu_check.sh --fetch downloads it)"
             for r in requirements() if r.startswith(missing + "=="))]


def test_an_unknown_argument_is_refused(tmp_path):
    done = dry_run(tmp_path, "--dryrun")
    assert done.returncode == 2 and "error: unknown argument '--dryrun'" in done.stderr


def test_every_runtime_dependency_travels_or_is_on_the_image():
    """A dependency of pyproject.toml is either a wheel of the list or one the GPU image has (the
    list's header names them); wandb stays behind because the check runs with logger=none."""
    import tomllib

    lines = (ROOT / "scripts" / "gpu_wheels.txt").read_text().splitlines()
    header = " ".join(line for line in lines if line.startswith("#"))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in deps}
    travelling = {r.split("==")[0] for r in requirements()}
    on_image = {"torch", "torchvision", "numpy", "scipy", "pandas", "matplotlib", "scikit-learn", "tqdm",
                "pillow", "wandb"}
    assert names <= travelling | on_image, names - travelling - on_image
    assert all(name in header for name in on_image), [name for name in on_image if name not in header]
