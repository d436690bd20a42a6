"""One layout for every result: ``results/<paper>/<id>/``. Every preset's ``hydra.sweep.dir`` and every
figure's declared run tree and output folder sit under their own paper's ``results/<paper>/``, and the
top of ``results/`` holds only the paper folders and the few shared ones."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from conftest import CONF, ROOT
from fedbn_bench.figures.catalog import CATALOG

PAPERS = ("fbn", "fedbn", "fedrbn", "fixbn", "hbn")
SHARED = {"bench", "claims", "CLAIMS.md", "parity", "replay", "anchors"}
"""Not a paper's result: the speed benchmarks, the claims' verdicts and charts, parity with the authors' code, the
replays of committed runs and the runs CI replays (issue 57)."""

SWEEP_DIRS = {path.relative_to(CONF / "experiment").with_suffix("").as_posix(): sweep_dir
              for path in sorted((CONF / "experiment").glob("*/*.yaml"))
              if (sweep_dir := OmegaConf.select(OmegaConf.load(path), "hydra.sweep.dir")) is not None}


def test_top_of_results_is_papers_and_shared_folders():
    assert {p.name for p in (ROOT / "results").iterdir() if not p.name.startswith(".")} <= set(PAPERS) | SHARED


def test_there_are_sweep_dirs_of_every_paper():
    assert {preset.split("/")[0] for preset in SWEEP_DIRS} == set(PAPERS)


@pytest.mark.parametrize("preset", sorted(SWEEP_DIRS))
def test_a_preset_sweeps_into_its_papers_results(preset):
    assert SWEEP_DIRS[preset].startswith(f"results/{preset.split('/')[0]}/"), SWEEP_DIRS[preset]


@pytest.mark.parametrize("fig", [f for f in CATALOG.values() if f.runs or f.out], ids=lambda f: f.id)
def test_a_figure_reads_and_writes_under_its_papers_results(fig):
    for path in filter(None, (fig.runs, fig.out)):
        assert path.startswith(f"results/{fig.paper_name}/"), (fig.id, path)
