"""Device hygiene checked on a CPU: no tensor is created on an implicit device where the engine, the
norms, the algorithms, the robust rules, the attacks or the metrics run.

A tensor factory (``torch.zeros``, ``randperm``, ``Generator``, ...) without ``device=`` lands on
torch's default device: the CPU, or whatever ``torch.set_default_device`` says. On a GPU run that is
the commonest bug in code like ours (a CPU mask indexing a CUDA tensor, a CUDA generator handed to a
CPU ``randperm``). So every factory in those packages names its device: the device of the data it
works with, or ``"cpu"`` where the work is host-side on purpose (index draws from a CPU generator,
moved once). Two places may leave it out: an ``__init__`` (a module's parameters and buffers are
built on the CPU and moved by ``model.to(device)``) and the allow list below, each entry with its
reason; an entry that no longer matches anything fails the test too.
"""
from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "src" / "fedbn_bench"
SCANNED = ("engine", "norms", "algorithms", "robust", "adversarial", "metrics")
FACTORIES = {"zeros", "ones", "full", "empty", "eye", "arange", "linspace", "logspace", "tensor", "as_tensor",
             "rand", "randn", "randint", "randperm", "normal", "bernoulli", "Generator"}

ALLOWED: dict[tuple[str, str, str], str] = {
    ("adversarial/eval_attacks.py", "<module>", "zeros"):
        "a one-parameter stand-in model, only read by torchattacks' constructor checks at build time",
}
"""``(file under src/fedbn_bench, enclosing function, factory)`` → why its device may stay implicit."""


def implicit_device_factories(source: str) -> list[tuple[str, str, int]]:
    """``(enclosing function, factory, line)`` of each ``torch.<factory>(...)`` without ``device=``
    outside an ``__init__``."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id == "torch"
                    and child.func.attr in FACTORIES and function != "__init__"
                    and not any(k.arg == "device" for k in child.keywords)):
                found.append((function, child.func.attr, child.lineno))
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return found


def scan() -> dict[tuple[str, str, str], list[int]]:
    hits: dict[tuple[str, str, str], list[int]] = {}
    for package in SCANNED:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            name = path.relative_to(PACKAGE).as_posix()
            for function, factory, line in implicit_device_factories(path.read_text()):
                hits.setdefault((name, function, factory), []).append(line)
    return hits


def test_every_tensor_factory_names_its_device():
    hits = scan()
    unexplained = [f"{name}:{lines[0]} {function}(): torch.{factory}(...) without device="
                   for (name, function, factory), lines in sorted(hits.items()) if (name, function, factory) not in ALLOWED]
    assert not unexplained, "tensor factories on an implicit device:\n" + "\n".join(unexplained)
    stale = sorted(set(ALLOWED) - set(hits))
    assert not stale, f"allow-list entries that match nothing any more: {stale}"


def test_the_scan_finds_a_factory_without_device_and_accepts_the_allowed_forms():
    source = """
import torch
X = torch.zeros(1)
class M:
    def __init__(self):
        self.b = torch.ones(3)
    def f(self, x, gen):
        a = torch.randperm(4, generator=gen)
        b = torch.zeros_like(x)
        c = torch.full((2,), 1.0, device=x.device)
        def inner():
            return torch.Generator()
        return torch.tensor([1], device="cpu")
"""
    assert implicit_device_factories(source) == [("<module>", "zeros", 3), ("f", "randperm", 8),
                                                  ("inner", "Generator", 12)]
