"""FixBN's claims (fixbn_making_bn_great.txt), reduced to Fashion-MNIST on a CPU.

Thresholds come from the paper's numbers (Tables 1, 4, 5, §3.4): where the paper shows a gap of
G points, the check asks for about a third of it; where it says two values match, 3 points (the
paper's own standard deviations reach 1.2). Seeds: 3 wherever the claimed gap is under 5 points, and on
the reduced Fig. 3 grid too (first one seed, its gaps being 17-23 points in Table 5; 3 since one seed moved by
more than a check's margin: issue 57). The reduced setting and why it can show FixBN's mechanism:
``conf/experiment/fixbn/base/fmnist.yaml``.
"""
from __future__ import annotations

from dataclasses import replace

from fedbn_bench.figures.claims.base import Check, Claim, Control, Quantity, Superseded, supersede

TABLE1 = "results/fixbn/table1_fmnist/runs"
FIG2 = "results/fixbn/fig2ab_fmnist/runs"
FIG3 = "results/fixbn/fig3_fmnist/runs"
VARIANTS = "results/fixbn/variants_fmnist/runs"
SEC3_4_400 = "results/fixbn/sec3_4_400_rounds_fmnist/runs"
FIG1_LATE = "results/fixbn/fig1_late_freeze_fmnist/runs"
FIG1_600 = "results/fixbn/fig1_600_rounds_fmnist/runs"
METHOD = "+experiment/fixbn/method"
NONIID = "+experiment/fixbn/noniid"
VARIANT = "+experiment/fixbn/fixbn_variant"
E1 = ("Fashion-MNIST, ResNet-20, 5 clients with 2 classes each, E = 1 (communication every SGD step), batch 20, "
      "SGD without momentum, lr 0.2 (x0.1 at 50 % / 75 %), 300 rounds")
E10 = ("Fashion-MNIST, ResNet-20, 5 clients, FedAvg with E = 10 local steps, batch 20, SGD momentum 0.9, lr 0.02 "
       "(x0.1 at 50 % / 75 %), 40 rounds, T* = 50 %")
FULL_E1 = "`experiment=fixbn/table1` (CIFAR-10, 64,000 rounds of one step; needs CIFAR-10 and a GPU)"
FULL_E100 = "`experiment=fixbn/fig3_cifar10` (CIFAR-10, E = 100, 640 rounds; needs CIFAR-10 and a GPU)"


def table1(method: str) -> Quantity:
    return Quantity(TABLE1, {METHOD: method})


def fig3(noniid: str, norm: str, metric: str = "summary:final_test_acc", runs: str = FIG3) -> Quantity:
    return Quantity(runs, {NONIID: noniid, "norm.name": norm}, metric=metric)


SEC3_4_DIAGNOSIS = (
    "Measured (seed 0): re-estimating the statistics on the pooled data gains 7.3 points at the last evaluation "
    "under Dir(0.1) (45.4 → 52.7 %) and 1.7 at round 20 (31.6 → 33.3 %); under Shards 2.0 (50.3 → 52.3 %) and −1.5 "
    "at round 20. The reading that the averaged statistics lag the weights is not what the statistics show. The "
    "same setting evaluated every 10 rounds with the per-layer variances logged (python run.py -m "
    "experiment=fixbn/sec3_4_layers_fmnist engine.threads=1, results/fixbn/sec3_4_layers_fmnist; not a repeat "
    "of the run above: 42.6 against 31.6 % at round 20, the code changed since) gains +10.5 / +2.7 / +2.4 / +3.9 "
    "points at rounds 10 / 20 / 30 / 40 (lr 0.02, 0.02, 0.002, 0.0002), while in all 19 BN layers the averaged "
    "variance's channel mean stays within 0.92-1.06 of the pooled one (mean |log ratio| 0.018 / 0.031 / 0.012 / "
    "0.017, no growth as the lr falls, the pooled variance not systematically larger). In the final state "
    "(python scripts/fixbn_pooled_parts.py results/fixbn/sec3_4_layers_fmnist/runs/dir0.1/bn-seed0) the averaged "
    "means are 0.002-0.014 pooled standard deviations from the pooled ones and the variances by 2-8 % per "
    "channel; yet test accuracy is 49.1 % with the averaged statistics, 53.0 % with the pooled ones, 52.4 % with "
    "only the means pooled and 52.6 % with only the variances pooled. So the statistics hardly differ and either "
    "small correction alone recovers most of the gain: this under-trained model (49 %, test loss 1.39; the paper "
    "trains 640 rounds of E = 100) is sensitive to small changes of its statistics, and a gain of this size says "
    "little about a mismatch between them. The paper's point (the failure is not only the final statistics) "
    "still shows in FixBN's larger gain (68.8 %, +23 points over BN).")


