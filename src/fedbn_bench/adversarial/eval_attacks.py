"""The robust-evaluation attacks of FedRBN (Hong et al., Table 3: PGD-20 ε = 16/255, PGD-100
ε = 8/255, MI-FGSM with 20/100 steps, AutoAttack standard, Square), by name.

``pgd`` is our :func:`pgd_attack`; the other names are ``torchattacks`` classes, run on the
[0, 1] pixels of the input with the dataset's normalization inside the attacked model. The
model is put in eval mode and stays there: torchattacks switches the attacked module to eval
during the attack and back to train afterwards if it was training, so the module handed to it
is in eval mode. Global RNG state is left untouched: torchattacks draws from (and APGD/Square
reseed) the global generator, so each call runs in a forked RNG seeded with ``seed``.

``pgd`` defaults to ε = 8/255, 10 steps and a random start (those of ``torchattacks.PGD``).
The step of ``pgd``, ``PGD`` and ``MIFGSM`` when none is given is FedRBN's official code rule
``min(1.25 ε, ε + 4/255) / steps`` (:func:`fedrbn_step_size`).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from fedbn_bench.adversarial.pgd import fedrbn_step_size, pgd_attack
from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.errors import ConfigError

EvalAttack = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
"""attack(model, x, y) -> adversarial x (model units); the model is in eval mode and stays so."""

_TORCHATTACKS = ("PGD", "MIFGSM", "AutoAttack", "Square", "APGD", "FGSM")
EVAL_ATTACKS: tuple[str, ...] = ("pgd",) + _TORCHATTACKS
_KEY = "adversarial.eval_attacks"
_PGD_DEFAULTS = {"eps": 8 / 255, "steps": 10, "random_start": True}
_SET_BY_BUILDER = ("model", "n_classes", "seed")
_STAND_IN = nn.ParameterList([nn.Parameter(torch.zeros(1))])
"""A model for trying out torchattacks' constructor checks at build time (it reads the device
from a parameter)."""
_NONNEGATIVE = ("eps", "alpha", "step_size", "decay")
_COUNTS = ("steps", "n_queries", "n_restarts")


class _PixelInputModel(nn.Module):
    """The model as a function of [0, 1] pixels: normalization first, then the model."""

    def __init__(self, model: nn.Module, space: PixelSpace):
        super().__init__()
        self.model = model
        self.space = space

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(self.space.from_pixels(pixels))


@contextmanager
def _parameters_frozen(model: nn.Module) -> Iterator[None]:
    """Parameters without ``requires_grad`` for the duration: FAB calls ``.backward()``, which
    would otherwise leave ``.grad`` on the model's parameters."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def build_eval_attack(name: str, space: PixelSpace, num_classes: int, seed: int = 0, **params) -> EvalAttack:
    """The evaluation attack ``name`` (one of ``EVAL_ATTACKS``) with its parameters; a bad name
    or parameter raises ``ConfigError`` naming ``adversarial.eval_attacks``."""
    if name not in EVAL_ATTACKS:
        raise ConfigError(f"{_KEY}: unknown attack {name!r}; allowed: {', '.join(EVAL_ATTACKS)}")
    if name == "pgd":
        return _our_pgd(space, seed, params)
    if name == "AutoAttack" and num_classes < 4:
        raise ConfigError(f"{_KEY}: AutoAttack needs at least 4 classes (its DLR losses), got {num_classes}")
    import torchattacks  # on first use: importing it costs every run a second of start-up

    return _torchattack(getattr(torchattacks, name), space, num_classes, seed, params)


def _check_params(name: str, params: dict, allowed: set[str]) -> None:
    for key, value in params.items():
        if key not in allowed:
            raise ConfigError(f"{_KEY}: {name} has no parameter {key!r}; allowed: {', '.join(sorted(allowed))}")
        if key in _NONNEGATIVE and not (isinstance(value, (int, float)) and value >= 0):
            raise ConfigError(f"{_KEY}: {name}.{key} must be a number >= 0, got {value!r}")
        if key in _COUNTS and not (isinstance(value, int) and value >= 1):
            raise ConfigError(f"{_KEY}: {name}.{key} must be an integer >= 1 (0 is no attack), got {value!r}")


def _our_pgd(space: PixelSpace, seed: int, params: dict) -> EvalAttack:
    _check_params("pgd", params, {*_PGD_DEFAULTS, "step_size"})
    settings = {**_PGD_DEFAULTS, **params}
    settings.setdefault("step_size", fedrbn_step_size(settings["eps"], settings["steps"]))

    def attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model.eval()
        generator = torch.Generator(device=x.device).manual_seed(seed)
        return pgd_attack(lambda z: F.cross_entropy(model(z), y), x, space, generator=generator, **settings)

    return attack


def _torchattack(cls: type, space: PixelSpace, num_classes: int, seed: int, params: dict) -> EvalAttack:
    signature = inspect.signature(cls.__init__).parameters
    _check_params(cls.__name__, params, set(signature) - {"self", *_SET_BY_BUILDER})
    settings = dict(params)
    if "alpha" in signature and "alpha" not in settings:
        eps = settings.get("eps", signature["eps"].default)
        settings["alpha"] = fedrbn_step_size(eps, settings.get("steps", signature["steps"].default))
    if "n_classes" in signature:
        settings["n_classes"] = num_classes
    if "seed" in signature:
        settings["seed"] = seed
    try:
        cls(_STAND_IN, **settings)
    except (ValueError, TypeError, AssertionError) as error:
        raise ConfigError(f"{_KEY}: {cls.__name__} rejects {params}: {error}") from None

    def attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model.eval()
        pixel_model = _PixelInputModel(model, space).eval()
        with torch.random.fork_rng(devices=[x.device] if x.is_cuda else []), torch.enable_grad(), \
                _parameters_frozen(model):
            torch.manual_seed(seed)
            adv = cls(pixel_model, **settings)(space.to_pixels(x).detach().contiguous(), y)  # their draws: NCHW order
        return space.from_pixels(adv).detach()

    return attack
