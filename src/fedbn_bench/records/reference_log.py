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

FedRBN (github:illidanlab/FedRBN, ``fedat.py``; Hong et al., AAAI 2023, §5 and App. C.1) validates after each
round's aggregation and prints, under ``============ Round r ============`` (0-based), `` 0-1 noised | Val  Acc:
85.3%`` for each user (domain-user, AT users ``noised``, ST users ``clean``; AT users' data attacked, so RA for
them and SA for ST users: our ``val_select``), then `` Avg Val Acc: 0.812`` (their unweighted mean over users).
Its test, a separate invocation on the checkpoint of the best validation round, prints `` Best site-0-0 noised|
Epoch:41 | Val Acc: 0.8533`` (that round, 0-based) and `` Average Test Acc: 0.7916...``: one test on clean data
(SA), one under the attack (RA). Its record: per round ``val_select``, ``val_robust_acc`` (mean over AT users)
and ``val_client_acc_<i>``; the summary ``test_acc_at_best_val`` = ``clean_acc_at_best_val`` and
``robust_acc_at_best_val`` at ``best_val_round`` (as ``records/selection.py`` names ours). No test accuracy per
round and no ``final_test_acc``: their code tests the selected round only.
"""
from __future__ import annotations

import csv
import json
import re
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from omegaconf import OmegaConf

ROUND = re.compile(r"^Round\s+(\d+),")
TEST = re.compile(r"^test: Acc\s+(\S+), Loss\s+(\S+)")
FEDBN_TEST = re.compile(r"^\s*(\S+)\s*\| Test  Loss: (\S+) \| Test  Acc: (\S+)\s*$")
FEDBN_DOMAINS = {"MNIST": "mnist", "SVHN": "svhn_like", "USPS": "usps_like", "SynthDigits": "synth_like",
                 "MNIST-M": "mnistm_like"}
"""FedBN's domain names (its print order) -> ours (``data/digits5_standin.py``)."""
FEDBN_FIELDS = ["round", "test_acc", "test_loss", *(f"acc_{d}" for d in FEDBN_DOMAINS.values())]
FEDRBN_ROUND = re.compile(r"^=+ Round (\d+) =+$")
FEDRBN_VAL = re.compile(r"^ (\d+-\d+ (?:noised|clean))\s*\| Val  Acc: (\S+)%$")
FEDRBN_AVERAGE_VAL = re.compile(r"^ Avg Val Acc: (\S+)$")
FEDRBN_BEST = re.compile(r"^ Best site-\S+ (?:noised|clean)\s*\| Epoch:(\d+) \|")
FEDRBN_AVERAGE_TEST = re.compile(r"^ Average Test Acc: (\S+)$")


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


def fedrbn_rows(log: str) -> list[dict[str, float]]:
    """One row per validated round of a FedRBN ``fedat.py`` training log: ``round`` (1-based), ``val_select``
    (their average), ``val_robust_acc`` (mean over AT users, where there are any), ``val_client_acc_<i>`` (in
    their user order; printed in % with one decimal, so fractions of three); a round cut short before its
    average is not counted."""
    rows: list[dict[str, float]] = []
    current: Optional[int] = None
    users: list[tuple[str, float]] = []
    for line in log.splitlines():
        if match := FEDRBN_ROUND.match(line):
            current, users = int(match[1]), []
        elif (match := FEDRBN_VAL.match(line)) and current is not None:
            users.append((match[1], round(float(match[2]) / 100.0, 3)))
        elif (match := FEDRBN_AVERAGE_VAL.match(line)) and current is not None:
            rows.append(fedrbn_row(current, float(match[1]), users))
            current = None
    return rows


def fedrbn_row(round_index: int, average: float, users: list[tuple[str, float]]) -> dict[str, float]:
    """The record's row of one round: its 0-based index, their average and each user's validation accuracy."""
    robust = [acc for name, acc in users if name.endswith("noised")]
    row = {"round": round_index + 1, "val_select": average}
    if robust:
        row["val_robust_acc"] = sum(robust) / len(robust)
    return {**row, **{f"val_client_acc_{i}": acc for i, (_, acc) in enumerate(users)}}


