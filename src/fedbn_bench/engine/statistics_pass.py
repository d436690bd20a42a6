"""The pre-training statistics pass (HBN Eq. 7-8, 11), stage by stage.

A norm method with ``statistics_before_training`` computes its clients' statistics under the
received weights in a separate pass (``NormMethod.pass_statistics``). The pass runs in stages
(``NormMethod.statistics_stages``): in each, every client records the stage's layers with the
statistics aggregated in earlier stages already loaded, and the server aggregates them (through
the update transforms and the run's aggregator, as any upload) before the next stage runs. With
one stage per layer in forward order, every layer is recorded under the statistics the evaluated
network will use in the layers before it.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo, UpdateTransform
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.engine.sampling import STATISTICS_STREAM, generator
from fedbn_bench.norms.base import NormMethod


def statistics_pass(norm: NormMethod, model: nn.Module, load_client: Callable[[int], None],
                    inputs: Sequence[torch.Tensor], info: RoundInfo, weights: torch.Tensor,
                    aggregator: Aggregator, global_state: State,
                    transforms: Sequence[UpdateTransform] = ()) -> State:
    """The new statistics entries of the global state after the pass over ``info.clients``
    (``inputs[i]``: client ``i``'s data, of which it reads ``norm.statistics_inputs``, drawn once
    per round and client; ``load_client(i)`` loads what it received); nothing else changes."""
    new: State = {}
    inputs = [norm.statistics_inputs(x, generator(info.seed, info.round_idx, client, STATISTICS_STREAM))
              for client, x in zip(info.clients, inputs)]
    stages = norm.statistics_stages(model, inputs[0]) if inputs else []
    for layers in stages:
        updates = []
        for i, (client, x) in enumerate(zip(info.clients, inputs)):
            load_client(i)
            if new:
                model.load_state_dict(new, strict=False)
            stats = norm.pass_statistics(model, x, layers)
            updates.append(ClientUpdate(client, {}, stats, {}, len(x), torch.zeros((), device=x.device)))
        for transform in transforms:
            updates = transform(updates, info)
        new.update(norm.aggregate_statistics([u.statistics for u in updates], weights, aggregator,
                                             {**global_state, **new}))
    return new