SEC3_4_400_DIAGNOSIS = (
    "Measured (seed 0, 400 rounds, lr 0.02, 0.002 from round 200, 0.0002 from 300; python run.py -m "
    "experiment=fixbn/sec3_4_400_rounds_fmnist): ten times the rounds do not close the gap. With the averaged "
    "statistics the test accuracy swings within 27-56 % until the first lr step (best 56.5 % at round 100) and "
    "settles at 48-52 % after it, 49.3 % at the end; with the pooled statistics 55-58 % after round 200, 56.0 % at "
    "the end. After the last lr step the pooled statistics gain 6.0-7.3 points at every evaluation (rounds 320-400), "
    "against 8.7 at round 40 of the same run and the paper's 0.78, and neither quantity's trend over the last fifth "
    "is significant. The model is no better at 400 rounds than at 100, so the gap is not that of an under-trained "
    "model: in this reduced setting (5 clients, Dir(0.1), E = 10) the averaged statistics stay far from the pooled "
    "ones' accuracy.")
FIG1_V1 = Claim(
    "fixbn/fig1_fixbn_recovers",
    "§1 Fig. 1, Table 4: FixBN closes most of FedAvg + BN's gap at E = 1 (non-IID: FixBN 87.71 vs BN 45.96 %).",
    {"FedAvg FixBN": 87.71, "FedAvg BN": 45.96},
    E1 + "; FixBN freezes its statistics at round 150", "fixbn/table1_fmnist",
    {"FedAvg FixBN": table1("fedavg_fixbn"), "FedAvg BN": table1("fedavg_bn")},
    (Check("FedAvg FixBN", "FedAvg BN", "at_least", 14.0, "paper gap 41.75 points (Table 4); a third of it"),),
    diagnosis="Measured (3 seeds): FixBN's stage II is unstable in this reduced setting. Seed 1 diverged (NaN at "
              "round 156, six rounds after the freeze at T* = 150; counted at its chance accuracy), seed 0 reached "
              "73.3 % (BN 36.2 %), seed 2 47.8 % (BN 37.1 %) with its training loss rising after the freeze "
              "(1.07 at round 100, 1.66 at 200, 1.79 at 300). In 300 rounds at lr 0.2 without momentum the "
              "statistics frozen at T* are those of a network still moving fast (the paper freezes after 32,000 "
              "rounds), and the first lr decay coincides with T*. Not tried: a later T* or a longer stage I.",
    seeds=3, figure="results/fixbn/table1_fmnist/table1_fmnist.md", full_scale=FULL_E1)
"""FixBN Fig. 1 as declared until commit d51274b: T* = 50 %, on the first lr decay."""

FIG1_CLAIM = Claim(
    "fixbn/fig1_fixbn_recovers", FIG1_V1.statement, FIG1_V1.paper_numbers,
    E1 + "; FixBN freezes its statistics at round 180 (T* = 60 %, 30 rounds after the first lr decay)",
    "fixbn/fig1_late_freeze_fmnist",
    {"FedAvg FixBN": Quantity(FIG1_LATE, {METHOD: "fedavg_fixbn", "norm.freeze_fraction": 0.6}),
     "FedAvg BN": table1("fedavg_bn")},
    FIG1_V1.checks, seeds=3, figure=FIG1_V1.figure, full_scale=FULL_E1, diagnosis=(
        "Measured (3 seeds, T* = 60 %): no run diverges now (seed 1 did at T* = 50 %), but stage II is still "
        "unstable. FixBN ends at 69.9 / 40.7 / 34.1 % (BN 36.2 / 47.2 / 37.1 %), +8.0 points on the mean where 14 "
        "are asked; the training loss rises after the freeze in every seed (round 200 to 300: 0.75 → 1.10, 0.98 → "
        "1.82, 0.87 → 2.10) while the test accuracy climbs back from 50.3 / 20.0 / 17.2 % at round 200. The runs "
        "evaluated every 100 rounds (table1_fmnist's cadence before issue 57), so the rule's trend reads only rounds 200 and 300: "
        "the rise from the post-freeze dip is what it calls a drift toward passing."),
    superseded=(Superseded(FIG1_V1, "its T* = 50 % fell on the first lr decay (round 150 of 300), so FixBN froze the "
                                    "statistics of a network still moving at lr 0.2, while FixBN §4.2 freezes once the "
                                    "model is burned in, which it finds 'after the first learning rate decay'; T* = "
                                    "60 % follows 30 rounds at the decayed lr (declared before its runs; the BN runs "
                                    "do not depend on T*)."),))
