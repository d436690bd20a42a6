"""FBN (Federated BatchNorm) figures and tables."""
from __future__ import annotations

from fedbn_bench.figures.base import Figure

FBN_BYZANTINE = {
    "fig4": "FBN Fig. 4: SF attack, median after NNM (CIFAR-10, DSGD, 3000 rounds)",
    "fig6": "FBN Fig. 6: SF attack, median after NNM, heterogeneity sweep",
    "fig7": "FBN Fig. 7: SF attack, trimmed mean after NNM",
    "fig8": "FBN Fig. 8: FOE attack, median after NNM",
    "fig9": "FBN Fig. 9: FOE attack, trimmed mean after NNM",
    "fig10": "FBN Fig. 10: ALIE attack, median after NNM",
    "fig11": "FBN Fig. 11: ALIE attack, trimmed mean after NNM",
    "fig12": "FBN Fig. 12: SF, FOE and ALIE, median after NNM",
    "fig13": "FBN Fig. 13: SF, FOE and ALIE, trimmed mean after NNM",
}
"""FBN App. C.3's figures (the presets' sweeps: tests/test_fbn_byzantine_figures.py)."""

FIG3A_NOTES = {
    "fbn/fig3a_toy": "The setting that shows the paper's effect: FBN §3's 2-D Gaussian data (Figs. 1-2) through "
                     "Fig. 3a's protocol (`conf/experiment/fbn/fig3a_toy.yaml`). The model is `mlp`, not the paper's "
                     "CNN; with `fbn_cnn` the effect did not show on MNIST (`../fig3a_mnist/table.md`) nor on the 8×8 "
                     "digits (`../fig3a_digits8x8/table.md`); CIFAR-10 is not available offline. Why: `README.md`.",
    "fbn/fig3a": "The first proxy, on the embedded 8×8 digits (`conf/experiment/fbn/fig3a.yaml`): the paper's effect "
                 "does not show.",
    "fbn/fig3a_cifar10": "Paper scale (`conf/experiment/fbn/fig3.yaml`): CIFAR-10, 3000 steps, B = 50, client momentum 0.99.",
    "fbn/fig3a_mnist": "Reduced Fig. 3a on MNIST with the paper's CNN (`conf/experiment/fbn/fig3a_mnist.yaml`): the "
                       "paper's effect does not show (naive BN does not fail at γ = 0); why: `../fig3a_toy/README.md`.",
}
"""The line under each Fig. 3a table's title (why that setting)."""

FIG3_ROWS = "experiment/fbn/fig3_method"
FIG3_LABELS = {"naive": "Naive BN", "fixbn": "FixBN", "fbn": "FBN", "centralized": "Centralized"}
"""Rows of the paper-scale Fig. 3 and Fig. 5 (conf/experiment/fbn/fig3_method/)."""

