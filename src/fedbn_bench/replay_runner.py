"""Re-run a committed run's own config with this checkout's code for its first evaluations and compare them with
its committed rows (issue 57 §1; the comparison and result files: ``records/replay.py``).

The config is the run's own ``.hydra/config.yaml``, laid over the config its overrides compose today (so that an
option added since keeps its default, which reproduces the old behaviour); the run trains with the thread count,
engine (backend) and device its ``summary.json`` recorded, W&B off, no checkpoint, in a temporary directory, and
stops once it has recorded ``evals`` evaluations. Nothing in the run directory is written.

    python -m fedbn_bench.replay_runner RUN_DIR [--evals K] [--repo R]     (writes results/replay/<RUN_DIR>.json)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from fedbn_bench.config.validate import validate_config
from fedbn_bench.engine.threads import apply_threads
from fedbn_bench.records.machine import cpu_model
from fedbn_bench.records.provenance import code_record
from fedbn_bench.records.replay import (NOT_COMPARABLE, Replay, committed_rows, compare, write_replay,
                                        written)
from fedbn_bench.runner import build_simulation

CONF = Path(__file__).resolve().parents[2] / "conf"


class NotComparable(Exception):
    """Why a run cannot be replayed as it ran."""


def composed_today(overrides: list[str]) -> DictConfig:
    """The config ``overrides`` compose with this checkout's ``conf/`` (the defaults alone if they no longer do)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from fedbn_bench.config.schema import register_schemas

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        try:
            return compose(config_name="config", overrides=overrides)
        except Exception:
            return compose(config_name="config", overrides=[])


def replay_config(run_dir: Path, summary: dict[str, Any]) -> tuple[DictConfig, dict[str, Any]]:
    """The run's config to replay, and how it is replayed (threads, engine, device)."""
    if "gpu" in summary:
        raise NotComparable(f"it ran on a GPU ({summary['gpu']}); replay it there")
    stored = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    if "implementation" in stored:
        raise NotComparable(f"a record of the authors' code ({stored.implementation}; records/reference_log.py), "
                            "not of this framework: their script re-runs it (scripts/parity/)")
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = [str(o) for o in OmegaConf.load(overrides_file)] if overrides_file.exists() else []
    try:
        cfg = OmegaConf.merge(composed_today(overrides), stored)
    except Exception as err:
        raise NotComparable(f"its config does not fit today's schema: {str(err).splitlines()[0]}") from None
    threads = summary.get("threads")
    if threads is None and isinstance(cfg.engine.threads, int):
        threads = cfg.engine.threads
    if threads is None:
        raise NotComparable("it recorded no thread count (results change with it)")
    backend = summary.get("engine") or cfg.engine.name
    with open_dict(cfg):
        cfg.engine.threads, cfg.engine.name, cfg.device = int(threads), backend, "cpu"
        cfg.logger.name = "none"
        cfg.progress, cfg.checkpoint_every, cfg.resume, cfg.overwrite, cfg.replicas = False, 0, None, False, 1
    return cfg, {"threads": int(threads), "engine": backend, "engine_recorded": "engine" in summary}


def replayed_rows(cfg: DictConfig, evals: int) -> tuple[list[dict[str, str]], str, str]:
    """The first ``evals`` metric rows of ``cfg`` trained here (as written), its ``partition.csv`` and the backend
    that trained."""
    validate_config(cfg)
    apply_threads(cfg.engine.threads, 1)
    with tempfile.TemporaryDirectory() as tmp:
        sim = build_simulation(cfg, tmp, torch.device("cpu"), OmegaConf.to_container(cfg, resolve=True))
        loop = sim.loop
        loop.begin()
        for round_idx in range(cfg.rounds):
            start = time.perf_counter()
            loss = loop.run_round(round_idx)
            if loop.after_round(round_idx, loss, time.perf_counter() - start) or len(loop.history) >= evals:
                break
        partition = (Path(tmp) / "partition.csv").read_text()
    return [written(row) for row in loop.history], partition, sim.engine


def declared_commit(repo: Path, run_dir: Path) -> Optional[str]:
    """The commit that added ``run_dir``'s records, as ``results/claims/declared.json`` dates it (from git)."""
    path = repo / "results" / "claims" / "declared.json"
    runs = json.loads(path.read_text()).get("runs", {}) if path.is_file() else {}
    dated = runs.get(run_dir.as_posix())
    return dated[0] if dated else None


def replay(run_dir: Path, evals: int, repo: Path, run_commit: Optional[str] = None) -> Replay:
    """Replay ``run_dir`` (relative to ``repo``) for ``evals`` evaluations here and compare (module
    docstring); ``run_commit``: the commit that added the run (default: ``declared_commit``)."""
    summary = json.loads((repo / run_dir / "summary.json").read_text())
    run_commit = run_commit or declared_commit(repo, run_dir)
    code = code_record()
    here = {"torch": torch.__version__, "cpu": cpu_model()}
    base = dict(run=run_dir.as_posix(), code_commit=code["code_commit"], code_dirty=bool(code.get("code_dirty")),
                run_commit=run_commit, run_code=summary.get("code_commit"))
    start = time.perf_counter()
    try:
        cfg, how = replay_config(repo / run_dir, summary)
        rows, partition, backend = replayed_rows(cfg, evals)
    except NotComparable as why:
        return Replay(status=NOT_COMPARABLE, detail=str(why), evals=0, setting=here, **base)
    setting = {**how, "engine": backend, **here, "seconds": round(time.perf_counter() - start, 1)}
    committed = committed_rows(repo / run_dir)
    same_partition = (repo / run_dir / "partition.csv").read_text() == partition \
        if (repo / run_dir / "partition.csv").exists() else True
    status, detail, first = compare(committed, rows, evals, same_partition)
    recorded_on = {k: summary[k] for k in ("cpu", "torch") if k in summary and summary[k] != here[k]}
    if status != "reproduced" and recorded_on:
        status, detail = NOT_COMPARABLE, (f"recorded with {', '.join(f'{k} {v}' for k, v in recorded_on.items())}, "
                                          f"replayed with {', '.join(here[k] for k in recorded_on)}: {detail}")
    return Replay(status=status, detail=detail, evals=min(evals, len(committed)), first_round=first,
                  setting=setting, **base)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a committed run directory, relative to the repository")
    parser.add_argument("--evals", type=int, default=1, help="evaluations to replay and compare")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository the run lies in")
    parser.add_argument("--out", type=Path, default=None, help="where results/replay/ goes (default: --repo)")
    parser.add_argument("--run-commit", default=None, help="the commit that added the run, for the record "
                        "(default: results/claims/declared.json's)")
    args = parser.parse_args(argv)
    if args.evals < 1:
        print(f"error: --evals {args.evals}: at least 1", file=sys.stderr)
        return 2
    if not (args.repo / args.run_dir / "summary.json").is_file():
        print(f"error: {args.repo / args.run_dir} holds no summary.json: not a run directory", file=sys.stderr)
        return 2
    result = replay(args.run_dir, args.evals, args.repo, args.run_commit)
    path = write_replay(args.out or args.repo, result)
    print(f"{result.status}: {result.run}: {result.detail} ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
