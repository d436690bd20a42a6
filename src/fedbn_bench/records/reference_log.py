"""Run records from the terminal output of an author's reference code, so that a claim can set the
authors' runs beside ours (the parity claims of ``figures/claims``; the reader is ``records/reader.py``).

HybridBN (github:Hongyao-Chen/HybridBN, the HBN paper's code with its FBN and FixBN baselines) prints
``Round   r, selected client [...]`` as round ``r`` (0-based) starts and, after its evaluation,
``test: Acc 85.120, Loss 0.412`` with the accuracy in percent. The record written here has our layout:
``metrics.csv`` (``round`` counted from 1, accuracy as a fraction), ``summary.json``, ``run.log`` (the
output itself) and ``.hydra/config.yaml`` (what the caller says about the run: code, commit, arguments).
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any, Mapping

from omegaconf import OmegaConf

ROUND = re.compile(r"^Round\s+(\d+),")
TEST = re.compile(r"^test: Acc\s+(\S+), Loss\s+(\S+)")


def hybridbn_rows(log: str) -> list[dict[str, float]]:
    """One row per evaluation in a HybridBN log: ``round`` (1-based), ``test_acc`` (fraction), ``test_loss``."""
    rows: list[dict[str, float]] = []
    current = None
    for line in log.splitlines():
        if match := ROUND.match(line):
            current = int(match[1])
        elif (match := TEST.match(line)) and current is not None:
            rows.append({"round": current + 1, "test_acc": float(match[1]) / 100.0, "test_loss": float(match[2])})
    return rows


def write_hybridbn_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool) -> dict:
    """Write the run record of a HybridBN run into ``directory`` and return its summary. ``finished``: the
    script returned normally; a run that did not, or that printed no evaluation, is ``failed``."""
    directory = Path(directory)
    (directory / ".hydra").mkdir(parents=True, exist_ok=True)
    rows = hybridbn_rows(log)
    OmegaConf.save(OmegaConf.create(dict(config)), directory / ".hydra" / "config.yaml")
    (directory / "run.log").write_text(log)
    with (directory / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["round", "test_acc", "test_loss"])
        writer.writeheader()
        writer.writerows(rows)
    summary: dict[str, Any] = {"status": "completed" if finished and rows else "failed"}
    if rows:
        summary.update(final_test_acc=rows[-1]["test_acc"], best_test_acc=max(r["test_acc"] for r in rows),
                       final_test_loss=rows[-1]["test_loss"], rounds_completed=int(rows[-1]["round"]))
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
