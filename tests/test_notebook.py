"""The notebooks under ``notebooks/`` execute top to bottom and are committed with their outputs:
``quickstart.ipynb`` (naive BN vs FBN, two seeds each, ten rounds on the embedded digits, the records
read back, the curve drawn by ``make_figures.py curve``) and ``claims.ipynb`` (one claim, its runs, verdict, chart and learning curves; only reads
records, so it also runs where they are missing)."""
from __future__ import annotations

import pytest

from conftest import ROOT
from fedbn_bench.figures.claims.base import VERDICTS

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[dev]')")

NOTEBOOKS = ROOT / "notebooks"


def execute(name: str, parameters: str | None = None) -> list[dict]:
    """Run ``notebooks/<name>`` in a fresh kernel (``parameters`` replaces its cell tagged so) and
    return its outputs; none is an error."""
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[dev]')")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[dev]')")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    if parameters is not None:
        cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
        cell.source = parameters
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


def stream(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def images(outputs: list[dict]) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


def test_quickstart_notebook_runs():
    outputs = execute("quickstart.ipynb")
    text = stream(outputs)
    assert "| BN | 2 | 2 | 10 |" in text and "| FBN | 2 | 2 | 10 |" in text
    assert images(outputs)


def test_claims_notebook_follows_a_claim_to_its_verdict_and_chart():
    outputs = execute("claims.ipynb")
    text = stream(outputs)
    assert "fbn/fig3a_naive_collapses" in text and "naive BN collapses" in text and "FBN − naive ≥ 20" in text
    assert any(f"verdict: {v}\n" in text for v in VERDICTS)
    assert images(outputs) >= 1  # the claim's committed chart, then the curves once runs exist


def committed_text(name: str) -> str:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_committed_notebooks_show_what_the_current_code_gives():
    """The outputs committed with the notebooks are today's: the claim count, the quickstart's sweep."""
    from fedbn_bench.figures.claims import BY_ID, CLAIMS
    from fedbn_bench.figures.claims.base import judge

    rerun = "re-run the notebook and commit it with its outputs (nbclient.NotebookClient(...).execute(), as execute() here)"
    claims_text = committed_text("claims.ipynb")
    assert f"({len(CLAIMS)} claims declared)" in claims_text, rerun
    claim_id = claims_text.split(" ", 1)[0]
    verdict = judge(BY_ID[claim_id], ROOT).verdict
    assert f"verdict: {verdict}\n" in claims_text, rerun + f" (the committed runs give {claim_id}: {verdict})"
    assert "| FBN | 2 | 2 | 10 |" in committed_text("quickstart.ipynb"), rerun


def test_claims_notebook_without_runs_says_not_run(tmp_path):
    outputs = execute("claims.ipynb", f"from pathlib import Path\nROOT = Path({str(tmp_path)!r})\n"
                                      "CLAIM_ID = 'fbn/fig3a_naive_collapses'")
    text = stream(outputs)
    assert "verdict: not run" in text and "no chart yet" in text and "no learning curve" in text
    assert images(outputs) == 0


@pytest.mark.parametrize("name", ["quickstart.ipynb", "claims.ipynb"])
def test_notebooks_are_committed_with_their_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    outputs = [o for c in code for o in c.outputs]
    assert images(outputs) and not [o for o in outputs if o.output_type == "error"]
