"""HBN's claims (hbn_hybrid_batch_normalisation.txt), reduced to Fashion-MNIST on a CPU.

Thresholds come from the paper's numbers (Tables 1, 2, 4, 6; §5; Fig. 5): where the paper shows a gap of G
points, the check asks for about a third of it; where it ranks HBN first, HBN must be at or above each other
norm; where it says a change costs almost nothing, at most 1 point; where it says a curve is insensitive, 3
points. Seeds: 3 (every gap here is under 6 points). The quantity is the best test accuracy over the
evaluations (the paper's ``best_acc``). The reduced setting, and why λ is matched to the run length:
``conf/experiment/hbn/base/fmnist.yaml``.
"""
from __future__ import annotations

from fedbn_bench.figures.claims.base import Check, Claim, Control, Quantity, Superseded, supersede

TABLE1 = "results/hbn/table1_fmnist/runs"
TABLE1_100 = "results/hbn/table1_100_rounds_fmnist/runs"
TABLE2 = "results/hbn/table2_fmnist/runs"
TABLE4 = "results/hbn/table4_fmnist/runs"
TABLE4_100 = "results/hbn/table4_100_rounds_fmnist/runs"
TABLE1_PHI01_100 = "results/hbn/table1_phi01_100_rounds_fmnist/runs"
TABLE2_100 = "results/hbn/table2_100_rounds_fmnist/runs"
TABLE6_100 = "results/hbn/table6_100_rounds_fmnist/runs"
TABLE6 = "results/hbn/table6_fmnist/runs"
SEC5 = "results/hbn/sec5_fmnist/runs"
FIG5 = "results/hbn/fig5_fmnist/runs"
FIG5_K100 = "results/hbn/fig5_k100_fmnist/runs"
SEC5_10 = "results/hbn/sec5_10_evals_fmnist/runs"
FIG5_K100_10 = "results/hbn/fig5_k100_10_evals_fmnist/runs"
ROW = "+experiment/hbn/fmnist_row"
BEST = "summary:best_test_acc"


def setting(rounds: int, eval_every: int, lam: float) -> str:
    """The shared reduced setting (``conf/experiment/hbn/base/fmnist.yaml``) at a run length and its matched λ."""
    return (f"Fashion-MNIST, Simple-CNN, FedAvg, K = 100 clients with 10 a round, B = 4, E = 1, per-class "
            f"Dirichlet(φ), {rounds} rounds evaluated every {eval_every}, Table 8's per-method lr, HBN's λ = {lam} "
            f"(matched to {rounds} rounds)")


SETTING = setting(30, 5, 0.15)
FULL_C10 = "`experiment=hbn/{}` (CIFAR-10, 500 rounds; needs CIFAR-10 and a GPU)"
NORMS = {"BN": "bn", "GN": "gn", "LN": "ln", "FedFN": "fedfn", "FixBN": "fixbn", "FBN": "fbn", "HBN": "hbn"}
PAPER_TABLE1 = {
    0.1: {"BN": 69.61, "GN": 68.76, "LN": 66.22, "FedFN": 67.96, "FixBN": 70.36, "FBN": 66.13, "HBN": 71.56},
    0.6: {"BN": 75.82, "GN": 75.74, "LN": 74.08, "FedFN": 75.51, "FixBN": 77.34, "FBN": 73.91, "HBN": 78.22},
}


def row(runs: str, name: str, alpha: float = 0.6, **where) -> Quantity:
    return Quantity(runs, {ROW: name, "alpha": alpha, **where}, metric=BEST)


TABLE1_PHI01_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): HBN is last, 0.1 to 2.1 points below the other six norms, and it trails at "
    "every evaluated round (mean test accuracy at round 5 / 20 / 30: HBN 58.0 / 81.1 / 77.6, BN 60.6 / 82.6 / "
    "81.6). The seven norms lie within 2 points of each other (81.1 to 83.1), as in the paper (66.1 to 71.6), and "
    "BN does not fall behind GN or LN here, so the failure HBN corrects is not visible at this length. Accuracy "
    "swings by up to 6 points between evaluations with the φ = 0.1 client draw: every norm's mean curve peaks at "
    "round 20 and drops at 25. So a best of six evaluations in 30 rounds is a noisy stand-in for the paper's best "
    "over 500 rounds. Not yet separated: the λ = 0.15 deviation "
    "(the global statistics move fast, so training mixes batch statistics with last round's), and the paper "
    "variant against the authors' code. In the issue's first look (Fashion-MNIST as CIFAR batches, α = 0.1, "
    "40 rounds, norm.variant=code) HBN led BN in both codes. Measured since (results/hbn/phi01_cause_fmnist, "
    "the same seeds and client draws, λ = 0.15): with norm.variant=code HBN's best is 82.3 / 84.8 / 84.0 "
    "(mean 83.7) against BN's 82.5 / 82.7 / 83.5 and the paper variant's 81.3 / 81.2 / 80.8, so the paired "
    "deficit comes with variant=paper at the same λ (code − BN −0.2 / +2.1 / +0.5 per seed; code − paper +1.0 / "
    "+3.6 / +3.2). In those runs the learned factor never moves: w = sigmoid(α) stays within 0.497-0.501 in "
    "every layer and evaluation (metric hybrid_factor), and within 0.4997-0.5007 with variant=paper (seed 0: "
    "best 81.6, 81.3 in table1_fmnist), so HBN acts as a fixed 1:1 mix of batch and global statistics here; which of the variants' other differences (statistics pass, record, count) makes the "
    "deficit is not separated yet. Smaller λ (python run.py -m experiment=hbn/phi01_cause_fmnist "
    "norm.lam=0.05,0.01 seed=0 resume=auto hydra/launcher=joblib hydra.launcher.n_jobs=2 engine.threads=1, then "
    "+experiment/hbn/fmnist_row=hbn norm.variant=paper norm.lam=0.05,0.01 seed=1,2): variant=paper's best is "
    "83.9 / 81.2 / 80.9 at λ = 0.05 (mean 82.0; − BN +1.4 / −1.5 / −2.6 per seed) and 81.1 / 79.4 / 78.6 at "
    "λ = 0.01 (mean 79.7; − BN −1.4 / −3.3 / −4.9), against 81.1 at 0.15; variant=code (seed 0) 83.5 at 0.05 and "
    "83.7 at 0.01. So the deficit is not the λ = 0.15 deviation: it stays, and is largest, at the paper's own "
    "λ = 0.01. It comes with variant=paper at every λ, and shows most at the end of the runs: at round 30 the "
    "paper variant is at 74.4 / 78.2 / 67.7 (λ = 0.01) and 76.0 / 78.8 / 77.5 (λ = 0.05), the code variant at "
    "81.1 to 83.0 in every run. w stays within 0.4969-0.5013 in all of them. Next runs: the variants' "
    "differences (statistics pass, record, count) one at a time, and the same rows at 100 rounds.")


