"""The pre-training statistics pass (HBN Eq. 7-8, 11), stage by stage.

A norm method with ``statistics_before_training`` computes its clients' statistics under the
received weights in a separate pass (``NormMethod.pass_statistics``), in stages: in each, every
client records the stage's layers with the statistics aggregated in earlier stages already
loaded, and the server aggregates them (through the update transforms and the run's aggregator,
as any upload) and loads them into the model before the next stage runs. With one stage per
layer in forward order, every layer is recorded under the statistics the evaluated network will
use in the layers before it. How the stages' forwards run (one for all clients, paused at each
stage) is the norm's business.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo, UpdateTransform
from fedbn_bench.core.updates import ClientUpdate, State, Statistics
from fedbn_bench.engine.options import channels_last_input
from fedbn_bench.engine.sampling import STATISTICS_STREAM, generator
from fedbn_bench.norms.base import NormMethod


def statistics_pass(norm: NormMethod, model: nn.Module, load_client: Callable[[int], None],
                    inputs: Sequence[torch.Tensor], info: RoundInfo, weights: torch.Tensor,
                    aggregator: Aggregator, global_state: State,
                    transforms: Sequence[UpdateTransform] = ()) -> State:
    """The new statistics entries of the global state after the pass over ``info.clients``
    (``inputs[i]``: client ``i``'s data, of which it reads ``norm.statistics_inputs``, drawn once
    per round and client; ``load_client(i)`` loads what it received); nothing else changes but
    the model's loaded state."""
    new: State = {}
    inputs = [pass_layout(norm.statistics_inputs(x, generator(info.seed, info.round_idx, client, STATISTICS_STREAM)))
              for client, x in zip(info.clients, inputs)]

    def load(i: int) -> None:
        load_client(i)
        model.load_state_dict(new, strict=False)

    def aggregate(stats: list[Statistics]) -> None:
        updates = [ClientUpdate(client, {}, s, {}, len(x), torch.zeros((), device=x.device))
                   for client, s, x in zip(info.clients, stats, inputs)]
        for transform in transforms:
            updates = transform(updates, info)
        stage = norm.aggregate_statistics([u.statistics for u in updates], weights, aggregator,
                                          {**global_state, **new})
        new.update(stage)
        model.load_state_dict(stage, strict=False)

    if inputs:
        norm.pass_statistics(model, inputs, load, aggregate)
    return new


def pass_layout(x: torch.Tensor) -> torch.Tensor:
    """A client's pass input in the layout its forward runs fastest in: channels-last for image
    batches on the CPU (as in evaluation, ``metrics/base.py``), else as it is."""
    return channels_last_input(x) if x.device.type == "cpu" else x
