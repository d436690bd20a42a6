"""Adversarial training objectives (``adversarial=pgd_at | free_at``): FedRBN §3-4, App. C.1.

An objective turns one client's batch into its training loss, by role (``core/roles.py``):

* AT users, ``pgd_at`` (Madry et al. 2018, as FedRBN trains them): ``(1 − w) ℓ(f(x; BN_c)) +
  w ℓ(f(x̃; BN_a))`` with w = ``adv_weight`` = 0.5 (the code's ``adv_lmbd``), x̃ the L∞ PGD
  attack (``pgd.py``) computed through BN_a. ``attack_mode: eval`` computes it with the model in
  eval mode (the code's ``ctx_noparamgrad_and_eval``: BN_a's running statistics, nothing
  updated); ``train`` with batch statistics and every buffer restored afterwards. Either way the
  attack steps never change a BN statistic.
* AT users, ``free_at`` (Shafahi et al. 2019, FedRBN Table 4): each batch is replayed ``replays``
  (m) times; every replay trains on x + δ only (the code's ``train_free``, ``adv_lmbd = 1``) and
  then moves δ by ``step_size``·sign(∇_δ ℓ) inside the ε-ball. δ starts at 0 for each client's
  round and carries over between its batches (the code keeps each AT user's δ from round to
  round: one adversary per user, built before the first round). The code stops training after
  rounds / m rounds: the presets set ``rounds`` so.
* ST users: the clean loss; with ``pnc_lambda`` = λ > 0 FedRBN's PNC loss (Eq. 5),
  ``(1 − λ) ℓ(f(x; BN_c)) + λ ℓ(f(x; BN_a))`` with BN_a frozen (its propagated running
  statistics), the gradient of the λ term clipped to norm ``pnc_clip`` = 10 (App. B.1 Alg. 3;
  the code clips it for every dataset), λ = 0 during the first ``pnc_warmup`` rounds (0-based
  rounds 0 … pnc_warmup − 1; the paper has none, so the default is 0). The code's
  ``--pnc_warmup 10`` tests ``round > pnc_warmup`` (λ = 0 in its rounds 0 … 10): ``pnc_warmup = 11`` here.

``loss_of(x)`` is the algorithm's loss of the model on ``x`` (FedProx's proximal term and the
other algorithms' hooks act on the gradients as without adversarial training). The norm method
supplies the branches (a no-op without dual BN: FATAvg, FATBN).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Optional, Protocol

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from fedbn_bench.adversarial.eval_attacks import EVAL_ATTACKS, EvalAttack, build_eval_attack
from fedbn_bench.adversarial.pgd import pgd_attack
from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.core.roles import ADVERSARIAL
from fedbn_bench.core.trees import per_client, total_norm
from fedbn_bench.errors import ConfigError
from fedbn_bench.registry import Registry

ATTACK_MODES = ("eval", "train")
PIXEL_SPACES = ("dataset", "model_units")
TEST_BRANCHES = ("adv", "clean")
ROBUST_TESTS = ("every", "best_val")


def default_eval_attacks() -> list[dict[str, Any]]:
    return [{"name": "pgd", "eps": 8 / 255, "steps": 7, "step_size": 2 / 255}]


@dataclass
class AdversarialConfig:
    name: str = "none"
    eps: float = 8 / 255
    """L∞ radius in [0, 1] pixels (FedRBN §5: 8/255; Free AT in the code: 4/255)."""
    steps: int = 7
    step_size: float = 2 / 255
    random_start: bool = True
    adv_weight: float = 0.5
    attack_mode: str = "eval"
    pixel_space: str = "dataset"
    """``dataset``: ε-ball and [0, 1] box in pixels, the dataset's normalization applied after
    the perturbation; ``model_units``: the model's inputs taken as pixels (the official code on
    Digits, stored in [−1, 1]: the [0, 1] clip is then not ε-bounded)."""
    replays: int = 1
    at_fraction: float = 1.0
    """Share of the users of each AT domain that train adversarially (first ones, code order)."""
    at_domains: Optional[int] = None
    """AT users only in the first n domains of ``domain_order`` (null: every domain)."""
    domain_order: Optional[list[str]] = None
    """Domain names in the order ``at_domains`` counts them (null: the dataset's order)."""
    pnc_lambda: float = 0.0
    pnc_clip: Optional[float] = 10.0
    pnc_warmup: int = 0
    test_branch: str = "adv"
    """The branch evaluations use: ``adv`` (BN_a, propagated for ST users; FedRBN Table 1) or ``clean``."""
    eval_attacks: list[Any] = field(default_factory=default_eval_attacks)
    """Attacks of the robust evaluation (``eval_attacks.py``); the first gives ``robust_acc``,
    the others ``<label>_acc``."""
    robust_test: str = "every"
    """When the test splits are attacked: ``every`` evaluation, or once, at the ``best_val`` round
    (the state of the best validation score kept, tested at the end: FedRBN's code tests only that
    checkpoint, App. C.1). ``best_val`` leaves per-round robust columns out and needs a validation split."""


class Branches(Protocol):
    """What an objective needs from the norm method (``NormMethod.branch``/``no_statistics_update``)."""

    branches: tuple[str, ...]

    def branch(self, model: nn.Module, name: str, frozen: bool = False) -> ContextManager[None]: ...

    def no_statistics_update(self, model: nn.Module) -> ContextManager[None]: ...


LossOf = Callable[[torch.Tensor], torch.Tensor]
ADVERSARIAL_TRAINING: Registry[type["AdversarialTraining"]] = Registry("adversarial")


@ADVERSARIAL_TRAINING.register("none")
class AdversarialTraining:
    """``adversarial=none``: every user trains on clean data; no robust evaluation."""

    config_class: type = AdversarialConfig
    active = False
    """Whether any loss differs from the algorithm's (then each user role's objective is the loss)."""

    def __init__(self, cfg: Any, space: PixelSpace) -> None:
        self.cfg, self.space = cfg, space
        self.replays = 1

    @property
    def test_branch(self) -> str:
        """The statistics branch evaluations use."""
        return "clean"

    def evaluation_attacks(self, num_classes: int, seed: int) -> dict[str, EvalAttack]:
        """The robust evaluation's attacks by column (none without adversarial training)."""
        return {}

    def validate(self, norm: Branches) -> None:
        """Raise ``ConfigError`` when the norm method cannot serve this objective."""

    def begin_client(self, client: int) -> None:
        """Called before a client's local training of a round."""

    def client_loss(self, model: nn.Module, norm: Branches, x: torch.Tensor, y: torch.Tensor, role: str,
                    loss_of: LossOf, round_idx: int) -> torch.Tensor:
        return loss_of(x)


@ADVERSARIAL_TRAINING.register("pgd_at")
class PGDTraining(AdversarialTraining):
    """``pgd_at``: AT users as Madry et al., ST users clean or with PNC (module docstring)."""

    active = True

    def __init__(self, cfg: Any, space: PixelSpace) -> None:
        super().__init__(cfg, space)
        checks = [
            (cfg.eps > 0, f"adversarial.eps={cfg.eps} is invalid: an L∞ radius in pixels > 0 (e.g. 8/255; "
                          "0 is no attack: adversarial=none trains clean)"),
            (cfg.steps >= 1, f"adversarial.steps={cfg.steps} is invalid: PGD takes >= 1 step (0 steps is no "
                             "attack: adversarial=none trains clean)"),
            (cfg.step_size > 0, f"adversarial.step_size={cfg.step_size} is invalid: must be > 0 (a step of 0 "
                                "never leaves the start)"),
            (0 <= cfg.adv_weight <= 1, f"adversarial.adv_weight={cfg.adv_weight} is invalid: must be in [0, 1]"),
            (cfg.attack_mode in ATTACK_MODES,
             f"adversarial.attack_mode='{cfg.attack_mode}' is unknown; allowed: {', '.join(ATTACK_MODES)}"),
            (cfg.pixel_space in PIXEL_SPACES,
             f"adversarial.pixel_space='{cfg.pixel_space}' is unknown; allowed: {', '.join(PIXEL_SPACES)}"),
            (0 <= cfg.pnc_lambda <= 1, f"adversarial.pnc_lambda={cfg.pnc_lambda} is invalid: must be in [0, 1]"),
            (cfg.pnc_clip is None or cfg.pnc_clip > 0,
             f"adversarial.pnc_clip={cfg.pnc_clip} is invalid: a norm > 0, or null for no clipping"),
            (cfg.pnc_warmup >= 0, f"adversarial.pnc_warmup={cfg.pnc_warmup} is invalid: must be >= 0"),
            (cfg.replays >= 1, f"adversarial.replays={cfg.replays} is invalid: must be >= 1"),
            (cfg.test_branch in TEST_BRANCHES,
             f"adversarial.test_branch='{cfg.test_branch}' is unknown; allowed: {', '.join(TEST_BRANCHES)}"),
            (cfg.robust_test in ROBUST_TESTS,
             f"adversarial.robust_test='{cfg.robust_test}' is unknown; allowed: {', '.join(ROBUST_TESTS)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        for i, spec in enumerate(cfg.eval_attacks):
            if not OmegaConf.is_dict(spec) and not isinstance(spec, dict):
                raise ConfigError(f"adversarial.eval_attacks[{i}]={spec!r} is invalid: each entry is a mapping "
                                  f"{{name: <attack>, ...}}; allowed names: {', '.join(EVAL_ATTACKS)}")

    @property
    def test_branch(self) -> str:
        return self.cfg.test_branch

    def evaluation_attacks(self, num_classes: int, seed: int) -> dict[str, EvalAttack]:
        """``robust_acc`` for the first of ``eval_attacks``, ``<label>_acc`` for the others
        (``label`` defaults to the lower-cased name)."""
        out = {}
        for i, spec in enumerate(self.cfg.eval_attacks):
            params = dict(spec)
            name, label = params.pop("name", None), params.pop("label", None)
            if name is None:
                raise ConfigError(f"adversarial.eval_attacks[{i}] has no `name`; allowed: {', '.join(EVAL_ATTACKS)}")
            column = "robust_acc" if i == 0 else f"{label or str(name).lower()}_acc"
            if column in out:
                raise ConfigError(f"adversarial.eval_attacks[{i}] repeats the column '{column}': give it a `label`")
            out[column] = build_eval_attack(name, self.space, num_classes, seed, **params)
        return out

    def validate(self, norm: Branches) -> None:
        if self.cfg.pnc_lambda > 0 and "adv" not in norm.branches:
            raise ConfigError(f"adversarial.pnc_lambda={self.cfg.pnc_lambda} needs dual BN's adversarial branch "
                              "(FedRBN Eq. 5): use norm=fedrbn or norm=dbn, or set adversarial.pnc_lambda=0")

    @contextlib.contextmanager
    def attack_forward(self, model: nn.Module, norm: Branches) -> Iterator[None]:
        """The model's mode while the attack runs: eval, or train with every buffer restored."""
        if self.cfg.attack_mode == "train":
            with norm.no_statistics_update(model):
                yield
            return
        was_training = model.training
        model.eval()
        try:
            yield
        finally:
            model.train(was_training)

    def adversarial_examples(self, model: nn.Module, norm: Branches, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x̃: PGD through BN_a that changes no buffer and leaves no parameter gradient."""
        c = self.cfg
        with norm.branch(model, "adv"), self.attack_forward(model, norm):
            return pgd_attack(lambda xa: attack_loss(model, xa, y), x, self.space, c.eps, c.steps, c.step_size,
                              c.random_start)

    def client_loss(self, model: nn.Module, norm: Branches, x: torch.Tensor, y: torch.Tensor, role: str,
                    loss_of: LossOf, round_idx: int) -> torch.Tensor:
        if role == ADVERSARIAL:
            return self.adversarial_loss(model, norm, x, y, loss_of)
        with norm.branch(model, "clean"):
            clean = loss_of(x)
        lam = self.cfg.pnc_lambda if round_idx >= self.cfg.pnc_warmup else 0.0
        if lam == 0:
            return clean
        with norm.branch(model, "adv", frozen=True):
            pnc = lam * loss_of(x)
        return (1 - lam) * clean + clipped_term(pnc, model, self.cfg.pnc_clip)

    def adversarial_loss(self, model: nn.Module, norm: Branches, x: torch.Tensor, y: torch.Tensor,
                         loss_of: LossOf) -> torch.Tensor:
        w = self.cfg.adv_weight
        with norm.branch(model, "clean"):
            clean = loss_of(x)
        x_adv = self.adversarial_examples(model, norm, x, y)
        with norm.branch(model, "adv"):
            adv = loss_of(x_adv)
        return (1 - w) * clean + w * adv


@ADVERSARIAL_TRAINING.register("free_at")
class FreeTraining(PGDTraining):
    """``free_at``: AT users replay each batch ``replays`` times on x + δ (module docstring)."""

    def __init__(self, cfg: Any, space: PixelSpace) -> None:
        super().__init__(cfg, space)
        self.replays = cfg.replays
        self.delta: Optional[torch.Tensor] = None

    def begin_client(self, client: int) -> None:
        self.delta = None

    def adversarial_loss(self, model: nn.Module, norm: Branches, x: torch.Tensor, y: torch.Tensor,
                         loss_of: LossOf) -> torch.Tensor:
        pixels = self.space.to_pixels(x)
        delta = self.next_delta(pixels)
        with norm.branch(model, "adv"):
            return loss_of(self.space.from_pixels((pixels + delta).clamp(0, 1)))

    def next_delta(self, pixels: torch.Tensor) -> torch.Tensor:
        """δ for this replay: the last one moved along the sign of its gradient (FGSM step) and
        clipped to the ε-ball, as a fresh leaf that the backward pass gives a gradient."""
        c, delta = self.cfg, self.delta
        if delta is None or delta.shape[1:] != pixels.shape[1:]:
            delta = torch.zeros_like(pixels)
        elif delta.grad is not None:
            delta = (delta + c.step_size * delta.grad.sign()).clamp(-c.eps, c.eps)
        delta = delta.detach()[: len(pixels)]
        if len(delta) < len(pixels):
            delta = torch.cat([delta, torch.zeros_like(pixels[len(delta):])])
        self.delta = delta.requires_grad_(True)
        return self.delta


def attack_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PGD's objective: the mean cross-entropy of the model's samples; for a stack of clients
    (``engine/backends/stacked_model.py``, ``model.clients`` of them, samples client-major) the sum of
    each client's mean, so every client's input gradient is scaled exactly as when attacked alone."""
    return F.cross_entropy(model(x), y, reduction="sum") / (len(y) // getattr(model, "clients", 1))


def clipped_term(term: torch.Tensor, model: nn.Module, max_norm: Optional[float]) -> torch.Tensor:
    """A loss with ``term``'s value whose gradient is ``term``'s gradient w.r.t. the model's
    parameters clipped to total norm ``max_norm`` (``torch.nn.utils.clip_grad_norm_``'s rule).
    ``term`` may hold one value per client of a stack (shape ``(n,)``, parameters with a leading
    client axis): each client's gradient is clipped by its own norm."""
    if max_norm is None:
        return term
    lead = term.dim()
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(term.sum(), params, retain_graph=False, allow_unused=True)
    pairs = [(p, g) for p, g in zip(params, grads) if g is not None]
    scale = (max_norm / (total_norm({str(i): g for i, (_, g) in enumerate(pairs)}, lead) + 1e-6)).clamp(max=1.0)
    surrogate = sum((p * (g * per_client(scale, g)).detach()).flatten(lead).sum(-1) for p, g in pairs)
    return term.detach() + surrogate - surrogate.detach()