TABLE1_PHI06_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): HBN is third (87.4 ± 0.3), 0.2 below BN (87.6 ± 0.3) and 0.4 below FixBN "
    "(87.7 ± 0.4), both inside one seed's sd, and 0.2 to 0.7 above the other four. The seven norms lie within "
    "1.1 points (86.6 to 87.7); the paper's spread is 4.3 (73.9 to 78.2). HBN leads BN early (mean test "
    "accuracy at round 5 / 10 / 20 / 30: HBN 78.1 / 83.3 / 85.7 / 87.4, BN 71.4 / 81.7 / 86.2 / 87.6), and "
    "every norm's best is its last evaluation: at 30 rounds the runs are still learning, where the paper takes "
    "the best over 500. Fashion-MNIST at φ = 0.6 leaves BN little to lose. Run since: BN, FixBN and HBN at 100 "
    "rounds (λ = 0.05, matched; claim hbn/table1_phi0.6_100_rounds), where all three converge by the rule and tie "
    "(HBN 90.1 ± 0.3, BN 90.1 ± 0.4, FixBN 89.9 ± 0.2), so longer runs do not give HBN its lead here.")


TABLE1_100_DIAGNOSIS = (
    "Measured (3 seeds, 100 rounds, every quantity converged by the rule): HBN 90.1 ± 0.3, BN 90.1 ± 0.4, FixBN "
    "89.9 ± 0.2; per seed HBN − BN is −0.16 / +0.09 / +0.04 and HBN − FixBN +0.27 / +0.33 / +0.15, so HBN is first "
    "by a margin far below the 0.8 asked (the paper's 2.4 points). With the same client draws the three norms peak "
    "at the same evaluation in each seed (round 100 / 80 / 90), and their mean curves are within 0.3 points of "
    "each other from round 60 on (BN 89.1 → 89.4, HBN 88.8 → 89.4); only at round 10 does one lead (FixBN 84.4 "
    "against BN 82.0 and HBN 81.7). HBN's learned factor does not move: w = sigmoid(α) stays within "
    "0.4994-0.5014 in every layer, seed and evaluation (sd over the clients at most 0.0016; metric "
    "hybrid_factor), so HBN runs as a fixed half-and-half mix of batch and global statistics; each client trains "
    "in about 10 of the 100 rounds. And BN loses nothing here that FixBN recovers: FixBN, 1.5 points above BN in "
    "the paper, is 0.2 below it. On Fashion-MNIST at φ = 0.6 there is no BN deficit for HBN to correct; the "
    "paper's gap is on CIFAR-10 at 500 rounds.")


TABLE6_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): 2 of the 5 checks pass. Only global statistics is clearly the worst variant "
    "(85.2 ± 0.7, 2.2 below full HBN), as in the paper, and weighted average sits just below full HBN (87.2, "
    "gap 0.18 against a threshold of 0.11). The other three fail: only batch statistics ends highest (87.7 ± 0.3, "
    "0.4 above full HBN), the fixed 1:1 ratio ties it (87.4 ± 0.4), and moving average is 0.6 below it where the "
    "threshold asks for 2.0. The curves show the same picture as Table 1 at φ = 0.6: only batch statistics, "
    "which is BN's rule, trails early (mean test accuracy at round 5 / 10: 73.6 / 82.6, full HBN 78.1 / 83.3) "
    "and catches up by round 20, and every variant's best is its last evaluation, so at 30 rounds the runs are "
    "still learning where the paper takes the best over 500. On Fashion-MNIST at φ = 0.6 BN's batch statistics "
    "lose nothing by the end, so the global statistics' benefit shows only in the early rounds. Next runs: the "
    "same rows at 100 rounds with λ matched, as for Table 1.")


TABLE2_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): 1 of the 3 checks passes (HBN's change from B = 32 to B = 2 stays below the "
    "paper's midpoint), but not for the paper's reason: both norms gain from the smaller batch instead of losing. "
    "Best test accuracy: BN 86.1 ± 0.9 at B = 32 and 87.5 ± 0.5 at B = 2, HBN 85.6 ± 0.7 and 87.3 ± 0.6, so at "
    "B = 2 HBN is 0.2 below BN, where the paper has it 4.97 above. With one epoch a round and lr scaled linearly "
    "with B, a B = 2 client takes 16 times the steps of a B = 32 client (300 against 19 for 600 samples), and the "
    "B = 32 runs are behind at every evaluation (BN mean test accuracy at round 5 / 10 / 20: 65.5 / 76.6 / 85.0 at "
    "B = 32, 76.3 / 83.0 / 86.4 at B = 2), so at 30 rounds the batch size's effect is confounded with the "
    "amount of training; the paper's 1000 rounds on CIFAR-100 let both converge. Two-sample batch statistics "
    "do not hurt BN here: on Fashion-MNIST at φ = 0.6 BN keeps up with HBN at B = 4 too (hbn/table1_phi0.6). "
    "Next runs: the same cells at a matched number of local steps or until the B = 32 runs stop improving.")


