"""Issue 27's schema fuzzer (``config_fuzz.py``): every key of every config group, boundary and
wrong values, through the real pre-round path. Each case must be refused by the schema or by one
``UserError`` naming the key, writing nothing; or be legal with a reason in ``LEGAL``. Never a
traceback.

A legal value is then trained to the end (one round, ``fz.TINY``) and must end ``completed``. The default
suite walks the top-level keys (the run's own settings) and every key of every option of every group (1481
cases, about 90 s on one core, one test per group so the workers share them) and trains the first legal value
of each option; ``-m slow`` trains every legal value. Neither trains a ``huge`` value (a huge round count or
step count is the long run itself; its reason in ``LEGAL`` says why it is legal) nor, in the default suite,
the options in ``COSTLY`` (224-pixel models, 15 to 45 s for one round on two cores)."""
from __future__ import annotations

import fnmatch
import logging
from pathlib import Path

import pytest

import config_fuzz as fz
from fedbn_bench.config.override_check import override_error

LEGAL = {
    ("seed", "zero"): "seed 0 is the default seed",
    ("seed", "huge"): "any non-negative seed is a seed",
    ("rounds", "huge"): "a long run (not trained here)",
    ("eval_every", "huge"): "evaluates only after the last round",
    ("checkpoint_every", "zero"): "0 writes no checkpoint",
    ("checkpoint_every", "huge"): "checkpoints only after the last round",
    ("val_fraction", "zero"): "no validation split (the default)",
    ("lr", "huge"): "a learning rate that diverges is recorded as `diverged`, not refused",
    ("alpha", "huge"): "Dir(alpha) with a large alpha is near-iid",
    ("gamma", "zero"): "gamma-similarity 0 is the extreme non-iid split (FBN §4)",
    ("crop_padding", "zero"): "random crops without padding",
    ("crop_padding", "huge"): "a large padding is a legal (if useless) crop; only cifar and tinyimagenet read it",
    ("resume", "empty"): "an empty `resume` is no resume (a fresh run)",
    ("transforms", "empty_list"): "no update transform (the default)",
    ("metrics", "empty_list"): "only the default metrics (the default)",
    ("*eval_batch_size", "huge"): "the whole test set in one batch",
    ("dataset.test_samples", "huge"): "more than the test set holds is the whole test set",
    ("norm.eps", "huge"): "a large eps only damps the normalization (the layer still normalizes)",
    ("norm.freeze_fraction", "zero"): "FixBN's T* = 0: statistics frozen from the first round (the limit of "
                                      "FixBN Fig. 2c's sweep of T*)",
    ("norm.stats_samples", "zero"): "HBN: 0 draws every sample of the client for its statistics pass",
    ("norm.stats_samples", "huge"): "HBN: more than a client holds is every sample",
    ("norm.stats_batch_size", "huge"): "HBN: the statistics pass in one batch",
    ("model.options.dropout", "zero"): "no dropout",
    ("dataset.num_domains", "zero"): "no synthetic domains (only partition=domains reads it)",
    ("dataset.options.cache_dir", "*"): "a folder name for the decoded-image cache, created when missing",
    ("dataset.options.crop_padding", "*"): "0 crops without padding; a large padding is legal (if useless)",
    ("dataset=sklearn_digits:dataset.root", "*"): "the embedded digits read no files",
    ("dataset=*_gaussian*:dataset.root", "*"): "the Gaussian toys are drawn, not read",
    ("dataset.options.*samples_per_class", "huge"): "a large drawn toy data set (costly, not wrong)",
    ("dataset.options.rho", "zero"): "FedBN App. F's second domain with independent features (AR(1), ρ = 0)",
    ("dataset.options.mean", "*"): "the class means ±m: 0 makes the classes coincide (a chance-level check), any "
                                   "other real separates them",
    ("algo.schedule.*", "*"): "read only by the schedule that uses it (`algo.schedule.name`, checked there by "
                              "validate_schedule); the presets' constant schedule reads none",
    ("algo.lr", "huge"): "a learning rate that diverges is recorded as `diverged`, not refused",
    ("algo.momentum", "zero"): "plain SGD without momentum",
    ("algo.weight_decay", "zero"): "no weight decay",
    ("algo.weight_decay", "huge"): "a decay that shrinks the weights to zero trains badly, not wrongly",
    ("algo.local_epochs", "huge"): "long local training (costly, not wrong)",
    ("algo.local_steps", "huge"): "long local training (costly, not wrong)",
    ("algo.clip_grad_norm", "huge"): "a clipping norm that never binds",
    ("algo.client_momentum", "zero"): "DSGD on raw gradients (FBN's reduced runs)",
    ("algo.server_lr", "huge"): "a server step that diverges is recorded as `diverged`",
    ("algo.server_momentum", "zero"): "FedAvgM with momentum 0 is FedAvg",
    ("algo.beta1", "zero"): "adaptive server optimizers without first-moment momentum (Reddi et al.)",
    ("algo.beta2", "zero"): "the second moment of the last round only",
    ("algo.tau", "huge"): "a large τ damps the adaptivity (FedAdam/FedYogi/FedAdagrad) or flattens MOON's softmax",
    ("algo.v_init", "*"): "the adaptive optimizers' initial second moment: 0 or any size (τ keeps the step finite)",
    ("algo.mu", "*"): "μ = 0 turns FedProx / MOON into FedAvg (the usual check); a large μ keeps clients at the "
                      "global model",
    ("algo.lam", "zero"): "FedACG's λ = 0: no look-ahead (FedAvg with server momentum)",
    ("algo.beta", "*"): "FedACG's proximal weight β: 0 is none, a large β is legal (and diverges, recorded as such)",
    ("algo.rho", "*"): "FedSAM's ρ = 0 is plain SGD; a large ρ a large perturbation",
    ("algo.agc_eps", "huge"): "FedWon's AGC floor: a large one clips less",
    ("algo.ws_gamma", "huge"): "FedWon's scaled weight standardization gain: large, not wrong",
    ("algo.ws_eps", "huge"): "FedWon's WS epsilon: a large one damps the standardization",
    ("algo.agc_clip", "huge"): "FedWon's adaptive clipping that never binds",
    ("algo.projection_dim", "huge"): "a wide MOON projection head (costly, not wrong)",
    ("adversarial=none:adversarial.*", "*"): "adversarial=none trains clean and reads none of the attack's keys",
    ("adversarial.eps", "huge"): "an unbounded L∞ ball (the adversarial pixels stay in [0, 1])",
    ("adversarial.steps", "huge"): "a long attack (costly, not wrong)",
    ("adversarial.step_size", "huge"): "a sign step beyond ε is projected back onto the ball",
    ("adversarial.replays", "huge"): "Free AT's minibatch replays (read by free_at only; costly, not wrong)",
    ("adversarial.at_fraction", "zero"): "no AT user: the clean end of FedRBN's AT-fraction sweep (Fig. 3)",
    ("adversarial.at_domains", "zero"): "no AT domain: the clean end of FedRBN's AT-domain sweep (Fig. 3b)",
    ("adversarial.domain_order", "empty_list"): "the dataset's own domain order",
    ("adversarial.pnc_lambda", "zero"): "no PNC loss (the default; FedRBN's ablation without it)",
    ("adversarial.pnc_clip", "huge"): "PNC's gradient clipping that never binds",
    ("adversarial.pnc_warmup", "*"): "rounds before PNC starts: 0 from the start, a huge value never",
    ("adversarial.eval_attacks", "empty_list"): "no robust evaluation (clean accuracy only)",
    ("adversarial.adv_weight", "zero"): "the AT loss without its adversarial term (FedRBN's code's adv_lmbd = 0)",
    ("partition.min_size", "zero"): "no minimum client size (HBN's code draws the Dirichlet split once)",
    ("partition.alpha", "huge"): "Dir(alpha) with a large alpha is near-iid",
    ("partition.samples_per_client", "huge"): "an upper bound: every sample of the client's domain",
    ("partition.shards_per_client", "huge"): "read by mode=shards only; the default mode=classes checks it is >= 1",
    ("partition.gamma", "zero"): "gamma-similarity 0 is the extreme non-iid split (FBN §4)",
    ("norm.temperature", "huge"): "FedRBN: a large softmax temperature makes the propagation weights uniform",
    ("aggregator.f", "zero"): "a robust rule with no Byzantine budget (median, Krum with f = 0) is still defined",
    ("byzantine.f", "zero"): "no Byzantine client (the default)",
    ("byzantine.foe_eps", "huge"): "FOE with a large ε (Xie et al. sweep ε up to 100)",
    ("byzantine.alie_z", "*"): "ALIE's z is any real (0 sends the honest mean; null derives it from n and f)",
    ("byzantine.gaussian_mu", "*"): "the Gaussian attack's mean is any real",
    ("byzantine.gaussian_sigma", "zero"): "σ = 0 sends the constant μ",
    ("byzantine.gaussian_sigma", "huge"): "a large σ is the usual Gaussian attack's regime",
    ("logger.*", "*"): "W&B names and tags are free text (project, entity, group, tags)",
    ("evaluation.clients", "huge"): "at most that many clients an evaluation: every client when the federation has fewer",
}
"""``(key pattern, value label) -> why the value is legal``; a pattern with ``:`` is matched against
``<group>=<option>:<key>`` (a key that the option does not read)."""