"""FixBN Fig. 1 with T* after the first lr decay (``fixbn/fig1_late_freeze_fmnist``), declared before its runs."""

FIG1_600_CLAIM = Claim(
    "fixbn/fig1_fixbn_recovers", FIG1_V1.statement, FIG1_V1.paper_numbers,
    E1.replace("300 rounds", "600 rounds, evaluated every 10")
    + "; FixBN freezes its statistics at round 360 (T* = 60 %, 60 rounds after the first lr decay)",
    "fixbn/fig1_600_rounds_fmnist",
    {"FedAvg FixBN": Quantity(FIG1_600, {METHOD: "fedavg_fixbn_t60"}),
     "FedAvg BN": Quantity(FIG1_600, {METHOD: "fedavg_bn"})},
    FIG1_V1.checks, seeds=3, figure=FIG1_V1.figure, full_scale=FULL_E1,
    superseded=supersede(FIG1_CLAIM,
                         "its runs evaluated every 100 rounds, so the convergence rule read two points, a curve "
                         "recovering from its post-freeze dip; the same comparison at twice the length, evaluated "
                         "every 10 rounds, with both methods' runs new, decides it (declared before its runs)."))
"""FixBN Fig. 1 at 600 rounds (``fixbn/fig1_600_rounds_fmnist``), declared before its runs."""


SEC3_4_STATEMENT = ("§3.4, App. B.1: re-estimating the BN statistics on the pooled training data after FedAvg gains "
                    "under 1 point (Tiny-ImageNet, Dir(0.1): 44.09 → 44.87 %).")
SEC3_4_PAPER = {"pooled statistics": 44.87, "FedAvg statistics": 44.09}
SEC3_4_CHECK = (Check("pooled statistics", "FedAvg statistics", "at_most", 1.0,
                      "paper: gain 0.78 points, 'less than 1 %'"),)
SEC3_4_FULL = "`experiment=fixbn/sec3_4` (Tiny-ImageNet, 640 rounds of E = 100; needs the data and a GPU)"


def sec3_4_quantities(runs: str) -> dict[str, Quantity]:
    """The BN run's last evaluation under Dir(0.1) in ``runs``: with the pooled and with the averaged statistics."""
    return {"pooled statistics": fig3("dir0.1", "bn", "final:pooled_bn_test_acc", runs),
            "FedAvg statistics": fig3("dir0.1", "bn", "final:test_acc", runs)}


SEC3_4_V1 = Claim(
    "fixbn/sec3_4_pooled_statistics", SEC3_4_STATEMENT, SEC3_4_PAPER,
    E10 + ", Dirichlet α = 0.1, the BN run's last evaluation (metric pooled_bn), one seed", "fixbn/fig3_fmnist",
    sec3_4_quantities(FIG3), SEC3_4_CHECK, diagnosis=SEC3_4_DIAGNOSIS,
    seeds=1, figure="results/fixbn/fig3_fmnist/fig3_fmnist.md", full_scale=SEC3_4_FULL)
"""FixBN §3.4 as first declared (commit 2582162 and before): fig3_fmnist's 40-round BN run."""

SEC3_4_CLAIM = Claim(
    "fixbn/sec3_4_pooled_statistics", SEC3_4_STATEMENT, SEC3_4_PAPER,
    E10.replace("40 rounds", "400 rounds (lr steps at rounds 200 / 300)") + ", Dirichlet α = 0.1, the BN run's "
    "last evaluation (metric pooled_bn every 20 rounds), one seed", "fixbn/sec3_4_400_rounds_fmnist",
    sec3_4_quantities(SEC3_4_400), SEC3_4_CHECK, seeds=1, full_scale=SEC3_4_FULL, diagnosis=SEC3_4_400_DIAGNOSIS,
    superseded=(Superseded(SEC3_4_V1, "at 40 rounds the model is under-trained (45 % test accuracy, test loss 1.5) "
                                      "and both the pooled and the averaged statistics were still improving at the "
                                      "last evaluation; the same run ten times longer decides it (declared before "
                                      "its run)."),))
