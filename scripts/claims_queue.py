"""The queue of runs that decide the claims (issue 49 §2): every cell of the deciders' sweeps, cheapest first, two
at a time, one torch thread each, until every run is finished.

The deciders are listed in ``scripts/claims_queue.txt`` (one a line, in order: the preset, the run tree its claim
reads, the estimated CPU-seconds of one run, and optional overrides that restrict or extend its grid). Each is
expanded into its single runs by Hydra's own sweeper (the preset's composed ``hydra.sweeper.params`` crossed with
the line's overrides), and each run is launched on its own, with its run directory spelled out so that no preset
default decides where evidence goes::

    python run.py -m experiment=<preset> <cell overrides> hydra.sweep.dir=<runs> hydra.sweep.subdir=<cell>
        resume=auto record=true engine.threads=1

A finished run (``summary.json`` completed or diverged) is skipped; an interrupted one resumes from its checkpoint
(``resume=auto``). A run is held by an ``flock`` on ``.claims_queue/locks/<run>.lock`` for as long as its process
lives (the lock's descriptor is inherited by the run), so a second queue, or a queue restarted while its runs still
go on, never starts a run twice. The lock file holds the run's process group and start time, which ``--status``,
``--pause`` and ``--resume`` read.

The code (this script, ``run.py``, ``src/``, ``conf/``) is that of the checkout the script lies in; the runs go
under ``--root`` (default: the same checkout), their working directory. ``scripts/claims_queue_start.sh`` starts the
queue detached, from a worktree at a fixed commit (``docs/claims.md``). One queue a root (``.claims_queue/queue.lock``).

    python scripts/claims_queue.py              run the queue (2 jobs; --jobs N)
    python scripts/claims_queue.py --status     done / running / failed / queued per run, CPU-hours left
    python scripts/claims_queue.py --pause      SIGSTOP every running job (a quiet machine for a benchmark)
    python scripts/claims_queue.py --resume     SIGCONT them
    python scripts/claims_queue.py --harvest CHECKOUT   copy the finished runs CHECKOUT lacks into it
    python scripts/claims_queue.py --plan [--longest-first]   the runs left to start, for scripts/gpu_claims.sh
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from fedbn_bench.records.provenance import recorded_code  # noqa: E402
from fedbn_bench.records.replay import record_path  # noqa: E402
STATE = ".claims_queue"
FINISHED = ("completed", "diverged")
FIXED = ("resume=auto", "record=true", "engine.threads=1")
"""Overrides every run gets: resume what a run directory holds, record into ``results/`` (the committed evidence,
written only with ``record=true``: ``records/evidence.py``), one torch thread (two jobs on two cores)."""


@dataclass(frozen=True)
class Decider:
    """One line of the queue file: a preset's sweep, the run tree it writes, the CPU-seconds of one run."""

    preset: str
    runs: str
    seconds: float
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cell:
    """One run of a decider: its overrides and its run directory (relative to the repository)."""

    decider: Decider
    overrides: tuple[str, ...]
    subdir: str

    @property
    def run_dir(self) -> str:
        return f"{self.decider.runs}/{self.subdir}"

    @property
    def seconds(self) -> float:
        return self.decider.seconds

    def finished(self, root: Path) -> bool:
        return run_status(root, self) in FINISHED

    @property
    def key(self) -> str:
        return self.run_dir.replace("/", "__")

    def command(self, runner: list[str]) -> list[str]:
        return [*runner, "-m", f"experiment={self.decider.preset}", *self.overrides,
                f"hydra.sweep.dir={self.decider.runs}", f"hydra.sweep.subdir={self.subdir}", *FIXED]


@dataclass(frozen=True)
class ReplayCell:
    """The replay of one committed run that a current claim reads (issue 57 §1): ``fedbn_bench.replay_runner`` on
    the run as the code's checkout holds it, for its first evaluation; its result goes to
    ``<root>/results/replay/`` (``records/replay.py``), which ``--harvest`` copies."""

    run_dir: str
    seconds: float
    evals: int = 1

    @property
    def key(self) -> str:
        return "replay__" + self.run_dir.replace("/", "__")

    def finished(self, root: Path) -> bool:
        return record_path(root, self.run_dir).is_file() or record_path(REPO, self.run_dir).is_file()

    def command(self, runner: list[str]) -> list[str]:
        return [runner[0], "-m", "fedbn_bench.replay_runner", self.run_dir, "--evals", str(self.evals),
                "--repo", str(REPO), "--out", "."]


