"""FBN's claims (fbn_federated_batchnorm.txt), reduced to Fashion-MNIST on a CPU.

Thresholds come from the paper's numbers (§4 "Results", §5, App. C): where the paper shows a gap
of G points, the check asks for about a third of it; where it says two curves match ("≈",
"matches", "unchanged"), the check allows 3 points where the paper's text reads as a tie (a tie
within seed noise) and 5 where it only says "similar". Seeds: 3 wherever the claimed gap is under
5 points; the parity with the authors' code 17 a side, for its check's standard error to fall below its 3-point
window at its runs' spread (issue 57). The reduced setting and why it can show FBN's mechanism:
``conf/experiment/fbn/base/fmnist.yaml``.
"""
from __future__ import annotations

from dataclasses import replace

from fedbn_bench.figures.claims.base import Check, Claim, Control, Quantity, Superseded, supersede

FIG3A = "results/fbn/fig3a_fmnist/runs"
FIG3B = "results/fbn/fig3b_fmnist/runs"
FIG4 = "results/fbn/fig4_fmnist/runs"
FIG4_M = "results/fbn/fig4_3000_momentum_fmnist/runs"
GRID = "results/fbn/fig6_11_fmnist/runs"
FIG5 = "results/fbn/fig5_fmnist/runs"
CONTROLS = "results/fbn/controls_fmnist/runs"
PARITY = "results/fbn/parity_hbn_code"
METHOD = "+experiment/fbn/fig3a_method"
SCENARIO = "+experiment/fbn/byzantine_scenario"
SETTING = ("Fashion-MNIST, FBN's CNN at half width, DSGD, n = 10 clients all participating, B = 16, 300 steps "
           "(lr 0.05 / 0.025 / 0.0167 over thirds), client momentum 0")
FULL = "`experiment=fbn/fig3` (CIFAR-10, 3000 steps, B = 50, client momentum 0.99; needs CIFAR-10 and a GPU)"


def fig3a(method: str, gamma: float) -> Quantity:
    return Quantity(FIG3B if gamma == 0.01 else FIG3A, {METHOD: method, "gamma": gamma})


def attacked(runs: str, norm: str, scenario: str, **where) -> Quantity:
    return Quantity(runs, {"norm.name": norm, SCENARIO: scenario, **where})


UNDEFENDED = {"sf": attacked(FIG4, "fbn", "sf"), "foe": attacked(CONTROLS, "fbn", "foe"),
              "alie": attacked(CONTROLS, "fbn", "alie")}
"""FBN under each attack with no defense (the server averages): the outcome that would fail a defense claim."""
DECIDED_FIG4 = ("the reduced setting at the paper's length and client momentum, 3000 steps (lr thirds at 1000 / "
                "2000): `experiment=fbn/fig4_3000_momentum_fmnist` and `fbn/fig8_10_3000_momentum_fmnist`, 13 runs of "
                "about 13 minutes at one thread (scripts/claims_queue.txt; `scripts/gpu_claims.sh` on a GPU)")


def undefended(attack: str, label: str, quantity: str) -> Control:
    """The control of a defense claim: ``quantity`` replaced by FBN under ``attack`` without defense."""
    return Control(f"FBN under {label} without defense in place of the defended run", {quantity: UNDEFENDED[attack]})


FIG4_DEGRADES_V1 = Claim(
    "fbn/fig4_fbn_undefended_degrades",
    "§5 Fig. 4: without defense FBN learns early (≈ 70 %) then degrades, strongly at γ = 0.",
    {"FBN, no attack": None, "FBN, SF, no defense": None},
    SETTING + ", γ = 0, f = 3 sign-flipping clients; no-attack runs from fbn/fig3a_fmnist", "fbn/fig4_fmnist",
    {"FBN, no attack": fig3a("fbn", 0), "FBN, SF, no defense": attacked(FIG4, "fbn", "sf")},
    (Check("FBN, no attack", "FBN, SF, no defense", "at_least", 10.0,
           "paper: 'degrades strongly' at γ = 0 (no number; 10 points)"),),
    diagnosis="Measured (3 seeds): FBN under sign flipping without defense does not degrade within 300 steps; "
              "its test accuracy keeps rising (79.3, 83.0, 83.8 % at steps 100, 200, 300) and ends 2.9 points "
              "below FBN without attack (86.7 %), so the 10-point check fails. FBN trains and tests with the same "
              "shared statistics, so the weights can adapt to the attacked means. The paper's degradation appears "
              "over 3000 steps with client momentum 0.99; whether it appears in a longer reduced run is not "
              "measured yet.",
    seeds=3, decided_by=DECIDED_FIG4,
    full_scale="`experiment=fbn/fig4` (CIFAR-10, 3000 steps; needs CIFAR-10 and a GPU)")
