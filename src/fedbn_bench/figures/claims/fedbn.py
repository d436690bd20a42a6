"""FedBN's claims (fedbn_local_batch_normalization.txt), reduced to the offline Digits-5 stand-in on a CPU.

Thresholds come from the paper's numbers (Tables 11-14; §5.1 for the figures without numbers): where the paper
shows a gap of G points, the check asks for about a third of it; where it says one method exceeds another without
a number, at or above it; where it says two are comparable, 3 points. A domain of the stand-in is checked against
the paper's number for the domain it stands in for (MNIST, SVHN, USPS, SynthDigits, MNIST-M:
``data/digits5_standin.py``); a mean is the unweighted mean over the five domains (``test_acc``: each domain's test
set has the same size). Seeds: 3 (the paper's gaps are under 5 points; it ran 5 trials), except Table 13 (the mean
over nine cells of one seed each). The quantity is the accuracy at the final round (FedBN's code). The reduced
setting and why FedBN's mechanism can act there: ``conf/experiment/fedbn/base/digits.yaml``.
"""
from __future__ import annotations

from typing import Callable

from fedbn_bench.figures.claims.base import Check, Claim, Quantity, Superseded, supersede

TABLE11 = "results/fedbn/table11_digits/runs"
FIG3 = "results/fedbn/fig3_digits/runs"
FIG4A = "results/fedbn/fig4a_digits/runs"
TABLE14 = "results/fedbn/table14_digits/runs"
FIG4C = "results/fedbn/fig4c_digits/runs"
TABLE12 = "results/fedbn/table12_digits/runs"
TABLE13 = "results/fedbn/table13_digits/runs"
FIG9 = "results/fedbn/fig9/runs"
FIG9_TRAINED = "results/fedbn/fig9_trained/runs"
FIG9_3000 = "results/fedbn/fig9_3000_steps/runs"
FIG9_STEPS = "results/fedbn/fig9_steps_to_loss/runs"
METHOD = "+experiment/fedbn/method"
CLIENTS = "+experiment/fedbn/clients"
FINAL = "summary:final_test_acc"
SETTING = ("Digits-5 stand-in (mnist, svhn_like, usps_like = scikit-learn's real 8x8 digits, synth_like, "
           "mnistm_like), one client per domain holding one part of 150 images, 297 test images per domain, "
           "Simple-CNN with BN, SGD lr 1e-2 without momentum, B = 32, E = 1, 100 rounds, the final round")
FULL = "`experiment=fedbn/{}` (Digits-5, 300 rounds; needs FedBN's Digits-5 archive)"
DOMAINS = {"SVHN": "svhn_like", "USPS": "usps_like", "SynthDigits": "synth_like", "MNIST-M": "mnistm_like",
           "MNIST": "mnist"}
"""The paper's Digits-5 domains (Table 11's column order) and the stand-in domain for each."""
TABLE11_PAPER = {
    "SingleSet": (65.25, 95.16, 80.31, 77.77, 94.38), "FedAvg": (62.86, 95.56, 82.27, 76.85, 95.87),
    "FedProx": (63.08, 95.58, 82.34, 76.64, 95.75), "FedBN": (71.04, 96.97, 83.19, 78.33, 96.57),
}
"""Table 11, mean of 5 trials, in the order of ``DOMAINS``."""
TABLE14_MEAN = {("SingleSet", 1.0): 94.066, ("FedAvg", 1.0): 92.788, ("FedBN", 1.0): 94.082,
                ("SingleSet", 0.05): 74.624, ("FedAvg", 0.05): 75.486, ("FedBN", 0.05): 79.466}
"""Table 14's means over the five domains at 100 % and 5 % of the data."""
TABLE13_MEAN = {"FedAvg": (84.998, 86.37, 84.268, 82.148, 81.534, 80.544, 81.094, 80.562, 81.014),
                "FedBN": (88.056, 88.09, 86.64, 85.086, 84.538, 83.44, 82.992, 82.21, 81.46)}
"""Table 13's means over the five domains, cells (B, E) = (10, 1), (10, 4), (10, 16), (50, 1), ... (∞, 16)."""
METHODS = {"SingleSet": "singleset", "FedAvg": "fedavg", "FedProx": "fedprox", "FedBN": "fedbn"}