@dataclass(frozen=True)
class RerunCell:
    """A committed run whose replay drifted (``results/replay/``), re-run in full at this code with its own command-line
    overrides into its own directory; ``--harvest --replace`` puts it over the stale one."""

    run_dir: str
    seconds: float
    overrides: tuple[str, ...]

    @property
    def key(self) -> str:
        return "rerun__" + self.run_dir.replace("/", "__")

    def finished(self, root: Path) -> bool:
        return run_status(root, self) in FINISHED and recorded_code(root / self.run_dir) is not None

    def command(self, runner: list[str]) -> list[str]:
        parent, name = self.run_dir.rsplit("/", 1)
        return [*runner, "-m", *self.overrides, f"hydra.sweep.dir={parent}", f"hydra.sweep.subdir={name}", *FIXED]


def drifted_cells() -> list[RerunCell]:
    """A full re-run of every committed run whose present record's replay drifted, cheapest first."""
    from fedbn_bench.records.reader import read_run
    from fedbn_bench.records.replay import DRIFTED, load_replays

    fixed = {o.partition("=")[0] for o in FIXED}
    cells = []
    for run, found in load_replays(REPO).items():
        record = read_run(REPO / run)
        if found.status != DRIFTED or found.run_code != record.summary.get("code_commit"):
            continue
        kept = tuple(o for o in record.overrides if o.partition("=")[0].lstrip("+~") not in fixed
                     and not o.startswith("hydra."))
        cells.append(RerunCell(run, float(record.summary.get("wall_time_s") or 0.0), kept))
    return sorted(cells, key=lambda c: c.seconds)


def replay_cells(evals: int = 1) -> list[ReplayCell]:
    """A replay of every committed run a current claim reads, cheapest first (its first ``evals`` evaluations'
    share of the run's recorded wall time)."""
    from fedbn_bench.figures.claims import CLAIMS
    from fedbn_bench.figures.claims.base import judge
    from fedbn_bench.figures.claims.evidence import all_runs_read
    from fedbn_bench.records.reader import read_run

    cache: dict = {}
    cells = []
    for run in all_runs_read(judge(claim, REPO, cache) for claim in CLAIMS):
        record = read_run(REPO / run)
        rounds = max(int(record.get("rounds") or record.get("steps") or 1), 1)
        share = min(evals * int(record.get("eval_every") or rounds), rounds) / rounds
        cells.append(ReplayCell(run, share * float(record.summary.get("wall_time_s") or 0.0) + 10, evals))
    return sorted(cells, key=lambda c: c.seconds)


DRIFTED_MARK = "@drifted"
"""A queue file's line that places the full re-runs of the committed runs whose replay drifted (:func:`drifted_cells`)."""
REPLAY_MARK = "@replay"
"""A queue file's line that places the replays (``--replay``) among its deciders: ``@replay [FROM [TO]]``, those
whose estimated CPU-seconds lie in ``[FROM, TO)`` (default: all)."""


@dataclass(frozen=True)
class ReplaySpan:
    """Where a queue file places replays: those estimated at ``[start, stop)`` CPU-seconds."""

    start: float = 0.0
    stop: float = float("inf")


def read_queue(path: Path) -> list[Union[Decider, ReplaySpan, str]]:
    """The deciders of the queue file ``path``, in order (``#`` starts a comment), with a :class:`ReplaySpan` where
    the file places replays (:data:`REPLAY_MARK`) and :data:`DRIFTED_MARK` where it places the re-runs of drifted
    runs."""
    deciders: list[Union[Decider, ReplaySpan, str]] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if fields == [DRIFTED_MARK]:
            deciders.append(DRIFTED_MARK)
            continue
        if fields[:1] == [REPLAY_MARK]:
            deciders.append(ReplaySpan(*map(float, fields[1:3])))
            continue
        if not fields:
            continue
        if len(fields) < 3:
            raise SystemExit(f"error: {path}:{number}: expected '<preset> <run tree> <CPU-seconds a run> "
                             f"[overrides]', got {line.strip()!r}")
        deciders.append(Decider(fields[0], fields[1], float(fields[2]), tuple(fields[3:])))
    return deciders