"""FBN Fig. 4's degradation as declared until commit 0b36b55: 300 steps, client momentum 0."""


def defense_beats_undefended(fig: int, attack: str, label: str, defended: Quantity, undefended_runs: Quantity,
                             preset: str, runs_text: str, setting: str = SETTING, decided_by: str = DECIDED_FIG4,
                             superseded: tuple[Superseded, ...] = (), diagnosis: str = "") -> Claim:
    """Under ``attack``, FBN with the median after NNM (``defended``) at least 10 points above FBN without defense."""
    return Claim(
        f"fbn/fig{fig}_{attack}_defense_beats_undefended",
        f"§5 / App. C.3.1 Fig. {fig}: under {label} on the BN statistics, FBN without defense degrades while FBN "
        "with the coordinate-wise median after NNM performs like no attack, so the defense is what keeps it.",
        {"FBN, median + NNM": None, "FBN, no defense": None},
        setting + f", γ = 0, f = 3 clients running {label}; {runs_text}", preset,
        {"FBN, median + NNM": defended, "FBN, no defense": undefended_runs},
        (Check("FBN, median + NNM", "FBN, no defense", "at_least", 10.0,
               "paper: undefended FBN 'degrades strongly' at γ = 0 (no number; 10 points, as fbn/fig4)"),),
        seeds=1, decided_by=decided_by, superseded=superseded, diagnosis=diagnosis,
        full_scale=f"`experiment=fbn/fig{fig}` (CIFAR-10, 3000 steps; needs CIFAR-10 and a GPU)")


DEFENSE_V1 = {
    attack: defense_beats_undefended(
        fig, attack, label, defended, UNDEFENDED[attack], "fbn/fig4_fmnist" if attack == "sf" else "fbn/controls_fmnist",
        f"the defended run from {runs} (seed 0), the undefended runs (the server averages) from "
        + ("fbn/fig4_fmnist" if attack == "sf" else "fbn/controls_fmnist"))
    for fig, attack, label, runs, defended in (
        (4, "sf", "sign flipping", "fbn/fig4_fmnist", attacked(FIG4, "fbn", "sf_defended", seed=0)),
        (8, "foe", "FOE (ε = 0.1)", "fbn/fig6_11_fmnist", Quantity(GRID, {SCENARIO: "foe_defended",
                                                                         "byzantine.defense": "median"})),
        (10, "alie", "ALIE", "fbn/fig6_11_fmnist", Quantity(GRID, {SCENARIO: "alie_defended",
                                                                 "byzantine.defense": "median"})))}
"""The defense claims as declared until commit 0b36b55: 300 steps, client momentum 0, undefended FOE / ALIE runs
from fbn/controls_fmnist and defended ones from the one-seed grid fbn/fig6_11_fmnist."""

WHY_MOMENTUM = (
    "at 300 steps with client momentum 0 undefended FBN was still improving and did not degrade, while the paper "
    "attributes the degradation to its 3000 steps with client momentum 0.99; the 3000-step preset that was to decide "
    "it (fbn/fig4_3000_fmnist) kept momentum 0 and held no FOE or ALIE runs. fbn/fig4_3000_momentum_fmnist and "
    "fbn/fig8_10_3000_momentum_fmnist run the paper's length and momentum, every attack (declared before their runs).")
SETTING_3000 = SETTING.replace("300 steps", "3000 steps").replace("client momentum 0", "client momentum 0.99 (the "
                                                                                        "paper's, from m0 = 0)")
MOMENTUM_RUNS = ("both in one folder: sign flipping from fbn/fig4_3000_momentum_fmnist (3 seeds), FOE and ALIE from "
                 "fbn/fig8_10_3000_momentum_fmnist (seed 0)")

