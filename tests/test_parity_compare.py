"""``figures/parity.py`` and ``scripts/parity/compare.py``: the runs of an author's code and ours grouped by
``norm.name``, final accuracy as mean ± sd over completed runs, ours − theirs, Welch's t (checked by hand and
against scipy), and the script's .md and .png from run records of both layouts."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from scipy import stats

from fedbn_bench.figures.parity import compare, summary_accuracy, table, welch
from fedbn_bench.records.reader import read_run
from fedbn_bench.records.reference_log import write_hybridbn_record

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("parity_compare", ROOT / "scripts" / "parity" / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_welch_by_hand_and_against_scipy():
    # means 2 and 4, variances 1 and 4 over 3 values: se² = 1/3 + 4/3, dof = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 50/17
    result = welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    assert result.t == pytest.approx(-2 / (5 / 3) ** 0.5)
    assert result.dof == pytest.approx(50 / 17)
    reference = stats.ttest_ind([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], equal_var=False)
    assert result.t == pytest.approx(reference.statistic)
    assert result.p == pytest.approx(reference.pvalue)
    assert welch([2.0, 4.0, 6.0], [1.0, 2.0, 3.0]).t == pytest.approx(-result.t)


@pytest.mark.parametrize("a, b", [([1.0], [2.0, 3.0]), ([1.0, 1.0], [2.0, 2.0])])
def test_welch_needs_two_values_a_side_and_some_spread(a, b):
    assert welch(a, b) is None


def ours(directory: Path, norm: str, seed: int, accuracies: list[float], status: str = "completed", **norm_keys):
    """A run record of our layout (what run.py writes, reduced to what the comparison reads)."""
    (directory / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create({"seed": seed, "norm": {"name": norm, **norm_keys}}),
                   directory / ".hydra" / "config.yaml")
    rows = "".join(f"{r},{a}\n" for r, a in enumerate(accuracies, 1))
    (directory / "metrics.csv").write_text("round,test_acc\n" + rows)
    (directory / "summary.json").write_text(json.dumps({"status": status, "final_test_acc": accuracies[-1]}))


def theirs(directory: Path, norm: str, seed: int, accuracies: list[float]) -> None:
    """A run record of the authors' code, from a log as theirs prints it (records/reference_log.py)."""
    log = "".join(f"Round {r:3d}, selected client [0 1]\ntest: Acc {100 * a:.3f}, Loss 1.000\n"
                  for r, a in enumerate(accuracies))
    write_hybridbn_record(directory, log, {"implementation": "HybridBN FedAvg_main.py", "seed": seed,
                                           "norm": {"name": norm}}, True)


@pytest.fixture
def records(tmp_path):
    for seed, (a, b) in enumerate([(0.50, 0.60), (0.52, 0.64)]):
        theirs(tmp_path / "authors" / f"bn-seed{seed}", "bn", seed, [0.3, a])
        ours(tmp_path / "ours" / f"bn-seed{seed}", "bn", seed, [0.4, b])
    ours(tmp_path / "ours" / "hbn-seed0", "hbn", 0, [0.7], variant="code")
    ours(tmp_path / "ours" / "bn-seed9", "bn", 9, [0.1], status="failed")
    return tmp_path


def test_methods_pair_both_sides_and_count_completed_runs_only(records):
    runs = {side: [read_run(p) for p in sorted((records / side).iterdir())] for side in ("authors", "ours")}
    bn, hbn = compare(runs["authors"], runs["ours"])
    assert (bn.method, len(bn.authors), len(bn.ours)) == ("bn", 2, 3)
    assert summary_accuracy(bn.ours) == pytest.approx([60.0, 64.0])
    assert bn.difference == pytest.approx(62.0 - 51.0)
    assert bn.test.t == pytest.approx(welch([60.0, 64.0], [50.0, 52.0]).t)
    assert bn.not_counted() == ["ours bn-seed9: failed"]
    assert (hbn.method, hbn.authors, hbn.difference, hbn.test) == ("hbn", [], None, None)
    rows = table([bn, hbn])
    assert rows[2].startswith("| bn | HybridBN FedAvg_main.py | norm=bn | 51.00 ± 1.41 (2) | 62.00 ± 2.83 (2) | +11.00 |")
    assert rows[3] == "| hbn | – | norm=hbn variant=code | – | 70.00 ± 0.00 (1) | – | – | – |"


def test_script_writes_the_table_and_the_curves(records):
    out = records / "parity" / "hybridbn"
    assert load_script().main(["--authors", str(records / "authors"), "--ours", str(records / "ours"),
                               "--out", str(out), "--title", "T"]) == 0
    text = out.with_suffix(".md").read_text()
    assert text.startswith("# T\n")
    assert "| bn | HybridBN FedAvg_main.py | norm=bn | 51.00 ± 1.41 (2) | 62.00 ± 2.83 (2) | +11.00 |" in text
    assert "- bn, ours bn-seed9: failed" in text
    assert out.with_suffix(".png").stat().st_size > 0


def test_script_refuses_a_side_without_runs(records, tmp_path):
    assert load_script().main(["--authors", str(tmp_path / "none"), "--ours", str(records / "ours"),
                               "--out", str(tmp_path / "x")]) == 1
