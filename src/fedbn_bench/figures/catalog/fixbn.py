"""FixBN (two-stage BN, maintained momentum) figures and tables.

Presets: ``conf/experiment/fixbn/<id>.yaml``; Figs. E, F and J-M are cuts and curves of the Fig. D (a)
runs (``fixbn/fig_d_epochs``). What has no preset, and why: :data:`NOT_COVERED`.
"""
from __future__ import annotations

from dataclasses import replace

from fedbn_bench.figures.base import Figure

ACC = {"acc": "final:test_acc"}
"""Every FixBN table reports the final test accuracy."""

NORMS = {"bn": "BN", "gn": "GN", "fixbn": "FixBN", "ln": "LN", "in": "IN"}
NONIID = {"iid": "IID", "dir0.6": "Dir(0.6)", "dir0.3": "Dir(0.3)", "dir0.1": "Dir(0.1)", "shards": "Shards",
          "shards40": "Shards"}
EPOCHS = {f"e{e}": f"E = {e}" for e in (1, 20, 100, 500, 2500)}
LABELS = {**NORMS, **NONIID, **EPOCHS, "none": "momentum reset", "global": "global momentum (†)",
          "local": "local momentum (*)", "experiment/fixbn/noniid": "non-IID", "norm": "norm",
          "experiment/fixbn/epochs": "E", "algo.momentum_carry": "momentum"}
METHODS = {"central_bn": "Centralized + BN", "central_gn": "Centralized + GN", "central_fixbn": "Centralized + FixBN",
           "fedavg_bn": "FedAvg + BN", "fedavg_gn": "FedAvg + GN", "fedavg_fixbn": "FedAvg + FixBN",
           "fedavg_fixbn_local": "FedAvg + FixBN* (local momentum)", "fedavg_fixbn_t60": "FedAvg + FixBN (T* = 60 %)"}
CIFAR_NONIID = ["iid", "dir0.6", "dir0.3", "dir0.1", "shards"]
FIG_D = "results/fixbn/fig_d_epochs/runs"


def fig3(dataset: str, shards: str) -> list[Figure]:
    """Fig. 3 for one data set: the grid (non-IID degree × norm) and one table per degree."""
    noniid = [*CIFAR_NONIID[:-1], shards]
    out = [Figure(f"fixbn/fig3_{dataset}", "grid", title=f"FixBN Fig. 3 ({dataset}): BN vs GN vs FixBN by non-IID degree",
                  rows="experiment/fixbn/noniid", metric="final:test_acc",
                  options={"columns": "norm", "expect_rows": noniid, "expect_columns": ["bn", "gn", "fixbn"],
                           "labels": LABELS})]
    for p in noniid:
        paper = dataset == "cifar10" and p == "shards"
        out.append(Figure(f"fixbn/fig3_{dataset}_{p}", "paper_table", preset=f"fixbn/fig3_{dataset}",
                          runs=f"results/fixbn/fig3_{dataset}/runs/{p}",
                          title=f"FixBN Fig. 3 ({dataset}, {NONIID[p]}): BN vs GN vs FixBN",
                          paper="fixbn/fig3_paper.csv" if paper else None,
                          paper_where={"setting": "cifar10_shards"} if paper else {},
                          rows="norm", metric=ACC, options={"labels": NORMS}))
    return out


def curves(letter: str, cuts: list[tuple[str, str]], what: str) -> list[Figure]:
    """Training curves (Figs. J-M) of the Fig. D (a) runs: one figure per (non-IID degree, E)."""
    return [Figure(f"fixbn/fig_{letter}_{p}_{e}", "curve", preset="fixbn/fig_d_epochs", runs=f"{FIG_D}/{p}/{e}",
                   title=f"FixBN Fig. {letter.upper()} ({what}): {NONIID[p]}, {EPOCHS[e]}, fixed 128 epochs",
                   rows="norm", metric="test_acc", options={"expect": ["bn", "gn", "fixbn"], "labels": NORMS})
            for p, e in cuts]


FIG_E = Figure("fixbn/fig_e", "grid", preset="fixbn/fig_d_epochs",
               title="FixBN Fig. E: accuracy vs E at a fixed number of SGD steps (CIFAR-10 Shards)",
               rows="norm", metric="final:test_acc",
               options={"columns": "experiment/fixbn/epochs", "where": {"experiment/fixbn/noniid": "shards"},
                        "expect_rows": ["bn", "gn"], "expect_columns": list(EPOCHS), "labels": LABELS})
