"""L∞ projected gradient ascent on the input (PGD, Madry et al., ICLR 2018), FedRBN's training
and evaluation attack (Hong et al., "Federated Robustness Propagation", §5 and App. C.1).

The paper trains with PGD ε = 8/255, n = 7 steps of 2/255; the official code uses the step
min(1.25 ε, ε + 4/255) / n (:func:`fedrbn_step_size`). ε and the step are in [0, 1] pixel units.

Data stored normalized: the ε-ball and the [0, 1] box are taken in pixel space and the dataset's
normalization is applied to the perturbed pixels before the model. FedBN's Digits archive is
stored in [−1, 1] = (pixel − 0.5) / 0.5, so ε = 8/255 pixels is 16/255 in model units. The
official FedRBN code instead clips the [−1, 1] input to [0, 1], which is not ε-bounded in
pixels; that variant is ``PixelSpace.of(None, None, C)`` (model units treated as pixels).
"""
from __future__ import annotations

from typing import Callable

import torch

from fedbn_bench.adversarial.pixels import PixelSpace


def fedrbn_step_size(eps: float, steps: int) -> float:
    """FedRBN's code rule for the PGD step: ``min(1.25 ε, ε + 4/255) / steps`` (0 without steps)."""
    return min(1.25 * eps, eps + 4 / 255) / steps if steps > 0 else 0.0


def pgd_attack(loss_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, space: PixelSpace,
               eps: float, steps: int, step_size: float, random_start: bool = True,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """The PGD adversarial input (model units) maximizing the scalar ``loss_fn(x_normalized)``.

    Same order of operations as ``torchattacks.PGD`` (uniform start in the ε-ball clipped to
    [0, 1], signed-gradient step, projection on the ε-ball then on [0, 1]). Gradients are taken
    with respect to the input only; no ``.grad`` is left on the model's parameters. The random
    start is drawn in the logical (NCHW) order, so a channels-last ``x`` gets the same start.
    """
    for name, value in (("eps", eps), ("steps", steps), ("step_size", step_size)):
        if value < 0:
            raise ValueError(f"pgd_attack: {name} must be >= 0, got {value}")
    clean = space.to_pixels(x).detach()
    adv = clean.clone()
    if random_start:
        start = torch.empty(adv.shape, dtype=adv.dtype, device=adv.device)  # drawn in NCHW order, whatever x's layout
        adv = (adv + start.uniform_(-eps, eps, generator=generator)).clamp(0, 1)
    with torch.enable_grad():
        for _ in range(steps):
            adv.requires_grad_(True)
            grad = torch.autograd.grad(loss_fn(space.from_pixels(adv)), adv)[0]
            adv = adv.detach() + step_size * grad.sign()
            delta = (adv - clean).clamp(-eps, eps)
            adv = (clean + delta).clamp(0, 1).detach()
    return space.from_pixels(adv).detach()
