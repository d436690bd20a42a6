"""A model's forward paused before chosen layers: the inputs of those layers, one at a time.

HBN's statistics pass (Eq. 7, ``norms/hbn.py``) records a layer's input on every client's data
before the server aggregates it (Eq. 8, 11), and the layers after it run with the new statistics.
Rerunning the forward from the input for every layer would redo the earlier layers each time; here
the forward is traced once (``torch.fx``, the chosen layers kept as leaves) and run node by node
as a generator that yields ``(layer, its input)`` before each chosen layer runs and goes on only
when asked. Between two steps the caller may change the layers' state (load statistics); the next
step reads it. Each generator keeps the values its remaining nodes need (freed after their last
use), so many suspended generators (one per chunk of samples) hold one layer's activations each.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch import fx, nn


class LeafTracer(fx.Tracer):
    """``torch.fx``'s tracer with the modules of ``leaves`` kept as single calls."""

    def __init__(self, leaves: tuple[type[nn.Module], ...]) -> None:
        super().__init__()
        self.leaves = leaves

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, self.leaves) or super().is_leaf_module(m, module_qualified_name)


def traced_graph(model: nn.Module, leaves: tuple[type[nn.Module], ...]) -> fx.Graph:
    """``model``'s forward as a graph in execution order, modules of type ``leaves`` as single calls."""
    return LeafTracer(leaves).trace(model)


def called_layers(graph: fx.Graph, layers: set[str]) -> list[str]:
    """The modules of ``layers`` that the forward calls, in the order of their first call."""
    calls = (node.target for node in graph.nodes if node.op == "call_module")
    return list(dict.fromkeys(name for name in calls if name in layers))


def layer_inputs(model: nn.Module, graph: fx.Graph, x: torch.Tensor, layers: list[str]
                 ) -> Iterator[tuple[str, torch.Tensor]]:
    """Run ``graph`` (``model``'s traced forward) on ``x``, yielding ``(name, input)`` before the
    first call of each module of ``layers`` and stopping after the last of them has run up to
    its input (the nodes after it never run)."""
    run = fx.Interpreter(model, graph=graph)
    run.args_iter = iter((x,))
    waiting = set(layers)
    for node in graph.nodes:
        if node.op == "call_module" and node.target in waiting:
            yield node.target, run.env[node.args[0]]
            waiting.discard(node.target)
            if not waiting:
                return
        run.env[node] = run.run_node(node)
        for value in run.user_to_last_uses.get(node, ()):
            del run.env[value]