TABLE2_100_DIAGNOSIS = (
    "Measured (3 seeds, 100 rounds, the best of 10 evaluations): BN 89.61 / 89.44 / 89.87 at B = 32 and 90.43 / "
    "89.84 / 89.58 at B = 2, HBN 89.90 / 89.75 / 89.83 and 90.33 / 90.24 / 89.48. Neither norm loses from the "
    "smaller batch: BN gains 0.31 (its check asks for a loss of 1.91), HBN 0.19, and at B = 2 HBN is 0.07 above "
    "BN (−0.10 / +0.40 / −0.10 per seed) where 1.66 is asked; HBN's check passes only because HBN loses nothing. "
    "The 30-round confound (a B = 32 client takes a sixteenth of a B = 2 client's steps) has shrunk: B = 32 is "
    "behind early (BN mean test accuracy at round 10 / 30 / 50: 76.9 / 85.1 / 86.9 against 82.6 / 87.7 / 88.3 at "
    "B = 2) and its bests end within 0.3 points of B = 2's. The B = 32 curves still rise a little at the end (mean "
    "over rounds 90-100 against 70-80: BN 88.5 against 88.0, HBN 88.6 against 87.9) while the B = 2 curves are "
    "flat (BN 89.1 against 89.4, HBN 89.3 against 89.4); the drift toward passing BN's check, +1.40 ± 0.75, is not "
    "significant, and −0.31 + 1.40 would still be below the 1.91 asked. Two-sample batch statistics do not hurt BN "
    "here: at B = 2 its training loss at round 100 is lower than at B = 32 (0.178 against 0.203) and its test loss "
    "too (0.294 against 0.317); these runs log no hybrid_factor. All 12 runs' bests lie within 89.44-90.43 on "
    "Fashion-MNIST (the paper's CIFAR-100 cells lie at 43.89-51.05); whether this ceiling hides the loss the "
    "paper finds at B = 2 is not tested.")


FIG5_LOW_C_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): λ = 0.15 gives 75.4 ± 3.1 and λ = 1 gives 75.6 ± 0.9; per seed the small λ "
    "is 1.9 and 0.4 points above and 3.1 below. With 2 of 20 clients a round under Dirichlet(0.6), each round's "
    "model leans towards those two clients' classes and test accuracy swings by 13 to 19 points between "
    "consecutive evaluations in every run (mean of the small-λ runs at round 25 / 30: 74.4 / 66.3, λ = 1: "
    "75.5 / 65.9), so the best of six evaluations is decided by which clients came last, a noise larger than "
    "the effect λ has on the statistics. The runs are also far from converged (19 local steps of 2 clients a "
    "round; best 72 to 79 %). Next runs: more seeds and rounds at C = 0.1, or the mean over the last "
    "evaluations instead of the best.")


def fig5_low_c(runs: str, preset: str, clients: str, per_round: int, *superseded: Superseded,
               diagnosis: str = "") -> Claim:
    """HBN Fig. 5 at C = 0.1: the small λ against λ = 1 with ``per_round`` clients a round (``clients``: K)."""
    return Claim(
        "hbn/fig5_small_lambda_low_c",
        "§4.4 Fig. 5 (CIFAR-10, φ = 0.6, B = 32): at a low client ratio (C = 0.1) a small λ helps.",
        {"λ small, C = 0.1": None, "λ = 1, C = 0.1": None},
        f"as the Table 1 setting {clients}, C = 0.1 ({per_round} a round), B = 32, lr 0.08, 19 local steps a round, "
        "φ = 0.6; small λ = 0.15 (the paper's 0.01 matched to 30 rounds)", preset,
        {"λ small, C = 0.1": row(runs, "hbn_b32", **{"clients_per_round": per_round, "norm.lam": 0.15}),
         "λ = 1, C = 0.1": row(runs, "hbn_b32", **{"clients_per_round": per_round, "norm.lam": 1})},
        (Check("λ small, C = 0.1", "λ = 1, C = 0.1", "at_least", 0.0, "paper: curves only; small λ above λ = 1"),),
        seeds=3, diagnosis=diagnosis, full_scale=FULL_C10.format("fig5"), superseded=superseded)


FIG5_LOW_C = fig5_low_c(
    FIG5_K100, "hbn/fig5_k100_fmnist", "(K = 100, as in the paper)", 10,
    Superseded(fig5_low_c(FIG5, "hbn/fig5_fmnist", "but K = 20 clients", 2),
               "its setting was not the paper's: with K = 20 clients C = 0.1 trains 2 clients a round where the "
               "paper's K = 100 trains 10 (issue 45; declared at commit bebfdc9 and before). " + FIG5_LOW_C_DIAGNOSIS),
    diagnosis="Measured (3 seeds, 30 rounds, the same client draws for both λ): the small λ is ahead in every seed, "
              "by 1.5, 3.3 and 1.2 points (best 85.9 / 85.5 / 85.0 against 84.4 / 82.2 / 83.8). With 10 clients a "
              "round the largest drop between consecutive evaluations is 5.2 points (it was 13-19 with 2 a round "
              "at K = 20). Both are still improving at round 30, as every 30-round run of this setting.")
"""HBN Fig. 5 at C = 0.1 with the paper's K = 100 (``hbn/fig5_k100_fmnist``), declared before its runs."""

WHY_TEN_EVALUATIONS = (
    "evaluated every 5 of its 30 rounds, each run had six evaluations, too few for the rule to read a trend (it read "
    "'holds (too few evaluations to tell)'); the same check and threshold on the same setting evaluated every 3 "
    "rounds (ten evaluations) decide it (issue 57 §2; declared before their runs). Evaluating does not change "
    "training (round 6 equal evaluated every 2 and every 3 rounds), so only the best's resolution changes: the best "
    "of ten evaluations rather than of six")