"""Fig. E; Fig. F (Shards, fixed epochs, BN vs GN along E) shows the same cut of the Fig. D (a) runs."""


FIGURES: list[Figure] = [
    Figure("fixbn/fig1", "paper_table", title="FixBN Fig. 1: FL vs centralized at E = 1 (CIFAR-10 Shards, ResNet-20)",
           rows="experiment/fixbn/fig1_method", metric=ACC, options={"labels": METHODS}),
    Figure("fixbn/table1", "paper_table", title="FixBN Table 1: centralized vs FL at E = 1, SGD without momentum",
           paper="fixbn/table1_paper.csv", rows="experiment/fixbn/method", metric=ACC),
    Figure("fixbn/fig2a", "curve", preset="fixbn/fig2ab",
           title="FixBN Fig. 2a: L1 change of the global BN statistics, local mini-batch vs global (CIFAR-10, E = 1)",
           rows="norm", metric=("bn_global_change", "bn_local_distance"),
           options={"scale": 1.0, "yscale": "log", "digits": 4, "expect": ["bn"], "labels": NORMS,
                    "ylabel": "L1 distance",
                    "column_labels": {"bn_global_change": "global ||S(t) - S(t')||_1 (since the last evaluation)",
                                      "bn_local_distance": "local ||S_m,B - S||_1 (mean over clients)"}}),
    Figure("fixbn/fig2b", "curve", preset="fixbn/fig2ab",
           title="FixBN Fig. 2b: variance of each client's local BN statistics over a 200-round window (E = 1)",
           rows="norm", metric=tuple(f"bn_local_var_{m}" for m in range(5)),
           options={"scale": 1.0, "yscale": "log", "digits": 6, "expect": ["bn"], "labels": NORMS,
                    "ylabel": "windowed variance",
                    "column_labels": {f"bn_local_var_{m}": f"client {m}" for m in range(5)}}),
    Figure("fixbn/fig2c", "paper_table", title="FixBN Fig. 2c: final accuracy by the freeze round T* (fraction of rounds)",
           rows="norm.freeze_fraction", metric=ACC),
    Figure("fixbn/fig2c_train_loss", "curve", preset="fixbn/fig2c",
           title="FixBN Fig. 2c: loss of the global model on the training data, by the freeze round T*",
           rows="norm.freeze_fraction", metric="global_train_loss",
           options={"scale": 1.0, "digits": 4, "ylabel": "training loss"}),
    Figure("fixbn/sec3_4", "paper_table",
           title="FixBN §3.4 / App. B.1: BN statistics re-estimated on the pooled training data "
                 "(Tiny-ImageNet, Dir(0.1))",
           paper="fixbn/sec3_4_paper.csv", rows="norm",
           metric={"acc": "final:test_acc", "pooled_acc": "final:pooled_bn_test_acc"}),
    *fig3("cifar10", "shards"),
    *fig3("tinyimagenet", "shards40"),
    Figure("fixbn/fig3_mnist", "grid", title="FixBN Fig. 3 reduced to MNIST (LeNet-5, 20 rounds, E = 100, 5 clients)",
           rows="experiment/fixbn/noniid", metric="final:test_acc",
           options={"columns": "norm", "expect_rows": ["iid", "shards"], "expect_columns": ["bn", "gn", "fixbn"],
                    "labels": LABELS}),
    Figure("fixbn/table2", "paper_table", title="FixBN Table 2: class-non-IID ImageNet (ResNet-18, Dir(0.1))",
           paper="fixbn/table2_paper.csv", rows="norm", metric=ACC),
    Figure("fixbn/table4", "paper_table", runs="results/fixbn/table4/runs/shards",
           title="FixBN Table 4: BN-in-FL methods, non-IID CIFAR-10 (FedTAN's setting)",
           paper="fixbn/table4_paper.csv", rows="experiment/fixbn/method", metric={"noniid": "final:test_acc"}),
    Figure("fixbn/table4_iid", "paper_table", preset="fixbn/table4", runs="results/fixbn/table4/runs/iid",
           title="FixBN Table 4: BN-in-FL methods, IID CIFAR-10 (FedTAN's setting)",
           paper="fixbn/table4_paper.csv", rows="experiment/fixbn/method", metric={"iid": "final:test_acc"}),
    Figure("fixbn/table5", "paper_table", title="FixBN Table 5: other normalizers (CIFAR-10 Shards, E = 100)",
           paper="fixbn/table5_paper.csv", rows="norm", metric=ACC),
    Figure("fixbn/table_h", "paper_table", title="FixBN Table H: which BN parameters to fix at T*",
           paper="fixbn/table_h_paper.csv", rows="experiment/fixbn/table_h_row", metric=ACC),
    Figure("fixbn/table_i", "paper_table", title="FixBN Table I: number of GN groups",
           paper="fixbn/table_i_paper.csv", rows="norm.groups", metric=ACC),
    Figure("fixbn/fig_d_epochs", "grid", title="FixBN Fig. D (a): BN vs GN, fixed 128 epochs (CIFAR-10, ResNet-20)",
           rows="experiment/fixbn/noniid", metric="final:test_acc",
           options={"columns": "experiment/fixbn/epochs", "panels": "norm", "expect_panels": ["bn", "gn"],
                    "expect_rows": CIFAR_NONIID, "expect_columns": list(EPOCHS), "difference": ["gn", "bn"],
                    "labels": LABELS}),
    Figure("fixbn/fig_d_rounds", "grid", title="FixBN Fig. D (b): BN vs GN, fixed 128 rounds (CIFAR-10, ResNet-20)",
           rows="experiment/fixbn/noniid", metric="final:test_acc",
           options={"columns": "algo.local_steps", "panels": "norm", "expect_panels": ["bn", "gn"],
                    "expect_rows": CIFAR_NONIID, "expect_columns": ["1", "20", "100", "500", "2500"],
                    "difference": ["gn", "bn"], "labels": LABELS}),
    FIG_E,
    replace(FIG_E, id="fixbn/fig_f", title="FixBN Fig. F: opposite trends of BN and GN along E (Shards, fixed epochs)"),
    Figure("fixbn/fig_g", "grid", title="FixBN Fig. G: clients M and participation (CIFAR-10 Shards, E = 100)",
           rows="experiment/fixbn/fig_g_setting", metric="final:test_acc",
           options={"columns": "norm", "expect_rows": ["m5", "m10", "m20", "m50", "m100", "m20_p50", "m100_p50",
                                                       "m100_p20", "m100_p10"],
                    "expect_columns": ["bn", "gn", "fixbn"], "labels": LABELS}),
    Figure("fixbn/fig_h", "grid", title="FixBN Fig. H: BN vs FixBN by batch size (CIFAR-10 Shards, E = 1)",
           rows="norm", metric="final:test_acc",
           options={"columns": "batch_size", "expect_rows": ["bn", "fixbn"],
                    "expect_columns": ["10", "20", "50", "100"], "labels": LABELS}),
    Figure("fixbn/fig_i", "grid", title="FixBN Fig. I: maintained momentum (CIFAR-10 Shards, fixed epochs)",
           rows="algo.momentum_carry", metric="final:test_acc",
           options={"columns": "experiment/fixbn/epochs", "panels": "norm", "expect_panels": ["bn", "gn", "fixbn"],
                    "expect_rows": ["none", "global", "local"], "expect_columns": list(EPOCHS), "labels": LABELS}),
    *curves("j", [("shards", e) for e in ("e1", "e20", "e100", "e500")], "Shards"),
    *curves("k", [(p, "e1") for p in CIFAR_NONIID], "E = 1"),
    *curves("l", [(p, "e20") for p in CIFAR_NONIID], "E = 20"),
    *curves("m", [(p, "e100") for p in CIFAR_NONIID], "E = 100"),
]

