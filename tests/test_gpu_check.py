"""``scripts/gpu_check.sh``, the one command for a lent GPU, checked on a CPU through its dry run: it
lists the install, the CUDA tier and a bench run for every preset of ``scripts/bench.py``, and it
refuses to start (naming the wheel) when a wheel of ``scripts/gpu_wheels.txt`` is not in the folder
that travels with the working tree."""
from __future__ import annotations

import importlib.metadata
import math
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

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


def bench_presets(bench) -> list[str]:
    """The synthetic presets: the GPU check times the engines on them; a real-data preset (with an
    ``experiment``, timed by ``robust_eval`` only) needs data the GPU machine does not hold."""
    return sorted(name for name, preset in bench.PRESETS.items() if not preset.experiment)


def test_the_dry_run_lists_every_step_when_all_wheels_are_there(bench, tmp_path):
    fake_wheels(tmp_path / "whl")
    done = dry_run(tmp_path / "whl", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pytest -m cuda" in done.stdout and "--no-index" in done.stdout
    for preset in bench_presets(bench):
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


def call_lines(stdout: str, first: str, last: str) -> list[str]:
    lines = stdout.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i, line in enumerate(lines) if line.startswith(last))
    return lines[begin:end]


def limits_of(lines: list[str]) -> list[int]:
    return [int(line.rsplit("(limit ", 1)[1].split()[0]) for line in lines if "(limit " in line]


def test_each_call_fits_its_budget_correctness_first_and_out_gets_at_most_eight_files(bench, tmp_path):
    """Call 1 checks the graphs before anything is timed (issue 51), within 6 minutes, the pool probe first; call 2 times
    every bench preset within 8; each copies at most 8 files to OUT."""
    fake_wheels(tmp_path / "whl")
    done = dry_run(tmp_path / "whl", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    budget = next(line for line in done.stdout.splitlines() if line.startswith("budget: "))
    check, speed = (int(n) for n in re.findall(r"call \d (\d+) s", budget))
    assert check <= 360 and speed <= 480, budget
    first = call_lines(done.stdout, "call 1", "call 2")
    assert sum(limits_of(first)) == check and "gpu_pool_probe.py" in first[3] and "gpu_graphs_check.py" in first[4] \
        and "graphed" in first[5], first
    second = call_lines(done.stdout, "call 2", "with OUT set")
    assert sum(limits_of(second)) + limits_of(first)[0] + limits_of(first)[1] == speed
    assert sum("bench: " in line for line in second) == len(bench_presets(bench))
    copied = next(line for line in done.stdout.splitlines() if line.startswith("with OUT set"))
    check_files, speed_files = (part.split() for part in copied.rsplit(": ", 1)[1].split(" / "))
    assert len(check_files) + 1 <= 8 and len(speed_files) <= 8
    assert "results/bench/gpu_graphs_check.csv" in check_files
    assert {f"results/bench/gpu_{preset}.csv" for preset in bench_presets(bench)} <= set(speed_files)
    sweep = next(line for line in done.stdout.splitlines() if line.startswith("call 3"))
    assert "--n-jobs 8" in sweep and "seed=0,1,2,3,4,5,6,7" in sweep and "-> results/bench/gpu_sweep.csv" in sweep


def bench_args(bench, processes: str):
    return bench.argparse.Namespace(preset="fbn_cifar10", rounds=1, warmup=0, device="cpu", override=[],
                                    replicas=2, processes=processes)


def test_out_gets_only_what_this_check_wrote(tmp_path):
    """A check that stops early (here: no CUDA device) still leaves its log in ``OUT``, and no table
    committed earlier passes for a new measurement."""
    fake_wheels(tmp_path / "whl")
    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    out.mkdir()
    (results / "gpu_hbn_cifar10.csv").write_text("an earlier table\n")
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "WHEELS": str(tmp_path / "whl"), "PYTHON": "false",
                               "RESULTS": str(results), "OUT": str(out)})
    assert done.returncode == 1 and "gpu check (correctness): FAILED: device" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.log"]
    assert "step 'device': exit 1" in (out / "gpu_check.log").read_text()


def test_a_bench_child_keeps_the_pythonpath_it_inherits(bench, monkeypatch):
    """Where the packages were installed with ``pip --target`` (a bare GPU machine), ``PYTHONPATH``
    is how a child finds them: the checkout's ``src`` goes first, the inherited path stays."""
    seen = {}

    def fake_run(cmd, env, **kwargs):
        seen.update(env)
        return subprocess.CompletedProcess(cmd, 0, stdout='{"config": "matmul"}\n', stderr="")

    monkeypatch.setenv("PYTHONPATH", "/tmp/fedbn-site")
    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    bench.run_child(bench_args(bench, "each"), "matmul", {})
    assert seen["PYTHONPATH"] == os.pathsep.join([str(ROOT / "src"), "/tmp/fedbn-site"])


