"""Every preset's multirun sweep as ``python run.py -m experiment=<preset>`` expands it, with Hydra's
own machinery: the *composed* ``hydra.sweeper.params`` (a preset that includes another inherits its
lists key by key: fedrbn/table4 once ran Table 2's 7 methods x 3 settings for each of its 4 rows, 84
jobs) parsed by ``OverridesParser`` and crossed by ``BasicSweeper.split_arguments``, the command
line's ``experiment=<preset>`` after the params, as ``BasicSweeper.sweep`` does. Each preset declares
its number of jobs here (``EXPECTED_JOBS``); each job composes, validates, builds its norm and
algorithm, and gets a run directory of its own (``hydra.sweep.dir``/``hydra.sweep.subdir`` resolved
for that job as ``BasicLauncher`` and ``run_job`` resolve it).

The job counts run for every preset by default (one composition each, spread over the workers);
composing every job of every preset (about 1,700 jobs, ~0.3 s each) runs under ``-m slow`` except
for ``FAST``. Last,
invariants of what some presets' jobs compose to (FBN's partition and augmentation, FixBN Fig. 1's
optimizer per bar)."""
from __future__ import annotations

import functools
import os

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from conftest import CONF, compose_config, load_script, sweep_presets
from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.config.validate import validate_config
from fedbn_bench.norms import build_norm

QUEUE = load_script("claims_queue")
SEARCHES = {"hbn/lr_search"}
"""Presets whose sweeper is a search (Optuna: ``n_trials`` runs), not a grid."""