def fedrbn_test(log: str) -> Optional[tuple[int, float]]:
    """``(best round, 0-based; average test accuracy)`` of a FedRBN ``fedat.py --test`` log, ``None`` when it
    printed no average."""
    best = next((int(m[1]) for line in log.splitlines() if (m := FEDRBN_BEST.match(line))), None)
    average = next((float(m[1]) for line in log.splitlines() if (m := FEDRBN_AVERAGE_TEST.match(line))), None)
    return None if best is None or average is None else (best, average)


def fedrbn_results(rows: list[dict[str, float]], tests: Mapping[str, Optional[tuple[int, float]]]) -> dict[str, Any]:
    """The summary of a FedRBN run: rounds validated and, from the ``clean`` and ``robust`` tests of the
    checkpoint, SA and RA at the best validation round (1-based, as ``records/selection.py``)."""
    summary: dict[str, Any] = {"rounds_completed": int(rows[-1]["round"])}
    found = {name: test for name, test in tests.items() if test is not None}
    best = {test[0] for test in found.values()}
    if len(best) > 1:
        raise ValueError(f"the tests read different checkpoints (best rounds {sorted(best)})")
    if best:
        summary.update(best_val_round=best.pop() + 1, model_selection="val_select")
    if "clean" in found:
        summary["test_acc_at_best_val"] = summary["clean_acc_at_best_val"] = found["clean"][1]
    if "robust" in found:
        summary["robust_acc_at_best_val"] = found["robust"][1]
    return summary


def final_and_best(rows: list[dict[str, float]]) -> dict[str, Any]:
    """The summary of rows that carry ``test_acc`` and ``test_loss`` every round: final and best."""
    return {"final_test_acc": rows[-1]["test_acc"], "best_test_acc": max(r["test_acc"] for r in rows),
            "final_test_loss": rows[-1]["test_loss"], "rounds_completed": int(rows[-1]["round"])}


def write_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool,
                 rows: list[dict[str, float]], fields: list[str],
                 results: Callable[[list[dict[str, float]]], dict[str, Any]] = final_and_best) -> dict:
    """Write the run record of ``rows`` (columns ``fields``) into ``directory`` and return its summary
    (``results`` of the rows). ``finished``: the script returned normally; a run that did not, or that has
    no row, is ``failed``."""
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
        summary.update(results(rows))
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def write_hybridbn_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool) -> dict:
    """``write_record`` of a HybridBN log (``hybridbn_rows``)."""
    return write_record(directory, log, config, finished, hybridbn_rows(log), ["round", "test_acc", "test_loss"])


def write_fedbn_record(directory: str | Path, log: str, config: Mapping[str, Any], finished: bool) -> dict:
    """``write_record`` of a FedBN ``fed_digits.py`` log (``fedbn_rows``)."""
    return write_record(directory, log, config, finished, fedbn_rows(log), FEDBN_FIELDS)


def write_fedrbn_record(directory: str | Path, logs: Mapping[str, str], config: Mapping[str, Any],
                        finished: bool) -> dict:
    """``write_record`` of a FedRBN run from the logs of its phases (``train``, then the tests ``clean`` and
    ``robust``; ``run.log`` holds them in that order under a ``[parity] <phase>`` line): complete when
    ``finished`` and both tests printed their average."""
    rows = fedrbn_rows(logs.get("train", ""))
    tests = {name: fedrbn_test(logs.get(name, "")) for name in ("clean", "robust")}
    log = "".join(f"[parity] {phase}\n{text}" for phase, text in logs.items())
    fields = list(dict.fromkeys(key for row in rows for key in row)) or ["round", "val_select"]
    complete = finished and all(test is not None for test in tests.values())
    return write_record(directory, log, config, complete, rows, fields, partial(fedrbn_results, tests=tests))