def expand(decider: Decider, conf: Path = REPO / "conf") -> list[Cell]:
    """``decider``'s single runs, in the order Hydra's BasicSweeper launches them, each with its resolved subdir."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from fedbn_bench.config.schema import register_schemas

    register_schemas()

    def composed(overrides: list[str]):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            return compose(config_name="config", overrides=overrides, return_hydra_config=True)

    preset = [f"experiment={decider.preset}"]
    params = composed(preset).hydra.sweeper.params or {}
    arguments = [f"{key}={value}" for key, value in params.items()] + list(decider.overrides)
    [jobs] = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), max_batch_size=None)
    return [Cell(decider, tuple(job), resolved(composed([*job, *preset]), number)) for number, job in enumerate(jobs)]


def resolved(cfg, number: int, key: str = "hydra.sweep.subdir") -> str:
    """``key`` (e.g. ``hydra.sweep.subdir``) of job ``number`` composed as ``cfg``, resolved as Hydra's ``run_job``
    resolves it: with the job's number and ``HydraConfig`` (``${hydra:runtime.choices...}``)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict, read_write

    with read_write(cfg.hydra), open_dict(cfg):
        cfg.hydra.job.num = cfg.hydra.job.id = number
    hydra = HydraConfig.instance()
    previous = hydra.cfg
    hydra.set_config(cfg)
    try:
        return str(OmegaConf.select(cfg, key))
    finally:
        hydra.cfg = previous


