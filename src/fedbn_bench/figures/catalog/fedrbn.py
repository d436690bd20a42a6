"""FedRBN (federated robustness propagation) figures and tables."""
from __future__ import annotations

from fedbn_bench.figures.base import Figure

RA_SA = {"ra": "summary:robust_acc_at_best_val", "sa": "summary:test_acc_at_best_val"}
"""FedRBN reports RA and SA at the best validation round (App. C.1; records/selection.py)."""
TABLE3_ATTACKS = ("pgd20_16", "pgd100_8", "mia20_16", "mia100_8", "autoattack")
"""Table 3's attack columns: each the ``label`` of an ``adversarial.eval_attacks`` entry of
conf/experiment/fedrbn/table3.yaml, read at the best validation round as ``RA_SA``."""
METHOD_LABELS = {"fedrbn": "FedRBN", "fedrbn_l1": "FedRBN λ=1", "fedrbn_l0": "FedRBN λ=0", "fatavg": "FATAvg",
                 "fatavg_dbn": "FATAvg+DBN", "fatbn": "FATBN", "fatprox": "FATProx", "local_at": "local AT",
                 "fedrbn_wo_prop": "FedRBN w/o prop"}
TABLE1_SETTINGS = {"all": ("digits_all", "Digits All"), "digits_20": ("digits_20", "Digits 20 %"),
                   "single_domain": ("digits_mnist", "Digits MNIST")}
"""Table 1: the preset's setting choice -> (the paper file's setting, label)."""
BN_LAYERS = ("features.1", "classifier.1")
"""digit_cnn's BN after the first convolution (FedRBN's bn1) and after the first linear layer (bn4):
the ``layer`` of conf/experiment/fedrbn/fig7.yaml's ``bn_statistics_pca`` metrics (Fig. 7, Fig. 13)."""

FIGURES: list[Figure] = [
    Figure("fedrbn/table2_mnist", "fedrbn_table", out="results/fedrbn/table2_mnist", md="table.md", image="table2",
           paper="fedrbn/table2_paper.csv", paper_where={"setting": "digits_20"}),
    Figure("fedrbn/table2", "fedrbn_table", paper="fedrbn/table2_paper.csv", paper_where={"setting": "digits_20"}),
    Figure("fedrbn/table3", "paper_table", title="FedRBN Table 3: robust accuracy under stronger attacks (Digits)",
           paper="fedrbn/table3_paper.csv", rows="experiment/fedrbn/method",
           metric={**{col: f"summary:{col}_acc_at_best_val" for col in TABLE3_ATTACKS}, "sa": RA_SA["sa"]}),
    Figure("fedrbn/table4", "paper_table", title="FedRBN Table 4: FedRBN vs full (Free) AT (Digits)",
           paper="fedrbn/table4_paper.csv", rows="experiment/fedrbn/table4_row", metric=RA_SA),
    *(Figure(f"fedrbn/table1_{setting}_l{lam}", "paper_table", preset="fedrbn/table1",
             runs=f"results/fedrbn/table1/runs/{choice}-lambda{lam}",
             title=f"FedRBN Table 1: test BN and propagation weights, {TABLE1_SETTINGS[choice][1]}, λ = {lam}",
             paper="fedrbn/table1_paper.csv", paper_where={"setting": setting, "lambda": lam},
             rows="experiment/fedrbn/table1_row", metric=RA_SA)
      for choice, (setting, _) in TABLE1_SETTINGS.items() for lam in ("0", "0.5")),
    *(Figure(f"fedrbn/fig1_{side}_{method}", "paper_table", preset="fedrbn/fig1",
             runs=f"results/fedrbn/fig1/runs/d{domains}/{method}",
             title=f"FedRBN Fig. 1: {METHOD_LABELS[method]} against the share of AT users ({what})",
             rows="cfg:adversarial.at_fraction", metric=RA_SA)
      for side, domains, what in (("in", 5, "in-domain: all 5 domains"), ("out", 3, "out-of-domain: 3 of 5 domains"))
      for method in ("local_at", "fatavg", "fatbn", "fedrbn", "fedrbn_wo_prop")),
    *(Figure(f"fedrbn/fig3a_{method}", "paper_table", runs=f"results/fedrbn/fig3a/runs/{method}",
             preset="fedrbn/fig3a", title=f"FedRBN Fig. 3a: {METHOD_LABELS[method]}, AT users in a single domain (Digits)",
             rows="experiment/fedrbn/at_domain", metric=RA_SA) for method in ("fedrbn", "fatavg", "fatbn")),
    *(Figure(f"fedrbn/fig3b_{method}", "paper_table", runs=f"results/fedrbn/fig3b/runs/{method}",
             preset="fedrbn/fig3b", title=f"FedRBN Fig. 3b: {METHOD_LABELS[method]} against the number of AT domains",
             rows="cfg:adversarial.at_domains", metric=RA_SA) for method in ("fedrbn", "fatavg", "fatbn")),
    Figure("fedrbn/fig5", "curve", preset="fedrbn/table2", runs="results/fedrbn/table2/runs/digits_20",
           title="FedRBN Fig. 5: validation accuracy per round (RA for AT users, SA for ST users), Digits 20 %",
           rows="experiment/fedrbn/method", metric="val_select",
           options={"labels": METHOD_LABELS, "ylabel": "validation accuracy (%)"}),
    *(Figure(f"fedrbn/fig6{panel}", "paper_table", preset="fedrbn/fig6", runs=f"results/fedrbn/fig6/runs/{choice}",
             title=f"FedRBN Fig. 6{panel}: FedRBN against the PNC coefficient λ, {what}",
             rows="cfg:adversarial.pnc_lambda", metric=RA_SA)
      for panel, choice, what in (("a", "digits_20", "Digits 20 % (3 of 5 domains)"), ("b", "single_domain", "AT users in MNIST"))),
    *(Figure(f"fedrbn/table7_{cell}", "paper_table", preset="fedrbn/table7", runs=f"results/fedrbn/table7/runs/{cell}",
             title=f"FedRBN Table 7: FATBN vs FedRBN, {what}, Digits 20 %", paper="fedrbn/table7_paper.csv",
             paper_where={"cell": cell}, rows="experiment/fedrbn/method", metric=RA_SA)
      for cell, what in (("b10_e1", "B = 10, E = 1"), ("b10_e4", "B = 10, E = 4"), ("b10_e8", "B = 10, E = 8"),
                         ("b50_e1", "B = 50, E = 1"), ("b100_e1", "B = 100, E = 1"))),
    *(Figure(f"fedrbn/fig8_{method}", "paper_table", preset="fedrbn/fig8", runs=f"results/fedrbn/fig8/runs/{method}",
             title=f"FedRBN Fig. 8: {METHOD_LABELS[method]} against the users per round (of 50), Digits 20 %",
             rows="cfg:clients_per_round", metric=RA_SA) for method in ("fedrbn", "fatbn", "fatavg")),
    Figure("fedrbn/fig7", "bn_pca", title="FedRBN Fig. 7: PCA of the users' BN statistics after the first linear "
           "layer, LBN+DBN, 100 % AT, Digits", options={"layers": {BN_LAYERS[1]: "bn4"}}),
    Figure("fedrbn/fig13", "bn_pca", preset="fedrbn/fig7", title="FedRBN Fig. 13 (Digits): PCA of the users' BN "
           "statistics after the first convolution and the first linear layer, LBN+DBN, 100 % AT",
           options={"layers": {BN_LAYERS[0]: "bn1", BN_LAYERS[1]: "bn4"}}),
]