"""Why the HBN claims evaluated six times are redeclared on runs evaluated ten times."""

FIG5_LOW_C_10 = fig5_low_c(
    FIG5_K100_10, "hbn/fig5_k100_10_evals_fmnist", "(K = 100, as in the paper), evaluated every 3 rounds", 10,
    *supersede(FIG5_LOW_C, WHY_TEN_EVALUATIONS + "; the 6-evaluation declaration at commit 32b5a6f and since. What "
               "its runs showed: " + FIG5_LOW_C.diagnosis))
"""HBN Fig. 5 at C = 0.1 and K = 100 on runs evaluated every 3 rounds (``hbn/fig5_k100_10_evals_fmnist``)."""

SEC5_V1 = Claim(
    "hbn/sec5_random_samples",
    "§5: computing HBN's statistics from 128 random samples per client instead of all local data costs only "
    "0.13 points.",
    {"all samples": None, "128 random samples": None},
    f"{SETTING}, φ = 0.6; all samples = table1_fmnist's φ = 0.6 HBN runs (each client holds about 600)",
    "hbn/sec5_fmnist",
    {"all samples": row(TABLE1, "hbn"), "128 random samples": row(SEC5, "hbn", **{"norm.stats_samples": 128})},
    (Check("all samples", "128 random samples", "at_most", 1.0,
           "paper: a 0.13-point cost; at most 1 point (module docstring)"),),
    seeds=3, full_scale=FULL_C10.format("sec5"))
"""HBN §5 on runs evaluated every 5 rounds, as declared until issue 57."""

SEC5_CLAIM = Claim(
    SEC5_V1.id, SEC5_V1.statement, SEC5_V1.paper_numbers,
    f"{setting(30, 3, 0.15)}, φ = 0.6; all samples = norm.stats_samples 0 (the paper's value, each client holds about "
    "600), beside the 128-sample runs", "hbn/sec5_10_evals_fmnist",
    {"all samples": row(SEC5_10, "hbn", **{"norm.stats_samples": 0}),
     "128 random samples": row(SEC5_10, "hbn", **{"norm.stats_samples": 128})},
    SEC5_V1.checks, seeds=3, full_scale=SEC5_V1.full_scale,
    superseded=supersede(SEC5_V1, WHY_TEN_EVALUATIONS + "; the all-samples runs are made beside the 128-sample ones "
                         "at the same cadence (the 6-evaluation declaration at commit 047ea45 and since)"))
"""HBN §5 on runs evaluated every 3 rounds (``hbn/sec5_10_evals_fmnist``), declared before its runs."""


def table1(phi: float, diagnosis: str = "") -> Claim:
    paper = PAPER_TABLE1[phi]
    gap = paper["HBN"] - paper["BN"]
    checks = tuple(Check("HBN", name, "at_least", 0.0, f"paper: HBN first ({paper['HBN']} vs {name} {paper[name]})")
                   for name in NORMS if name != "HBN")
    return Claim(
        f"hbn/table1_phi{phi}",
        f"§4.2 Table 1 (CIFAR-10, φ = {phi}): FedAvg + HBN has the best accuracy of the seven norms "
        f"({paper['HBN']}), {gap:.2f} points above BN ({paper['BN']}).",
        paper, f"{SETTING}, φ = {phi}", "hbn/table1_fmnist",
        {name: row(TABLE1, option, phi) for name, option in NORMS.items()},
        checks + (Check("HBN", "BN", "at_least", round(gap / 3, 2), f"paper gap {gap:.2f} points; a third of it"),),
        seeds=3, diagnosis=diagnosis, full_scale=FULL_C10.format("table1"),
        decided_by=DECIDED_TABLE1[phi])


TABLE1_PHI01_100_DIAGNOSIS = (
    "Measured (3 seeds, 100 rounds, the best of 10 evaluations): HBN 87.7 / 88.5 / 87.6 against BN 87.7 / 88.7 / "
    "87.1 and FixBN 88.3 / 88.8 / 88.2 (HBN − BN 0.0 / −0.2 / +0.5 per seed, where 0.65 is asked; HBN − FixBN "
    "−0.6 / −0.3 / −0.6). The mean curves end within 0.4 points at round 100 (HBN 87.7, BN 87.6, FixBN 88.0) and "
    "HBN trails them mid-run (round 30 / 60: 77.7 / 79.1 against BN's 81.4 / 82.1), as in the 30-round runs "
    "(hbn/table1_phi0.1); by round 100 that deficit is gone, but no lead appears. The learned factor hardly "
    "moves: the channel mean of w = sigmoid(α) stays within 0.4996-0.5009 in every layer, seed and evaluation, "
    "single channels within 0.046 of 0.5 (sd over a layer's channels at most 0.0046), so HBN acts as a fixed 1:1 "
    "mix of batch and global statistics, the Table 6 'fixed' row. HBN with one statistics exchange a round (Alg. "
    "1's reading) ends lower, 85.6 / 87.7 / 84.8, and dips deepest mid-run (mean 62.4 at round 30), so the "
    "per-layer exchange of variant=paper is not what keeps HBN from leading. All four bests still rise, by 4.8 to "
    "15.5 points over rounds 60-100 (the trends above), but the differences the checks read do not drift "
    "significantly toward passing.")


DECIDED_TABLE1 = {
    0.6: "BN, FixBN and HBN at 100 rounds, claim hbn/table1_phi0.6_100_rounds (`experiment=hbn/table1_100_rounds_fmnist`, "
         "9 runs, about 100 CPU-minutes; `scripts/gpu_claims.sh` on a GPU)",
    0.1: "BN, FixBN and HBN at 100 rounds and φ = 0.1, beside HBN with one statistics exchange a round, claim "
         "hbn/table1_phi0.1_100_rounds (`experiment=hbn/table1_phi01_100_rounds_fmnist`, 12 runs, about 3 CPU-hours); "
         "the cause of the paired deficit: `experiment=hbn/phi01_cause_fmnist`"}
