"""scripts/claims_queue.py with a fake run command: each decider expands to its preset's sweep cells, every
cell runs once with its run directory spelled out, at most ``--jobs`` at a time; finished and held runs are
skipped; ``--status`` counts and estimates; ``--pause`` / ``--resume`` stop and continue the running jobs."""
from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from conftest import load_script

queue = load_script("claims_queue")

FAKE_RUN = '''
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
run = os.path.join(args["hydra.sweep.dir"], args["hydra.sweep.subdir"])
os.makedirs(run, exist_ok=True)
with open("calls.jsonl", "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "start": time.time()}) + "\\n")
time.sleep(float(os.environ.get("FAKE_SECONDS", "0.3")))
with open(os.path.join(run, "summary.json"), "w") as f:
    json.dump({"status": "completed"}, f)
with open("calls.jsonl", "a") as log:
    log.write(json.dumps({"end": time.time(), "run": run}) + "\\n")
'''
RUNS = "results/fedbn/fig9_3000_steps/runs"
CELLS = [f"{m}-seed{s}" for m in ("fedavg", "fedbn") for s in (1, 2, 3)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    (tmp_path / "queue.txt").write_text(f"# a comment\nfedbn/fig9_3000_steps  {RUNS}  100\n")
    return tmp_path


def run_main(root: Path, *extra: str) -> int:
    return queue.main(["--root", str(root), "--queue", str(root / "queue.txt"), "--poll", "0.05",
                       "--runner", shlex.join([sys.executable, str(root / "fake_run.py")]), *extra])


def calls(root: Path) -> tuple[list[dict], list[dict]]:
    lines = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    return [c for c in lines if "argv" in c], [c for c in lines if "end" in c]


def max_at_once(starts: list[dict], ends: list[dict]) -> int:
    """The most fake runs that were running at the same time."""
    events = sorted([(c["start"], 1) for c in starts] + [(c["end"], -1) for c in ends])
    return max(sum(step for _, step in events[:i + 1]) for i in range(len(events)))


def cells(root: Path) -> list:
    return queue.expand(queue.read_queue(root / "queue.txt")[0])


def test_every_cell_runs_once_with_its_directory_spelled_out_two_at_a_time(root):
    assert run_main(root) == 0
    starts, ends = calls(root)
    subdirs = sorted(dict(a.split("=", 1) for a in c["argv"] if "=" in a)["hydra.sweep.subdir"] for c in starts)
    assert subdirs == sorted(CELLS)
    for call in starts:
        argv = call["argv"]
        assert argv[:2] == ["-m", "experiment=fedbn/fig9_3000_steps"]
        assert f"hydra.sweep.dir={RUNS}" in argv and "resume=auto" in argv and "record=true" in argv and "engine.threads=1" in argv
    assert max_at_once(starts, ends) == 2
    assert all(json.loads((root / RUNS / c / "summary.json").read_text())["status"] == "completed" for c in CELLS)


def test_finished_and_held_runs_are_not_started(root):
    finished = root / RUNS / "fedavg-seed1"
    finished.mkdir(parents=True)
    (finished / "summary.json").write_text(json.dumps({"status": "completed"}))
    held = next(c for c in cells(root) if c.subdir == "fedbn-seed3")
    fd = queue.try_lock(queue.lock_path(root, held))
    try:
        assert run_main(root, "--jobs", "3") == 1   # the held run has not finished
    finally:
        os.close(fd)
    starts, ends = calls(root)
    started = {dict(a.split("=", 1) for a in c["argv"] if "=" in a)["hydra.sweep.subdir"] for c in starts}
    assert started == set(CELLS) - {"fedavg-seed1", "fedbn-seed3"}
    assert max_at_once(starts, ends) == 2   # the held run takes one of the 3 jobs


def test_status_counts_each_state_and_the_cpu_hours_left(root, capsys):
    all_cells = cells(root)
    (root / RUNS / "fedavg-seed1").mkdir(parents=True)
    (root / RUNS / "fedavg-seed1" / "summary.json").write_text(json.dumps({"status": "diverged"}))
    (root / RUNS / "fedavg-seed2").mkdir(parents=True)
    (root / RUNS / "fedavg-seed2" / "summary.json").write_text(json.dumps({"status": "failed"}))
    running = all_cells[2]
    fd = queue.try_lock(queue.lock_path(root, running))
    os.pwrite(fd, json.dumps({"pgid": 0, "started": 1000.0}).encode(), 0)
    try:
        rows = queue.survey(root, all_cells)
        assert [r.state for r in rows] == ["done", "failed", "running", "queued", "queued", "queued"]
        assert queue.hours_left(rows, now=1040.0) == pytest.approx((3 * 100 + 60) / 3600)
        assert run_main(root, "--status") == 0
    finally:
        os.close(fd)
    assert "done 1/6, running 1, failed 1, queued 3, about 0.1 CPU-h left" in capsys.readouterr().out


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_pause_stops_the_running_jobs_and_resume_continues_them(root, monkeypatch):
    monkeypatch.setenv("FAKE_SECONDS", "60")
    cell = cells(root)[0]
    fd = queue.try_lock(queue.lock_path(root, cell))
    process = queue.start(root, cell, [sys.executable, str(root / "fake_run.py")], fd)
    try:
        assert run_main(root, "--pause") == 0
        deadline = time.time() + 10
        while process_state(process.pid) != "T" and time.time() < deadline:
            time.sleep(0.05)
        assert process_state(process.pid) == "T"
        assert run_main(root, "--resume") == 0
        while process_state(process.pid) == "T" and time.time() < deadline:
            time.sleep(0.05)
        assert process_state(process.pid) in ("S", "R")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        os.close(fd)


def test_a_second_queue_on_the_same_root_is_refused(root, capsys):
    fd = queue.try_lock(root / queue.STATE / "queue.lock")
    try:
        assert run_main(root) == 2
    finally:
        os.close(fd)
    assert capsys.readouterr().err.startswith("error: a queue already runs")
    assert not (root / "calls.jsonl").exists()


def test_a_line_without_its_estimate_is_refused(tmp_path):
    (tmp_path / "queue.txt").write_text(f"fedbn/fig9_3000_steps {RUNS}\n")
    with pytest.raises(SystemExit, match=r"error: .*queue.txt:1: expected"):
        queue.read_queue(tmp_path / "queue.txt")


def test_a_line_s_overrides_restrict_its_preset_s_grid(tmp_path):
    (tmp_path / "queue.txt").write_text(f"fedbn/fig9_3000_steps {RUNS} 100 +experiment/fedbn/method=fedbn seed=2,3\n")
    [decider] = queue.read_queue(tmp_path / "queue.txt")
    assert [cell.subdir for cell in queue.expand(decider)] == ["fedbn-seed2", "fedbn-seed3"]


def test_harvest_copies_finished_runs_without_checkpoints_once(root, tmp_path_factory, capsys):
    checkout = tmp_path_factory.mktemp("checkout")
    done, unfinished = root / RUNS / "fedavg-seed1", root / RUNS / "fedavg-seed2"
    for run in (done, unfinished):
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
        (run / "checkpoint.pt").write_bytes(b"state")
    (done / "summary.json").write_text(json.dumps({"status": "completed", "wall_time_s": 88.4}))
    (unfinished / "summary.json").write_text(json.dumps({"status": "interrupted"}))
    assert run_main(root, "--harvest", str(checkout)) == 0
    assert capsys.readouterr().out.startswith(f"{RUNS}/fedavg-seed1: completed, 88 s\nnext: python scripts/claims.py")
    assert sorted(p.relative_to(checkout).as_posix() for p in checkout.rglob("*") if p.is_file()) == [
        f"{RUNS}/fedavg-seed1/.hydra/overrides.yaml", f"{RUNS}/fedavg-seed1/summary.json"]
    assert run_main(root, "--harvest", str(checkout)) == 0
    assert capsys.readouterr().out == "nothing new finished\n"


def test_plan_lists_the_cells_left_with_their_estimate_and_command(root, capsys):
    (root / "queue.txt").write_text(f"fedbn/fig9_3000_steps {RUNS} 100 seed=1\n"
                                    f"fedbn/fig9_3000_steps {RUNS} 200 +experiment/fedbn/method=fedbn seed=2,3\n")
    finished = root / RUNS / "fedavg-seed1"
    finished.mkdir(parents=True)
    (finished / "summary.json").write_text(json.dumps({"status": "completed"}))
    [held] = [c for d in queue.read_queue(root / "queue.txt") for c in queue.expand(d) if c.subdir == "fedbn-seed3"]
    fd = queue.try_lock(queue.lock_path(root, held))
    try:
        assert run_main(root, "--plan", "--longest-first") == 0
    finally:
        os.close(fd)
    assert [line.split("\t") for line in capsys.readouterr().out.splitlines()] == [
        [f"{RUNS}/fedbn-seed2", "200", "-m", "experiment=fedbn/fig9_3000_steps", "+experiment/fedbn/method=fedbn",
         "seed=2", f"hydra.sweep.dir={RUNS}", "hydra.sweep.subdir=fedbn-seed2", *queue.FIXED],
        [f"{RUNS}/fedbn-seed1", "100", "-m", "experiment=fedbn/fig9_3000_steps", "+experiment/fedbn/method=fedbn",
         "seed=1", f"hydra.sweep.dir={RUNS}", "hydra.sweep.subdir=fedbn-seed1", *queue.FIXED]]


def test_a_run_the_queue_re_runs_in_full_is_not_also_replayed(root):
    """Issue 57: a replay only checks a committed record against this code; a run the queue re-runs in full gets a
    record of its own code instead, so its replay is dropped and every other replay stays where the file puts it."""
    (root / "queue.txt").write_text(f"@replay\nfedbn/fig9_3000_steps  {RUNS}  100\n")
    replays = [queue.ReplayCell(f"{RUNS}/fedavg-seed1", 5.0), queue.ReplayCell("results/other/runs/x-seed0", 5.0)]
    drifted = [queue.RerunCell("results/other/runs/y-seed0", 9.0, ())]
    entries = [*queue.read_queue(root / "queue.txt"), queue.DRIFTED_MARK]
    assembled = queue.assemble(entries, replays, lambda: drifted)
    assert [c.run_dir for c in assembled] == ["results/other/runs/x-seed0", *(f"{RUNS}/{c}" for c in CELLS),
                                              "results/other/runs/y-seed0"]
    again = queue.assemble(entries, [queue.ReplayCell(drifted[0].run_dir, 5.0)], lambda: drifted)
    assert not any(isinstance(c, queue.ReplayCell) for c in again) and again[-1] == drifted[0]