def test_one_process_times_every_configuration_without_a_child(bench, monkeypatch):
    """``--processes one`` (the default on CUDA) measures in the bench's own process; on the CPU a row
    then has no peak memory, since the process's peak RSS spans the configurations before it."""
    calls = []

    def fake_measure(preset, config, rounds, warmup, device, overrides, replicas):
        calls.append((preset, config, rounds, warmup, device.type, overrides, replicas))
        return {"config": config, "peak_mem_mib": 900.0, "mem_kind": "cpu_peak_rss"}

    monkeypatch.setattr(bench.subprocess, "run", None)  # a child would fail
    monkeypatch.setattr(bench, "measure", fake_measure)
    row = bench.run_child(bench_args(bench, "one"), "packed", {"norm": "gn"})
    assert calls == [("fbn_cifar10", "packed", 1, 0, "cpu", ["norm=gn"], 2)]
    assert (row["config"], row["algo"], row["norm"], row["mem_kind"]) == ("packed", "dsgd", "gn", "")
    assert math.isnan(row["peak_mem_mib"])


IMAGE_LACKS = [r.split("==")[0] for r in requirements()] + ["fedbn-bench"]
"""What a GPU image's Python does not have: the wheels' packages and the project itself."""


def wheel_cache() -> Path:
    """The wheels of ``scripts/gpu_wheels.txt``, fetched once by ``scripts/gpu_check.sh --fetch`` into
    ``$FEDBN_WHEEL_CACHE`` (default ``~/.cache/fedbn-bench/gpu-wheels``); skips without a package index."""
    cache = Path(os.environ.get("FEDBN_WHEEL_CACHE", Path.home() / ".cache" / "fedbn-bench" / "gpu-wheels"))
    if dry_run(cache, "--dry-run").returncode != 0:
        done = subprocess.run(["bash", str(SCRIPT), "--fetch"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                              env={**os.environ, "WHEELS": str(cache), "PYTHON": sys.executable})
        if done.returncode != 0:
            pytest.skip(f"the wheels could not be fetched (no package index?): {(done.stdout + done.stderr)[-300:]}")
    return cache


def bare_python(folder: Path) -> Path:
    """A Python like a GPU image's: a venv that sees this environment's packages (torch, numpy, pandas,
    ...) through a folder of links, less the project and the packages its wheels bring (``IMAGE_LACKS``)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True, timeout=300)
    lacking = {part for name in IMAGE_LACKS for f in importlib.metadata.distribution(name).files or []
               for part in f.parts[:1] if part != ".."}
    image = folder / "image"
    image.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.name not in lacking and entry.suffix != ".pth":
            (image / entry.name).symlink_to(entry)
    venv_site = next((folder / "venv" / "lib").glob("python*/site-packages"))
    (venv_site / "gpu_image.pth").write_text(f"{image}\n")
    return folder / "venv" / "bin" / "python"


@pytest.mark.slow
def test_the_install_step_gives_a_bare_python_what_the_bench_children_import(tmp_path):
    """Today's failure on the H200 (every bench child: ``No module named 'hydra'``), on the CPU: a
    Python without hydra gets it only from the wheels, through ``gpu_check.sh --install``, and the
    bench's child processes import it."""
    wheels = wheel_cache()
    python = bare_python(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    missing = subprocess.run([str(python), "-c", "import hydra"], capture_output=True, text=True, env=env)
    assert "No module named 'hydra'" in missing.stderr
    installed = subprocess.run(["bash", str(SCRIPT), "--install"], capture_output=True, text=True, cwd=ROOT,
                               timeout=300, env={**env, "WHEELS": str(wheels), "PYTHON": str(python),
                                                 "SITE": str(tmp_path / "site")})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    pythonpath = installed.stdout.strip().splitlines()[-1].removeprefix("PYTHONPATH=")
    assert pythonpath == f"{tmp_path / 'site'}:{ROOT / 'src'}"
    bench = subprocess.run([str(python), "scripts/bench.py", "--preset", "fbn_cifar10", "--configs", "", "--rounds",
                            "1", "--warmup", "0", "--processes", "each", "--out", str(tmp_path / "out")],
                           capture_output=True, text=True, cwd=ROOT, timeout=600,
                           env={**env, "PYTHONPATH": pythonpath})
    assert bench.returncode == 0, bench.stderr[-3000:]
    table = (tmp_path / "out" / "fbn_cifar10.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in table[1:]] == ["auto", "matmul"]
