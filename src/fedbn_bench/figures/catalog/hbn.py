"""HBN (Hybrid Batch Normalisation) figures and tables.

Paper-scale presets whose sweep spans a table's columns (φ, K, the model, ...) write each column's runs
under its own sub-directory of the sweep dir; a column is one declaration over that sub-directory
(``<id>_<column>``). Rows are the preset's per-row override, or ``cfg:<key>`` where a figure's x-axis is
a config value (lr grids, φ, λ, E)."""
from __future__ import annotations

from fedbn_bench.figures.base import Figure

BEST = "summary:best_test_acc"
"""HBN reports the best test accuracy over rounds (its code's ``best_acc``)."""
NORMS = ("bn", "gn", "ln", "fedfn", "fixbn", "fbn", "hbn")
NORM_LABELS = {"bn": "BN", "gn": "GN", "ln": "LN", "fedfn": "FedFN", "fixbn": "FixBN", "fbn": "FBN", "hbn": "HBN"}
TABLE5_MODELS = {"mobilenet_v2": "MobileNetV2", "resnet18": "ResNet-18", "resnet50": "ResNet-50",
                 "vgg11": "VGG-11", "vgg19": "VGG-19"}


def columns(preset: str, rows: str, paper: str, title: str, cols: dict[str, str]) -> list[Figure]:
    """One ``paper_table`` per column of a table whose preset writes each column under ``runs/<column>``:
    ``cols`` = ``{column: what it is}``; the paper file's column of the same name is compared."""
    return [Figure(f"hbn/{preset.split('_')[0]}_{col}", "paper_table", preset=f"hbn/{preset}",
                   runs=f"results/hbn/{preset}/runs/{col}", title=f"{title}, {what}", paper=f"hbn/{paper}",
                   rows=rows, metric={col: BEST}) for col, what in cols.items()]


def per_norm(table: str, title: str) -> list[Figure]:
    """HBN Tables 8-10: one lr grid per norm (rows: the run's lr; the paper file's ``norm`` selects)."""
    return [Figure(f"hbn/{table}_{norm}", "paper_table", preset=f"hbn/{table}", runs=f"results/hbn/{table}/runs/{norm}",
                   title=f"{title}: FedAvg + {label} per learning rate", paper=f"hbn/{table}_paper.csv",
                   paper_where={"norm": norm}, rows="cfg:lr", metric={"acc": BEST})
            for norm, label in NORM_LABELS.items()]


def by_value(name: str, preset: str, key: str, groups: dict[str, str], title: str) -> list[Figure]:
    """A figure without paper numbers whose x-axis is a config value ``key``, one table per group
    (the preset's sub-directory ``runs/<group>``), ids ``<name>_<group>``."""
    return [Figure(f"hbn/{name}_{group}", "paper_table", runs=f"results/hbn/{preset}/runs/{group}", preset=f"hbn/{preset}",
                   title=f"{title}, {what} (best test accuracy over rounds)", rows=f"cfg:{key}", metric={"acc": BEST})
            for group, what in groups.items()]


PHI = {"phi0.6": "φ = 0.6", "phi0.3": "φ = 0.3", "phi0.1": "φ = 0.1", "phi0.05": "φ = 0.05"}