"""The runs that would decide Table 1 where the 30-round runs were still improving."""


WHY_TABLE1_100 = {
    0.6: "at 30 rounds every norm's best was its last evaluation, the runs still learning, and HBN − BN failed by "
         "0.2, inside one seed's sd; BN, FixBN and HBN at 100 rounds with λ matched to 100 rounds decide the column "
         "(this declaration, commit 07181f2, before its runs). Kept here since issue 57 §2, so that the column counts "
         "once: the 30-round checks against GN, LN, FedFN and FBN were not re-run at 100 rounds and stand only here. "
         "What the 30-round runs showed: " + TABLE1_PHI06_DIAGNOSIS,
    0.1: "at 30 rounds the best of six evaluations is a noisy stand-in for the paper's best over 500 rounds (accuracy "
         "swung by up to 6 points between evaluations with the φ = 0.1 client draw); BN, FixBN and HBN (and HBN with one "
         "statistics exchange a round) "
         "at 100 rounds with λ matched to 100 rounds decide the column (this declaration, commit dd3c859, before its "
         "runs). Kept here since issue 57 §2, so that the column counts once: the 30-round checks against GN, LN, FedFN "
         "and FBN were not re-run at 100 rounds and stand only here. What the 30-round runs showed: "
         + TABLE1_PHI01_DIAGNOSIS}
"""Why the 100-round Table 1 declarations replace the 30-round ones (each column's 30-round claim is shown inside its
100-round section, not beside it)."""


def table1_100_rounds(phi: float = 0.6) -> Claim:
    """Table 1 at ``phi`` for BN, FixBN and HBN, run 100 rounds (the 30-round diagnosis's next run; at φ = 0.6 the
    three norms tied at 30 rounds). Same checks as ``table1`` restricted to BN and FixBN; the 30-round ``table1``
    (seven norms) kept as superseded. At φ = 0.1 the decider also runs HBN with one statistics exchange a round
    (``stats_forward: global``), a quantity no check reads."""
    paper = {name: PAPER_TABLE1[phi][name] for name in ("BN", "FixBN", "HBN")}
    gap = paper["HBN"] - paper["BN"]
    runs, preset = (TABLE1_100, "hbn/table1_100_rounds_fmnist") if phi == 0.6 else (
        TABLE1_PHI01_100, "hbn/table1_phi01_100_rounds_fmnist")
    quantities = {"BN": row(runs, "bn", phi), "FixBN": row(runs, "fixbn", phi), "HBN": row(runs, "hbn_100_rounds", phi)}
    if phi == 0.1:
        quantities["HBN, one statistics exchange a round"] = row(runs, "hbn_one_exchange_100_rounds", phi)
    return Claim(
        f"hbn/table1_phi{phi}_100_rounds",
        f"§4.2 Table 1 (CIFAR-10, φ = {phi}): FedAvg + HBN ({paper['HBN']}) is above FixBN ({paper['FixBN']}) and "
        f"{gap:.2f} points above BN ({paper['BN']}).",
        paper, f"{setting(100, 10, 0.05)}, φ = {phi}", preset, quantities,
        (Check("HBN", "FixBN", "at_least", 0.0, f"paper: HBN first ({paper['HBN']} vs FixBN {paper['FixBN']})"),
         Check("HBN", "BN", "at_least", round(gap / 3, 2), f"paper gap {gap:.2f} points; a third of it")),
        seeds=3, diagnosis=TABLE1_100_DIAGNOSIS if phi == 0.6 else TABLE1_PHI01_100_DIAGNOSIS,
        full_scale=FULL_C10.format("table1"),
        superseded=supersede(table1(phi, TABLE1_PHI06_DIAGNOSIS if phi == 0.6 else TABLE1_PHI01_DIAGNOSIS),
                             WHY_TABLE1_100[phi]))


TABLE4_SAME_AS_TABLE1 = (
    "every run's best is its last evaluation: at 30 rounds they are still learning, where the paper takes the "
    "best over 500, and on Fashion-MNIST at φ = 0.6 BN's batch statistics lose nothing by then (hbn/table1_phi0.6: "
    "FedAvg + HBN 87.4, FedAvg + BN 87.6).")
TABLE4_FEDPROX_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): FedProx + HBN 87.3 ± 0.1 against FedProx + BN 87.4 ± 0.3. HBN leads early "
    "(mean test accuracy at round 5 / 10: 77.4 / 82.8 against 73.0 / 82.1) and BN catches up by round 15; "
    + TABLE4_SAME_AS_TABLE1)
TABLE4_SCAFFOLD_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): SCAFFOLD + HBN 87.3 ± 0.2 against SCAFFOLD + BN 87.6 ± 0.3. HBN leads early "
    "(round 5 / 10: 78.0 / 82.2 against 74.1 / 81.0) and BN is ahead from round 15; " + TABLE4_SAME_AS_TABLE1)
TABLE4_FEDADAM_DIAGNOSIS = (
    "Measured (3 seeds, 30 rounds): FedAdam + HBN 87.0 ± 0.1 against FedAdam + GN 86.2 ± 0.7, a gain of 0.73 in "
    "the paper's direction, 0.1 short of the threshold (a third of the paper's 2.50). HBN ends above GN, as BN "
    "and HBN end above GN under FedAvg (hbn/table1_phi0.6: GN 86.6); the mean curves cross twice (round 5 / 10 / 20 "
    "/ 30: HBN 76.0 / 76.0 / 84.7 / 87.0, GN 74.6 / 79.9 / 84.8 / 86.2), and " + TABLE4_SAME_AS_TABLE1)