FIGURES += [
    Figure("fixbn/table1_fmnist", "paper_table",
           title="FixBN Table 1 / Fig. 1 reduced to Fashion-MNIST: centralized vs FL at E = 1, SGD without momentum",
           paper="fixbn/table1_paper.csv", rows="experiment/fixbn/method", metric={"acc": "summary:final_test_acc"},
           out="results/fixbn/table1_fmnist", options={"labels": METHODS}),
    Figure("fixbn/fig3_fmnist", "grid", title="FixBN Fig. 3 reduced to Fashion-MNIST: BN vs GN vs FixBN (E = 10)",
           out="results/fixbn/fig3_fmnist", rows="experiment/fixbn/noniid", metric="final:test_acc",
           options={"columns": "cfg:norm.name", "expect_rows": ["shards", "dir0.1"],
                    "expect_columns": ["bn", "gn", "fixbn"], "labels": LABELS}),
    Figure("fixbn/variants_fmnist", "paper_table",
           title="FixBN Table H / Fig. I reduced to Fashion-MNIST: FixBN variants (Shards, E = 10)",
           out="results/fixbn/variants_fmnist", rows="experiment/fixbn/fixbn_variant",
           metric={"acc": "summary:final_test_acc"},
           options={"labels": {"fix_both": "FixBN, (γ, β) frozen too", "local_momentum": "FixBN, maintained momentum"}}),
    Figure("fixbn/sec3_4_layers_fmnist", "curve",
           title="FixBN §3.4 on Fashion-MNIST: averaged vs pooled BN statistics (Dir(0.1))",
           out="results/fixbn/sec3_4_layers_fmnist", rows="cfg:norm.name", metric=("test_acc", "pooled_bn_test_acc"),
           options={"ylabel": "test accuracy (%)",
                    "column_labels": {"test_acc": "averaged statistics (FedAvg)",
                                      "pooled_bn_test_acc": "statistics re-estimated on the pooled data"}}),
    replace(next(f for f in FIGURES if f.id == "fixbn/fig2a"), id="fixbn/fig2a_fmnist", preset="fixbn/fig2ab_fmnist",
            out="results/fixbn/fig2ab_fmnist", rows="cfg:norm.name",
            title="FixBN Fig. 2a reduced to Fashion-MNIST: L1 change of the global BN statistics, local vs global (E = 1)"),
]