FIGURES: list[Figure] = [
    Figure("hbn/table1_mnist", "hbn_table", out="results/hbn/table1_mnist", md="table.md", image="table1",
           paper="hbn/table1_paper.csv", options={"table": "table1"}),
    Figure("hbn/table4_mnist", "hbn_table", out="results/hbn/table4_mnist", md="table.md", image="table4",
           paper="hbn/table4_paper.csv", options={"table": "table4", "column": "c10_phi0.6"}),
    Figure("hbn/table4", "hbn_table", paper="hbn/table4_paper.csv", options={"table": "table4", "column": "c10_phi0.6"}),
    *columns("table1", "experiment/hbn/table1_method", "table1_paper.csv", "HBN Table 1: FedAvg + 7 norms, CIFAR-10",
             {f"c10_{p}": PHI[p] for p in ("phi0.6", "phi0.3", "phi0.1")}),
    *columns("table1_c100", "experiment/hbn/table1_c100_method", "table1_paper.csv",
             "HBN Table 1: FedAvg + 7 norms, CIFAR-100", {f"c100_{p}": PHI[p] for p in ("phi0.6", "phi0.3", "phi0.1")}),
    *columns("table1_tiny", "experiment/hbn/table1_tiny_method", "table1_paper.csv",
             "HBN Table 1: FedAvg + 7 norms, Tiny-ImageNet (ResNet-18)", {f"tiny_{p}": PHI[p] for p in ("phi0.1", "phi0.05")}),
    *columns("table2", "experiment/hbn/table2_cell", "table2_paper.csv", "HBN Table 2: BN / GN / HBN vs batch size, CIFAR-100",
             {p: PHI[p] for p in ("phi0.6", "phi0.3")}),
    Figure("hbn/fig4", "paper_table", preset="hbn/table2", runs="results/hbn/table2/runs/phi0.6",
           title="HBN Fig. 4: sensitivity to the batch size, CIFAR-100, φ = 0.6 (Table 2's runs)",
           paper="hbn/table2_paper.csv", rows="experiment/hbn/table2_cell", metric={"phi0.6": BEST}),
    Figure("hbn/fig1b", "paper_table", preset="hbn/table2", runs="results/hbn/table2/runs/phi0.6",
           title="HBN Fig. 1b: BN / GN / HBN vs batch size, CIFAR-100, φ = 0.6 (accuracy; the paper plots 100 − it)",
           paper="hbn/table2_paper.csv", rows="experiment/hbn/table2_cell", metric={"phi0.6": BEST}),
    *by_value("fig1a", "fig1", "alpha", {n: f"FedAvg + {NORM_LABELS[n]}, B = 16" for n in ("bn", "gn", "hbn")},
              "HBN Fig. 1a: accuracy vs Dirichlet φ, CIFAR-100 (the paper plots the error, 100 − it)"),
    *columns("table3", "experiment/hbn/table1_method", "table3_paper.csv", "HBN Table 3: number of clients, CIFAR-10",
             {f"K{k}": f"K = {k}" for k in (100, 200, 500, 1000)}),
    *(Figure(f"hbn/table5_{model}", "paper_table", preset="hbn/table5", runs=f"results/hbn/table5/runs/{model}",
             title=f"HBN Table 5: {label} (pretrained) with BN / GN / HBN, CIFAR-100, φ = 0.1, B = 64",
             paper="hbn/table5_paper.csv", paper_where={"model": model}, rows="experiment/hbn/table5_method",
             metric={"acc": BEST}) for model, label in TABLE5_MODELS.items()),
    *(Figure(f"hbn/fig7_{model}", "curve", preset="hbn/table5", runs=f"results/hbn/table5/runs/{model}",
             title=f"HBN Fig. 7: convergence of {label} with BN / GN / HBN (Table 5's runs)",
             rows="experiment/hbn/table5_method", metric="test_acc",
             options={"expect": ["bn", "gn", "hbn"], "labels": {"bn": "+BN", "gn": "+GN", "hbn": "+HBN"}})
      for model, label in TABLE5_MODELS.items()),
    Figure("hbn/table6", "paper_table", title="HBN Table 6: ablation of HBN's components, CIFAR-10",
           paper="hbn/table6_paper.csv", rows="experiment/hbn/table6_row", metric={"acc": BEST}),
    *by_value("fig5", "fig5", "norm.lam", {f"C{c}": f"C = {c / 100:g} ({c} clients per round)" for c in (100, 70, 40, 10)},
              "HBN Fig. 5: HBN's λ vs client activation ratio, CIFAR-10, B = 32"),
    *by_value("fig6", "fig6", "algo.local_epochs", {n: f"FedAvg + {NORM_LABELS[n]}" for n in ("bn", "gn", "hbn")},
              "HBN Fig. 6: local epochs E, CIFAR-100, φ = 0.6, B = 32"),
    Figure("hbn/sec5", "paper_table", rows="cfg:norm.stats_samples", metric={"acc": BEST},
           title="HBN §5: local statistics from all data (0) vs 128 random samples per client, CIFAR-10, φ = 0.6 "
                 "(paper: 0.13 points lower with 128; best test accuracy over rounds)"),
    *per_norm("table8", "HBN Table 8 (CIFAR-10, φ = 0.6, B = 4)"),
    *per_norm("table9", "HBN Table 9 (CIFAR-100, φ = 0.6, B = 4)"),
    *per_norm("table10", "HBN Table 10 (Tiny-ImageNet, ResNet-18, φ = 0.1, B = 64)"),
    Figure("hbn/fig2", "hbn_clusters", runs="results/hbn/fig2/runs", options={"toy": "hbn_clusters"},
           title="HBN Fig. 2: two clients' clusters normalised by local, global and hybrid (HBN) statistics"),
    Figure("hbn/fig3", "partition_heatmap", rows="alpha",
           title="HBN Fig. 3: label distribution of 100 CIFAR-10 clients (Dirichlet φ = 0.6, 0.1)",
           options={"expect": ["0.6", "0.1"], "labels": {"0.6": "φ = 0.6", "0.1": "φ = 0.1"}}),
]

NOT_COVERED: dict[str, str] = {
    "hbn/table7": "architecture table (Simple-CNN, App. B.1): no run; it is model=simple_cnn "
                  "(FedFN column: norm=fedfn)",
}
"""HBN ids with no preset, and why."""