EXPECTED_JOBS: dict[str, int] = {
    "fbn/fig3": 72, "fbn/fig3a": 48, "fbn/fig3a_mnist": 8, "fbn/fig3a_toy": 60, "fbn/fig4": 12,
    "fbn/fig4_mnist": 12, "fbn/fig5": 60, "fbn/fig6": 24, "fbn/fig7": 24, "fbn/fig8": 24, "fbn/fig9": 24,
    "fbn/fig10": 24, "fbn/fig11": 24, "fbn/fig12": 28, "fbn/fig13": 28,
    "fbn/fig3a_fmnist": 24, "fbn/fig3a_fixbn_seeds_fmnist": 10, "fbn/fig3b_fmnist": 6, "fbn/fig4_fmnist": 12, "fbn/fig5_fmnist": 9, "fbn/fig6_11_fmnist": 6,
    "fbn/parity_hbn_code": 17,
    "fedbn/fig3": 2, "fedbn/fig4a": 8, "fedbn/fig4b": 14, "fedbn/fig4c": 20, "fedbn/fig8": 9, "fedbn/fig9": 6, "fedbn/fig9_trained": 6, "fedbn/fig9_3000_steps": 6, "fedbn/fig9_steps_to_loss": 6, "fedbn/fig4a_600_rounds_digits": 6,
    "fedbn/table11": 20, "fedbn/table11_mnist": 2, "fedbn/table12": 10, "fedbn/table13": 18, "fedbn/table14": 21,
    "fedbn/table1_abide": 20, "fedbn/table1_domainnet": 20, "fedbn/table1_office": 20,
    "fedbn/table11_digits": 12, "fedbn/fig3_digits": 6, "fedbn/fig4a_digits": 24, "fedbn/table14_digits": 18,
    "fedbn/fig4c_digits": 24, "fedbn/table12_digits": 3, "fedbn/table13_digits": 18, "fedbn/table11_300_rounds_digits": 12, "fedbn/fig4a_300_rounds_digits": 12,
    "fedrbn/fig1": 60, "fedrbn/fig3a": 15, "fedrbn/fig3b": 15, "fedrbn/fig6": 8, "fedrbn/fig7": 1, "fedrbn/fig8": 12,
    "fedrbn/table1": 18, "fedrbn/table2": 63, "fedrbn/table2_mnist": 3, "fedrbn/table3": 3, "fedrbn/table4": 4,
    "fedrbn/table7": 10,
    "fedrbn/table2_digits": 27, "fedrbn/table2_single_domain_digits": 9, "fedrbn/fig1_digits": 1,
    "fedrbn/fig3a_digits": 15, "fedrbn/fig3a_at_domain_3_seeds_digits": 15, "fedrbn/fig3b_digits": 12, "fedrbn/table1_digits": 8, "fedrbn/table3_digits": 3,
    "fedrbn/table4_digits": 4, "fedrbn/table7_digits": 10, "fedrbn/table1_state_digits": 4, "fedrbn/fig8_digits": 6,
    "fedrbn/fedrbn_300_rounds_digits": 9, "fedrbn/fig6_5_seeds_300_rounds_digits": 15, "fedrbn/fig1_300_rounds_digits": 1, "fedrbn/fig8_300_rounds_digits": 3,
    "fedrbn/table4_300_rounds_digits": 4, "fedrbn/table7_b100_1000_rounds_digits": 2,
    "fixbn/fig1": 15, "fixbn/fig2ab": 3, "fixbn/fig2c": 21, "fixbn/fig3_cifar10": 45, "fixbn/fig3_mnist": 18,
    "fixbn/fig3_tinyimagenet": 45, "fixbn/fig_d_epochs": 75, "fixbn/fig_d_rounds": 50, "fixbn/fig_g": 27,
    "fixbn/fig_h": 8, "fixbn/fig_i": 45, "fixbn/sec3_4": 3, "fixbn/table1": 12, "fixbn/table2": 3,
    "fixbn/table4": 30, "fixbn/table5": 15, "fixbn/table_h": 9, "fixbn/table_i": 9,
    "fbn/controls_fmnist": 6, "fbn/fig4_3000_fmnist": 9, "fbn/fig4_3000_momentum_fmnist": 9, "fbn/fig8_10_3000_momentum_fmnist": 4, "fixbn/fig2ab_fmnist": 1, "fixbn/fig3_fmnist": 18, "fixbn/table1_fmnist": 15, "fixbn/variants_fmnist": 9, "fixbn/sec3_4_layers_fmnist": 1, "fixbn/sec3_4_400_rounds_fmnist": 1, "fixbn/fig1_late_freeze_fmnist": 3, "fixbn/fig1_600_rounds_fmnist": 6,
    "hbn/fig1": 15, "hbn/fig3": 2, "hbn/fig5": 12, "hbn/fig6": 12, "hbn/sec5": 2, "hbn/table1": 21,
    "hbn/table10": 35, "hbn/table1_c100": 21, "hbn/table1_mnist": 7, "hbn/table1_tiny": 14, "hbn/table2": 30,
    "hbn/table3": 28, "hbn/table4": 16, "hbn/table4_mnist": 16, "hbn/table5": 15, "hbn/table6": 6,
    "hbn/table8": 42, "hbn/table9": 49,
    "hbn/table1_fmnist": 42, "hbn/table2_fmnist": 12, "hbn/table4_fmnist": 24, "hbn/table6_fmnist": 15,
    "hbn/sec5_fmnist": 3, "hbn/fig5_fmnist": 12, "hbn/fig5_k100_fmnist": 6, "hbn/sec5_10_evals_fmnist": 6, "hbn/fig5_k100_10_evals_fmnist": 6, "hbn/parity_code": 12, "hbn/table1_100_rounds_fmnist": 9, "hbn/table4_100_rounds_fmnist": 24, "hbn/table2_100_rounds_fmnist": 12, "hbn/table1_phi01_100_rounds_fmnist": 12,
    "hbn/table6_100_rounds_fmnist": 15, "hbn/phi01_cause_fmnist": 18,
}
"""The runs each grid preset's sweep makes: its paper's rows x columns x seeds, as its comment lists them."""

FAST = {"fedrbn/table4", "fedrbn/table3", "fixbn/fig1", "fedbn/fig9", "hbn/table4_fmnist"}
"""Presets whose every job is composed in the default run (Table 4's rows, two presets that replace
inherited sweep lists, Fig. 1's per-bar settings); the others under ``-m slow``."""


@functools.lru_cache(maxsize=None)
def composed(preset: str) -> DictConfig:
    """``experiment=<preset>`` with its ``hydra`` node (merged sweeper params, sweep dir)."""
    return compose_config([f"experiment={preset}"], return_hydra_config=True)


def sweep_jobs(preset: str) -> list[list[str]]:
    """Each job's overrides, in the order Hydra's BasicSweeper launches them."""
    params = composed(preset).hydra.sweeper.params
    arguments = [f"{key}={value}" for key, value in params.items()] + [f"experiment={preset}"]
    [jobs] = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), max_batch_size=None)
    return jobs


def run_dir(cfg: DictConfig, num: int) -> str:
    """The output directory of job ``num`` composed as ``cfg``, as Hydra resolves it (``claims_queue.resolved``)."""
    return os.path.join(QUEUE.resolved(cfg, num, "hydra.sweep.dir"), QUEUE.resolved(cfg, num, "hydra.sweep.subdir"))


def test_every_grid_preset_declares_its_job_count():
    assert set(sweep_presets()) - SEARCHES == set(EXPECTED_JOBS), "a new preset declares its job count here"