TABLE11_DIAGNOSIS = {
    "FedAvg": "Holds on four of the five domains, most where the stand-in's appearance differs most from the others "
              "(svhn_like +20.9 points, synth_like +32.9, usps_like +15.3, mnist +1.2), as the paper says of SVHN. "
              "It fails on mnistm_like alone, by a tie: 93.5 for both (per seed FedBN 93.9 / 94.3 / 92.3, FedAvg "
              "93.6 / 94.9 / 91.9). mnistm_like is where both methods are most accurate of the five domains, and "
              "the paper's own MNIST-M gap is small (1.48 points); that the stand-in's texture background leaves "
              "averaged BN statistics adequate there is a reading we did not test. FedAvg's large spread elsewhere "
              "comes from seed 1 (synth_like 22.6 %, usps_like 56.2 %), but FedBN is ahead in every seed on the "
              "four domains that hold.",
    "FedProx": "As against FedAvg: with μ = 1e-2 FedProx is within 0.7 points of FedAvg on every domain and seed, "
               "so the verdict is the same: FedBN ahead on svhn_like, usps_like, synth_like and mnist, a tie on "
               "mnistm_like (93.5 for both).",
    "SingleSet": "Holds on synth_like (+17.2), mnistm_like (+3.4) and mnist (+3.5); fails on svhn_like (−1.5, within "
                 "seed noise: FedBN 88.9 / 83.8 / 91.6, SingleSet 90.9 / 86.2 / 91.6) and on usps_like (−5.4). "
                 "usps_like is the only domain from another source (scikit-learn's real 8x8 digits; the other four "
                 "are transforms of MNIST), and every federated method is below local training there (SingleSet "
                 "94.9, FedBN 89.6, FedAvg 74.3): federating with four MNIST-derived domains costs it accuracy "
                 "that local BN recovers only in part. The paper's USPS gap over SingleSet is 1.81 points.",
}
"""What the 3-seed Table 11 runs (``experiment=fedbn/table11_digits``) show, by rival."""

TABLE11_300_DIAGNOSIS = {
    "FedAvg": "Measured (3 seeds, 300 rounds): FedBN is ahead on four domains by far more than asked (svhn_like "
              "+20.3 points, usps_like +14.1, synth_like +34.7, mnist +1.2) and ties on mnistm_like, 94.7 against "
              "94.3 (per seed FedBN 94.9 / 95.6 / 93.6, FedAvg 93.9 / 95.3 / 93.6), +0.45 where a third of the "
              "paper's 1.48 asks 0.49, its drift toward passing over the last 60 rounds (+0.13 ± 0.11) not "
              "significant. As at 100 rounds (superseded below), mnistm_like is the stand-in domain where averaged "
              "BN statistics cost FedAvg nothing measurable.",
    "FedProx": "Measured (3 seeds, 300 rounds): as against FedAvg (μ = 1e-2 keeps FedProx within 0.7 points of "
               "FedAvg on every domain and seed): FedBN far ahead on svhn_like, usps_like, synth_like and mnist, a "
               "tie on mnistm_like, 94.7 against 94.4 (per seed FedProx 94.3 / 95.3 / 93.6), +0.34 where 0.56 is "
               "asked.",
    "SingleSet": "Measured (3 seeds, 300 rounds): holds on synth_like (+19.6), mnistm_like (+3.7) and mnist (+4.3); "
                 "fails on svhn_like (+1.5 where 1.93 is asked; per seed FedBN 91.9 / 89.6 / 92.9, SingleSet 91.9 / "
                 "86.9 / 91.2; FedBN's trend still rising, +0.26 over the last 60 rounds) and on usps_like (−1.8: "
                 "FedBN 94.9 / 92.9 / 92.9, SingleSet 94.3 / 94.9 / 97.0). usps_like is the one domain from another "
                 "source than MNIST (scikit-learn's 8x8 digits), and local training on it stays ahead of FedBN at 300 "
                 "rounds as at 100.",
}
"""What the 300-round Table 11 runs (``experiment=fedbn/table11_300_rounds_digits``) show, by rival."""


FIG3_DIAGNOSIS = (
    "The two training-loss curves are nearly the same in every seed (mean 0.904 against 0.907, rises 0.021 against "
    "0.020; at round 50 0.646-0.664 against 0.648-0.669), while the same runs' test accuracy differs by up to 33 "
    "points on a domain (fedbn/table11_vs_fedavg). The training loss is taken in training mode, where BN normalizes "
    "with each batch's own statistics in both methods, so FedAvg and FedBN differ there only by FedAvg's averaging "
    "of BN's γ and β; the averaged running statistics, FedBN's main difference here, act only at test time. "
    "The curve the paper draws for FedAvg is rougher than ours; with one client per domain and full participation "
    "our rounds have little sampling noise.")


FIG9_DIAGNOSIS = (
    "Measured with the initialization fixed (α on the hidden layer only), 3 seeds: at the paper's lr 1e-5 the 600 "
    "steps barely train the network. The loss falls by 4-5 % (seed 0 0.906 -> 0.865, seed 1 0.865 -> 0.831, seed 2 "
    "0.735 -> 0.707) and the test accuracy ends at 47, 24 and 55 % (chance is 50 %), the same to four decimals of "
    "loss for both methods. With one full-batch step a round, both normalize with each client's batch statistics "
    "in training, so they differ only by FedAvg's averaging of BN's γ and β, which lr 1e-5 hardly moves. The loss "
    "check passes only by that tie (−0.00). The paper's 100 % needs a setting we could not read from App. F (a "
    "larger learning rate, or its α-scaled NTK parametrization); the earlier seed-0 run with α also on the output "
    "layer (results/fedbn/fig9.md before this rerun) ended at 56 %.")


