"""Numbers quoted in the README and in ``docs/`` come from committed results.

A paragraph that cites a committed result file (``results/…/<file>.md|csv|json``) may quote only
numbers that appear in one of the files it cites (a table cites what the paragraph before it
cites), so a number left behind after the results change fails here. Generated blocks (between ``<!-- …:begin`` and ``<!-- …:end -->``) are checked by their
generators (``scripts/claims.py --check``).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CITED = re.compile(r"results/[\w./-]+\.(?:md|csv|json)")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
GENERATED = re.compile(r"<!-- \w+:begin.*?<!-- \w+:end -->", re.S)


def paragraphs(text: str) -> list[str]:
    """The page's paragraphs (blank-line separated), generated blocks and code blocks removed."""
    text = GENERATED.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def unsupported_numbers(paragraph: str, cites: str = "") -> list[str]:
    """The decimal numbers of ``paragraph`` found in none of the committed files it (or ``cites``) cites."""
    sources = [ROOT / path for path in CITED.findall(paragraph + cites) if (ROOT / path).is_file()]
    if not sources:
        return []
    text = "\n".join(path.read_text() for path in sources)
    return [n for n in DECIMAL.findall(paragraph) if n not in text]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_numbers_match_the_committed_results(page: Path) -> None:
    parts = paragraphs(page.read_text())
    cites = ["", *parts[:-1]]
    wrong = {p.strip()[:80]: bad for p, before in zip(parts, cites)
             if (bad := unsupported_numbers(p, before if p.lstrip().startswith("|") else ""))}
    assert not wrong, f"{page.name}: numbers not in the results the paragraph cites: {wrong}"


def test_a_changed_number_is_caught() -> None:
    assert unsupported_numbers("loop 1.99 s / round, 9.99× (`results/bench/README.md`)") == ["9.99"]


def test_readme_fits_a_screenful_of_reading() -> None:
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024


EXPERIMENT = re.compile(r"experiment=([\w/.-]+?)(?=[\s`,)]|$)", re.M)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_presets_exist(page: Path) -> None:
    names = set(EXPERIMENT.findall(page.read_text())) - {"<preset>"}
    missing = sorted(n for n in names if not (ROOT / "conf" / "experiment" / f"{n}.yaml").is_file())
    assert not missing, f"{page.name} quotes presets that conf/experiment/ lacks: {missing}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_pages_resolve(page: Path) -> None:
    targets = [t.split("#")[0] for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("#")]
    broken = sorted({t for t in targets if t and not (page.parent / t).exists()})
    assert not broken, f"{page.name} links to files that do not exist: {broken}"
