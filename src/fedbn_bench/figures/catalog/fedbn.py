"""FedBN (local BN under feature shift) figures and tables.

FedBN reports each domain's (site's) test accuracy: the runs' ``metrics.csv`` column ``acc_<domain>``
(every method: the global model per domain for FedAvg/FedProx/centralized, each client's own model on
its domain for FedBN and SingleSet). ``test_acc`` is the unweighted mean over domains only for the
methods with local state (FedBN, SingleSet); for FedAvg it pools the test sets, so the tables show the
per-domain columns only (the paper prints no average either). Presets: ``conf/experiment/fedbn/``.
"""
from __future__ import annotations

from fedbn_bench.figures.base import Figure

DIGITS = ("SVHN", "USPS", "SynthDigits", "MNIST_M", "MNIST")
"""Digits-5 domains in the paper's column order (the project's names: ``acc_<domain>``)."""
MNIST_DOMAINS = ("identity", "invert", "color", "blur", "noise")
"""The synthetic feature-shift domains of partition=domains on MNIST (the reduced preset)."""
SITES = {
    "office": ("office_caltech10", "Office-Caltech10", ("amazon", "caltech", "dslr", "webcam")),
    "domainnet": ("domainnet", "DomainNet", ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")),
    "abide": ("abide", "ABIDE I", ("NYU", "USM", "UM", "UCLA")),
}
"""Table 1's three parts: preset suffix -> (paper-file selector, name, sites in the paper's order)."""
METHOD = "experiment/fedbn/method"
LOCAL_EPOCHS = (1, 4, 8, 16)
EB = {f"b{b}_e{e}": f"B={'∞' if b == 'inf' else b} E={e}" for b in (10, 50, "inf") for e in (1, 4, 16)}
CLIENTS = {f"n{n}": f"n = {n} ({5 * n} clients)" for n in range(1, 11)}
METHOD_NAMES = {"singleset": "SingleSet", "fedavg": "FedAvg", "fedprox": "FedProx", "fedbn": "FedBN"}
COS_TOY = "results/fedbn/cos_toy/runs"
"""The cosine toy's record (Figs. 1 and 2; ``python scripts/toys.py fedbn_cos``, ``toy/records.py``)."""


def final_accuracy(domains) -> dict[str, str]:
    """The paper's per-domain columns: each domain's accuracy at the final round."""
    return {domain: f"final:acc_{domain}" for domain in domains}


FIGURES: list[Figure] = [
    Figure("fedbn/table11", "paper_table", title="FedBN Fig. 5 / Table 11: SingleSet, FedAvg, FedProx, FedBN on Digits-5",
           paper="fedbn/table11_paper.csv", rows=METHOD, metric=final_accuracy(DIGITS)),
    Figure("fedbn/table11_mnist", "paper_table", out="results/fedbn/table11_mnist", md="table.md", image="table11",
           title="FedBN Table 11 reduced to MNIST with 5 synthetic feature-shift domains (FedAvg vs FedBN, 50 rounds)",
           rows=METHOD, metric=final_accuracy(MNIST_DOMAINS), options={"labels": METHOD_NAMES}),
    Figure("fedbn/table12", "paper_table", title="FedBN Table 12: FedBN vs centralized training on Digits-5",
           paper="fedbn/table12_paper.csv", rows=METHOD, metric=final_accuracy(DIGITS)),
    *(Figure(f"fedbn/table1_{suffix}", "paper_table",
             title=f"FedBN Table 1, {name}: per-site test accuracy (final round)",
             paper="fedbn/table1_paper.csv", paper_where={"dataset": selector}, rows=METHOD,
             metric=final_accuracy(sites))
      for suffix, (selector, name, sites) in SITES.items()),
    Figure("fedbn/fig3", "curve", preset="fedbn/fig3", runs="results/fedbn/fig4a/runs/E1",
           title="FedBN Fig. 3: training loss, FedBN vs FedAvg (Digits-5, E = 1; mean local-step loss)",
           rows=METHOD, metric="train_loss",
           options={"scale": 1.0, "expect": ["fedavg", "fedbn"], "labels": METHOD_NAMES, "ylabel": "training loss"}),
    *(Figure(f"fedbn/fig4a_e{e}", "paper_table", preset="fedbn/fig4a", runs=f"results/fedbn/fig4a/runs/E{e}",
             title=f"FedBN Fig. 4a: test accuracy per domain, FedBN vs FedAvg, E = {e} (final round)",
             rows=METHOD, metric=final_accuracy(DIGITS), options={"labels": METHOD_NAMES})
      for e in LOCAL_EPOCHS),
    *(Figure(f"fedbn/fig7_e{e}", "curve", preset="fedbn/fig4a", runs=f"results/fedbn/fig4a/runs/E{e}",
             title=f"FedBN Fig. 7: training loss, FedBN vs FedAvg, E = {e} (mean local-step loss)",
             rows=METHOD, metric="train_loss",
             options={"scale": 1.0, "expect": ["fedavg", "fedbn"], "labels": METHOD_NAMES, "ylabel": "training loss"})
      for e in LOCAL_EPOCHS),
    *(Figure(f"fedbn/fig4c_{method}", "paper_table", preset="fedbn/fig4c", runs=f"results/fedbn/fig4c/runs/{method}",
             title=f"FedBN Fig. 4c: {METHOD_NAMES[method]} test accuracy per domain vs clients per domain (final round)",
             rows="experiment/fedbn/clients", metric=final_accuracy(DIGITS), options={"labels": CLIENTS})
      for method in ("fedavg", "fedbn")),
    *(Figure(f"fedbn/table13_{method}", "paper_table", preset="fedbn/table13", runs=f"results/fedbn/table13/runs/{method}",
             title=f"FedBN Table 13: {METHOD_NAMES[method]} for batch size B × local epochs E (Digits-5)",
             paper="fedbn/table13_paper.csv", paper_where={"approach": method}, rows="experiment/fedbn/eb",
             metric=final_accuracy(DIGITS))
      for method in ("fedavg", "fedbn")),
    Figure("fedbn/fig8", "curve", preset="fedbn/fig8", runs="results/fedbn/table13/runs/fedbn",
           title="FedBN Fig. 8: FedBN test accuracy (mean of the 5 domains) for B × E",
           rows="experiment/fedbn/eb", metric="test_acc", options={"expect": list(EB), "labels": EB}),
    *(Figure(f"fedbn/table14_{method}", "paper_table", preset="fedbn/table14", runs=f"results/fedbn/table14/runs/{method}",
             title=f"FedBN Table 14 / Fig. 4b: {METHOD_NAMES[method]} over the local dataset size (Digits-5)",
             paper="fedbn/table14_paper.csv", paper_where={"approach": method}, rows="dataset.options.percent",
             metric=final_accuracy(DIGITS))
      for method in ("singleset", "fedavg", "fedbn")),
    Figure("fedbn/fig1", "fedbn_cos_loss", runs=COS_TOY, options={"toy": "fedbn_cos"},
           title="FedBN Fig. 1: each client's training loss over w, without and with local BN (cosine toy)"),
    Figure("fedbn/fig2", "fedbn_cos_surface", runs=COS_TOY, options={"toy": "fedbn_cos"},
           title="FedBN Fig. 2: client 1's loss over (w, γ); averaging both clients' (w*, γ*) (cosine toy)"),
    Figure("fedbn/fig9", "curve", title="FedBN Fig. 9: training loss per step, FedBN vs FedAvg (App. F, 2 clients)",
           rows=METHOD, metric="train_loss",
           options={"scale": 1.0, "expect": ["fedavg", "fedbn"], "labels": METHOD_NAMES, "ylabel": "training loss",
                    "digits": 3}),
]

DRAWN_BY = {
    "fedbn/fig5": ["fedbn/table11"],
    "fedbn/fig4b": ["fedbn/table14_singleset", "fedbn/table14_fedbn"],
}
"""Paper figures whose numbers another declaration draws (same runs, same numbers)."""

NOT_COVERED = {
    "fedbn/fig6": "data visualisation (App. D.1: example images and pixel histograms per domain), not a training "
                  "run; no visualisation script (M-VIS)",
    "fedbn/table15": "unequal client sizes at 10 % (App. E.6: SVHN 7,943, USPS 743, SynthDigits 39,116, MNIST-M and "
                     "MNIST 5,600): digits5 reads FedBN's archive of 10 parts of ~743 per domain, so no domain can "
                     "exceed 7,430 (truncate: false still gives ~743 at 10 %); the untruncated datasets are not "
                     "available (M-DATA-DIGITS-FULL), and the number of 'repeat sampling' iterations is unstated",
    "fedbn/table16": "unequal client sizes at 100 % (App. E.6: 79,430 / 7,430 / 391,160 / 56,000 / 56,000): as "
                     "fedbn/table15, the untruncated Digits-5 is not available (M-DATA-DIGITS-FULL)",
    "fedbn/table17": "unseen-domain clients (App. G): no Morpho-MNIST dataset (M-DATA-MORPHO) and no new-client "
                     "evaluation (averaged BN affine parameters + the new client's own batch statistics)",
    "fedbn/table2": "notation table, not an experiment",
    "fedbn/table3": "DigitModel architecture: model=digit_cnn (used by every Digits preset), not an experiment",
    "fedbn/table4": "settings of Fig. 3: conf/experiment/fedbn/fig3.yaml",
    "fedbn/table5": "settings of Fig. 4a: conf/experiment/fedbn/fig4a.yaml",
    "fedbn/table6": "settings of Fig. 4b: conf/experiment/fedbn/table14.yaml",
    "fedbn/table7": "settings of Fig. 4c: conf/experiment/fedbn/fig4c.yaml",
    "fedbn/table8": "settings of Fig. 5 / Table 11: conf/experiment/fedbn/table11.yaml",
    "fedbn/table9": "AlexNet-BN architecture: model=alexnet_bn (table1_office, table1_domainnet), not an experiment",
    "fedbn/table10": "ABIDE I data summary (dataset=abide), not an experiment",
}
"""FedBN figures and tables without a preset or declaration, and why (the gap names follow the repro
notes, /work/shared/repro/hbn_fedrbn_fedbn.md §3)."""