@pytest.mark.parametrize("preset", sorted(SEARCHES))
def test_a_search_preset_has_a_search_sweeper(preset):
    assert not composed(preset).hydra.sweeper._target_.endswith(".BasicSweeper")


@pytest.mark.parametrize("preset", sorted(EXPECTED_JOBS))
def test_sweep_expands_to_the_declared_jobs(preset):
    """A grid preset (Hydra's BasicSweeper; a search sweeper belongs in ``SEARCHES``) launches its declared jobs."""
    assert composed(preset).hydra.sweeper._target_.endswith(".BasicSweeper")
    assert len(sweep_jobs(preset)) == EXPECTED_JOBS[preset]


@pytest.mark.parametrize("preset", [p if p in FAST else pytest.param(p, marks=pytest.mark.slow)
                                    for p in sorted(EXPECTED_JOBS)])
def test_every_job_composes_validates_and_has_a_run_dir_of_its_own(preset):
    dirs: dict[str, list[str]] = {}
    for num, job in enumerate(sweep_jobs(preset)):
        cfg = compose_config(job, return_hydra_config=True)
        validate_config(cfg)
        build_norm(cfg.norm)  # the checks their constructors make before any training
        build_algorithm(cfg.algo)
        dirs.setdefault(run_dir(cfg, num), []).append(" ".join(job))
    shared = {d: jobs for d, jobs in dirs.items() if len(jobs) > 1}
    assert not shared, f"jobs sharing a run directory: {shared}"


def test_table4_runs_its_four_rows_once_each():
    """FedRBN Table 4: one job per row (the row, not Table 2's method lists, decides method and setting)."""
    jobs = sweep_jobs("fedrbn/table4")
    rows = [o.split("=", 1)[1] for job in jobs for o in job if o.startswith("+experiment/fedrbn/table4_row=")]
    assert rows == ["fedrbn_150", "fatavg_300", "fatavg_free", "fatbn_free"]
    assert not [o for job in jobs for o in job if o.startswith(("+experiment/fedrbn/method=", "+experiment/fedrbn/setting="))]


FBN_PRESETS = sorted(p.stem for p in (CONF / "experiment" / "fbn").glob("*.yaml") if p.stem != "parity_hbn_code")
"""FBN's presets; ``parity_hbn_code`` runs the HBN authors' FBN baseline as their code does (its per-class
split), beside their script, so it follows HybridBN, not FBN's paper."""


@pytest.mark.parametrize("preset", FBN_PRESETS)
def test_fbn_presets_split_dirichlet_per_client_without_augmentation(preset):
    """FBN App. C.2 splits by Dirichlet as Hsu et al. (per-client class proportions: ``per_client``);
    FBN states no augmentation, so none of its presets augments (conf/preset/fbn.yaml)."""
    cfg = composed(f"fbn/{preset}")
    assert not cfg.dataset.augment
    if cfg.partition.name == "dirichlet":
        assert cfg.partition.scheme == "per_client"


def test_fixbn_fig1_bars_use_table1_settings_and_fixbn_star_momentum():
    """FixBN Fig. 1 shows Table 1's gap (§3.2: SGD without momentum for FL and centralized, lr 0.2 here)
    plus FixBN* "with SGD momentum" (the caption; maintained local momentum, App. C.4)."""
    settings = {}
    for job in sweep_jobs("fixbn/fig1"):
        cfg = compose_config(job)
        method = next(o.split("=", 1)[1] for o in job if o.startswith("+experiment/fixbn/fig1_method="))
        settings[method] = (cfg.algo.lr, cfg.algo.momentum, cfg.algo.momentum_carry)
    momentum_free = (0.2, 0.0, "none")
    assert settings == {"central_bn": momentum_free, "fedavg_bn": momentum_free, "fedavg_gn": momentum_free,
                        "fedavg_fixbn": momentum_free, "fedavg_fixbn_local": (0.02, 0.9, "local")}


def test_hbn_fig5_jobs_keep_its_batch_lr_and_local_steps():
    """HBN Fig. 5 reduced (conf/experiment/hbn/fig5_fmnist.yaml): every job trains K = 20 clients with B = 32 at
    lr 0.08 for 19 local steps; the swept row file is applied after the preset, so a row carrying Table 8's
    B = 4 lr (0.01) would silently replace them."""
    settings = {(cfg.num_clients, cfg.batch_size, cfg.lr, cfg.algo.local_steps, cfg.norm.name)
                for cfg in map(compose_config, sweep_jobs("hbn/fig5_fmnist"))}
    assert settings == {(20, 32, 0.08, 19, "hbn")}
