"""A paper's claim as data, and its verdict from run records.

A :class:`Claim` is one sentence a paper asserts, with the paper's numbers; the reduced setting that
tests it (a preset and the run tree it writes); the measured :class:`Quantity` values it compares;
and its :class:`Check` relations, each with a threshold taken from the paper's own effect size.
Declarations (``claims/<paper>.py``) are committed before the runs that decide them, so the git
history shows every threshold predating its verdict. A verdict comes only from committed run records
(``records/reader.py``): ``holds`` when every check passes on the means over seeds, ``fails`` when
one does not, ``not run`` while any quantity has fewer counted runs than the claim's seeds. A run
counts when it completed or diverged (divergence is the method's outcome in that setting: its
record's value, e.g. chance accuracy, enters the mean); a failed, interrupted or unfinished run never
counts and is listed.

A verdict says what it knows: a fail whose every failing check still drifts toward passing at the end of its runs
(``convergence.RULE``) is ``fails (not converged)``, and a hold whose passing check drifts against it by more
than its margin is ``holds (not converged)``, each with the run length that would decide it
(``Claim.decided_by``); a claim declares :class:`Control` outcomes that would fail it (the
undefended run under the same attack), and a claim that holds is ``uninformative`` when one of its
controls passes its checks too (``holds (control not run)`` until the control's runs exist). A claim
whose quantity, check or setting changed keeps its earlier declaration as :class:`Superseded`, judged
and shown beside the new one with why it was replaced. A claim the offline stand-in data cannot test
(``Claim.offline``: why, and the data that would) reads ``cannot decide offline``, its checks still shown.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from fedbn_bench.figures.base import COMPLETED, load_runs, mean_std, measure
from fedbn_bench.figures.claims.convergence import Drift, Trend, coefficients, drift, of_mean, trend, untold
from fedbn_bench.records.reader import RunRecord

HOLDS, FAILS, NOT_RUN = "holds", "fails", "not run"
NOT_CONVERGED, UNINFORMATIVE, UNCONTROLLED = "fails (not converged)", "uninformative", "holds (control not run)"
HOLDS_NOT_CONVERGED, OFFLINE = "holds (not converged)", "cannot decide offline"
HOLDS_UNTOLD, FAILS_UNTOLD = "holds (too few evaluations to tell)", "fails (too few evaluations to tell)"
HOLDS_IN_NOISE, FAILS_IN_NOISE = "holds (within seed noise)", "fails (within seed noise)"
VERDICTS = (HOLDS, HOLDS_NOT_CONVERGED, HOLDS_UNTOLD, HOLDS_IN_NOISE, UNCONTROLLED, UNINFORMATIVE, FAILS,
            FAILS_IN_NOISE, NOT_CONVERGED, FAILS_UNTOLD, OFFLINE, NOT_RUN)
"""Every verdict, in report order (module docstring)."""
COUNTED = (COMPLETED, "diverged")
"""Run statuses whose records enter a claim's means (module docstring)."""


@dataclass(frozen=True)
class Quantity:
    """One measured number per run: ``metric`` (``summary:<key>``, ``final:<column>``, ``first:<column>``,
    ``best:<column>``, ``mean:<column>``, ``rises:<column>``, ``reach:<column><=<level>``: ``figures.base.measure``)
    × ``scale`` of the completed runs under ``runs`` whose config matches ``where``
    (dotted config key → value; a key starting with ``+`` is a command-line override, e.g.
    ``+experiment/fbn/fig3a_method``)."""

    runs: str
    where: Mapping[str, Any]
    metric: str = "summary:final_test_acc"
    scale: float = 100.0


