"""Pre-registration checked by the machine (``figures/claims/declared.py``): each check and control is dated by
the commit that declared it and set against the commits of the runs it reads; the committed record
``results/claims/declared.json`` is what git gives, and the page marks every declaration that came after its runs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import CONF, write_run_record
from fedbn_bench.figures.claims import CLAIMS, declared
from fedbn_bench.figures.claims.base import Check, Claim, Control, Quantity, judge
from fedbn_bench.figures.claims.declared import (
    AFTER, BEFORE, DATA, UNRECORDED, WITH, Declared, check_key, control_key, is_repository, positions, refresh,
    run_commits, uncommitted_runs)
from fedbn_bench.figures.claims.report import claims_md

ROOT = CONF.parent
RUNS = "results/toy_declared/runs"


def test_a_declaration_stands_before_with_or_after_its_runs():
    record = Declared({"k": ["d000001", 10], "new": None},
                      {"early": ["r000001", 5], "same": ["d000001", 10], "late": ["r000002", 12], "uncommitted": None})
    assert record.standing("k", ["late", "uncommitted"]) == (BEFORE, "d000001", "r000002")
    assert record.standing("k", ["uncommitted"]) == (BEFORE, "d000001", None)
    assert record.standing("k", ["late", "same"]) == (WITH, "d000001", "d000001")
    assert record.standing("k", ["late", "early", "same"]) == (AFTER, "d000001", "r000001")
    assert record.standing("new", ["late"]) == (AFTER, None, "r000002")      # committed runs, declaration not yet
    assert record.standing("new", ["uncommitted"]) == (WITH, None, None)
    assert record.standing("missing", ["late"]) == (UNRECORDED, None, None)


def write_run(root, name: str, method: str, acc: float) -> None:
    write_run_record(root / RUNS / name, [f"+experiment/m={method}"], acc)


def test_the_page_marks_a_threshold_and_a_control_declared_after_their_runs(tmp_path):
    q = {m: Quantity(RUNS, {"+experiment/m": m}) for m in "abu"}
    claim = Claim("fbn/toy", "A beats B.", {}, "", "p", {"A": q["a"], "B": q["b"]},
                  (Check("A", "B", "at_least", 10.0, "toy"),), controls=(Control("undefended", {"A": q["u"]}),))
    for method, acc in (("a", 0.9), ("b", 0.5), ("u", 0.55)):
        write_run(tmp_path, f"{method}/seed0", method, acc)   # nested, as fedrbn's method/setting trees
    verdict = judge(claim, tmp_path)
    record = Declared({check_key(claim.id, claim.quantities, claim.checks[0]): ["c000009", 9],
                       control_key(claim, claim.controls[0]): ["c000003", 3]},
                      {f"{RUNS}/a/seed0": ["c000004", 4], f"{RUNS}/b/seed0": ["c000005", 5],
                       f"{RUNS}/u/seed0": ["c000002", 2]})
    md = claims_md([verdict], record)
    assert "Threshold: toy. **Declared after its runs**: at `c000009`, its first run at `c000004`." in md
    assert "fails the checks, as it must. **Declared after its runs**: at `c000003`, its first run at `c000002`." in md
    assert "of the 2 checks and controls on this page (superseded ones included), 0 were declared before every " \
           "run they read, 0 in the same commit as their runs, 2 after their runs and 0 are not recorded" in md
    record = Declared({**record.declarations, control_key(claim, claim.controls[0]): ["c000001", 1]}, record.runs)
    assert "as it must. Declared at `c000001`, before its runs." in claims_md([verdict], record)


def test_a_harvested_run_not_yet_committed_is_recorded_as_not_committed(tmp_path):
    """A harvest commits its runs with the refreshed record, so the record must already name them (as not
    committed): the CI failure of 3858824, whose record lacked the run it committed."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)
    git("init", "-q")
    for seed in (0, 1, 2):
        (tmp_path / RUNS / f"seed{seed}").mkdir(parents=True)
        (tmp_path / RUNS / f"seed{seed}" / "summary.json").write_text("{}")
    git("add", f"{RUNS}/seed0")
    git("commit", "-q", "-m", "first run")
    git("add", f"{RUNS}/seed1")
    place = positions(tmp_path)
    assert list(run_commits(tmp_path, [RUNS], place)) == [f"{RUNS}/seed0"]
    assert uncommitted_runs(tmp_path, [RUNS]) == [f"{RUNS}/seed1", f"{RUNS}/seed2"]
    assert uncommitted_runs(tmp_path, ["results/elsewhere"]) == []