FIGURES: list[Figure] = [
    Figure("fbn/fig4_mnist", "fbn_byzantine", out="results/fbn/fig4_mnist", md="table.md", image="figure",
           title="FBN Fig. 4 reduced to MNIST (DSGD, 90 rounds, n = 10, f = 3, SF on BN statistics)"),
    *(Figure(f"fbn/{name}", "fbn_byzantine", title=title) for name, title in FBN_BYZANTINE.items()),
    Figure("fbn/fig3a_toy", "fbn_fig3a", out="results/fbn/fig3a_toy", md="table.md", image="fig3a",
           paper="fbn/fig3a_paper.csv", options={"note": FIG3A_NOTES["fbn/fig3a_toy"]}),
    Figure("fbn/fig3a", "fbn_fig3a", out="results/fbn/fig3a_digits8x8", md="table.md", image="fig3a",
           paper="fbn/fig3a_paper.csv", options={"note": FIG3A_NOTES["fbn/fig3a"]}),
    Figure("fbn/fig3a_mnist", "fbn_fig3a", out="results/fbn/fig3a_mnist", md="table.md", image="fig3a",
           paper="fbn/fig3a_paper.csv", options={"note": FIG3A_NOTES["fbn/fig3a_mnist"]}),
    Figure("fbn/fig3a_cifar10", "fbn_fig3a", preset="fbn/fig3", paper="fbn/fig3a_paper.csv",
           options={"note": FIG3A_NOTES["fbn/fig3a_cifar10"]}),
    *(Figure(f"fbn/fig3{panel}", "curve", preset="fbn/fig3", runs=f"results/fbn/fig3/runs/gamma{gamma}",
             title=f"FBN Fig. 3{panel}: test accuracy per step at γ = {gamma} (CIFAR-10, DSGD)", rows=FIG3_ROWS,
             metric="test_acc", options={"expect": list(FIG3_LABELS), "labels": FIG3_LABELS})
      for panel, gamma in (("b", "0.01"), ("c", "0"))),
    *(Figure(f"fbn/fig5a_alpha{alpha}", "paper_table", preset="fbn/fig5", runs=f"results/fbn/fig5/runs/alpha{alpha}",
             title=f"FBN Fig. 5a: final test accuracy at Dirichlet α = {alpha} (CIFAR-10, DSGD)", rows=FIG3_ROWS,
             metric={"acc": "summary:final_test_acc"}, options={"labels": FIG3_LABELS})
      for alpha in ("1", "0.5", "0.1", "0.05", "0.01")),
    *(Figure(f"fbn/fig5{panel}", "curve", preset="fbn/fig5", runs=f"results/fbn/fig5/runs/alpha{alpha}",
             title=f"FBN Fig. 5{panel}: test accuracy per step at Dirichlet α = {alpha} (CIFAR-10, DSGD)",
             rows=FIG3_ROWS, metric="test_acc", options={"expect": list(FIG3_LABELS), "labels": FIG3_LABELS})
      for panel, alpha in (("b", "0.1"), ("c", "0.01"))),
]

FMNIST_NOTE = ("FBN reduced to Fashion-MNIST (`conf/experiment/fbn/base/fmnist.yaml`: FBN's CNN at half width, DSGD, "
               "300 steps, B = 16), where naive BN's failure shows; the claims it decides: `results/CLAIMS.md`.")
FMNIST_ROWS = "experiment/fbn/fig3a_method"

FIGURES += [
    Figure("fbn/fig3a_fmnist", "fbn_fig3a", out="results/fbn/fig3a_fmnist", md="table.md", image="fig3a",
           paper="fbn/fig3a_paper.csv", options={"note": FMNIST_NOTE}),
    Figure("fbn/fig3b_fmnist", "curve", out="results/fbn/fig3b_fmnist", title="FBN Fig. 3b reduced to Fashion-MNIST: test accuracy per step at γ = 0.01",
           rows=FMNIST_ROWS, metric="test_acc", options={"expect": ["naive", "fbn"], "labels": FIG3_LABELS}),
    Figure("fbn/fig3c_fmnist", "curve", preset="fbn/fig3a_fmnist", out="results/fbn/fig3a_fmnist",
           title="FBN Fig. 3c reduced to Fashion-MNIST: test accuracy per step at γ = 0",
           rows=FMNIST_ROWS, metric="test_acc",
           options={"expect": list(FIG3_LABELS), "labels": FIG3_LABELS, "where": {"cfg:gamma": "0.0"}}),
]

NOT_COVERED: dict[str, str] = {
    "fbn/fig1": "drawn by scripts/toy_normalization.py (2-D Gaussian toy, no training; results/fbn/toy/)",
    "fbn/fig2": "drawn by scripts/toy_normalization.py (2-D Gaussian toy, panels a-c; results/fbn/toy/)",
    "fbn/table1": "architecture table (the CNN of App. C.1): no run; it is model=fbn_cnn",
    "fbn/table2": "hyperparameter table (App. C.1): no run; it is preset=fbn",
}
"""FBN ids with no preset, and why."""
