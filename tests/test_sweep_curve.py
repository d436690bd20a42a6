"""``make_figures.py curve --runs DIR``: the learning curve of any sweep, grouped by what the sweep
varies, mean ± sd over seeds with the band's meaning stated, accuracy in %, integer round ticks,
method names as the papers write them; and paper ids that are misspelt name the nearest ones."""
from __future__ import annotations

import json
import statistics
from unittest import mock

import pytest
from omegaconf import OmegaConf

from fedbn_bench.figures import cli, sweep_curve


def fake_run(path, overrides: list[str], accs: list[float], status: str = "completed") -> None:
    (path / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), path / ".hydra" / "overrides.yaml")
    OmegaConf.save(OmegaConf.create({"seed": 0}), path / ".hydra" / "config.yaml")
    (path / "summary.json").write_text(json.dumps({"status": status}))
    rows = "".join(f"{2 * (i + 1)},{a},1.0\n" for i, a in enumerate(accs))
    (path / "metrics.csv").write_text("round,test_acc,test_loss\n" + rows)


@pytest.fixture
def sweep(tmp_path):
    runs = tmp_path / "sweep"
    values = {("bn", 0): [0.5, 0.6, 0.7], ("bn", 1): [0.5, 0.7, 0.9], ("fbn", 0): [0.4, 0.5, 0.8],
              ("fbn", 1): [0.4, 0.6, 0.8]}
    for i, ((norm, seed), accs) in enumerate(values.items()):
        fake_run(runs / f"{i}_norm={norm},seed={seed}", [f"norm={norm}", f"seed={seed}", "alpha=0.1", "rounds=6"], accs)
    fake_run(runs / "4_norm=hbn,seed=0", ["norm=hbn", "seed=0", "alpha=0.1", "rounds=6"], [0.1], status="diverged")
    return runs


def test_a_sweep_is_grouped_by_what_it_varies_with_readable_labels(sweep, tmp_path):
    with mock.patch.object(sweep_curve.plt, "close") as close:
        assert cli.main(["curve", "--runs", str(sweep), "--out", str(tmp_path / "out")]) == 0
    ax = close.call_args.args[0].axes[0]
    assert ax.get_ylabel() == "test accuracy (%)" and ax.get_xlabel() == "round"
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["BN (n=2)", "FBN (n=2)"]
    assert "band: ±1 sd" in ax.get_title()
    md = (tmp_path / "out" / "curve_test_acc.md").read_text()
    sd = statistics.stdev([70.0, 90.0])
    assert f"| BN | 2 | 2 | 6 | 80.0 ± {sd:.1f} |" in md and "| FBN | 2 | 2 | 6 | 80.0 ± 0.0 |" in md
    assert "run 4_norm=hbn,seed=0 is diverged" in md and "missing" not in md
    assert (tmp_path / "out" / "curve_test_acc.png").is_file()


def test_by_and_metric_are_checked_against_the_runs(sweep, tmp_path, capsys):
    assert sweep_curve.varied_overrides(sweep_curve.load_runs(sweep)) == ["norm"]
    with pytest.raises(SystemExit):
        cli.main(["curve", "--runs", str(sweep), "--by", "nrom"])
    assert "not an override of these runs; varied here: norm" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["curve", "--runs", str(sweep), "--metric", "acc"])
    assert "columns: test_acc, test_loss" in capsys.readouterr().err
    assert sweep_curve.main(["--runs", str(sweep), "--metric", "test_loss", "--out", str(tmp_path / "o")]) == 0
    assert "test loss by norm" in (tmp_path / "o" / "curve_test_loss.md").read_text()


def test_a_misspelt_paper_id_names_the_nearest_ids_only(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fbn/fig3a_fmnst"])
    err = capsys.readouterr().err
    assert "unknown figure id 'fbn/fig3a_fmnst', did you mean fbn/fig3a_fmnist" in err and len(err) < 600
    with pytest.raises(SystemExit):
        cli.main(["--runs", "somewhere"])
    assert "curve --runs DIR" in capsys.readouterr().err


def test_claim_charts_name_what_their_bars_measure(tmp_path):
    from fedbn_bench.figures.claims import CLAIMS, report
    from fedbn_bench.figures.claims.base import judge

    claim = next(c for c in CLAIMS if c.id == "fbn/fig3a_naive_collapses")
    with mock.patch.object(report.plt, "close") as close:
        report.draw_chart(judge(claim, tmp_path), tmp_path / "chart.png")
    assert close.call_args.args[0].axes[0].get_ylabel() == "accuracy (%)"


def test_the_title_names_the_fixed_settings_and_a_short_curve_is_warned_about(tmp_path, capsys):
    """Issue 52 §6: the title named neither dataset nor α, and a 10-round sweep with eval_every=5 drew two-point
    curves without a word."""
    runs = tmp_path / "sweep"
    for i, norm in enumerate(("bn", "fbn")):
        fake_run(runs / f"{i}_norm={norm}", [f"norm={norm}", "alpha=0.1", "rounds=4"], [0.5, 0.6])
        config = {"seed": 0, "dataset": {"name": "sklearn_digits"}, "partition": {"name": "dirichlet", "alpha": 0.1}}
        OmegaConf.save(OmegaConf.create(config), runs / f"{i}_norm={norm}" / ".hydra" / "config.yaml")
    with mock.patch.object(sweep_curve.plt, "close") as close:
        assert cli.main(["curve", "--runs", str(runs), "--out", str(tmp_path / "out")]) == 0
    title = close.call_args.args[0].axes[0].get_title()
    assert title.splitlines()[1] == "dataset = sklearn_digits, partition = dirichlet, alpha = 0.1, rounds = 4"
    err = capsys.readouterr().err
    assert "BN: its curve has 2 point(s) (rounds 2, 4); a curve needs 3 or more" in err and "FBN: its curve" in err