FIGURES += [  # the claims' longer deciders (issue 49), drawn as the runs they extend
    replace(next(f for f in FIGURES if f.id == "fixbn/sec3_4_layers_fmnist"), id="fixbn/sec3_4_400_rounds_fmnist",
            out="results/fixbn/sec3_4_400_rounds_fmnist",
            title="FixBN §3.4 on Fashion-MNIST at 400 rounds: averaged vs pooled BN statistics (Dir(0.1))"),
    replace(next(f for f in FIGURES if f.id == "fixbn/table1_fmnist"), id="fixbn/fig1_late_freeze_fmnist",
            out="results/fixbn/fig1_late_freeze_fmnist",
            title="FixBN Fig. 1 reduced to Fashion-MNIST with T* = 60 % (E = 1, SGD without momentum)"),
    replace(next(f for f in FIGURES if f.id == "fixbn/table1_fmnist"), id="fixbn/fig1_600_rounds_fmnist",
            out="results/fixbn/fig1_600_rounds_fmnist",
            title="FixBN Fig. 1 reduced to Fashion-MNIST at 600 rounds with T* = 60 % (E = 1, SGD without momentum)"),
]

NOT_COVERED: dict[str, str] = {
    "fixbn/sec3_3": "§3.3's decoupled round (frozen weights: clients update statistics by Eq. 1, the server averages "
                    "them; then weights trained in eval mode with the global statistics) is not implemented; "
                    "norm=hbn norm.mixing=global_only is only an approximation (a separate statistics pass, not Eq. 1).",
    "fixbn/table3": "Cityscapes segmentation: no Cityscapes dataset (city clients), no DeepLab-v3+ (output stride 16), "
                    "no segmentation loss or mIoU evaluation, no Adam client optimizer.",
    "fixbn/table4:fedtan": "FedTAN (layer-wise iterative statistics aggregation, 3L+1 communications per step) is not "
                           "implemented; its row stays missing in fixbn/table4.",
    "fixbn/table4:heterofl": "HeteroFL's static BN (no running statistics) is not implemented.",
    "fixbn/table4:feddna": "FedDNA (decoupled BN-statistics aggregation) is not implemented.",
    "fixbn/table5:gn_ws": "Weight Standardization (GN + WS) is not implemented; the row stays missing in fixbn/table5.",
    "fixbn/table5:fixup": "FixUp ResNet-20 (normalization-free, Fixup initialization) is not implemented.",
    "fixbn/table_h:fix_affine": "Freezing (gamma, beta) while the statistics keep updating: norms/fixbn.py always "
                                "freezes the statistics in stage II (freeze_affine adds the affine parameters).",
    "fixbn/table_f": "Data-set summary (App. A.1): a settings table, nothing to run.",
    "fixbn/table_g": "Default FL settings (App. A.1): a settings table, nothing to run (the presets use them).",
}
"""FixBN figures, tables and rows without a preset, and why (issue 15: a preset or a documented reason)."""