TABLE4_FEDSAM_DIAGNOSIS = (
    "Holds narrowly: FedSAM + HBN 86.7 ± 0.8 against FedSAM + BN 86.0 ± 1.1, a gain of 0.68 against a threshold "
    "of 0.67, inside one seed's sd. HBN is ahead at every evaluated round (mean test accuracy at round 5 / 10 / 20 "
    "/ 30: 75.7 / 80.8 / 84.9 / 86.7 against 63.5 / 77.1 / 83.6 / 86.0), the largest early lead of the four "
    "algorithms; as for the others, every run's best is its last evaluation, so at 30 rounds both are still "
    "learning.")


def table4(algorithm: str, own: str, paper_own: float, paper_hbn: float, diagnosis: str = "",
           rounds: int = 30, superseded: tuple[Superseded, ...] = ()) -> Claim:
    """HBN in place of ``algorithm``'s own norm ``own``, a third of the paper's gain asked; at 30 rounds
    (``hbn/table4_fmnist``) or 100 (``hbn/table4_100_rounds_fmnist``, λ matched to 100 rounds)."""
    gain = paper_hbn - paper_own
    label = {"fedprox": "FedProx", "scaffold": "SCAFFOLD", "fedadam": "FedAdam", "fedsam": "FedSAM"}[algorithm]
    preset, runs, hbn, length = (("hbn/table4_fmnist", TABLE4, f"{algorithm}_hbn", SETTING) if rounds == 30 else
                                 ("hbn/table4_100_rounds_fmnist", TABLE4_100, f"{algorithm}_hbn_100_rounds",
                                  setting(100, 10, 0.05)))
    return Claim(
        f"hbn/table4_{algorithm}",
        f"§4.3 Table 4 (CIFAR-10, φ = 0.6): HBN in place of {label}'s own normalisation ({own.upper()}) improves it "
        f"({paper_own} → {paper_hbn}).",
        {f"{label} + {own.upper()}": paper_own, f"{label} + HBN": paper_hbn},
        f"{length}, φ = 0.6; algorithm settings of conf/experiment/hbn/table4_method (the paper gives none)", preset,
        {f"{label} + {own.upper()}": row(runs, f"{algorithm}_{own}"), f"{label} + HBN": row(runs, hbn)},
        (Check(f"{label} + HBN", f"{label} + {own.upper()}", "at_least", round(gain / 3, 2),
               f"paper gain {gain:.2f} points; a third of it"),),
        seeds=3, diagnosis=diagnosis, full_scale=FULL_C10.format("table4"), superseded=superseded)


WHY_100 = ("at 30 rounds a failing check read a quantity still improving at its last evaluation; the same rows at "
           "100 rounds with λ matched to 100 rounds (as hbn/table1_phi0.6_100_rounds) decide it (declared before "
           "their runs; the 30-round declaration at commit 2582162 and before).")


WHY_TABLE6_100 = (
    "at 30 rounds a failing check read a quantity still improving at its last evaluation; the same rows at 100 rounds "
    "with λ matched to 100 rounds (as hbn/table1_phi0.6_100_rounds) decide it. Declared at commit 375cb6a before the "
    "runs of its five ablated rows but after the full-HBN runs it reuses (table1_100_rounds_fmnist's, committed at "
    "acee478), so each of its checks reads as declared after its runs; the 30-round declaration at commit 2582162 "
    "and before.")


TABLE4_100_CEILING = (
    "All 18 runs' bests lie within 89.50-90.69 on Fashion-MNIST (the paper's CIFAR-10 rows lie at 75.67-78.65); "
    "whether this ceiling compresses the gains the paper finds is not tested.")
TABLE4_100_NO_FACTOR = "these runs log no hybrid_factor, so HBN's learned mix is not measured here. "
TABLE4_100_DIAGNOSIS = {
    "fedprox": "Measured (3 seeds, 100 rounds, the best of 10 evaluations): FedProx + HBN 90.43 / 90.16 / 89.71 "
               "(mean 90.10) against FedProx + BN 90.25 / 89.99 / 89.58 (mean 89.94), a gain of +0.18 / +0.17 / "
               "+0.13 per seed, mean +0.16, 0.63 short of the 0.79 asked; both reach their best at the same rounds "
               "(100 / 80 / 90). The curves are flat at the end: mean test accuracy over the evaluations at rounds "
               "90-100 against 70-80 is 89.2 against 89.3 for HBN and 89.2 against 89.4 for BN (seed 1 falls by "
               "1.7 and 1.5 points), and HBN's lead over those windows is +0.07 against −0.11. HBN trails mid-run "
               "(mean test accuracy at round 20 / 40 / 60: 84.8 / 87.5 / 88.6 against 86.0 / 88.3 / 89.2) and is "
               "level from round 80 (89.5 against 89.4). Its training loss is lower at every evaluation in every "
               "seed (mean 0.553 against 0.686 at round 10, 0.176 against 0.185 at round 100) while its mean test "
               "loss is higher at every evaluation (0.299 against 0.291 at round 100, higher in every seed); "
               + TABLE4_100_NO_FACTOR + TABLE4_100_CEILING,
    "scaffold": "Measured (3 seeds, 100 rounds, the best of 10 evaluations): SCAFFOLD + HBN 90.07 / 89.96 / 89.93 "
                "(mean 89.99) against SCAFFOLD + BN 90.00 / 89.92 / 89.60 (mean 89.84), a gain of +0.07 / +0.04 / "
                "+0.33 per seed, mean +0.15, 0.19 short of the 0.34 asked; at round 100 alone it is −0.26 / −0.01 / "
                "+0.33. Both curves still rise a little at the end, together: mean test accuracy over the "
                "evaluations at rounds 90-100 against 70-80 is 89.8 against 89.5 for HBN and 89.7 against 89.5 for "
                "BN, and HBN's lead over those windows is +0.10 against +0.01. HBN is ahead at round 10 (81.1 "
                "against 80.5), behind from round 20 to 60 (round 20 / 30 / 60: 84.5 / 86.9 / 88.8 against 85.7 / "
                "87.6 / 89.1) and within 0.2 points from round 70. Its training loss is lower at every evaluation "
                "in every seed but one (seed 2 at round 30; mean 0.579 against 0.717 at round 10, 0.249 against "
                "0.261 at round 100), and its mean test loss, higher than BN's at rounds 10-40, is lower from round "
                "70 (0.273 against 0.280 at round 100); " + TABLE4_100_NO_FACTOR + TABLE4_100_CEILING,
    "fedadam": "Measured (3 seeds, 100 rounds, the best of 10 evaluations): FedAdam + HBN 90.62 / 90.69 / 90.06 "
               "(mean 90.46) against FedAdam + GN 90.14 / 90.12 / 89.50 (mean 89.92), a gain of +0.48 / +0.57 / "
               "+0.56 per seed, mean +0.54, 0.29 short of the 0.83 asked; at round 100 alone it is +0.95 / +0.57 / "
               "+0.89 (mean +0.80), still under. Both curves still rise at the end: mean test accuracy over the "
               "evaluations at rounds 90-100 against 70-80 is 90.2 against 89.7 for HBN and 89.7 against 89.2 for "
               "GN, and HBN's lead over those windows is +0.43 against +0.50, not widening. HBN starts slower "
               "(round 10: 71.9 against 79.8; seed 2 at 61.6 with test loss 1.05 against 0.56) and is ahead in "
               "every seed at every evaluation from round 40 to 80 and at round 100. Its training loss is lower "
               "at every evaluation in every seed (mean 0.655 against 0.673 at round 10, 0.157 against 0.165 at "
               "round 100); " + TABLE4_100_NO_FACTOR + TABLE4_100_CEILING,
}
"""What the 100-round Table 4 runs (``hbn/table4_100_rounds_fmnist``) show, by algorithm (FedSAM's not run yet)."""