FIG9_TRAINED_DIAGNOSIS = (
    "Measured (seeds 1-3, lr 1e-2, 600 steps): both methods train (final test accuracy 98.0 / 98.5 / 99.0 % FedBN, "
    "98.25 / 98.5 / 99.25 % FedAvg, within 3 points of the paper's 100 %), and their training losses coincide: the "
    "mean over the 600 steps is 0.0859 / 0.1002 / 0.0879 for FedBN and 0.0860 / 0.1004 / 0.0880 for FedAvg (ratio "
    "0.998-0.999 per seed, 0.9 asked). With one full-batch step a round both normalize with each client's own batch "
    "statistics in training, so FedAvg differs from FedBN only by averaging BN's γ and β every round, and those "
    "barely leave their initial values: in FedBN's final state (checkpoint.pt) max |γ − 1| is 0.029-0.044, max |β| "
    "0.043-0.074, and the two clients' γ differ by at most 0.022 and their β by at most 0.031. The seed-0 diagnostic "
    "(the superseded declaration below) found the same tie at every rate from 1e-4 to 1 and with 10 local steps a "
    "round. So in this reading of App. F (Σ₂ = 0.5^|i−j|, one step a round, the training-mode loss) FedBN has "
    "nothing to converge faster with; App. F leaves open Σ₂'s values, the local steps per round and which loss it "
    "plots. The FedBN loss is still falling by 0.01 over the last 120 steps, so the rule reads not converged.")


FIG9_3000_DIAGNOSIS = (
    "Measured (seeds 1-3, lr 1e-2, 3000 steps; the first 600 steps repeat fig9_trained's runs to four digits): the "
    "mean training loss over the 3000 steps is 0.0327 / 0.0487 / 0.0346 for FedBN and 0.0330 / 0.0496 / 0.0351 for "
    "FedAvg, a ratio of 0.991 / 0.982 / 0.986 against the 0.9 asked; at the last step 0.0128 / 0.0264 / 0.0130 "
    "against 0.0133 / 0.0278 / 0.0137 (0.95-0.96). Both losses still fall by 14-18 % over the last 600 steps (step "
    "2400 to 3000), as a cross-entropy on data the network separates keeps falling while its weights grow, so a "
    "trend over the last fifth of 600 evaluations a run finds a drift toward passing however long the run; the gap "
    "it would have to close is 0.09 of the ratio, the drift it finds rounds to 0.00. Final test accuracy 98.0 / "
    "98.25 / 98.75 % FedBN, 98.0 / 98.5 / 99.0 % FedAvg.")


FIG9_STATEMENT = ("App. F Fig. 9 (two 10-dim Gaussian clients, Σ₁ = I and a correlated Σ₂): FedBN's training loss "
                  "converges significantly faster than FedAvg's, and both reach 100 % accuracy.")
FIG9_SETTING = ("2 clients × 100 samples, a 10-100-2 network with BN, α = 10 on the hidden layer only, SGD lr {lr}, "
                "{steps} full-batch steps; Σ₂[i, j] = 0.5^|i−j| (the paper gives no values); mean loss = the training "
                "loss's mean over the {steps} steps")
FIG9_PAPER = {"FedBN mean loss": None, "FedAvg mean loss": None, "FedBN accuracy": 100.0, "FedAvg accuracy": 100.0}
FIG9_ACCURACY = (Check("FedBN accuracy", 100.0, "at_least", -3.0, "paper: 100 %; within 3 points"),
                 Check("FedAvg accuracy", 100.0, "at_least", -3.0, "paper: 100 %; within 3 points"))
FIG9_FASTER = (Check("FedBN mean loss", "FedAvg mean loss", "ratio_at_most", 0.9,
                     "paper: curves only, 'significantly faster convergence'; FedBN's mean loss at least a tenth "
                     "below FedAvg's"),)


def fig9_quantities(runs: str) -> dict[str, Quantity]:
    """Fig. 9's mean training losses and final accuracies of FedBN and FedAvg in the run tree ``runs``."""
    return {**{f"{m} mean loss": Quantity(runs, {METHOD: METHODS[m]}, "mean:train_loss", 1.0) for m in ("FedBN", "FedAvg")},
            **{f"{m} accuracy": Quantity(runs, {METHOD: METHODS[m]}) for m in ("FedBN", "FedAvg")}}


FIG9_V1 = Claim(
    "fedbn/fig9_fedbn_faster", FIG9_STATEMENT, FIG9_PAPER,
    "the paper's setting (conf/experiment/fedbn/fig9.yaml): " + FIG9_SETTING.format(lr="1e-5", steps=600),
    "fedbn/fig9", fig9_quantities(FIG9),
    (Check("FedBN mean loss", "FedAvg mean loss", "at_most", 0.0, "paper: curves only; FedBN's lower"),) + FIG9_ACCURACY,
    seeds=3)
"""FedBN Fig. 9 as first declared (commit bebfdc9 and before): the paper's lr 1e-5."""

