"""A newcomer's mistakes on the command line: each one is one ``error:`` line that names the
nearest legal choice, exit status 2, before anything is trained; ``--help`` shows the app's groups."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CONF, ROOT, compose_config
from fedbn_bench.config.choices import public_groups, unknown_choice, user_choices
from fedbn_bench.config.help import GROUPS, help_text
from fedbn_bench.config.override_check import override_error
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import run_experiment


def cli(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "0",
                                            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])})


def test_a_misspelt_key_added_with_plus_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key `nrom`.*Did you mean `norm`"):
        run_experiment(compose_config(["+nrom=fbn", "rounds=1"]), tmp_path / "run")
    assert not list(tmp_path.rglob("metrics.csv"))


def test_plus_key_from_the_command_line_exits_2_with_one_line(tmp_path):
    result = cli("+nrom=fbn", "rounds=1", "logger=none", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: unknown key `nrom`. Did you mean `norm`? "
        "`python run.py --help` lists the groups and keys"]
    assert not list(tmp_path.rglob("metrics.csv"))


@pytest.mark.parametrize("argv, message", [
    (["experiment=fbn/fig3a_fmnst"], "experiment=fbn/fig3a_fmnst is not an option of `experiment` (conf/experiment/). "
                                     "Did you mean `fbn/fig3a_fmnist`"),
    (["-m", "norm=bn,fnb"], "norm=fnb is not an option of `norm` (conf/norm/). Did you mean `fbn`"),
    (["dataset=fmnist"], "Did you mean `mnist` or `fashion_mnist`?"),
    (["norm=batchnorm"], "Choices: bn, dbn, fbn, fedbn, fedfn, fedrbn, fixbn, gn, hbn, in, ln, none."),
])
def test_a_misspelt_choice_names_the_nearest_choices(argv, message):
    assert message in unknown_choice(argv, CONF)


@pytest.mark.parametrize("argv", [
    ["norm=bn", "experiment=fbn/fig3a", "preset=null"], ["+experiment/hbn/table1_method=gn"], ["-m", "norm=bn,fbn"],
    ["norm=choice(bn,fbn)"], ["dataset.root=/x"], ["hydra/launcher=joblib"], ["--config-dir", "/mine", "norm=mine"],
    ["hydra.searchpath=[file:///mine]", "norm=mine"],
])
def test_existing_choices_and_sweep_syntax_pass(argv):
    assert unknown_choice(argv, CONF) is None
    assert override_error(argv, CONF) is None


def test_a_misspelt_preset_from_the_command_line_exits_2_with_one_line(tmp_path):
    result = cli("experiment=fbn/fig3a_fmnst", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: " + unknown_choice(["experiment=fbn/fig3a_fmnst"], CONF)]
    assert not list(tmp_path.iterdir())


def test_help_describes_the_app_and_its_groups_without_internals():
    result = cli("--help")
    assert result.returncode == 0 and result.stdout.strip() == help_text(CONF).strip()
    text = result.stdout
    assert text.startswith("fedbn-bench: simulate federated learning")
    assert set(public_groups(CONF)) == set(GROUPS)  # every group described, no description left over
    for group in GROUPS:
        assert f"  {group}: {GROUPS[group]}" in text
    for internal in ("schema/", "/base", "_method", "byzantine_scenario", "hydra/"):
        assert internal not in text
    assert "fbn/fig3a_fmnist" in text and "fbn/base/fmnist" not in user_choices(CONF, "experiment")


def test_a_preset_that_sweeps_is_refused_without_m_naming_the_command_that_runs_it(tmp_path):
    result = cli("experiment=fbn/fig3a_toy", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: experiment=fbn/fig3a_toy is a grid of 60 runs over +experiment/fbn/fig3a_method, gamma, seed: run it "
        "with -m (python run.py -m experiment=fbn/fig3a_toy), or one of its runs by setting "
        "+experiment/fbn/fig3a_method=naive gamma=0 seed=0"]
    assert not list(tmp_path.iterdir())


def test_a_preset_run_that_sets_every_swept_key_is_one_run_of_its_grid(tmp_path):
    result = cli("experiment=fbn/fig3a_toy", "+experiment/fbn/fig3a_method=fbn", "gamma=0", "seed=0", "rounds=1",
                 "eval_every=1", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run/summary.json").is_file()
    assert "norm:\n  name: fbn\n" in (tmp_path / "run/.hydra/config.yaml").read_text()


@pytest.mark.parametrize("argv, line", [
    (["rounds=abc"], "rounds=abc is invalid: `rounds` takes an integer"),
    (["-m", "seed=0,1", "lr=0.1,x"], "lr=x is invalid: `lr` takes a number"),
    (["nrom=fbn"], "unknown key `nrom`. Did you mean `norm`? `python run.py --help` lists the groups and keys"),
    (["partition.alhpa=3"], "unknown key `partition.alhpa`: `partition` (dirichlet) takes name, alpha, min_size, scheme. "
                            "Did you mean `alpha`?"),
    (["+partition.alhpa=3"], "unknown key `partition.alhpa`: `partition` (dirichlet) takes name, alpha, min_size, "
                             "scheme. Did you mean `alpha`?"),
    (["logger.mode=online"], "logger.mode=online needs a W&B login for api.wandb.ai, and none is set up (no "
                             "WANDB_API_KEY, no ~/.netrc entry); allowed without one: logger.mode=offline (python "
                             "scripts/wandb_sync.py uploads it later), logger=none; or run `wandb login` first"),
])
def test_a_misspelt_key_a_wrong_type_or_no_login_is_one_line_exit_2_and_nothing_on_disk(tmp_path, monkeypatch, argv,
                                                                                       line):
    """Issue 52 §4: Hydra's own multi-line errors (exit 1) and W&B's traceback (exit 1, a failed run left) before."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    (tmp_path / "cwd").mkdir()
    result = cli(*argv, "rounds=1" if "rounds=abc" not in argv else "seed=0", cwd=tmp_path / "cwd")
    assert (result.returncode, result.stderr.strip().splitlines()) == (2, [f"error: {line}"])
    assert not list((tmp_path / "cwd").iterdir())


