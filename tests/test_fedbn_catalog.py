"""FedBN's declarations (figures/catalog/fedbn.py) against their presets and paper files: every
figure and table of FedBN's experiments is declared, drawn by another declaration or named as not
covered; each declaration's runs folder lies in its preset's sweep folder (the toys of Figs. 1-2 read
their records instead: tests/test_toys_papers.py); each row a preset sweeps is a row of the paper
file and back; each column is a domain of the dataset; and a hand-made run
tree lands in the right cells (Table 14's percent rows, Table 13's B × E rows)."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from conftest import CONF
from fedbn_bench.data.digits5 import DOMAINS
from fedbn_bench.figures.base import read_paper
from fedbn_bench.figures.catalog import CATALOG, fedbn
from fedbn_bench.figures.cli import draw
from test_make_figures import make_run

ROOT = CONF.parent
PAPER_IDS = {"fedbn/fig1", "fedbn/fig2", "fedbn/fig3", "fedbn/fig4a", "fedbn/fig4b", "fedbn/fig4c", "fedbn/fig5",
             "fedbn/table1", "fedbn/fig6", "fedbn/fig7", "fedbn/fig8", "fedbn/fig9",
             *(f"fedbn/table{n}" for n in range(2, 18))}
"""FedBN's figures and tables (repro notes §3); a declaration ``<id>_<part>`` covers ``<id>``."""
DECLARED = [fig for fig in CATALOG.values() if fig.paper_name == "fedbn"]


def preset_yaml(preset: str):
    return OmegaConf.load(CONF / "experiment" / f"{preset}.yaml")


def sweep(preset: str) -> dict[str, list[str]]:
    params = OmegaConf.select(preset_yaml(preset), "hydra.sweeper.params", default={}) or {}
    return {key: str(values).split(",") for key, values in params.items()}


def sweep_dir(preset: str) -> str:
    """The preset's sweep folder, through the presets it includes (fig3 -> fig4a, fig8 -> table13)."""
    cfg = preset_yaml(preset)
    found = OmegaConf.select(cfg, "hydra.sweep.dir", default=None)
    if found is None:
        base = next(d for d in cfg.defaults if isinstance(d, str) and d.startswith("/experiment/fedbn/"))
        return sweep_dir(base.removeprefix("/experiment/").split("@")[0])
    return found


def test_every_paper_figure_is_declared_drawn_by_another_or_not_covered():
    covered = {fig.id for fig in DECLARED} | set(fedbn.DRAWN_BY) | set(fedbn.NOT_COVERED)
    for paper_id in PAPER_IDS:
        assert paper_id in covered or any(c.startswith(paper_id + "_") for c in covered), paper_id
    assert not set(fedbn.NOT_COVERED) & {fig.id for fig in DECLARED}
    assert all(reason.strip() for reason in fedbn.NOT_COVERED.values())
    for drawn in fedbn.DRAWN_BY.values():
        assert set(drawn) <= set(CATALOG)


@pytest.mark.parametrize("fig", [f for f in DECLARED if "toy" not in f.options], ids=lambda f: f.id)
def test_declaration_reads_its_presets_runs(fig):
    preset = fig.preset or fig.id
    assert (CONF / "experiment" / f"{preset}.yaml").exists(), preset
    root = sweep_dir(preset)
    runs = fig.runs or root
    assert runs == root or runs.startswith(root + "/"), (runs, root)
    params = sweep(preset)
    if fig.rows and fig.runs and fig.runs != root:
        # the runs folder is one value of the sweep's first path component (method / E)
        sub = fig.runs.removeprefix(root + "/")
        assert any(sub in (v, f"E{v}") for values in params.values() for v in values), (fig.id, sub)
    if fig.rows:
        assert fig.rows in {k.lstrip("+") for k in params}, (fig.id, fig.rows, list(params))


@pytest.mark.parametrize("fig", [f for f in DECLARED if f.paper], ids=lambda f: f.id)
def test_paper_rows_are_the_swept_rows_and_columns_the_domains(fig):
    paper = read_paper(CONF / "experiment" / fig.paper, fig.paper_where)
    swept = sweep(fig.preset or fig.id)["+" + fig.rows if not fig.rows.startswith("dataset") else fig.rows]
    assert set(paper) == set(swept), (fig.id, sorted(paper), swept)
    for method, row in paper.items():
        for column in fig.metric:
            assert float(row[column]) > 0, (fig.id, method, column)
    dataset = OmegaConf.load(CONF / "dataset" / f"{compose_dataset(fig)}.yaml").options.domains
    assert set(fig.metric) == {c.removeprefix("final:acc_") for c in fig.metric.values()}
    assert set(fig.metric) == set(dataset), (fig.id, list(fig.metric), list(dataset))


def compose_dataset(fig) -> str:
    cfg = preset_yaml(fig.preset or fig.id)
    for entry in cfg.get("defaults", []):
        if isinstance(entry, str) and entry.startswith("/experiment/fedbn/"):
            return compose_dataset(type(fig)(entry.removeprefix("/experiment/").split("@")[0], fig.recipe))
        if not isinstance(entry, str) and "override /dataset" in entry:
            return entry["override /dataset"]
    raise AssertionError(f"{fig.id}: no dataset in the preset")


def test_digits_columns_are_the_loaders_domains():
    assert set(fedbn.DIGITS) == set(DOMAINS)


def test_table14_and_table13_rows_land_in_their_cells(tmp_path):
    """Runs as `run.py -m experiment=fedbn/table14` writes them: the percent override names the row."""
    runs = tmp_path / "table14"
    for percent, svhn in (("1.0", 0.8), ("0.01", 0.3)):
        make_run(runs, f"percent{percent}-seed0", ["+experiment/fedbn/method=fedbn", f"dataset.options.percent={percent}"],
                 {}, {"status": "completed"}, [svhn])
        metrics = runs / f"percent{percent}-seed0" / "metrics.csv"
        lines = metrics.read_text().splitlines()
        extra = ",".join(f"acc_{d}" for d in fedbn.DIGITS)
        values = ",".join(str(svhn + 0.01 * i) for i in range(len(fedbn.DIGITS)))
        metrics.write_text(f"{lines[0]},{extra}\n{lines[1]},{values}\n")
    job = draw(CATALOG["fedbn/table14_fedbn"], ROOT, CONF, runs=runs, out=tmp_path / "out")
    md = job.md_path.read_text()
    # SVHN: ours 80.00 vs paper 86.93 at 100 %; 30.00 vs 31.98 at 1 %; USPS at 1 %: 31.00 vs 85.05
    assert "| 100 % | 1 | completed | 80.00 | 86.93 | -6.93 | 81.00 | 98.82 | -17.82 |" in md
    assert "| 1 % | 1 | completed | 30.00 | 31.98 | -1.98 | 31.00 | 85.05 | -54.05 |" in md
    assert "- 60 %: no run (missing)" in md
