"""HBN Table 1 on MNIST (``experiment=hbn/table1_mnist``): the preset composes for every method with
the paper's settings and lr, and ``make_figures.py hbn/table1_mnist`` (recipe ``hbn_table``) turns
hand-made run records into the expected cells (no training)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import CONF, compose_config
from fedbn_bench.config.validate import validate_config
from fedbn_bench.figures.cli import main as make_figures

ROOT = CONF.parent
PAPER = CONF / "experiment" / "hbn" / "table1_paper.csv"


def paper_rows() -> list[dict]:
    with PAPER.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def test_sweep_runs_every_paper_row_into_the_results_dir():
    hydra = OmegaConf.load(CONF / "experiment" / "hbn" / "table1_mnist.yaml").hydra
    methods = str(hydra.sweeper.params["+experiment/hbn/table1_method"]).split(",")
    assert methods == [row["method"] for row in paper_rows()]
    assert hydra.sweep.dir == "results/hbn/table1_mnist/runs"


@pytest.mark.parametrize("row", paper_rows(), ids=lambda row: row["method"])
def test_preset_composes_for_every_method(row):
    cfg = compose_config(["experiment=hbn/table1_mnist", f"+experiment/hbn/table1_method={row['method']}"])
    validate_config(cfg)
    assert cfg.norm.name == row["method"]
    assert cfg.lr == pytest.approx(float(row["lr_c10"])) and cfg.algo.lr == cfg.lr
    if row["method"] == "fbn":
        assert cfg.norm.variant == "hbn_code"
    if row["method"] == "hbn":
        assert cfg.norm.variant == "paper"
    assert (cfg.dataset.name, cfg.dataset.root, cfg.model.name, cfg.algo.name) == (
        "mnist", "data", "simple_cnn", "fedavg")
    assert (cfg.partition.name, cfg.alpha, cfg.partition.scheme, cfg.partition.min_size) == (
        "dirichlet", 0.1, "per_class", 0)
    assert (cfg.num_clients, cfg.clients_per_round, cfg.batch_size, cfg.small_clients) == (100, 10, 4, "skip")
    assert (cfg.algo.momentum, cfg.algo.weight_decay, cfg.algo.clip_grad_norm) == (0.9, 0.0, 10)
    assert (cfg.algo.schedule.name, cfg.algo.schedule.decay, cfg.algo.local_epochs) == ("exponential", 0.998, 1)
    assert (cfg.engine.name, cfg.logger.name, cfg.checkpoint_every) == ("auto", "none", cfg.eval_every)


def fake_run(runs: Path, name: str, norm: dict, lr: float, summary: dict, accs: list[float],
             algo: str = "fedavg") -> None:
    """A run directory as run.py writes it: .hydra/config.yaml, metrics.csv, summary.json."""
    run = runs / name
    (run / ".hydra").mkdir(parents=True)
    cfg = {"dataset": {"name": "mnist"}, "model": {"name": "simple_cnn"}, "partition": {"name": "dirichlet"},
           "algo": {"name": algo, "lr": "${lr}", "momentum": 0.9, "weight_decay": 0.0, "clip_grad_norm": 10,
                    "schedule": {"name": "exponential", "decay": 0.998}},
           "norm": norm, "lr": lr, "alpha": 0.1, "rounds": 3, "num_clients": 100, "clients_per_round": 10,
           "batch_size": 4, "seed": 0, "eval_every": 1, "small_clients": "skip"}
    OmegaConf.save(OmegaConf.create(cfg), run / ".hydra" / "config.yaml")
    lines = ["round,test_acc,test_loss,train_loss,lr,wall_s"]
    lines += [f"{i + 1},{acc},1.0,1.0,{lr},{i + 1}" for i, acc in enumerate(accs)]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    (run / "summary.json").write_text(json.dumps(summary))


def test_table_script_on_hand_made_runs(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    fake_run(runs, "bn-alpha0.1-seed0", {"name": "bn"}, 0.01,
             {"status": "completed", "final_test_acc": 0.9, "best_test_acc": 0.95, "rounds_completed": 3},
             [0.5, 0.95, 0.9])
    fake_run(runs, "hbn-alpha0.1-seed0", {"name": "hbn", "variant": "paper"}, 0.01,
             {"status": "completed", "final_test_acc": 0.975, "best_test_acc": 0.975, "rounds_completed": 3},
             [0.4, 0.8, 0.975])
    fake_run(runs, "fbn-alpha0.1-seed0", {"name": "fbn", "variant": "hbn_code"}, 0.01,
             {"status": "diverged", "final_test_acc": 0.1, "best_test_acc": 0.6, "rounds_completed": 2},
             [0.6, 0.1])
    make_figures(["hbn/table1_mnist", "--runs", str(runs), "--out", str(out)], repo=ROOT)

    with (out / "table.csv").open() as f:
        rows = {row["method"]: row for row in csv.DictReader(f)}
    assert list(rows) == ["bn", "gn", "ln", "fedfn", "fixbn", "fbn", "hbn"]
    assert rows["bn"] == {"method": "bn", "label": "BN", "lr": "0.01", "runs": "1", "status": "completed",
                          "rounds_completed": "3", "rounds": "3", "final_acc": "90.00", "best_acc": "95.00",
                          "best_round": "2", "last5_mean": "78.33", "last5_sd": "24.66",
                          "rank_ours": "2", "paper_acc": "69.61", "rank_paper": "3"}
    assert rows["hbn"] == {"method": "hbn", "label": "HBN", "lr": "0.01", "runs": "1", "status": "completed",
                           "rounds_completed": "3", "rounds": "3", "final_acc": "97.50", "best_acc": "97.50",
                           "best_round": "3", "last5_mean": "72.50", "last5_sd": "29.47",
                           "rank_ours": "1", "paper_acc": "71.56", "rank_paper": "1"}
    assert rows["fbn"] == {"method": "fbn", "label": "FBN", "lr": "0.01", "runs": "1", "status": "diverged",
                           "rounds_completed": "2", "rounds": "3", "final_acc": "10.00", "best_acc": "60.00",
                           "best_round": "1", "last5_mean": "35.00", "last5_sd": "35.36",
                           "rank_ours": "", "paper_acc": "66.13", "rank_paper": "7"}
    assert rows["gn"] == {"method": "gn", "label": "GN", "lr": "", "runs": "0", "status": "missing",
                          "rounds_completed": "", "rounds": "", "final_acc": "", "best_acc": "", "best_round": "",
                          "last5_mean": "", "last5_sd": "", "rank_ours": "", "paper_acc": "68.76", "rank_paper": "4"}

    md = (out / "table.md").read_text()
    assert "| FBN | 0.01 | diverged | 2 | 10.00 | 60.00 | 1 | 35.00 ± 35.36 | – | 66.13 | 7 |" in md
    assert "| GN | – | missing | – | – | – | – | – | – | 68.76 | 4 |" in md
    assert "- ours (best accuracy): HBN > BN\n- paper: HBN > BN\n" in md
    assert "Kendall τ over the 2 methods in both: 1.00 (1 pairs ordered as in the paper, 0 reversed)" in md
    assert ("not ranked (no completed run): GN (missing), LN (missing), FedFN (missing), FixBN (missing), "
            "FBN (diverged)") in md
    assert "rounds 3 (paper: 500)" in md and "dataset mnist (paper: cifar10)" in md
    assert (out / "table1.png").stat().st_size > 0