"""FixBN §3.4 at 400 rounds (``fixbn/sec3_4_400_rounds_fmnist``), declared before its run."""


FIG3_SHARDS_V1 = Claim(
    "fixbn/fig3_shards",
    "§5 Fig. 3, Table 5: under Shards FixBN beats BN and GN (CIFAR-10, E = 100: 76.56 vs 53.97 and 59.69 %).",
    {"FixBN": 76.56, "BN": 53.97, "GN": 59.69},
    E10 + ", Shards (2 of 10 classes per client), one seed", "fixbn/fig3_fmnist",
    {"FixBN": fig3("shards", "fixbn"), "BN": fig3("shards", "bn"), "GN": fig3("shards", "gn")},
    (Check("FixBN", "BN", "at_least", 7.5, "paper gap 22.6 points; a third of it"),
     Check("FixBN", "GN", "at_least", 5.6, "paper gap 16.9 points; a third of it")),
    seeds=1, figure="results/fixbn/fig3_fmnist/fig3_fmnist.md", full_scale=FULL_E100)

FIG3_DIRICHLET_V1 = Claim(
    "fixbn/fig3_dirichlet",
    "§5 Fig. 3: FixBN is at least as good as BN and GN at every non-IID degree (here Dir(0.1)).",
    {"FixBN": None, "BN": None, "GN": None},
    E10 + ", Dirichlet α = 0.1 (Hsu et al.), one seed", "fixbn/fig3_fmnist",
    {"FixBN": fig3("dir0.1", "fixbn"), "BN": fig3("dir0.1", "bn"), "GN": fig3("dir0.1", "gn")},
    (Check("FixBN", "BN", "at_least", -1.0, "paper: FixBN ≥ BN (no number at Dir(0.1)); 1 point of noise"),
     Check("FixBN", "GN", "at_least", -1.0, "paper: FixBN ≥ GN (no number at Dir(0.1)); 1 point of noise")),
    seeds=1, figure="results/fixbn/fig3_fmnist/fig3_fmnist.md", full_scale=FULL_E100)

TABLE_H_V1 = Claim(
    "fixbn/table_h_freeze_affine",
    "App. C.1 Table H: what matters is freezing the statistics; also freezing (γ, β) changes little "
    "(75.22 vs FixBN's 76.56 %), and both are far above BN (53.97 %).",
    {"FixBN + frozen (γ, β)": 75.22, "FixBN": 76.56, "BN": 53.97},
    E10 + ", Shards, one seed; FixBN and BN runs from fixbn/fig3_fmnist", "fixbn/variants_fmnist",
    {"FixBN + frozen (γ, β)": Quantity(VARIANTS, {VARIANT: "fix_both"}), "FixBN": fig3("shards", "fixbn"),
     "BN": fig3("shards", "bn")},
    (Check("FixBN + frozen (γ, β)", "FixBN", "within", 3.0, "paper gap 1.34 points"),
     Check("FixBN + frozen (γ, β)", "BN", "at_least", 7.0, "paper gap 21.25 points; a third of it")),
    seeds=1,
    controls=(Control("FixBN with every weight frozen in stage II (lr × 1e-9 from T*) in place of frozen (γ, β): if "
                      "it too is within the window, stage II moves the weights too little for freezing (γ, β) "
                      "to matter", {"FixBN + frozen (γ, β)": Quantity(VARIANTS, {VARIANT: "freeze_weights"})},
                      checks=(0,)),),
    figure="results/fixbn/fig3_fmnist/fig3_fmnist.md", full_scale="`experiment=fixbn/table_h`")

FIG_I_V1 = Claim(
    "fixbn/fig_i_maintained_momentum",
    "App. C.4 Fig. I: maintaining the local SGD momentum across rounds keeps FixBN at least as good.",
    {"FixBN, maintained momentum": None, "FixBN": None},
    E10 + ", Shards, one seed; the FixBN run from fixbn/fig3_fmnist", "fixbn/variants_fmnist",
    {"FixBN, maintained momentum": Quantity(VARIANTS, {VARIANT: "local_momentum"}),
     "FixBN": fig3("shards", "fixbn")},
    (Check("FixBN, maintained momentum", "FixBN", "at_least", -1.0,
           "paper: curves only, maintained momentum helps; 1 point of noise"),),
    seeds=1, full_scale="`experiment=fixbn/fig_i`")