FIG9_V2 = Claim(
    "fedbn/fig9_fedbn_faster", FIG9_STATEMENT, FIG9_PAPER,
    "the paper's setting (conf/experiment/fedbn/fig9.yaml) at a learning rate where the network trains "
    "(conf/experiment/fedbn/fig9_trained.yaml): " + FIG9_SETTING.format(lr="1e-2", steps=600) + "; seeds 1, 2, 3",
    "fedbn/fig9_trained", fig9_quantities(FIG9_TRAINED),
    FIG9_FASTER + FIG9_ACCURACY,
    seeds=3, diagnosis=FIG9_TRAINED_DIAGNOSIS,
    decided_by="the same runs longer (rounds=3000), until the loss stops falling; at 600 steps the two losses "
               "differ by 0.1-0.2 % in every seed")
"""FedBN Fig. 9 at lr 1e-2 and 600 steps (``fedbn/fig9_trained``), declared before its runs at 32b5a6f."""

FIG9_V1_WHY = ("at the paper's lr 1e-5 the 600 steps barely train the network, so neither the "
               "accuracy nor the loss comparison can say anything: " + FIG9_DIAGNOSIS + " Tested "
               "since (seed 0, the same setting at larger rates: python run.py -m "
               "experiment=fedbn/fig9 'lr=1e-4,1e-3,1e-2,1e-1,1.0' seed=0, records in "
               "results/fedbn/fig9_lr/runs): both methods end at 63.5-64 % at 1e-4, 99.25 % at "
               "1e-3 and 99.5 % from 1e-2 up, so the rate is what kept the network untrained. "
               "The loss check asked only for FedBN at or below FedAvg, which a tie passes; "
               "the new declaration asks for the 'significantly faster' the paper states, declared after "
               "that diagnostic had shown seed 0 at 1e-2 tied (mean loss 0.0869 FedBN, 0.0870 "
               "FedAvg; with 10 local steps a round for 60 rounds 0.0868 and 0.0869, "
               "results/fedbn/fig9_lr_e10/runs).")

FIG9_V3 = Claim(
    "fedbn/fig9_fedbn_faster", FIG9_STATEMENT, FIG9_PAPER,
    "the paper's setting (conf/experiment/fedbn/fig9.yaml) at a learning rate where the network trains, run 3000 "
    "steps (conf/experiment/fedbn/fig9_3000_steps.yaml): " + FIG9_SETTING.format(lr="1e-2", steps=3000)
    + "; seeds 1, 2, 3", "fedbn/fig9_3000_steps", fig9_quantities(FIG9_3000), FIG9_FASTER + FIG9_ACCURACY, seeds=3,
    diagnosis=FIG9_3000_DIAGNOSIS, superseded=(Superseded(FIG9_V2, "at 600 steps FedBN's training loss was still falling (0.01 over the last 120 "
                                    "steps); the same runs at 3000 steps, the length its decided_by named, decide "
                                    "it (declared before their runs)."),
                Superseded(FIG9_V1, FIG9_V1_WHY)))
"""FedBN Fig. 9 at lr 1e-2 and 3000 steps (``fedbn/fig9_3000_steps``), declared before its runs."""

FIG9_V3_WHY = (
    "a mean of the training loss over the run never settles in this setting: a cross-entropy on data the network "
    "separates keeps falling while its weights grow, so the mean-loss ratio (0.98-0.99 per seed against the 0.9 "
    "asked) drifts toward passing by amounts that round to 0.00 but are significant on curves this smooth, and the "
    "convergence rule reads it not converged at any length. The steps each method takes to reach a training loss "
    "are fixed once reached, and 'converges faster' is read there. Declared after seeds 1-3's curves were seen "
    "(both methods reach 0.1 at the same step in each: 115, 149, 121), so it is decided on new seeds 4-6.")

FIG9_STEPS_DIAGNOSIS = (
    "Measured (seeds 4-6, lr 1e-2, 1000 steps): FedBN reaches a training loss of 0.1 at steps 136 / 136 / 102 and "
    "FedAvg at 136 / 136 / 103, a ratio of 1.00 against the 0.9 asked; at 0.2 both at 48 / 41 / 35 and at 0.05 "
    "FedBN at 431 / 509 / 333 against 435 / 516 / 335 (0.99). Final test accuracy 98.5 / 99.0 / 98.25 % FedBN, "
    "98.75 / 99.0 / 98.25 % FedAvg. The curves coincide as at 600 and 3000 steps on seeds 1-3 (the superseded "
    "declarations below): with one full-batch step a round both methods normalize with each client's own batch "
    "statistics in training and differ only by FedAvg's averaging of γ and β, which stayed near their initial values "
    "in the 600-step runs (max |γ − 1| 0.029-0.044, seeds 1-3; not measured on seeds 4-6). "
    "So in this reading of App. F (Σ₂ = 0.5^|i−j|, one step a round, the training-mode loss) FedBN is not faster; "
    "App. F leaves open Σ₂'s values, the local steps per round and which loss it plots.")

