"""A run records the code that made it (issue 57 §1): commit, dirty flag and a hash of the difference."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import build_simulation
from fedbn_bench.records.provenance import code_record, diff_digest


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("x = 1\n")
    (repo / "results").mkdir()
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return repo


def test_a_clean_checkout_records_its_commit_and_is_not_dirty(tmp_path):
    repo = checkout(tmp_path)
    (repo / "results" / "run.csv").write_text("a run's records are not code\n")
    record = code_record.__wrapped__(repo)
    assert record == {"code_commit": git(repo, "rev-parse", "HEAD").strip(), "code_dirty": False}


def test_a_changed_or_added_code_file_makes_the_run_dirty_with_a_digest_of_the_change(tmp_path):
    repo = checkout(tmp_path)
    (repo / "src" / "a.py").write_text("x = 2\n")
    changed = code_record.__wrapped__(repo)
    assert changed["code_dirty"] and len(changed["code_diff_sha256"]) == 64
    (repo / "src" / "b.py").write_text("y = 1\n")
    assert diff_digest(repo) != changed["code_diff_sha256"]
    (repo / "src" / "a.py").write_text("x = 1\n")
    assert diff_digest(repo) is not None   # the untracked file alone


def test_outside_a_checkout_the_record_names_the_package_version(tmp_path):
    record = code_record.__wrapped__(tmp_path)
    assert record["code_commit"] is None and "code_version" in record


def test_a_run_writes_its_code_into_summary_json(tmp_path):
    build_simulation(["debug=default"], tmp_path, rounds=1).run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["code_commit"] == code_record()["code_commit"] and "code_dirty" in summary