@dataclass(frozen=True)
class Check:
    """``mean(a) − mean(b) >= threshold`` (``at_least``), ``<= threshold`` (``at_most``),
    ``|mean(a) − mean(b)| <= threshold`` (``within``) or ``mean(a) / mean(b) <= threshold``
    (``ratio_at_most``). ``b`` is a quantity's name or a number (e.g. chance accuracy); ``source``
    says where in the paper the threshold comes from."""

    a: str
    b: str | float
    relation: str
    threshold: float
    source: str

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"check {self.a} vs {self.b}: relation {self.relation!r} not in {sorted(RELATIONS)}")

    def text(self) -> str:
        b = f"{self.b:g}" if isinstance(self.b, (int, float)) else self.b
        return RELATIONS[self.relation][0].format(a=self.a, b=b, t=self.threshold)

    def passes(self, a: float, b: float) -> bool:
        return RELATIONS[self.relation][1](a, b, self.threshold)

    def operands(self, measured: Mapping[str, "Measured"]) -> tuple[Optional[float], Optional[float]]:
        """The means the check compares (``b`` itself where it is a number)."""
        b = self.b if isinstance(self.b, (int, float)) else measured[self.b].mean
        return measured[self.a].mean, b

    def margin(self, a: float, b: float) -> float:
        """How far the check passes (negative: how far it fails), in the units of its value."""
        if self.relation == "ratio_at_most" and b == 0:
            return -math.inf
        value = {"at_least": a - b, "at_most": b - a, "within": -abs(a - b), "ratio_at_most": -a / b}[self.relation]
        return value - (self.threshold if self.relation == "at_least" else -self.threshold)

    def drift(self, measured: Mapping[str, "Measured"], toward_passing: bool) -> Optional[Drift]:
        """The drift of the check's value at the end of its runs (``convergence.drift``)."""
        a, b = self.operands(measured)
        trends = (measured[self.a].trend, None if isinstance(self.b, (int, float)) else measured[self.b].trend)
        return drift(self.relation, a, b, trends, toward_passing)


RELATIONS = {
    "at_least": ("{a} − {b} ≥ {t:g}", lambda a, b, t: a - b >= t),
    "at_most": ("{a} − {b} ≤ {t:g}", lambda a, b, t: a - b <= t),
    "within": ("|{a} − {b}| ≤ {t:g}", lambda a, b, t: abs(a - b) <= t),
    "ratio_at_most": ("{a} / {b} ≤ {t:g}", lambda a, b, t: b != 0 and a / b <= t),
}


@dataclass(frozen=True)
class Control:
    """An outcome that would fail the claim, e.g. the undefended run under the same attack: the claim's
    quantities in ``replace`` swapped for these, read against the claim's checks that name a replaced quantity
    (or those at the indices ``checks``). A claim that holds while a control passes too is uninformative."""

    text: str
    """What the control is and why it must fail the claim's checks."""
    replace: Mapping[str, Quantity]
    checks: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class Superseded:
    """An earlier declaration of a claim (its quantity, check or setting changed): still judged and shown."""

    claim: "Claim"
    why: str
    """Why it was replaced, and the commit that declared it."""


def supersede(old: "Claim", why: str) -> tuple[Superseded, ...]:
    """``old`` replaced for ``why``, then the declarations ``old`` itself had replaced: a claim's history as one
    flat list (each shown once, newest first)."""
    return (Superseded(replace(old, superseded=()), why), *old.superseded)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper (module docstring)."""

    id: str
    """``<paper>/<name>``: the anchor in ``results/CLAIMS.md``."""
    statement: str
    """The paper's sentence, with its section."""
    paper_numbers: Mapping[str, Optional[float]]
    """The paper's value of each quantity (``None`` where the paper gives none)."""
    setting: str
    """The reduced setting: data, model, scale, and why the paper's mechanism can act there."""
    preset: str
    """``conf/experiment/<preset>.yaml``: the command that writes the runs."""
    quantities: Mapping[str, Quantity]
    checks: tuple[Check, ...]
    seeds: int = 1
    figure: Optional[str] = None
    """The figure or table file (relative to the repository) that shows the runs."""
    diagnosis: str = ""
    """For a claim that fails or partly holds: what we measured to explain it."""
    full_scale: str = ""
    """The paper-scale preset and what it costs."""
    decided_by: str = ""
    """The run length that would decide the claim where its runs had not converged (default: ``full_scale``)."""
    controls: tuple[Control, ...] = ()
    superseded: tuple[Superseded, ...] = ()
    offline: str = ""
    """Why the offline stand-in data cannot test the claim, and the data that would: such a claim reads *cannot
    decide offline* whatever its runs give (empty: the stand-ins can test it)."""
    fixed_budget: str = ""
    """Why the claim compares its quantities at one fixed, equal budget rather than where they settle (a parity of
    two implementations run for the same rounds): its checks are read without trends or drift, so it never reads
    *not converged* or *too few evaluations to tell* (issue 57 §2; empty: the convergence rule applies)."""

    def __post_init__(self) -> None:
        names = {c.a for c in self.checks} | {c.b for c in self.checks if isinstance(c.b, str)}
        unknown = sorted(names - set(self.quantities))
        if unknown:
            raise ValueError(f"claim {self.id}: checks name unknown quantities {unknown}")
        for control in self.controls:
            if not control.replace or set(control.replace) - set(self.quantities):
                raise ValueError(f"claim {self.id}: control {control.text!r} replaces no quantity or unknown ones")
            if not self.control_checks(control):
                raise ValueError(f"claim {self.id}: control {control.text!r} reads no check")

    def control_checks(self, control: Control) -> tuple[int, ...]:
        """The indices of the checks ``control`` is read against."""
        if control.checks is not None:
            return tuple(i for i in control.checks if 0 <= i < len(self.checks))
        return tuple(i for i, c in enumerate(self.checks) if {c.a, c.b} & set(control.replace))

    @property
    def paper_name(self) -> str:
        return self.id.split("/", 1)[0]