FIG9_STEPS_CHECK = (Check("FedBN steps to loss 0.1", "FedAvg steps to loss 0.1", "ratio_at_most", 0.9,
                          "paper: curves only, 'significantly faster convergence'; FedBN reaches a training loss of "
                          "0.1 in at most nine tenths of FedAvg's steps"),)

FIG9_CLAIM = Claim(
    "fedbn/fig9_fedbn_faster", FIG9_STATEMENT, {"FedBN steps to loss 0.1": None, "FedAvg steps to loss 0.1": None,
                                                "FedBN accuracy": 100.0, "FedAvg accuracy": 100.0},
    "the paper's setting (conf/experiment/fedbn/fig9.yaml) at a learning rate where the network trains, new seeds "
    "(conf/experiment/fedbn/fig9_steps_to_loss.yaml): " + FIG9_SETTING.format(lr="1e-2", steps=1000).split("; mean loss")[0]
    + "; steps to loss 0.1 = the first step whose training loss is at or below 0.1; seeds 4, 5, 6",
    "fedbn/fig9_steps_to_loss",
    {**{f"{m} steps to loss 0.1": Quantity(FIG9_STEPS, {METHOD: METHODS[m]}, "reach:train_loss<=0.1", 1.0)
        for m in ("FedBN", "FedAvg")},
     **{f"{m} accuracy": Quantity(FIG9_STEPS, {METHOD: METHODS[m]}) for m in ("FedBN", "FedAvg")}},
    FIG9_STEPS_CHECK + FIG9_ACCURACY, seeds=3, diagnosis=FIG9_STEPS_DIAGNOSIS,
    superseded=supersede(FIG9_V3, FIG9_V3_WHY))
"""FedBN Fig. 9 as steps to a training loss of 0.1 (``fedbn/fig9_steps_to_loss``), declared before its runs."""


FIG4A_FALLS_DIAGNOSIS = (
    "Holds for FedAvg (75.2 at E = 1, 74.3 at E = 16; most of the loss on synth_like, 51.0 -> 41.3, and svhn_like, "
    "67.2 -> 64.8) and fails for FedBN, whose accuracy rises from E = 1 to E = 4 and then stays flat "
    "(89.3, 91.7, 91.4, 91.5 at E = 1, 4, 8, 16). Our E = 1 is under-trained at the final round: 100 rounds of 5 "
    "local steps (150 images, B = 32) are 500 steps, where the paper's E = 1 takes 23 steps a round for 300 rounds; "
    "FedBN's E = 1 curve still climbs at the end (87.0 at round 75, 89.3 at 100; train loss 0.18), while E >= 4 "
    "plateau by round 75 (train loss 0.012 and below). At an equal number of local epochs E = 1 leads (round 100 "
    "of E = 1 89.3, round 25 of E = 4 87.7, round 6 of E = 16 78.6). Between E = 4 and 16 FedBN moves by 0.3 "
    "points, inside one seed's sd.")


def table11(rival: str, preset: str = "table11_digits", rounds: int = 100, diagnosis: str = "",
            superseded: tuple[Superseded, ...] = ()) -> Claim:
    """FedBN above ``rival`` on every domain by a third of the paper's gap there, on the runs of
    ``fedbn/<preset>`` (``rounds`` rounds)."""
    runs = f"results/fedbn/{preset}/runs"
    paper = {f"{method} {domain}": TABLE11_PAPER[method][i] for method in ("FedBN", rival)
             for i, domain in enumerate(DOMAINS)}
    quantities = {f"{method} {domain}": Quantity(runs, {METHOD: METHODS[method]}, f"final:acc_{ours}")
                  for method in ("FedBN", rival) for domain, ours in DOMAINS.items()}
    checks = []
    for domain in DOMAINS:
        gap = paper[f"FedBN {domain}"] - paper[f"{rival} {domain}"]
        checks.append(Check(f"FedBN {domain}", f"{rival} {domain}", "at_least", round(gap / 3, 2),
                            f"paper gap on {domain} {gap:.2f} points; a third of it"))
    return Claim(
        f"fedbn/table11_vs_{METHODS[rival]}",
        f"§5.1 Fig. 5 / Table 11 (Digits-5, 5 trials): FedBN achieves the highest accuracy, above {rival} on every "
        "domain (most on SVHN, whose appearance differs most).",
        paper, SETTING.replace("100 rounds", f"{rounds} rounds") + f"; each domain's test accuracy (acc_<domain>), the "
        f"paper's {', '.join(DOMAINS)} checked on {', '.join(DOMAINS.values())}",
        f"fedbn/{preset}", quantities, tuple(checks), seeds=3, diagnosis=diagnosis, full_scale=FULL.format("table11"),
        superseded=superseded)