WHY_FEDSAM_100 = (
    "it held by 0.01 at 30 rounds (a gain of 0.68 against the 0.67 asked, inside one seed's sd) with every run's best "
    "its last evaluation, while its siblings FedProx, SCAFFOLD and FedAdam, failing there, were re-run at 100 rounds, "
    "where each fails; a hold is re-run at the length its failing siblings moved to (issue 57 §2). The same rows at "
    "100 rounds with λ matched to 100 rounds (as the siblings: fmnist_row/fedsam_hbn_100_rounds.yaml), the same "
    "check and threshold, decide it (declared before their runs; the 30-round declaration at commit 047ea45 and "
    "since). What the 30-round runs showed: " + TABLE4_FEDSAM_DIAGNOSIS)


def table4_100_rounds(algorithm: str, own: str, paper_own: float, paper_hbn: float, diagnosis: str,
                      why: str = WHY_100) -> Claim:
    """``table4`` at 100 rounds with its diagnosis (none before its runs), the 30-round declaration (and
    ``diagnosis``, its own) kept as superseded for ``why``."""
    return table4(algorithm, own, paper_own, paper_hbn, TABLE4_100_DIAGNOSIS.get(algorithm, ""), rounds=100,
                  superseded=(Superseded(table4(algorithm, own, paper_own, paper_hbn, diagnosis), why),))


ABLATION = {"moving average (Eq. 7 →)": ("hbn_moving_average", 72.25),
            "weighted average (Eq. 8 →)": ("hbn_weighted_average", 77.90),
            "only global statistics (Eq. 9 →)": ("hbn_global_only", 76.87),
            "only batch statistics (Eq. 9 →)": ("hbn_batch_only", 76.33),
            "fixed 1:1 ratio (Eq. 9 →)": ("hbn_fixed", 77.49)}
FULL_HBN = 78.22

def table2_batch_size(rounds: int = 30, diagnosis: str = "", superseded: tuple[Superseded, ...] = ()) -> Claim:
    """Table 2: BN loses more than HBN from B = 32 to B = 2, at 30 rounds (``hbn/table2_fmnist``) or 100
    (``hbn/table2_100_rounds_fmnist``, λ matched to 100 rounds)."""
    preset, runs, hbn, length = (("hbn/table2_fmnist", TABLE2, "", SETTING) if rounds == 30 else
                                 ("hbn/table2_100_rounds_fmnist", TABLE2_100, "_100_rounds", setting(100, 10, 0.05)))
    return Claim(
        "hbn/table2_batch_size",
        "§4.3 Table 2 / Fig. 4 (CIFAR-100, φ = 0.6): from B = 32 to B = 2 BN loses 5.74 points, HBN 2.19; at B = 2 "
        "HBN is 4.97 points above BN.",
        {"BN B=32": 49.63, "BN B=2": 43.89, "HBN B=32": 51.05, "HBN B=2": 48.86},
        f"{length}, φ = 0.6, B = 32 and B = 2 with lr scaled linearly from B = 4", preset,
        {"BN B=32": row(runs, "bn_b32"), "BN B=2": row(runs, "bn_b2"),
         "HBN B=32": row(runs, f"hbn_b32{hbn}"), "HBN B=2": row(runs, f"hbn_b2{hbn}")},
        (Check("BN B=32", "BN B=2", "at_least", 1.91, "paper: BN loses 5.74 points; a third of it"),
         Check("HBN B=32", "HBN B=2", "at_most", 3.97, "paper: HBN loses 2.19, BN 5.74; HBN's loss below their midpoint"),
         Check("HBN B=2", "BN B=2", "at_least", 1.66, "paper gap at B = 2: 4.97 points; a third of it")),
        seeds=3, diagnosis=diagnosis, superseded=superseded,
        full_scale="`experiment=hbn/table2` (CIFAR-100, 1000 rounds; needs CIFAR-100 and a GPU)")