@dataclass
class Measured:
    """A quantity's values over its completed runs, and the runs that did not complete."""

    values: list[float] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    """The directories of the counted runs, relative to the repository (``declared.py`` dates them)."""
    trend: Optional[Trend] = None
    """The trend of the completed runs' curve (``convergence.trend``; a diverged run has ended)."""
    untold: str = ""
    """Why its curve has no trend that can be weighed (``convergence.untold``; empty: it has one or needs none)."""

    @property
    def mean(self) -> Optional[float]:
        return mean_std(self.values)[0]

    @property
    def sd(self) -> Optional[float]:
        return mean_std(self.values)[1]


@dataclass
class Verdict:
    claim: Claim
    measured: dict[str, Measured]
    verdict: str
    check_results: list[Optional[bool]]
    """Per check: passed, failed, or ``None`` (not evaluated)."""
    drifts: list[Optional[Drift]] = field(default_factory=list)
    """Per check: its drift toward passing where it failed, against it where it passed (``convergence.RULE``)."""
    controls: list[Optional[bool]] = field(default_factory=list)
    """Per control: whether it passes the checks it is read against (``None``: its runs are missing)."""
    control_measured: list[dict[str, Measured]] = field(default_factory=list)
    superseded: list["Verdict"] = field(default_factory=list)

    @property
    def unsettled(self) -> list[int]:
        """The checks whose outcome the runs' drift may still change (``convergence.RULE``): a failed check drifting
        significantly toward passing, a passed one drifting significantly against it by more than its margin."""
        return [i for i, (check, passed, d) in enumerate(zip(self.claim.checks, self.check_results, self.drifts))
                if passed is not None and d is not None and d.significant
                and (not passed or d.change > check.margin(*check.operands(self.measured)))]


    @property
    def untold(self) -> list[int]:
        """The checks one of whose quantities has no trend that can be weighed (``Measured.untold``); none for a claim
        at a fixed budget (``Claim.fixed_budget``)."""
        if self.claim.fixed_budget:
            return []
        return [i for i, check in enumerate(self.claim.checks)
                if any(self.measured[name].untold for name in (check.a, check.b) if isinstance(name, str))]

    @property
    def in_noise(self) -> list[int]:
        """The checks that pass or fail by less than their standard error over seeds (:func:`seed_error`)."""
        out = []
        for i, (check, passed) in enumerate(zip(self.claim.checks, self.check_results)):
            error = seed_error(check, self.measured) if passed is not None else None
            if error is not None and abs(check.margin(*check.operands(self.measured))) < error:
                out.append(i)
        return out


def seed_error(check: Check, measured: Mapping[str, Measured]) -> Optional[float]:
    """The standard error of ``check``'s value over its quantities' seeds (each side's sample sd / √n, combined as
    the check's value moves with it); ``None`` where a side has fewer than two runs (no seed noise to read)."""
    a, b = check.operands(measured)
    variance = 0.0
    for coefficient, name in zip(coefficients(check.relation, a, b), (check.a, check.b)):
        if not isinstance(name, str):
            continue
        m = measured[name]
        if len(m.values) < 2:
            return None
        variance += (coefficient * m.sd) ** 2 / len(m.values)
    return math.sqrt(variance)


def matches(run: RunRecord, where: Mapping[str, Any]) -> bool:
    """Whether ``run``'s config (or, for ``+key``, its override) has every value of ``where``."""
    for key, want in where.items():
        have = run.override(key[1:]) if key.startswith("+") else run.get(key)
        if not same(have, want):
            return False
    return True


def same(have: Any, want: Any) -> bool:
    """Config values compared as numbers where both are numbers (``0`` = ``0.0``), else as strings."""
    if have is None:
        return want is None
    try:
        return math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(have) == str(want)


