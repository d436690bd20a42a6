"""Issue 27's schema fuzzer (``config_fuzz.py``): every key of every config group, boundary and
wrong values, through the real pre-round path. Each case must be refused by the schema or by one
``UserError`` naming the key, writing nothing; or be legal with a reason in ``LEGAL``. Never a
traceback.

The default suite walks the top-level keys (the run's own settings) and counts every case of every
group; ``-m slow`` walks every group's options (it still reports findings: see ``test_every_group``)."""
from __future__ import annotations

import fnmatch
import logging
from pathlib import Path

import pytest

import config_fuzz as fz

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
}
"""``(key pattern, value label) -> why the value is legal``."""


def legal_reason(case: fz.Case) -> str | None:
    return next((why for (pattern, label), why in LEGAL.items()
                 if label == case.label and fnmatch.fnmatch(case.key, pattern)), None)


def findings(cases, tmp_path: Path) -> tuple[int, list[str]]:
    """Run ``cases``; the number run and one line per case that breaks the promise."""
    logging.disable(logging.WARNING)
    bad, count = [], 0
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
    finally:
        logging.disable(logging.NOTSET)
    return count, bad


def test_the_fuzzer_walks_every_key_of_every_group(tmp_path):
    per_group: dict[str, int] = {}
    for _, case in fz.cases(tmp_path / "data"):
        group = case.option.split("=")[0] or "top-level"
        per_group[group] = per_group.get(group, 0) + 1
    print(f"schema fuzzer: {sum(per_group.values())} cases ({per_group})")
    assert set(per_group) == {"top-level", *fz.GROUPS}
    assert all(count >= 2 for count in per_group.values())


def test_every_top_level_key_is_legal_or_one_error_naming_it(tmp_path):
    top = [(cfg, case) for cfg, case in fz.top_level_cases(tmp_path / "data")]
    count, bad = findings(top, tmp_path)
    print(f"schema fuzzer, top-level keys: {count} cases, {len(bad)} findings")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@pytest.mark.xfail(reason="issue 27: open findings of the group walk (tracebacks and unexplained legal values "
                          "in the dataset, norm, algo, adversarial and byzantine groups) are not all fixed yet",
                   strict=False)
def test_every_group(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative roots and cache folders of the fuzzed values land here
    count, bad = findings(fz.cases(tmp_path / "data"), tmp_path)
    print(f"schema fuzzer, every group: {count} cases, {len(bad)} findings")
    assert not bad, "\n".join(bad)