def table11_300_rounds(rival: str) -> Claim:
    """``table11(rival)`` on the same 12 runs at 300 rounds, the 100-round declaration kept as superseded."""
    return table11(rival, "table11_300_rounds_digits", 300, TABLE11_300_DIAGNOSIS[rival], superseded=(Superseded(
        table11(rival, diagnosis=TABLE11_DIAGNOSIS[rival]), "at 100 rounds a failing check read a quantity still improving at the last evaluation; the "
                        "same runs at 300 rounds (the paper's length) decide it (declared before their runs, "
                        "commit 2582162 and before at 100 rounds)."),))


def at_e(method: str, epochs: int, metric: str = FINAL, scale: float = 100.0, runs: str = FIG4A) -> Quantity:
    """A method's runs at E local epochs (``scale`` 1 for a loss, as Fig. 9's quantities)."""
    return Quantity(runs, {METHOD: method, "algo.local_epochs": epochs}, metric, scale)


def fig4a_falls(preset: str = "fig4a_digits", rounds: int = 100, diagnosis: str = "",
                superseded: tuple[Superseded, ...] = (), fedavg_preset: str = "", fedavg_rounds: int = 0) -> Claim:
    """Fig. 4a: accuracy at E = 1 at or above E = 16 for both methods, on the runs of ``fedbn/<preset>``
    (FedAvg's on those of ``fedbn/<fedavg_preset>`` at ``fedavg_rounds`` where given)."""
    fedavg_preset, fedavg_rounds = fedavg_preset or preset, fedavg_rounds or rounds
    runs = {"FedBN": f"results/fedbn/{preset}/runs", "FedAvg": f"results/fedbn/{fedavg_preset}/runs"}
    lengths = (f", E = 1 against E = 16 with {rounds} rounds each" if fedavg_rounds == rounds else
               f", E = 1 against E = 16, FedBN with {rounds} rounds each (fedbn/{preset}), FedAvg with "
               f"{fedavg_rounds} (fedbn/{fedavg_preset})")
    return Claim(
        "fedbn/fig4a_accuracy_falls_with_e",
        "§5.1 Fig. 4a (Digits-5): an inverse relationship between the local epochs E and the test accuracy, for both "
        "FedBN and FedAvg.",
        {"FedBN E=1": None, "FedBN E=16": None, "FedAvg E=1": None, "FedAvg E=16": None},
        SETTING.replace("100 rounds", f"{rounds} rounds") + lengths,
        f"fedbn/{preset}",
        {f"{m} E={e}": at_e(METHODS[m], e, runs=runs[m]) for m in ("FedBN", "FedAvg") for e in (1, 16)},
        (Check("FedBN E=1", "FedBN E=16", "at_least", 0.0, "paper: figure only; accuracy falls as E grows"),
         Check("FedAvg E=1", "FedAvg E=16", "at_least", 0.0, "paper: figure only; accuracy falls as E grows")),
        seeds=3, diagnosis=diagnosis, full_scale=FULL.format("fig4a"), superseded=superseded)


FIG4A_300 = fig4a_falls("fig4a_300_rounds_digits", 300, superseded=(Superseded(
    fig4a_falls(diagnosis=FIG4A_FALLS_DIAGNOSIS),
    "at 100 rounds FedBN's E = 1 was still improving at its last evaluation (the diagnosis: 500 local steps "
    "where the paper's E = 1 takes 23 a round for 300 rounds); E = 1 and E = 16 at the paper's 300 rounds decide "
    "it (declared before their runs; the 100-round declaration at commit 2582162 and before)."),))
"""FedBN Fig. 4a at 300 rounds (``fedbn/fig4a_300_rounds_digits``), declared before its runs."""

FIG4A_600_DIAGNOSIS = (
    "Holds by a tie on FedBN's side: at 600 rounds FedBN's final accuracy is 93.0 / 91.4 / 92.2 at E = 1 and "
    "93.5 / 91.7 / 91.3 at E = 16 (E = 1 lower in two seeds of three), a mean difference of +0.04 against a "
    "threshold of 0, with neither curve drifting (+0.05 each over the last 120 rounds). The paper's 'inverse "
    "relationship' shows for FedAvg (+3.57 at 300 rounds); for FedBN on the stand-in, E = 1 catches up with E = 16 "
    "given 600 rounds but does not pass it.")

FIG4A_CLAIM = fig4a_falls(
    "fig4a_600_rounds_digits", 600, fedavg_preset="fig4a_300_rounds_digits", fedavg_rounds=300,
    diagnosis=FIG4A_600_DIAGNOSIS,
    superseded=supersede(FIG4A_300,
                         "at 300 rounds FedBN's check failed by 0.13 points (E = 1 91.9, E = 16 92.0) while "
                         "drifting toward passing (+0.12 ± 0.03 over the last 60 rounds, both curves still "
                         "rising); FedBN's runs at twice the length decide it, and FedAvg's check, passing with no "
                         "significant drift against it, stays on its 300-round runs (declared before the "
                         "600-round runs)."))
"""FedBN Fig. 4a, FedBN at 600 rounds (``fedbn/fig4a_600_rounds_digits``), declared before its runs."""