NOT_COVERED: dict[str, str] = {
    "fedrbn/fig2": "visualisation (penultimate-layer representations projected on a 3-class plane): no figure recipe",
    "fedrbn/fig4": "illustration (sample images of each domain): no run",
    "fedrbn/fig9": "needs a within-domain Dirichlet split of user sizes with a minimum of 40 samples and the mean "
                   "number of batches per user (the code's partition_mode=dir, M-PART-DIRSIZE): partition=domains "
                   "splits a domain evenly",
    "fedrbn/fig10": "DomainNet (Fig. 3 repeated): the FedRBN DomainNet setup has no preset (train augmentation "
                    "RandomRotation(±30°) is missing, M-AUG-ROT; the DomainNet columns of Tables 1-2 are not run either)",
    "fedrbn/fig11": "visualisation (penultimate-layer representations): no figure recipe",
    "fedrbn/fig12": "visualisation (representations per domain, SVHN users): no figure recipe",
    "fedrbn/fig13:domainnet": "Fig. 13's DomainNet panels need the FedRBN DomainNet setup (no preset, see fedrbn/fig10)",
    "fedrbn/table5": "architecture table (Digits CNN with dual BN): no run; it is model=digit_cnn norm=fedrbn",
    "fedrbn/table6": "architecture table (AlexNet with dual BN): no run; it is model=alexnet_bn norm=fedrbn",
    "fedrbn/table8": "needs robustness transfer by fine-tuning (AT users only for the first rounds, then ST-only "
                     "fine-tuning with the first layers frozen; the code's --AT_iters / --freeze_n_layer, M-FT)",
    "fedrbn/table2:fatmeta": "Table 2's FATMeta row needs Per-FedAvg-style meta FL (M-ALG-META)",
    "fedrbn/table2:fedrob": "Table 2's FedRob row needs FedRob (Reisizadeh et al., M-ALG-ROB)",
    "fedrbn/table3:lsa": "Table 3's LSA column needs the local search attack",
}
"""FedRBN ids with no preset (or rows/columns a preset lacks), and why."""