FIG4_DEGRADES = Claim(
    "fbn/fig4_fbn_undefended_degrades",
    "§5 Fig. 4: without defense FBN learns early (≈ 70 %) then degrades, strongly at γ = 0.",
    {"FBN, no attack": None, "FBN, SF, no defense": None},
    SETTING_3000 + ", γ = 0, f = 3 sign-flipping clients; both from fbn/fig4_3000_momentum_fmnist",
    "fbn/fig4_3000_momentum_fmnist",
    {"FBN, no attack": attacked(FIG4_M, "fbn", "clean"), "FBN, SF, no defense": attacked(FIG4_M, "fbn", "sf")},
    FIG4_DEGRADES_V1.checks, seeds=3, full_scale=FIG4_DEGRADES_V1.full_scale,
    diagnosis="Measured (3 seeds, 3000 steps, client momentum 0.99, the last evaluation): FBN under sign flipping "
              "without defense ends at 87.9 / 90.0 / 89.8 % against 91.9 / 90.9 / 91.2 % without attack, 2.1 "
              "points below where 10 are asked. It does not learn early and then degrade: its mean test accuracy "
              "rises from 78.9 % at step 300 (84.4 without attack) to 89.5 % at step 2100 and ends at 89.2 %, and "
              "the gap narrows from 5.5 points at step 300 to 1.5-2.7 from step 1200 on. One seed falls: seed 0 "
              "drops from 89.7 % at step 2100 to 86.4 % at step 2400 (training loss 0.304 to 0.422) and recovers "
              "to 87.9 % by step 3000; seeds 1 and 2 reach their bests at step 2700 (seed 2 after a 0.07-point "
              "dip at step 2400). The attacked runs' training loss stays above the clean runs' (mean 0.298 "
              "against 0.210 at step 3000). The paper's "
              "length and client momentum, which the 300-step declaration below lacked, leave the result as it "
              "was there (a gap of 2.9 points, no fall): in this reduction FBN trains under the same attacked "
              "shared statistics it is tested with. Whether the paper's fall appears on CIFAR-10 with the "
              "full-width CNN is not tested here.",
    superseded=(Superseded(FIG4_DEGRADES_V1, WHY_MOMENTUM),))
"""FBN Fig. 4 at the paper's 3000 steps and client momentum 0.99, declared before its runs."""

DEFENSE_DIAGNOSIS = {
    "sf": "Measured (3000 steps, client momentum 0.99, the last evaluation): the defended run (seed 0) ends at "
          "91.8 % and FBN without defense at 87.9 / 90.0 / 89.8 % (mean 89.2), 2.6 points where 10 are asked. The "
          "defense does its part: the defended runs of all three seeds end at 91.8 / 91.2 / 91.7 % against 91.9 / "
          "90.9 / 91.2 % without attack. What is missing is the fall it should prevent: undefended FBN does not "
          "degrade here (fbn/fig4_fbn_undefended_degrades: 2.1 points below no attack, rising to step 2100, one "
          "seed dipping by 3.3 points at step 2400 and recovering in part).",
    "foe": "Measured (seed 0, 3000 steps, client momentum 0.99): FBN under FOE (ε = 0.1) without defense ends at "
           "90.0 % and with the median after NNM at 91.8 %, 1.9 points where 10 are asked. Undefended FBN rises "
           "at every evaluation (80.8 % at step 300, 89.4 / 89.5 / 90.0 % at steps 2400 / 2700 / 3000), 2.0 points "
           "below FBN without attack on the same seed (91.9 %): FOE slows it and does not make it fall. The "
           "defended run equals the defended sign-flipping run of seed 0 in every logged value (test accuracy, "
           "test and training loss at every evaluation), as the rule implies when the attackers' statistics lie "
           "far from every honest client's: NNM then gives the 7 honest clients one average, and the median of 10 "
           "values of which 7 coincide is that average, whatever the 3 attackers send (SF sends −μ, FOE −0.1 μ; "
           "tests/test_byzantine.py checks the invariant).",
    "alie": "Measured (seed 0, 3000 steps, client momentum 0.99): FBN under ALIE (z = 0.52) without defense ends at "
            "91.8 % and with the median after NNM at 92.0 %, 0.15 points where 10 are asked. ALIE does not hurt "
            "undefended FBN here: its curve stays within 0.41 points of FBN without attack on the same seed at "
            "every evaluation (−0.40 at step 300, −0.10 at step 3000, ending at 91.8 % against 91.9 %). ALIE sends "
            "the honest mean plus 0.52 honest standard deviations per coordinate, inside the honest clients' "
            "spread by construction, a likely reason it moves the averaged statistics too little to matter (not "
            "measured); NNM does not isolate it (the defended run differs from the sign-flipping and FOE ones, "
            "which coincide). The paper shows undefended FBN degrading under ALIE on CIFAR-10; in this "
            "reduction there is no degradation for the defense to prevent.",
}
"""Diagnoses of the defense claims at 3000 steps with momentum 0.99, from the records."""