TABLE6_100_DIAGNOSIS = (
    "Measured (3 seeds, 100 rounds, the best of 10 evaluations): full HBN 90.3 / 90.2 / 89.8 (mean 90.1); moving "
    "average 89.7 / 89.7 / 89.6, weighted average 90.4 / 90.2 / 89.5, only global statistics 88.7 / 89.1 / 88.8, "
    "only batch statistics 90.4 / 90.3 / 89.7, fixed 1:1 ratio 90.5 / 90.4 / 89.6. Only the global-statistics row "
    "falls below full HBN by the margin asked (1.25 where 0.45 is); it is behind at every evaluation (mean test "
    "accuracy at round 10 / 50 / 100: 79.3 / 84.6 / 87.7 against 81.7 / 87.6 / 89.4). Batch-only and fixed 1:1 "
    "end level with full HBN, weighted average 0.06 below it where 0.11 is asked, and moving average 0.43 below "
    "where 1.99 is asked. Full HBN's learned factor hardly moves: the channel mean of w = sigmoid(α) stays "
    "within 0.4994-0.5014 in every layer, seed and evaluation (table1_100_rounds_fmnist's runs), so it acts as "
    "the fixed 1:1 row, and the two agree (−0.06). No difference that fails drifts significantly toward passing. "
    "As in Table 4 at 100 rounds, every row but global-only ends within 89.5-90.5 on Fashion-MNIST (the paper's "
    "rows lie at 72.3-78.2); whether this ceiling compresses the paper's gaps is not tested.")


def table6_ablation(rounds: int = 30, diagnosis: str = "", superseded: tuple[Superseded, ...] = ()) -> Claim:
    """Table 6: full HBN above each ablated variant, at 30 rounds (``hbn/table6_fmnist``, full HBN from table1_fmnist)
    or 100 (``hbn/table6_100_rounds_fmnist``, full HBN from table1_100_rounds_fmnist; λ matched to 100 rounds)."""
    preset, runs, full, suffix, length, full_runs = (
        ("hbn/table6_fmnist", TABLE6, row(TABLE1, "hbn"), "", SETTING, "table1_fmnist's φ = 0.6 HBN runs")
        if rounds == 30 else
        ("hbn/table6_100_rounds_fmnist", TABLE6_100, row(TABLE1_100, "hbn_100_rounds"), "_100_rounds",
         setting(100, 10, 0.05), "table1_100_rounds_fmnist's HBN runs"))
    return Claim(
        "hbn/table6_ablation",
        "§4.4 Table 6 (CIFAR-10, φ = 0.6): full HBN (78.22) is above each ablated variant (72.25 to 77.90).",
        {"full HBN": FULL_HBN, **{name: value for name, (_, value) in ABLATION.items()}},
        f"{length}, φ = 0.6; full HBN = {full_runs}", preset,
        {"full HBN": full, **{name: row(runs, option + suffix) for name, (option, _) in ABLATION.items()}},
        tuple(Check("full HBN", name, "at_least", round((FULL_HBN - value) / 3, 2),
                    f"paper gap {FULL_HBN - value:.2f} points; a third of it")
              for name, (_, value) in ABLATION.items()),
        seeds=3, diagnosis=diagnosis, full_scale=FULL_C10.format("table6"), superseded=superseded)


CLAIMS: list[Claim] = [
    table1_100_rounds(),
    table1_100_rounds(0.1),
    table2_batch_size(100, TABLE2_100_DIAGNOSIS,
                      superseded=(Superseded(table2_batch_size(diagnosis=TABLE2_DIAGNOSIS), WHY_100),)),
    table4_100_rounds("fedprox", "bn", 76.08, 78.44, TABLE4_FEDPROX_DIAGNOSIS),
    table4_100_rounds("scaffold", "bn", 77.63, 78.65, TABLE4_SCAFFOLD_DIAGNOSIS),
    table4_100_rounds("fedadam", "gn", 75.67, 78.17, TABLE4_FEDADAM_DIAGNOSIS),
    table4_100_rounds("fedsam", "bn", 76.39, 78.40, TABLE4_FEDSAM_DIAGNOSIS, WHY_FEDSAM_100),
    table6_ablation(100, TABLE6_100_DIAGNOSIS,
                    superseded=(Superseded(table6_ablation(diagnosis=TABLE6_DIAGNOSIS), WHY_TABLE6_100),)),
    SEC5_CLAIM,
    FIG5_LOW_C_10,
    Claim(
        "hbn/fig5_lambda_insensitive_high_c",
        "§4.4 Fig. 5 (CIFAR-10, φ = 0.6, B = 32): at a high client ratio (C = 1) HBN is insensitive to λ.",
        {"λ small, C = 1": None, "λ = 1, C = 1": None},
        "as the Table 1 setting but K = 20 clients, C = 1 (20 a round), B = 32, lr 0.08, 19 local steps a round, φ = 0.6; small λ = 0.15",
        "hbn/fig5_fmnist",
        {"λ small, C = 1": row(FIG5, "hbn_b32", **{"clients_per_round": 20, "norm.lam": 0.15}),
         "λ = 1, C = 1": row(FIG5, "hbn_b32", **{"clients_per_round": 20, "norm.lam": 1})},
        (Check("λ small, C = 1", "λ = 1, C = 1", "within", 3.0, "paper: curves only; insensitive (module docstring)"),),
        seeds=3,
        controls=(Control("the same λ pair at C = 0.1 (2 clients a round), where the paper says λ matters",
                          {"λ small, C = 1": row(FIG5, "hbn_b32", **{"clients_per_round": 2, "norm.lam": 0.15}),
                           "λ = 1, C = 1": row(FIG5, "hbn_b32", **{"clients_per_round": 2, "norm.lam": 1})}),), full_scale=FULL_C10.format("fig5")),
]