COSTLY = {"dataset=office_caltech10", "dataset=imagenet", "dataset=domainnet", "model=vgg11", "model=vgg19"}
"""Options whose one-round run costs 15 to 45 s on two cores: trained only under ``-m slow``."""


def legal_reason(case: fz.Case) -> str | None:
    return next((why for (pattern, label), why in LEGAL.items()
                 if fnmatch.fnmatch(case.label, label)
                 and fnmatch.fnmatch(f"{case.option}:{case.key}" if ":" in pattern else case.key, pattern)), None)


def findings(cases, tmp_path: Path, train: str = "first") -> tuple[int, int, list[str]]:
    """Run ``cases``; the number run, the number trained to the end and one line per case that breaks the
    promise. ``train``: which legal
    values are then trained to the end, ``"first"`` of each option outside ``COSTLY`` or ``"all"``."""
    logging.disable(logging.WARNING)
    bad, count, trained = [], 0, []
    try:
        for i, (cfg, case) in enumerate(cases):
            count += 1
            run_dir = tmp_path / f"case{i}"
            kind, message = fz.outcome(cfg, case, run_dir)
            if kind == "traceback":
                bad.append(f"{case}: traceback {message}")
            elif kind in ("error", "composition") and not fz.names_key(message, case):
                bad.append(f"{case}: the error does not name the key: {message}")
            elif kind == "error" and run_dir.exists() and any(run_dir.iterdir()):
                bad.append(f"{case}: refused after writing {sorted(p.name for p in run_dir.iterdir())}")
            elif kind == "legal" and legal_reason(case) is None:
                bad.append(f"{case}: accepted without a reason in LEGAL")
            elif kind == "legal" and to_train(case, trained, train):
                trained.append(case.option)
                problem = fz.completes(cfg, case, tmp_path / f"trained{i}")
                if problem:
                    bad.append(f"{case}: legal, but {problem}")
    finally:
        logging.disable(logging.NOTSET)
    return count, len(trained), bad