def size(method: str, percent: float) -> Quantity:
    return Quantity(TABLE14, {METHOD: METHODS[method], "dataset.options.percent": percent})


def share(percent: float) -> str:
    """``percent`` of the data as a label: ``5 %``."""
    return f"{percent * 100:g} %"


def sizes_paper(*methods: str) -> dict[str, float]:
    return {f"{method} {share(p)}": TABLE14_MEAN[(method, p)] for method in methods for p in (0.05, 1.0)}


def margin(a: str, b: str, percent: float) -> Check:
    """``a`` above ``b`` at ``percent`` of the data by a third of the paper's margin there."""
    gap = TABLE14_MEAN[(a, percent)] - TABLE14_MEAN[(b, percent)]
    name = share(percent)
    return Check(f"{a} {name}", f"{b} {name}", "at_least", round(gap / 3, 2),
                 f"paper margin at {name} {gap:.2f} points; a third of it")


def above_fedavg(claim_id: str, statement: str, setting: str, preset: str,
                 points: dict[str, Callable[[str], Quantity]], paper_preset: str) -> Claim:
    """FedBN at or above FedAvg at each point of a figure without numbers (``points``: label -> the quantity of
    a method's runs there)."""
    return Claim(
        claim_id, statement, {}, setting, preset,
        {f"{m} {point}": quantity(METHODS[m]) for point, quantity in points.items() for m in ("FedBN", "FedAvg")},
        tuple(Check(f"FedBN {point}", f"FedAvg {point}", "at_least", 0.0, "paper: figure only; FedBN at or above")
              for point in points),
        seeds=3, full_scale=FULL.format(paper_preset))


TABLE13_GAP = sum(TABLE13_MEAN["FedBN"]) / 9 - sum(TABLE13_MEAN["FedAvg"]) / 9

FIG3_V1 = Claim(
    "fedbn/fig3_loss_lower_and_smoother",
    "§5.1 Fig. 3 (Digits-5, E = 1): the training loss of FedBN goes down faster and smoother than FedAvg's.",
    {"FedBN mean loss": None, "FedAvg mean loss": None, "FedBN rises": None, "FedAvg rises": None},
    SETTING + ", evaluated every round; training loss = the mean loss of a round's local steps (train_loss); "
    "mean loss = its mean over the 100 rounds, rises = the sum of its increases from round to round",
    "fedbn/fig4a_digits",
    {f"{m} {label}": at_e(METHODS[m], 1, f"{kind}:train_loss", 1.0)
     for label, kind in (("mean loss", "mean"), ("rises", "rises")) for m in ("FedBN", "FedAvg")},
    (Check("FedBN mean loss", "FedAvg mean loss", "at_most", 0.0, "paper: curves only; FedBN's lower"),
     Check("FedBN rises", "FedAvg rises", "at_most", 0.0, "paper: curves only; FedBN's smoother")),
    seeds=3, diagnosis=FIG3_DIAGNOSIS, full_scale=FULL.format("fig3"))
"""FedBN Fig. 3 as first declared (commit 02ecf67 and before): the training-mode loss of the local steps."""

FIG3_CLAIM = Claim(
    "fedbn/fig3_loss_lower_and_smoother",
    "§5.1 Fig. 3 (Digits-5, E = 1): the training loss of FedBN goes down faster and smoother than FedAvg's.",
    {"FedBN mean loss": None, "FedAvg mean loss": None, "FedBN rises": None, "FedAvg rises": None},
    SETTING + ", evaluated every round; training loss = the authors' \"Train Loss\": each client's model after "
    "aggregation in eval mode on its own training set, the mean over clients (client_train_loss); mean loss = its "
    "mean over the 100 rounds, rises = the sum of its increases from round to round",
    "fedbn/fig3_digits",
    {f"{m} {label}": Quantity(FIG3, {METHOD: METHODS[m]}, f"{kind}:client_train_loss", 1.0)
     for label, kind in (("mean loss", "mean"), ("rises", "rises")) for m in ("FedBN", "FedAvg")},
    (Check("FedBN mean loss", "FedAvg mean loss", "at_most", 0.0, "paper: curves only; FedBN's lower"),
     Check("FedBN rises", "FedAvg rises", "at_most", 0.0, "paper: curves only; FedBN's smoother")),
    seeds=3, full_scale=FULL.format("fig3"),
    superseded=(Superseded(FIG3_V1, "it measured the wrong quantity: the training-mode loss averaged over the local "
                                    "steps, where BN normalizes with each batch's own statistics in both methods; "
                                    "the authors' code logs the model after aggregation in eval mode on each "
                                    "client's training data, where FedAvg's averaged statistics act "
                                    "(claims_audit.md, category c). Its runs are fig4a_digits's E = 1 runs."),))
"""FedBN Fig. 3 on the quantity the paper plots, declared before its runs (``fedbn/fig3_digits``)."""