@pytest.mark.parametrize("argv, line", [
    (["nrom=fbn", "rounds=abc"], "unknown key `nrom`. Did you mean `norm`?"),
    (["nrom=fbn", "partition.alhpa=3"], "unknown key `nrom`. Did you mean `norm`?"),
    (["partition.alhpa=3", "nrom=fbn"], "unknown key `partition.alhpa`"),
    (["rounds=abc", "nrom=fbn"], "rounds=abc is invalid: `rounds` takes an integer"),
])
def test_two_mistakes_on_one_command_line_are_one_line_naming_the_first(tmp_path, argv, line):
    """Issue 59: a second mistake made the first one's recomposition raise: an 83-line traceback, exit 1."""
    result = cli(*argv, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    [only] = result.stderr.strip().splitlines()
    assert only.startswith(f"error: {line}")
    assert not list(tmp_path.iterdir())


def test_an_override_below_an_unknown_key_is_one_line_after_two_compositions(monkeypatch):
    """``wandb.mode=disabled`` (the logger is ``logger.mode``): Hydra names ``wandb`` as the missing key, and
    recomposing without overrides of ``wandb`` itself kept ``wandb.mode``, recursing for minutes. The line says
    which group ``wandb`` is an option of."""
    from fedbn_bench.config import override_check

    calls, compose_original = [], override_check.composed

    def counted(conf_dir, overrides):
        calls.append(overrides)
        assert len(calls) <= 2, f"composed {len(calls)} times: {calls}"
        return compose_original(conf_dir, overrides)

    monkeypatch.setattr(override_check, "composed", counted)
    line = override_error(["wandb.mode=disabled", "rounds=1"], CONF)
    assert line == ("unknown key `wandb`. `wandb` is an option of `logger`: logger=wandb, its keys logger.<key>. "
                    "`python run.py --help` lists the groups and keys")
    assert calls[-1] == ["rounds=1"]
