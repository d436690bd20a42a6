"""Run records from the terminal output of an author's reference code, so that a claim can set the
authors' runs beside ours (the parity claims of ``figures/claims``; the reader is ``records/reader.py``).
The record has our layout: ``metrics.csv`` (``round`` counted from 1, accuracy as a fraction),
``summary.json``, ``run.log`` (the output itself) and ``.hydra/config.yaml`` (what the caller says about
the run: code, commit, arguments).

HybridBN (github:Hongyao-Chen/HybridBN, the HBN paper's code with its FBN and FixBN baselines) prints
``Round   r, selected client [...]`` as round ``r`` (0-based) starts and, after its evaluation,
``test: Acc 85.120, Loss 0.412`` with the accuracy in percent.

FedBN (github:med-air/FedBN, ``federated/fed_digits.py``; Li et al., ICLR 2021, §5.1) prints, after each
round's aggregation, `` MNIST      | Test  Loss: 0.4120 | Test  Acc: 0.8512`` for each of its five domains in
the order MNIST, SVHN, USPS, SynthDigits, MNIST-M (accuracy as a fraction; under FedBN each client's model on
its own domain). Its record has the columns of our ``client_accuracy`` metric: ``acc_<domain>`` under our
names of the Digits-5 stand-in's domains, ``test_acc`` and ``test_loss`` their unweighted means.
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
FEDBN_TEST = re.compile(r"^\s*(\S+)\s*\| Test  Loss: (\S+) \| Test  Acc: (\S+)\s*$")
FEDBN_DOMAINS = {"MNIST": "mnist", "SVHN": "svhn_like", "USPS": "usps_like", "SynthDigits": "synth_like",
                 "MNIST-M": "mnistm_like"}
"""FedBN's domain names (its print order) -> ours (``data/digits5_standin.py``)."""
FEDBN_FIELDS = ["round", "test_acc", "test_loss", *(f"acc_{d}" for d in FEDBN_DOMAINS.values())]


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


def fedbn_rows(log: str) -> list[dict[str, float]]:
    """One row per round of a FedBN ``fed_digits.py`` log (columns ``FEDBN_FIELDS``): a round is a complete
    block of the five domains' test lines; a block cut short by the end of the log is not counted."""
    rows: list[dict[str, float]] = []
    block: dict[str, tuple[float, float]] = {}
    for line in log.splitlines():
        if not (match := FEDBN_TEST.match(line)):
            continue
        domain = FEDBN_DOMAINS.get(match[1])
        if domain is None or domain in block:
            raise ValueError(f"not a round of FedBN's five digit domains at: {line!r}")
        block[domain] = float(match[3]), float(match[2])
        if len(block) == len(FEDBN_DOMAINS):
            accs, losses = zip(*block.values())
            rows.append({"round": len(rows) + 1, "test_acc": sum(accs) / len(accs),
                         "test_loss": sum(losses) / len(losses),
                         **{f"acc_{d}": block[d][0] for d in FEDBN_DOMAINS.values()}})
            block = {}
    return rows


def write_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool,
                 rows: list[dict[str, float]], fields: list[str]) -> dict:
    """Write the run record of ``rows`` (columns ``fields``) into ``directory`` and return its summary.
    ``finished``: the script returned normally; a run that did not, or that has no row, is ``failed``."""
    directory = Path(directory)
    (directory / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(dict(config)), directory / ".hydra" / "config.yaml")
    (directory / "run.log").write_text(log)
    with (directory / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    summary: dict[str, Any] = {"status": "completed" if finished and rows else "failed"}
    if rows:
        summary.update(final_test_acc=rows[-1]["test_acc"], best_test_acc=max(r["test_acc"] for r in rows),
                       final_test_loss=rows[-1]["test_loss"], rounds_completed=int(rows[-1]["round"]))
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def write_hybridbn_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool) -> dict:
    """``write_record`` of a HybridBN log (``hybridbn_rows``)."""
    return write_record(directory, log, config, finished, hybridbn_rows(log), ["round", "test_acc", "test_loss"])


def write_fedbn_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool) -> dict:
    """``write_record`` of a FedBN ``fed_digits.py`` log (``fedbn_rows``)."""
    return write_record(directory, log, config, finished, fedbn_rows(log), FEDBN_FIELDS)
