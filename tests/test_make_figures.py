"""``scripts/make_figures.py`` on hand-made run directories (written as ``run.py -m`` writes them:
``.hydra/config.yaml`` + ``overrides.yaml``, ``metrics.csv``, ``summary.json``): exact table cells
(ours, paper, ours − paper), missing and failed runs named in the .md and on stderr, a curve's mean
and seed band, and ``--all`` on a results tree of its own (no training)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import CONF
from fedbn_bench.figures.base import Figure, Job, read_paper
from fedbn_bench.figures.catalog import CATALOG
from fedbn_bench.figures.cli import draw, main
from fedbn_bench.figures.recipes.curve import band
from fedbn_bench.records.reader import read_runs

ROOT = CONF.parent


def make_run(runs: Path, name: str, overrides: list[str], config: dict, summary: dict | None,
             accs: list[float], rounds: list[int] | None = None) -> None:
    run = runs / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "rounds": 2, **config}))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    rounds = rounds or list(range(1, len(accs) + 1))
    lines = ["round,test_acc,test_loss,train_loss,lr,wall_s"]
    lines += [f"{r},{a},1.0,1.0,0.01,{r}" for r, a in zip(rounds, accs)]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))


def table4_runs(runs: Path) -> None:
    """FedRBN Table 4 (recipe ``paper_table``, RA and SA at the best validation round): two seeds of
    FedRBN, one FATBN, a diverged FATAvg, no FATAvg + Free AT."""
    def run(row: str, seed: int, ra: float, sa: float, status: str = "completed") -> None:
        make_run(runs, f"{row}-seed{seed}", [f"+experiment/fedrbn/table4_row={row}", f"seed={seed}",
                                             "experiment=fedrbn/table4"],
                 {"seed": seed}, {"status": status, "robust_acc_at_best_val": ra, "test_acc_at_best_val": sa,
                                  "rounds_completed": 2}, [sa - 0.1, sa])
    run("fedrbn_150", 0, 0.60, 0.90)
    run("fedrbn_150", 1, 0.50, 0.88)
    run("fatbn_free", 0, 0.463, 0.60)
    run("fatavg_300", 0, 0.30, 0.40, status="diverged")


def test_paper_table_cells_missing_and_failed_runs(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    table4_runs(runs)
    assert main(["fedrbn/table4", "--runs", str(runs), "--out", str(out)], repo=ROOT) == 0
    md = (out / "table4.md").read_text()
    header = ("| method | runs | status | ra ours | ra paper | ra ours − paper | sa ours | sa paper | "
              "sa ours − paper |")
    expected = [
        header,
        "| FedRBN (150 epochs) | 2 | completed | 55.00 ± 7.07 | 56.10 | -1.10 | 89.00 ± 1.41 | 86.20 | +2.80 |",
        "| FATBN + Free AT | 1 | completed | 46.30 | 46.30 | +0.00 | 60.00 | 57.40 | +2.60 |",
        "| FATAvg 20 % (300 epochs) | 1 | diverged | – | 44.90 | – | – | 85.60 | – |",
        "| FATAvg + Free AT | 0 | missing | – | 47.10 | – | – | 63.60 | – |",
        "- FATAvg 20 % (300 epochs): run fatavg_300-seed0 is diverged (not in the means)",
        "- FATAvg + Free AT: no run (missing)",
    ]
    assert [line for line in expected if line not in md.splitlines()] == []
    captured = capsys.readouterr()
    assert "fedrbn/table4: FATAvg + Free AT: no run (missing)" in captured.err
    assert "fedrbn/table4: FATAvg 20 % (300 epochs): run fatavg_300-seed0 is diverged" in captured.err
    assert captured.out.count("\n") == 1 and captured.out.startswith("fedrbn/table4: wrote ")
    for ext in ("md", "png", "pdf"):
        assert (out / f"table4.{ext}").stat().st_size > 0


def test_paper_numbers_file_format_is_shared():
    """Every declared paper file reads with the one reader: method and label first, numbers after."""
    for fig in CATALOG.values():
        if fig.paper:
            rows = read_paper(CONF / "experiment" / fig.paper, fig.paper_where)
            assert rows, fig.id
            first = next(iter(rows.values()))
            assert list(first)[:2] == ["method", "label"], fig.paper


def curve_runs(runs: Path) -> None:
    for seed, accs in ((0, [0.5, 0.7]), (1, [0.7, 0.9])):
        make_run(runs, f"bn-seed{seed}", ["norm=bn", f"seed={seed}"], {"norm": {"name": "bn"}, "seed": seed},
                 {"status": "completed", "final_test_acc": accs[-1]}, accs)
    make_run(runs, "fbn-seed0", ["norm=fbn", "seed=0"], {"norm": {"name": "fbn"}}, {"status": "failed"}, [0.3])


def test_curve_mean_and_seed_band(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    curve_runs(runs)
    records = [r for r in read_runs(runs) if r.override("norm") == "bn"]
    rounds, mean, sd = band(records, "test_acc")
    assert rounds == [1.0, 2.0]
    assert mean == pytest.approx([60.0, 80.0])
    assert sd == pytest.approx([14.142135623730951, 14.142135623730951])
    figure = Figure("test/curve", "curve", rows="norm", metric="test_acc",
                    options={"expect": ["bn", "fbn", "gn"], "labels": {"bn": "BN"}})
    job = draw(figure, tmp_path, CONF, runs=runs, out=out)
    assert isinstance(job, Job)
    md = (out / "curve.md").read_text()
    assert "| BN | 2 | 2 | 2.0 | 80.00 ± 14.14 |" in md
    assert "| fbn | 1 | 0 | – | – |" in md
    assert "- fbn: run fbn-seed0 is failed (not in the band)" in md and "- gn: no run (missing)" in md
    assert "test/curve: gn: no run (missing)" in capsys.readouterr().err
    assert (out / "curve.png").stat().st_size > 0 and (out / "curve.pdf").stat().st_size > 0


def test_all_draws_the_figures_with_runs_and_names_the_others(tmp_path, capsys):
    table4_runs(tmp_path / "results" / "fedrbn" / "table4" / "runs")
    assert main(["--all", "--root", str(tmp_path)], repo=ROOT) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n") == 1 and captured.out.startswith("fedrbn/table4: wrote ")
    for ext in ("md", "png", "pdf"):
        assert (tmp_path / "results" / "fedrbn" / f"table4.{ext}").exists()
    missing = captured.err.splitlines()[-1]
    assert missing.startswith("missing (no runs): ")
    assert set(missing.removeprefix("missing (no runs): ").split(", ")) == set(CATALOG) - {"fedrbn/table4"}


def test_a_single_figure_without_runs_fails_and_says_so(tmp_path, capsys):
    assert main(["fbn/fig6", "--root", str(tmp_path)], repo=ROOT) == 1
    assert "fbn/fig6: missing: no run under" in capsys.readouterr().err


def test_a_figure_drawn_from_runs_of_ones_own_goes_beside_them(tmp_path):
    """Issue 52 §1: ``make_figures.py <id> --runs DIR`` without ``--out`` wrote into the declared ``results/<paper>/``
    (a tracked file changed by drawing a user's own runs); it now draws into ``DIR``."""
    runs = tmp_path / "runs"
    curve_runs(runs)
    figure = Figure("test/curve", "curve", rows="norm", metric="test_acc", options={"expect": ["bn"]})
    assert draw(figure, tmp_path, CONF, runs=runs) is not None
    assert (runs / "curve.png").is_file() and not (tmp_path / "results").exists()