def test_a_run_re_run_at_recorded_code_is_dated_by_its_own_record(tmp_path):
    """A run re-run in full over an older one (issue 57: its summary names the code that made it) is dated by the
    commit that wrote that summary; an old record rewritten without one keeps the commit that first added it (a
    cosmetic rewrite never makes an earlier run look newer than a declaration)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout
    git("init", "-q")
    for seed in (0, 1):
        (tmp_path / RUNS / f"seed{seed}").mkdir(parents=True)
        (tmp_path / RUNS / f"seed{seed}" / "summary.json").write_text('{"status": "completed"}')
    git("add", "."), git("commit", "-q", "-m", "runs")
    first = git("rev-parse", "HEAD").strip()
    (tmp_path / RUNS / "seed0" / "summary.json").write_text('{"status": "completed", "code_commit": "abc"}')
    (tmp_path / RUNS / "seed1" / "summary.json").write_text('{"status": "completed", "wall_time_s": 1}')
    git("add", "."), git("commit", "-q", "-m", "seed 0 re-run, seed 1 rewritten")
    again = git("rev-parse", "HEAD").strip()
    assert run_commits(tmp_path, [RUNS], positions(tmp_path)) == {f"{RUNS}/seed0": again, f"{RUNS}/seed1": first}


def test_a_commit_s_keys_come_from_that_commit_s_claims_not_the_installed_ones(tmp_path):
    """``keys_at`` runs ``declared.py`` over exported ``src/`` trees, all in one process: the claims it reads must be
    each tree's, not the installed project's (a top-level import of the project would bind the installed package
    and date every declaration by the first commit whose claims import) nor the tree's before (the second tree
    here lacks the module its claims import, so it must read as not importing)."""
    trees = [tmp_path / name / "src" for name in ("with_marker", "without_marker")]
    for tree in trees:
        claims = tree / "fedbn_bench" / "figures" / "claims"
        claims.mkdir(parents=True)
        for package in (claims.parent.parent, claims.parent):
            (package / "__init__.py").write_text("")
        (claims / "__init__.py").write_text("from fedbn_bench.marker import CLAIMS\n")
    (trees[0] / "fedbn_bench" / "marker.py").write_text("CLAIMS = []\n")
    out = tmp_path / "keys.json"
    done = subprocess.run([sys.executable, declared.__file__, str(out), *map(str, trees)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {str(trees[0]): [], str(trees[1]): None}


@pytest.mark.skipif(not is_repository(ROOT), reason="needs the repository's git history")
def test_the_committed_record_is_what_git_gives():
    """Each declaration and run of ``results/claims/declared.json`` is dated as git dates it now; one recorded as
    not committed must have been committed with the record or after it."""
    committed, fresh = json.loads((ROOT / DATA).read_text()), refresh(ROOT, CLAIMS)
    place = positions(ROOT)
    log = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", str(DATA)],
                         capture_output=True, text=True, check=True).stdout.split()
    recorded_at = place[log[0]] if log else len(place) + 1
    for part in ("declarations", "runs"):
        assert set(committed[part]) >= set(fresh[part]), f"{part} missing: run python scripts/claims.py"
        for key, now in fresh[part].items():
            then = committed[part][key]
            assert then == now or (then is None and now is not None and now[1] >= recorded_at), (part, key, then, now)