CLAIMS: list[Claim] = [
    table11_300_rounds("FedAvg"),
    table11_300_rounds("FedProx"),
    table11_300_rounds("SingleSet"),
    FIG3_CLAIM,
    above_fedavg(
        "fedbn/fig4a_every_e",
        "§5.1 Fig. 4a (Digits-5): FedBN's accuracy stably exceeds FedAvg's for E = 1, 4, 8 and 16 local epochs.",
        SETTING + ", E ∈ {1, 4, 8, 16} with 100 rounds each", "fedbn/fig4a_digits",
        {f"E={e}": lambda method, e=e: at_e(method, e) for e in (1, 4, 8, 16)}, "fig4a"),
    FIG4A_CLAIM,
    Claim(
        "fedbn/fig4b_margin_grows_as_data_shrinks",
        "§5.1 Fig. 4b, App. E.5 Table 14 (Digits-5): the improvement margin of FedBN over SingleSet increases as the "
        "local dataset shrinks (means over the domains: 0.02 points at 100 % of the data, 4.84 at 5 %).",
        sizes_paper("FedBN", "SingleSet"),
        SETTING + "; 100 % = 10 parts (1,500 images) and 5 % = 75 images per client", "fedbn/table14_digits",
        {f"{m} {share(p)}": size(m, p) for m in ("FedBN", "SingleSet") for p in (0.05, 1.0)},
        (margin("FedBN", "SingleSet", 0.05),
         Check("FedBN 100 %", "SingleSet 100 %", "at_most", margin("FedBN", "SingleSet", 0.05).threshold,
               "paper margin at 100 % 0.02 points; at most the margin asked at 5 %, so the margin grows")),
        seeds=3, full_scale=FULL.format("table14")),
    Claim(
        "fedbn/table14_above_fedavg",
        "App. E.5 Table 14 (Digits-5): FedBN is above FedAvg at every local dataset size (means over the domains: "
        "+1.29 points at 100 %, +3.98 at 5 %).",
        sizes_paper("FedBN", "FedAvg"),
        SETTING + "; 100 % = 10 parts (1,500 images) and 5 % = 75 images per client", "fedbn/table14_digits",
        {f"{m} {share(p)}": size(m, p) for m in ("FedBN", "FedAvg") for p in (0.05, 1.0)},
        (margin("FedBN", "FedAvg", 0.05), margin("FedBN", "FedAvg", 1.0)),
        seeds=3, full_scale=FULL.format("table14")),
    above_fedavg(
        "fedbn/fig4c_clients",
        "§5.1 Fig. 4c (Digits-5): with n clients per domain (more clients, less heterogeneity) FedBN achieves "
        "substantially higher accuracy than FedAvg at every n.",
        SETTING + "; n ∈ {1, 2, 5, 10} clients of 150 images per domain", "fedbn/fig4c_digits",
        {f"n={n}": lambda method, n=n: Quantity(FIG4C, {METHOD: method, CLIENTS: f"n{n}"}) for n in (1, 2, 5, 10)},
        "fig4c"),
    Claim(
        "fedbn/table12_centralized",
        "App. E.3 Table 12 (Digits-5, 5 trials): FedBN achieves performance comparable with centralized training on "
        "the pooled data (means over the domains: 85.22 vs 86.28).",
        {"FedBN": 85.22, "centralized": 86.28},
        SETTING + "; centralized = one model on the five clients' pooled 750 images, one epoch a round; FedBN = "
        "table11_digits's FedBN runs", "fedbn/table12_digits",
        {"FedBN": Quantity(TABLE11, {METHOD: "fedbn"}), "centralized": Quantity(TABLE12, {METHOD: "centralized"})},
        (Check("FedBN", "centralized", "within", 3.0, "paper gap 1.06 points: comparable (a tie)"),),
        seeds=3, full_scale=FULL.format("table12")),
    Claim(
        "fedbn/table13_b_e",
        "App. E.4 Table 13 (Digits-5): over the combinations of B ∈ {10, 50, ∞} and E ∈ {1, 4, 16} FedBN "
        f"consistently outperforms FedAvg (mean over the nine cells: +{TABLE13_GAP:.2f} points).",
        {"FedBN": round(sum(TABLE13_MEAN["FedBN"]) / 9, 2), "FedAvg": round(sum(TABLE13_MEAN["FedAvg"]) / 9, 2)},
        SETTING + "; B ∈ {10, 50, 150 = a client's data}, E ∈ {1, 4, 16}, one seed per cell; each quantity is the "
        "mean over its nine cells", "fedbn/table13_digits",
        {"FedBN": Quantity(TABLE13, {METHOD: "fedbn"}), "FedAvg": Quantity(TABLE13, {METHOD: "fedavg"})},
        (Check("FedBN", "FedAvg", "at_least", round(TABLE13_GAP / 3, 2),
               f"paper: mean gap over the cells {TABLE13_GAP:.2f} points; a third of it"),),
        seeds=9, full_scale=FULL.format("table13")),
    FIG9_CLAIM,
]