def to_train(case: fz.Case, trained: list[str], train: str) -> bool:
    if case.label == "huge":
        return False
    return train == "all" or (case.option not in trained and case.option not in COSTLY)


def test_the_fuzzer_walks_every_config_group_of_a_run():
    """Every group directory under conf/ that a run composes is fuzzed (the tests below walk its keys and
    assert at least two cases each); the others select whole experiments or run lengths, not keys."""
    not_keys = {"experiment", "preset", "scale", "debug", "hydra"}
    groups = {path.name for path in fz.CONF.iterdir() if path.is_dir()} - not_keys
    assert set(fz.GROUPS) == groups


def test_every_top_level_key_is_legal_or_one_error_naming_it(tmp_path):
    top = [(cfg, case) for cfg, case in fz.top_level_cases(tmp_path / "data")]
    count, trained, bad = findings(top, tmp_path)
    print(f"schema fuzzer, top-level keys: {count} cases, {trained} legal values trained, {len(bad)} findings")
    assert count >= 2 and not bad, "\n".join(bad)


@pytest.mark.parametrize("group", fz.GROUPS)
def test_every_key_of_every_group_is_legal_or_one_error_naming_it(group, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative roots and cache folders of the fuzzed values land here
    count, trained, bad = findings(fz.group_cases(group, tmp_path / "data"), tmp_path)
    print(f"schema fuzzer, {group}: {count} cases, {trained} legal values trained, {len(bad)} findings")
    assert count >= 2 and not bad, "\n".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("group", ("top-level", *fz.GROUPS))
def test_every_legal_value_trains_to_the_end(group, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = fz.top_level_cases(tmp_path / "data") if group == "top-level" else fz.group_cases(group, tmp_path / "data")
    count, trained, bad = findings(cases, tmp_path, train="all")
    print(f"schema fuzzer, {group}: {count} cases, every legal value trained ({trained}), {len(bad)} findings")
    assert count and not bad, "\n".join(bad)


@pytest.mark.parametrize("group", ("", *fz.GROUPS), ids=lambda g: g or "top-level")
def test_every_misspelt_key_and_wrong_type_on_the_command_line_is_one_line_naming_it(group):
    """Issue 52: the ``key=``, ``group.key=`` and ``+group.key=`` forms of a misspelt key, and a word given to a
    number or a switch, are each one line (``override_error``, what ``run.py`` prints before Hydra starts)
    naming the key and, for a misspelt one, the key meant."""
    bad = []
    for argv, key, meant in fz.command_line_cases(group):
        message = override_error(argv, fz.CONF)
        if message is None or "\n" in message or f"`{key}`" not in message or (meant and f"`{meant}`" not in message):
            bad.append(f"{' '.join(argv)}: {message!r}")
    assert not bad, "\n".join(bad)