PARITY_V1 = Claim(
    "fbn/parity_authors_code",
    "Parity, not a paper sentence: HybridBN's FBN baseline (the only public FBN code, github:Hongyao-Chen/HybridBN "
    "@ 1c0e151, FBN_main.py) and fedbn-bench's norm=fbn norm.variant=hbn_code run the same algorithm, so on the "
    "same data they reach the same accuracy.",
    {"authors' code": None, "fedbn-bench": None},
    "Fashion-MNIST, Simple-CNN (1 input channel), FedAvg (one epoch, B = 4, lr 0.01 × 0.998 per round, "
    "momentum 0.9, clip 10), 10 clients all participating, per-class Dirichlet α = 0.1 without a minimum size, "
    "2 rounds (each about 15,000 local steps of B = 4), inputs standardised with the training split's mean and sd "
    "on both sides; the authors' script run unmodified from a scratch directory (scripts/parity/README.md)",
    "fbn/parity_hbn_code",
    {"authors' code": Quantity(f"{PARITY}/authors", {}), "fedbn-bench": Quantity(f"{PARITY}/runs", {})},
    (Check("fedbn-bench", "authors' code", "within", 3.0,
           "the same algorithm: equal within seed noise (this file's 3 points for a tie)"),),
    seeds=3,
    diagnosis="The gap (ours 59.6 ± 6.3, theirs 57.5 ± 10.4, 2.1 points) is well inside seed noise: its "
              "standard error over 3 + 3 seeds is 7.0 points (Welch t = 0.30). Their runs are those of "
              "2026-11-25 with standardised inputs as ours (the first ones had pixels in [0, 1]: 55.7 ± 9.2, "
              "results/parity/README.md). After two rounds of FedAvg under Dirichlet α = 0.1 the seeds spread by 6-9 points "
              "(partition draw, client order), so 3 seeds cannot resolve a 3-point tie; neither side shows a "
              "systematic difference. Resolving 3 points at this spread takes about 40 seeds per side or a run "
              "long enough for the seeds to converge (each round of their script is about 15,000 steps of B = 4).",
    full_scale="`experiment=hbn/table1` (CIFAR-10, 100 clients; needs CIFAR-10 and a GPU)")
"""The parity claim as declared at 7cd68d1 (3 seeds a side)."""

PARITY_SEEDS = (
    "17 seeds a side: seed s is a different draw on each side (scripts/parity/README.md), so the check's standard "
    "error is √(sd_ours² / n + sd_theirs² / n); with the 3-seed runs' sd (ours 6.31: 66.64 / 54.46 / 57.66, theirs "
    "10.37: 46.10 / 66.40 / 59.91) it falls below the 3-point window from n = (6.31² + 10.37²) / 3² = 147.4 / 9 = "
    "16.4, so 17 (SE 2.94; a true tie then passes 69 % of the time, a true 6-point gap 15 %, against 33 % and 23 % "
    "at 3 seeds); their seeds 3-16 by scripts/parity/README.md's loop, ours by the preset")
"""Why the parity claim takes 17 seeds a side (issue 57 §2)."""

PARITY_CLAIM = replace(
    PARITY_V1, setting=f"{PARITY_V1.setting}; {PARITY_SEEDS}", seeds=17, diagnosis="",
    fixed_budget="it asks whether the two codes give the same accuracy after the same 2 rounds on the same data, "
                 "not where either would settle: each run's two evaluations leave no trend, and none is needed",
    superseded=supersede(PARITY_V1, (
        "it held on a check whose standard error over 3 + 3 seeds was 7.0 points, more than twice its 3-point "
        "window (a true tie passes it 33 % of the time); the same check with 17 seeds a side, enough for its "
        "standard error to fall below 3 points (the setting gives the arithmetic), decides it (issue 57 §2; declared "
        "before the runs of seeds 3-16; the 3-seed declaration at commit 7cd68d1 and since). What the 3-seed runs "
        "showed: " + PARITY_V1.diagnosis)))