FIG3_WHY = (
    "it rested on one seed, and one seed moves by more than its margin: fig3_fmnist's dir0.1/bn-seed0, replayed at "
    "the code since 2026-11-27, reads 42.6 % at round 20 (of 40) where its committed record reads 31.6 % (issue 57 §1), "
    "11 points, more than the margin of {margin}. The same checks and thresholds on seeds 0, 1 and 2 decide it (seed 0 "
    "re-run at that code, scripts/rerun_queue.txt; issue 57 §2; declared before the runs of seeds 1 and 2; the "
    "one-seed declaration at commit {commit} and since).")
"""Why the claims on fig3_fmnist's one-seed grid take 3 seeds."""


def three_seeds(old: Claim, margin: str, commit: str) -> Claim:
    """``old`` (one seed) on seeds 0, 1 and 2, ``old`` kept as superseded (``FIG3_WHY``)."""
    return replace(old, setting=old.setting.replace("one seed", "3 seeds (0, 1, 2)"), seeds=3,
                   superseded=supersede(old, FIG3_WHY.format(margin=margin, commit=commit)))


FIG3_SHARDS = three_seeds(FIG3_SHARDS_V1, "its check against GN (15.1 where 5.6 is asked: 9.5)", "fffed09")
FIG3_DIRICHLET = three_seeds(FIG3_DIRICHLET_V1, "its check against GN (6.0 where −1 is asked: 7.0)", "fffed09")
TABLE_H = three_seeds(TABLE_H_V1, "its window (|−0.04| where 3 is allowed: 2.96)", "1e3be48")
FIG_I = three_seeds(FIG_I_V1, "its check (2.0 where −1 is asked: 3.0)", "1e3be48")
"""FixBN Fig. 3, Table H and Fig. I on 3 seeds (``fixbn/fig3_fmnist``, ``fixbn/variants_fmnist``, seeds 0-2),
declared before the runs of seeds 1 and 2."""


CLAIMS: list[Claim] = [
    Claim(
        "fixbn/table1_bn_gap",
        "§3.2 Table 1: with communication every step (E = 1) and 2 classes per client, FedAvg + BN falls far below "
        "centralized BN (42.93 vs 89.30 %).",
        {"centralized BN": 89.30, "FedAvg BN": 42.93},
        E1, "fixbn/table1_fmnist",
        {"centralized BN": table1("central_bn"), "FedAvg BN": table1("fedavg_bn")},
        (Check("centralized BN", "FedAvg BN", "at_least", 15.0, "paper gap 46.4 points; a third of it"),),
        seeds=3, figure="results/fixbn/table1_fmnist/table1_fmnist.md", full_scale=FULL_E1),
    Claim(
        "fixbn/table1_gn_close",
        "§3.2 Table 1: in the same setting FedAvg + GN stays at its centralized accuracy (87.37 vs 87.46 %).",
        {"centralized GN": 87.46, "FedAvg GN": 87.37},
        E1, "fixbn/table1_fmnist",
        {"centralized GN": table1("central_gn"), "FedAvg GN": table1("fedavg_gn")},
        (Check("centralized GN", "FedAvg GN", "within", 3.0, "paper gap 0.09 points, sd up to 1.16"),),
        seeds=3, figure="results/fixbn/table1_fmnist/table1_fmnist.md", full_scale=FULL_E1),
    FIG1_600_CLAIM,
    Claim(
        "fixbn/fig2a_statistics_settle",
        "§4.1 Fig. 2a: the global BN statistics keep changing early in training and settle later (which motivates "
        "freezing them at T* = 50 %).",
        {"change, last evaluation": None, "change, first evaluation": None},
        E1 + "; metric bn_statistics_drift every 20 rounds, one seed", "fixbn/fig2ab_fmnist",
        {"change, last evaluation": Quantity(FIG2, {"norm.name": "bn"}, "final:bn_global_change", 1.0),
         "change, first evaluation": Quantity(FIG2, {"norm.name": "bn"}, "first:bn_global_change", 1.0)},
        (Check("change, last evaluation", "change, first evaluation", "ratio_at_most", 0.5,
               "paper: curves only; 'converge' read as at least halving"),),
        seeds=1, figure="results/fixbn/fig2ab_fmnist/fig2a_fmnist.md"),
    FIG3_SHARDS,
    FIG3_DIRICHLET,
    SEC3_4_CLAIM,
    TABLE_H,
    FIG_I,
]