def run_status(root: Path, cell: Cell) -> Optional[str]:
    """The status its ``summary.json`` records (``None``: no summary yet)."""
    try:
        return json.loads((root / cell.run_dir / "summary.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def lock_path(root: Path, cell: AnyCell) -> Path:
    return root / STATE / "locks" / f"{cell.key}.lock"


def try_lock(path: Path) -> Optional[int]:
    """An open descriptor holding ``path``'s exclusive lock, or ``None`` while another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def holder(path: Path) -> Optional[dict]:
    """The process group and start time written into a held lock (``None``: not held)."""
    fd = try_lock(path) if path.exists() else -1
    if fd is None:
        try:
            return json.loads(path.read_text() or "{}")
        except ValueError:
            return {}
    if fd >= 0:
        os.close(fd)
    return None


AnyCell = Union[Cell, ReplayCell, RerunCell]


@dataclass
class Row:
    cell: AnyCell
    state: str
    """done, running, failed (its summary says so), queued."""
    started: Optional[float] = None


def survey(root: Path, cells: list[AnyCell]) -> list[Row]:
    rows = []
    for cell in cells:
        status = None if isinstance(cell, ReplayCell) else run_status(root, cell)
        held = holder(lock_path(root, cell))
        if cell.finished(root):
            rows.append(Row(cell, "done"))
        elif held is not None:
            rows.append(Row(cell, "running", held.get("started")))
        elif status == "failed":
            rows.append(Row(cell, "failed"))
        else:
            rows.append(Row(cell, "queued"))
    return rows


def hours_left(rows: list[Row], now: float) -> float:
    """Estimated CPU-hours left: every queued run's estimate, and what a running one has left of its own."""
    seconds = 0.0
    for row in rows:
        if row.state == "queued":
            seconds += row.cell.seconds
        elif row.state == "running":
            seconds += max(row.cell.seconds - (now - (row.started or now)), 0.0)
    return seconds / 3600


def progress_line(rows: list[Row], now: float) -> str:
    count = {state: sum(r.state == state for r in rows) for state in ("done", "running", "failed", "queued")}
    return (f"[{time.strftime('%H:%M:%S', time.gmtime(now))} UTC] done {count['done']}/{len(rows)}, running "
            f"{count['running']}, failed {count['failed']}, queued {count['queued']}, about "
            f"{hours_left(rows, now):.1f} CPU-h left")


def print_status(rows: list[Row], now: float) -> None:
    for row in rows:
        since = f" since {time.strftime('%H:%M', time.gmtime(row.started))} UTC" if row.started else ""
        print(f"{row.state:8} {row.cell.run_dir}{since}")
    print(progress_line(rows, now))


def signal_running(root: Path, cells: list[AnyCell], signum: int) -> int:
    """Send ``signum`` to every running job's process group; how many got it."""
    sent = 0
    for cell in cells:
        held = holder(lock_path(root, cell))
        if held and held.get("pgid"):
            try:
                os.killpg(held["pgid"], signum)
                sent += 1
            except ProcessLookupError:
                pass
    return sent


def plan(root: Path, cells: list[AnyCell], longest_first: bool = False) -> list[str]:
    """One tab-separated line per cell neither finished nor running under ``root``: its run directory, its
    estimated CPU-seconds (whole), then its command's arguments (``Cell.command`` without the runner, ``FIXED``
    included). ``longest_first``: the costliest deciders' cells first, queue order among equals. Replays are left
    out: they replay CPU runs on the CPU queue."""
    left = [row.cell for row in survey(root, cells)
            if row.state in ("queued", "failed") and not isinstance(row.cell, ReplayCell)]
    if longest_first:
        left.sort(key=lambda cell: -cell.seconds)
    return ["\t".join([cell.run_dir, f"{cell.seconds:.0f}", *cell.command([])]) for cell in left]


def harvest(root: Path, cells: list[AnyCell], into: Path, replace: bool = False) -> list[str]:
    """Copy each finished run missing under ``into`` (a checkout) there, without its checkpoints (``*.pt``,
    gitignored), and each replay result it lacks; with ``replace``, a finished run also replaces the checkout's
    run of the same directory when the two were made by different code (a run re-run in full after its replay
    drifted). One line per run copied: its directory, status and wall time."""
    copied = []
    for cell in cells:
        if isinstance(cell, ReplayCell):
            source, target = record_path(root, cell.run_dir), record_path(into, cell.run_dir)
            if source.is_file() and not target.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                copied.append(f"{cell.run_dir}: {json.loads(source.read_text())['status']} (replay)")
            continue
        source, target = root / cell.run_dir, into / cell.run_dir
        if run_status(root, cell) not in FINISHED:
            continue
        if (target / "summary.json").exists():
            if not replace or recorded_code(source) == recorded_code(target):
                continue
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.pt"))
        summary = json.loads((target / "summary.json").read_text())
        copied.append(f"{cell.run_dir}: {summary['status']}, {summary.get('wall_time_s', 0):.0f} s")
    return copied


def start(root: Path, cell: AnyCell, runner: list[str], fd: int) -> subprocess.Popen:
    """Launch ``cell`` in a process group of its own, holding the lock ``fd`` for as long as it lives."""
    logs = root / STATE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    with open(logs / f"{cell.key}.log", "ab") as log:
        process = subprocess.Popen(cell.command(runner), cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, pass_fds=(fd,), start_new_session=True)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pgid": process.pid, "started": time.time(), "command": shlex.join(process.args)})
              .encode(), 0)
    return process


def next_cells(root: Path, cells: list[AnyCell], tried: set[str]) -> Iterator[tuple[AnyCell, int]]:
    """The cells to run now, in queue order, each with its lock held: not finished, not running, not tried."""
    for cell in cells:
        if cell.key in tried or cell.finished(root):
            continue
        fd = try_lock(lock_path(root, cell))
        if fd is not None:
            yield cell, fd


def run_queue(root: Path, cells: list[AnyCell], runner: list[str], jobs: int, poll: float) -> int:
    """Run every cell not finished while fewer than ``jobs`` runs hold their locks (this queue's, or those a
    previous queue left running); a cell that ends unfinished is not retried this time."""
    running: dict[str, tuple[subprocess.Popen, int, AnyCell]] = {}
    tried: set[str] = set()
    last = ""
    while True:
        for key, (process, fd, cell) in list(running.items()):
            if process.poll() is not None:
                os.close(fd)
                del running[key]
                print(f"exit {process.returncode:3} {cell.run_dir}: {run_status(root, cell)}", flush=True)
        busy = sum(row.state == "running" for row in survey(root, cells))
        for cell, fd in next_cells(root, cells, tried):
            if busy >= jobs:
                os.close(fd)
                break
            tried.add(cell.key)
            running[cell.key] = (start(root, cell, runner, fd), fd, cell)
            busy += 1
            print(f"start   {cell.run_dir}", flush=True)
        rows = survey(root, cells)
        line = progress_line(rows, time.time())
        if line.split("]", 1)[1] != last:
            print(line, flush=True)
            last = line.split("]", 1)[1]
        waiting = any(row.state == "queued" and row.cell.key not in tried for row in rows)
        if not running and not (waiting and any(row.state == "running" for row in rows)):
            break
        time.sleep(poll)
    return 0 if all(row.state == "done" for row in survey(root, cells)) else 1


def assemble(entries: list[Union[Decider, ReplaySpan, str]], replays: list[ReplayCell],
             drifted: Callable[[], list[RerunCell]]) -> list[AnyCell]:
    """The queue's cells in its file's order: each decider's sweep, the drifted runs' re-runs where it says
    :data:`DRIFTED_MARK`, the replays in each :class:`ReplaySpan`. A replay is left out where the queue re-runs its
    run in full: the re-run replaces the run with one that records the code that made it (*made at*)."""
    cells: list[AnyCell] = []
    for entry in entries:
        if isinstance(entry, Decider):
            cells += expand(entry)
        elif entry == DRIFTED_MARK:
            cells += drifted()
        else:
            cells += [c for c in replays if entry.start <= c.seconds < entry.stop]
    rerun = {c.run_dir for c in cells if not isinstance(c, ReplayCell)}
    return [c for c in cells if not (isinstance(c, ReplayCell) and c.run_dir in rerun)]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=Path, default=REPO / "scripts" / "claims_queue.txt", help="the deciders")
    parser.add_argument("--root", type=Path, default=REPO,
                        help="where the runs go (results/, .claims_queue/), and their working directory (data/)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (each with one thread)")
    parser.add_argument("--runner", default=shlex.join([sys.executable, str(REPO / "run.py")]),
                        help="the command of one run")
    parser.add_argument("--poll", type=float, default=10.0, help="seconds between looks at the running jobs")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="each run's state and the CPU-hours left")
    action.add_argument("--pause", action="store_true", help="SIGSTOP the running jobs")
    action.add_argument("--resume", action="store_true", help="SIGCONT the running jobs")
    action.add_argument("--harvest", type=Path, metavar="CHECKOUT",
                        help="copy the finished runs CHECKOUT lacks into it (no checkpoints), with their wall times")
    action.add_argument("--plan", action="store_true",
                        help="the runs neither finished nor running, one a line: run directory, CPU-seconds, "
                             "arguments (tab-separated)")
    parser.add_argument("--longest-first", action="store_true", help="--plan: the costliest runs first")
    parser.add_argument("--replay", action="store_true",
                        help="replay every committed run a current claim reads (issue 57), where the queue file "
                             f"says {REPLAY_MARK}, else after its deciders")
    parser.add_argument("--evals", type=int, default=1, help="--replay: the evaluations each replay compares")
    parser.add_argument("--replace", action="store_true",
                        help="--harvest: a finished run replaces the checkout's run made by other code (a re-run)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        print(f"error: --jobs {args.jobs}: at least 1", file=sys.stderr)
        return 2
    root = args.root.resolve()
    entries = read_queue(args.queue)
    if not any(isinstance(e, ReplaySpan) for e in entries):
        entries.append(ReplaySpan())
    cells = assemble(entries, replay_cells(args.evals) if args.replay else [], drifted_cells)
    if args.status:
        print_status(survey(root, cells), time.time())
        return 0
    if args.plan:
        for line in plan(root, cells, args.longest_first):
            print(line)
        return 0
    if args.harvest:
        copied = harvest(root, cells, args.harvest.resolve(), args.replace)
        print("\n".join(copied) or "nothing new finished")
        if copied:
            print("next: python scripts/claims.py (the page, and results/claims/declared.json naming these runs), "
                  "then commit the runs and both files together")
        return 0
    if args.pause or args.resume:
        sent = signal_running(root, cells, signal.SIGSTOP if args.pause else signal.SIGCONT)
        print(f"{'SIGSTOP' if args.pause else 'SIGCONT'} sent to {sent} running job(s)")
        return 0
    fd = try_lock(root / STATE / "queue.lock")
    if fd is None:
        print(f"error: a queue already runs in {root} (process {holder(root / STATE / 'queue.lock')}); stop it first",
              file=sys.stderr)
        return 2
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "code": str(REPO)}).encode(), 0)
    return run_queue(root, cells, shlex.split(args.runner), args.jobs, args.poll)


if __name__ == "__main__":
    sys.exit(main())