"""Parity with the authors' FBN code at 17 seeds a side (``fbn/parity_hbn_code``), declared before seeds 3-16."""

CLAIMS: list[Claim] = [
    Claim(
        "fbn/fig3a_naive_collapses",
        "§4 Results, Fig. 3a: at γ = 0 naive BN collapses (best case ≈ 17 %) while FBN reaches ≈ 80 %.",
        {"FBN": 80.0, "naive": 17.0},
        SETTING + ", γ = 0 (each client holds one class)", "fbn/fig3a_fmnist",
        {"FBN": fig3a("fbn", 0), "naive": fig3a("naive", 0)},
        (Check("FBN", "naive", "at_least", 20.0, "paper gap 80 − 17 = 63 points; a third of it"),),
        seeds=3, figure="results/fbn/fig3a_fmnist/table.md", full_scale=FULL),
    Claim(
        "fbn/fig3a_fbn_matches_centralized",
        "§4 Results, Fig. 3a/3c: at γ = 0 FBN matches centralized BN (max ≈ 80 % both) and tracks its curve.",
        {"FBN": 80.0, "centralized": 80.0},
        SETTING + ", γ = 0; centralized = SGD on the union of the clients' batches (Remark 4.1)", "fbn/fig3a_fmnist",
        {"FBN": fig3a("fbn", 0), "centralized": fig3a("centralized", 0)},
        (Check("FBN", "centralized", "within", 3.0, "paper: equal maxima (≈ 80 %)"),),
        seeds=3, figure="results/fbn/fig3a_fmnist/table.md", full_scale=FULL),
    Claim(
        "fbn/fig3a_fixbn_between",
        "§4 Results, Fig. 3a/3c: at γ = 0 FixBN recovers most of the gap (max 75 %) but stays below FBN (80 %).",
        {"FixBN": 75.0, "naive": 17.0, "FBN": 80.0},
        SETTING + ", γ = 0; FixBN freezes its statistics at step 150 (half the run, as FBN's 1500 of 3000)",
        "fbn/fig3a_fmnist",
        {"FixBN": fig3a("fixbn", 0), "naive": fig3a("naive", 0), "FBN": fig3a("fbn", 0)},
        (Check("FixBN", "naive", "at_least", 20.0, "paper gap 75 − 17 = 58 points; a third of it"),
         Check("FBN", "FixBN", "at_least", 0.0, "paper: FBN 80 above FixBN 75")),
        diagnosis="FixBN's seed 0 diverged at step 156, six steps after FixBN froze its statistics at step 150: "
                  "its train loss was 0.20 at step 150 and NaN at 156, its test accuracy 10 %. A diverged run counts "
                  "as a measured outcome, so FixBN's mean is 61.0; seeds 1 and 2 reach 86.8 and 86.2, against FBN's "
                  "86.7. The same seed under older code (committed at 4d674aa, evaluated every 50 steps) passed the "
                  "switch with its train loss rising 0.21 to 0.60 by step 200 and ended at 86.05. FixBN's seed 0 in "
                  "fixbn/table1_fmnist diverged the same way, at step 154 (freeze at 150). Evaluated every 50 steps at "
                  "82f024e, seed 0 diverges at the same step with the same test accuracy and loss at step 150 (62.52 "
                  "%, 1.31335), so the evaluation cadence is not the cause; the older run's 62.08 there shows that "
                  "the code between the two changed the trajectory. The switch is a knife edge, not a fault of one "
                  "commit: at 58b9269 (a7a32dd: same source) the same seed diverges with one thread on either "
                  "engine (packed at step 156, loop at 155, from 62.98 % at step 150) and survives with two threads (packed: 61.95 % at step "
                  "150, train loss 0.20 to 0.66 at 180, final 86.03 %), float summation order alone deciding "
                  "(python run.py +experiment/fbn/fig3a_method=fixbn gamma=0 seed=0 experiment=fbn/fig3a_fmnist "
                  "engine=loop|packed engine.threads=1|2 logger=none). How often: on ten more seeds (3-12, one thread, "
                  "python run.py -m experiment=fbn/fig3a_fixbn_seeds_fmnist, made at 4be97c7; they decide nothing) "
                  "2 diverged after the switch (seed 8 at step 155, seed 11 at step 165) and 8 ended at 83.7-86.6 %: "
                  "the switch diverges on 3 of 13 seeds here, so a 3-seed mean rests on how many of its seeds "
                  "diverge. The claim reads seeds 0-2, as declared.",
        seeds=3, figure="results/fbn/fig3a_fmnist/table.md", full_scale=FULL),
    Claim(
        "fbn/fig3a_gamma001",
        "§4 Results, Fig. 3a/3b: at γ = 0.01 naive BN loses 40 points (to ≈ 40 %) while FBN is unchanged.",
        {"naive γ=0.01": 40.0, "naive γ=1": 80.0, "FBN γ=0.01": 80.0, "FBN γ=1": 80.0},
        SETTING + ", γ = 0.01 against γ = 1 (the γ = 1 runs: fbn/fig3a_fmnist)", "fbn/fig3b_fmnist",
        {"naive γ=0.01": fig3a("naive", 0.01), "naive γ=1": fig3a("naive", 1),
         "FBN γ=0.01": fig3a("fbn", 0.01), "FBN γ=1": fig3a("fbn", 1)},
        (Check("naive γ=1", "naive γ=0.01", "at_least", 13.0, "paper: naive loses 40 points; a third of it"),
         Check("FBN γ=1", "FBN γ=0.01", "at_most", 5.0, "paper: FBN's accuracy 'is not impacted'")),
        seeds=3, figure="results/fbn/fig3b_fmnist/fig3b_fmnist.md", full_scale=FULL),
    Claim(
        "fbn/fig3a_iid_all_similar",
        "§4 Results, Fig. 3a: for γ ≥ 0.3 all methods perform similarly (≈ 80 %).",
        {"naive": 80.0, "FixBN": 80.0, "FBN": 80.0, "centralized": 80.0},
        SETTING + ", γ = 1 (i.i.d.)", "fbn/fig3a_fmnist",
        {"naive": fig3a("naive", 1), "FixBN": fig3a("fixbn", 1), "FBN": fig3a("fbn", 1),
         "centralized": fig3a("centralized", 1)},
        (Check("naive", "centralized", "within", 5.0, "paper: 'similar' (no numbers)"),
         Check("FixBN", "centralized", "within", 5.0, "paper: 'similar' (no numbers)"),
         Check("FBN", "centralized", "within", 5.0, "paper: 'similar' (no numbers)")),
        seeds=3, figure="results/fbn/fig3a_fmnist/table.md", full_scale=FULL),
    Claim(
        "fbn/fig4_naive_no_defense",
        "§5 Fig. 4: with f = 3 clients sign-flipping the mean of their BN statistics and no defense, naive BN is "
        "stuck near 10 % (chance).",
        {"naive, SF, no defense": 10.0},
        SETTING + ", γ = 0, f = 3 of 10 clients send the opposite of the honest mean of their BN means", "fbn/fig4_fmnist",
        {"naive, SF, no defense": attacked(FIG4, "bn", "sf")},
        (Check("naive, SF, no defense", 10.0, "at_most", 10.0, "paper ≈ 10 % (chance); at most 10 points above it"),),
        seeds=3,
        full_scale="`experiment=fbn/fig4` (CIFAR-10, 3000 steps; needs CIFAR-10 and a GPU)"),
    Claim(
        "fbn/fig4_naive_defended",
        "§5 Fig. 4: naive BN with the median after NNM performs like naive BN without attack.",
        {"naive, SF, median + NNM": None, "naive, no attack": None},
        SETTING + ", γ = 0, f = 3 sign-flipping clients; no-attack runs from fbn/fig3a_fmnist", "fbn/fig4_fmnist",
        {"naive, SF, median + NNM": attacked(FIG4, "bn", "sf_defended"), "naive, no attack": fig3a("naive", 0)},
        (Check("naive, SF, median + NNM", "naive, no attack", "within", 5.0,
               "paper: 'Naive BN median ≈ Naive BN no-attack' (γ = 0.01; curves only)"),),
        seeds=3,
        controls=(Control("naive BN under the same sign flipping without defense in place of the defended run",
                          {"naive, SF, median + NNM": attacked(FIG4, "bn", "sf")}),),
        full_scale="`experiment=fbn/fig4` (CIFAR-10, 3000 steps; needs CIFAR-10 and a GPU)"),
    Claim(
        "fbn/fig4_fbn_defended",
        "§5 Fig. 4: FBN with the coordinate-wise median after NNM performs like FBN without attack.",
        {"FBN, SF, median + NNM": None, "FBN, no attack": None},
        SETTING + ", γ = 0, f = 3 sign-flipping clients; no-attack runs from fbn/fig3a_fmnist", "fbn/fig4_fmnist",
        {"FBN, SF, median + NNM": attacked(FIG4, "fbn", "sf_defended"), "FBN, no attack": fig3a("fbn", 0)},
        (Check("FBN, SF, median + NNM", "FBN, no attack", "within", 3.0, "paper: the two curves coincide"),),
        seeds=3, controls=(undefended("sf", "the same sign flipping", "FBN, SF, median + NNM"),),
        full_scale="`experiment=fbn/fig4` (CIFAR-10, 3000 steps; needs CIFAR-10 and a GPU)"),
    FIG4_DEGRADES,
    *(Claim(
        f"fbn/fig{fig}_{attack}_{rule}",
        f"App. C.3.1 Fig. {fig}: under {label} on the BN statistics, FBN with the {rule_label} after NNM performs "
        "like FBN without attack.",
        {"FBN, defended": None, "FBN, no attack": None},
        SETTING + f", γ = 0, f = 3 clients running {label}; one seed (a reduced grid); no-attack runs from "
        "fbn/fig3a_fmnist", "fbn/fig6_11_fmnist",
        {"FBN, defended": Quantity(GRID, {SCENARIO: f"{attack}_defended", "byzantine.defense": rule}),
         "FBN, no attack": fig3a("fbn", 0)},
        (Check("FBN, defended", "FBN, no attack", "within", 5.0, "paper: 'similar' to no attack (no numbers)"),),
        seeds=1, controls=(undefended(attack, f"the same {label}", "FBN, defended"),),
        full_scale=f"`experiment=fbn/fig{fig}` (CIFAR-10, 4 γ values; needs CIFAR-10 and a GPU)")
      for fig, attack, label, rule, rule_label in (
          (6, "sf", "sign flipping", "median", "coordinate-wise median"),
          (7, "sf", "sign flipping", "trimmed_mean", "coordinate-wise trimmed mean"),
          (8, "foe", "FOE (ε = 0.1)", "median", "coordinate-wise median"),
          (9, "foe", "FOE (ε = 0.1)", "trimmed_mean", "coordinate-wise trimmed mean"),
          (10, "alie", "ALIE", "median", "coordinate-wise median"),
          (11, "alie", "ALIE", "trimmed_mean", "coordinate-wise trimmed mean"))),
    *(defense_beats_undefended(fig, attack, label, attacked(FIG4_M, "fbn", f"{attack}_defended", seed=0),
                               attacked(FIG4_M, "fbn", attack), "fbn/fig4_3000_momentum_fmnist" if attack == "sf"
                               else "fbn/fig8_10_3000_momentum_fmnist", MOMENTUM_RUNS, SETTING_3000, "",
                               (Superseded(DEFENSE_V1[attack], WHY_MOMENTUM),), DEFENSE_DIAGNOSIS[attack])
      for fig, attack, label in ((4, "sf", "sign flipping"), (8, "foe", "FOE (ε = 0.1)"), (10, "alie", "ALIE"))),
    Claim(
        "fbn/fig5a_dirichlet",
        "App. C.2 Fig. 5: under Dirichlet heterogeneity (Hsu et al.) the conclusions of Fig. 3 hold: FBN close to "
        "centralized and above naive BN.",
        {"FBN": None, "naive": None, "centralized": None},
        SETTING + ", Dirichlet α = 0.1 over classes per client (Hsu et al., equal sizes)", "fbn/fig5_fmnist",
        {"FBN": Quantity(FIG5, {METHOD: "fbn"}), "naive": Quantity(FIG5, {METHOD: "naive"}),
         "centralized": Quantity(FIG5, {METHOD: "centralized"})},
        (Check("FBN", "centralized", "within", 3.0, "as Fig. 3a at γ = 0: equal"),
         Check("FBN", "naive", "at_least", 0.0, "as Fig. 3a: FBN above naive BN (the paper gives no numbers)")),
        seeds=3,
        full_scale="`experiment=fbn/fig5` (CIFAR-10, 5 α values; needs CIFAR-10 and a GPU)"),
    PARITY_CLAIM,
]