def measure_quantity(q: Quantity, runs: list[RunRecord], tree: Path) -> Measured:
    """``q`` on the ``runs`` of its run tree (``tree``: where ``q.runs`` lies)."""
    out, completed = Measured(), []
    for run in runs:
        if not matches(run, q.where):
            continue
        value = measure(run, q.metric) if run.status in COUNTED else None
        if value is None:
            out.other.append(f"{run.path.name}: {run.status}")
        else:
            out.values.append(value * q.scale)
            out.runs.append(f"{q.runs}/{run.path.relative_to(tree).as_posix()}")
            if run.status == COMPLETED:
                completed.append(run)   # a diverged run ended: it has no trend to read
            else:
                out.other.append(f"{run.path.name}: {run.status} (counted)")
    out.trend = of_mean(trend(completed, q.metric, q.scale), len(completed), len(out.values))
    out.untold = untold(completed, q.metric, out.trend)
    return out


def measure_all(quantities: Mapping[str, Quantity], root: Path,
                cache: dict[Path, list[RunRecord]]) -> dict[str, Measured]:
    """Each quantity measured on the run records under ``root`` (run trees read once through ``cache``)."""
    measured = {}
    for name, q in quantities.items():
        path = root / q.runs
        if path not in cache:
            cache[path] = load_runs(path)
        measured[name] = measure_quantity(q, cache[path], path)
    return measured


def control_passes(claim: Claim, control: Control, measured: dict[str, Measured]) -> Optional[bool]:
    """Whether the claim's checks would pass with ``control``'s outcomes in place (``None``: runs missing)."""
    if any(len(m.values) < claim.seeds for m in measured.values()):
        return None
    return all(claim.checks[i].passes(*claim.checks[i].operands(measured)) for i in claim.control_checks(control))


def settled(verdict: Verdict) -> str:
    """The verdict once the checks' drift, trends, seeds and controls are read (``convergence.RULE``): a fail that one
    converged check decides is *fails*, or *fails (within seed noise)* when every failing check fails by less than
    its standard error over seeds; else one whose failing checks lack a trend *fails (too few evaluations to
    tell)*; else *fails (not converged)*. A hold is *uninformative* when a control passes too, *holds (not
    converged)* when a passing check drifts against it by more than its margin, *holds (too few evaluations to
    tell)* when a passing check has no trend, *holds (within seed noise)* when a margin is smaller than its
    standard error over seeds, *holds (control not run)* while a control's runs are missing."""
    results, unsettled, untold = verdict.check_results, verdict.unsettled, verdict.untold
    if verdict.verdict == FAILS:
        failing = [i for i, passed in enumerate(results) if not passed]
        if any(i not in unsettled and i not in untold for i in failing):
            return FAILS_IN_NOISE if set(failing) <= set(verdict.in_noise) else FAILS
        return FAILS_UNTOLD if any(i in untold for i in failing) else NOT_CONVERGED
    if any(verdict.controls):
        return UNINFORMATIVE
    if unsettled:
        return HOLDS_NOT_CONVERGED
    if untold:
        return HOLDS_UNTOLD
    if verdict.in_noise:
        return HOLDS_IN_NOISE
    return UNCONTROLLED if None in verdict.controls else HOLDS


def judge(claim: Claim, root: Path, cache: Optional[dict[Path, list[RunRecord]]] = None) -> Verdict:
    """The verdict of ``claim`` (and of the declarations it superseded) from the run records under ``root``."""
    cache = {} if cache is None else cache
    measured = measure_all(claim.quantities, root, cache)
    older = [judge(s.claim, root, cache) for s in claim.superseded]
    if any(len(m.values) < claim.seeds for m in measured.values()):
        return Verdict(claim, measured, OFFLINE if claim.offline else NOT_RUN, [None] * len(claim.checks),
                       superseded=older)
    results = [check.passes(*check.operands(measured)) for check in claim.checks]
    drifts = [None if claim.fixed_budget else check.drift(measured, toward_passing=not passed)
              for check, passed in zip(claim.checks, results)]   # a fixed budget reads no drift
    verdict = Verdict(claim, measured, HOLDS if all(results) else FAILS, results, drifts, superseded=older)
    for control in claim.controls:
        swapped = {**measured, **measure_all(control.replace, root, cache)}
        verdict.control_measured.append({name: swapped[name] for name in control.replace})
        verdict.controls.append(control_passes(claim, control, swapped))
    verdict.verdict = settled(verdict)
    if claim.offline:
        verdict.verdict = OFFLINE
    return verdict
