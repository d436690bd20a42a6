"""Many clients' own models evaluated in one vectorized pass (``torch.func``, as ``engine=vmap``
trains them): every client's test samples are cut into units of at most ``batch_size``, the
units padded to one length, and ``vmap(functional_call)`` runs each unit under its client's own
keys (stacked) and the shared ones (unbatched, so a shared convolution sees one large batch)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from fedbn_bench.core.updates import State

SAMPLES_PER_PASS = 2048
"""Padded samples per vectorized call (bounds the memory of one pass)."""


def batched_client_outcomes(model: nn.Module, shared: State, own: Callable[[int], State], clients: list[int],
                            data: list[tuple[torch.Tensor, torch.Tensor]],
                            batch_size: int) -> list[tuple[float, float]]:
    """(accuracy, mean loss) of each of ``clients``' models (``shared`` with ``own(client)`` on
    top, in eval mode) on its ``data`` (inputs, labels), in the order of ``clients``; one host
    synchronisation at the end."""
    if not clients:
        return []
    units = [(i, start, min(start + batch_size, len(y))) for i, (_, y) in enumerate(data)
             for start in range(0, len(y), batch_size)]
    width = max((stop - start for _, start, stop in units), default=1)
    device = data[0][1].device
    correct = torch.zeros(len(clients), device=device)
    losses = torch.zeros(len(clients), device=device, dtype=torch.float64)
    model.eval()
    cl = data[0][0].dim() == 4 and device.type == "cpu"  # channels-last convolutions: several times faster on the CPU
    if cl:
        shared = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in shared.items()}
    forward = vmap(lambda state, x: functional_call(model, (shared, state), (x,)))
    per_pass = max(1, SAMPLES_PER_PASS // width)
    states = [own(c) for c in clients]
    with torch.inference_mode():
        for g in range(0, len(units), per_pass):
            group = units[g: g + per_pass]
            owners = torch.tensor([i for i, _, _ in group], device="cpu")
            stacked = {k: torch.stack([states[i][k] for i, _, _ in group]) for k in states[0]}
            x = torch.stack([pad(data[i][0][start:stop], width) for i, start, stop in group])
            if cl:
                x = x.flatten(0, 1).contiguous(memory_format=torch.channels_last).unflatten(0, (len(group), width))
            y = torch.stack([pad(data[i][1][start:stop], width) for i, start, stop in group])
            valid = torch.stack([torch.arange(width, device=device) < stop - start for _, start, stop in group])
            logits = forward(stacked, x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view_as(valid)
            hit = (logits.argmax(-1) == y) & valid
            owners = owners.to(device)
            correct.index_add_(0, owners, hit.sum(1).to(correct.dtype))
            losses.index_add_(0, owners, (loss * valid).sum(1).to(torch.float64))
    sizes = torch.tensor([max(len(y), 1) for _, y in data], device="cpu", dtype=torch.float64)
    acc = (correct.cpu().double() / sizes).tolist()
    mean_loss = (losses.cpu() / sizes).tolist()
    return list(zip(acc, mean_loss))


def pad(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` with zeros appended along its first axis up to ``width`` rows."""
    if len(t) == width:
        return t
    return torch.cat([t, t.new_zeros((width - len(t), *t.shape[1:]))])
