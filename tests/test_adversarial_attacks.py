"""FedRBN's attack primitives: the pixel space, our L∞ PGD (checked against torchattacks.PGD to
float precision) and the evaluation attacks (ε-ball, [0, 1] box, BN buffers and eval mode kept)."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchattacks

from fedbn_bench.adversarial.eval_attacks import EVAL_ATTACKS, _parameters_frozen, build_eval_attack
from fedbn_bench.adversarial.pgd import pgd_attack
from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.errors import ConfigError

EPS = 8 / 255
MEAN, STD = (0.5, 0.4, 0.3), (0.25, 0.3, 0.2)
SPACES = {
    "identity": PixelSpace.of(None, None, 3),
    "digits": PixelSpace.of(torch.tensor(0.5), torch.tensor(0.5), 3),
    "per_channel": PixelSpace.of(torch.tensor(MEAN), torch.tensor(STD), 3),
}


def tiny_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 8 * 8, 4))


@pytest.fixture(scope="module")
def task():
    """A tiny conv net with BatchNorm trained on 4 classes of 3×8×8 [0, 1] images (per-channel
    normalized inputs), returned in eval mode with its pixels and labels."""
    gen = torch.Generator().manual_seed(0)
    patterns = torch.randn(4, 3, 8, 8, generator=gen).sign()
    labels = torch.arange(48) % 4
    pixels = (0.5 + 0.05 * patterns[labels] + 0.15 * torch.randn(48, 3, 8, 8, generator=gen)).clamp(0, 1)
    torch.manual_seed(0)
    model = tiny_net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = SPACES["per_channel"].from_pixels(pixels)
    for _ in range(20):
        opt.zero_grad()
        F.cross_entropy(model(x), labels).backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    return model.eval(), pixels, labels


def ce_of(model, y):
    return lambda z: F.cross_entropy(model(z), y)


def assert_in_ball(space, x_adv, x, eps):
    p_adv, p = space.to_pixels(x_adv), space.to_pixels(x)
    assert (p_adv - p).abs().max().item() <= eps + 1e-6
    assert p_adv.min().item() >= -1e-6 and p_adv.max().item() <= 1 + 1e-6


class PixelModel(nn.Module):
    """The test's own normalization-inside wrapper, to attack pixels with torchattacks."""

    def __init__(self, model, mean, std):
        super().__init__()
        self.model, self.mean, self.std = model, torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)

    def forward(self, p):
        return self.model((p - self.mean) / self.std)


def test_pixel_space_maps_per_channel_and_back():
    space = SPACES["per_channel"]
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    p = space.to_pixels(x)
    assert p.dtype == torch.float64
    for c in range(3):
        assert torch.allclose(p[:, c], x[:, c] * STD[c] + MEAN[c])
    assert torch.allclose(space.from_pixels(p), x)
    flat = torch.randn(5, 3)
    assert torch.allclose(space.to_pixels(flat), flat * torch.tensor(STD) + torch.tensor(MEAN))
    assert torch.equal(SPACES["identity"].to_pixels(x), x)
    assert torch.allclose(SPACES["digits"].to_pixels(-torch.ones(1, 3, 2, 2)), torch.zeros(1, 3, 2, 2))
    with pytest.raises(ValueError, match="mean"):
        PixelSpace.of(torch.zeros(2), None, 3)
    with pytest.raises(ValueError, match="std"):
        PixelSpace.of(None, torch.tensor(0.0), 3)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_pgd_stays_in_eps_ball_and_pixel_box(task, space_name):
    model, pixels, labels = task
    space = SPACES[space_name]
    x = space.from_pixels(pixels)
    gen = torch.Generator().manual_seed(1)
    x_adv = pgd_attack(ce_of(model, labels), x, space, eps=EPS, steps=5, step_size=2.5 / 255, generator=gen)
    assert_in_ball(space, x_adv, x, EPS)
    assert (space.to_pixels(x_adv) - pixels).abs().max().item() == pytest.approx(EPS, abs=1e-6)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_pgd_increases_the_loss(task, space_name):
    model, pixels, labels = task
    space = SPACES[space_name]
    x = space.from_pixels(pixels)
    loss = ce_of(model, labels)
    x_adv = pgd_attack(loss, x, space, eps=EPS, steps=7, step_size=2 / 255, random_start=False)
    with torch.no_grad():
        clean, adv = loss(x).item(), loss(x_adv).item()
    assert adv > clean + 0.01


def test_pgd_equals_torchattacks_without_random_start(task):
    model, pixels, labels = task
    space = SPACES["identity"]
    ours = pgd_attack(ce_of(model, labels), pixels, space, eps=EPS, steps=7, step_size=2 / 255, random_start=False)
    theirs = torchattacks.PGD(model, eps=EPS, alpha=2 / 255, steps=7, random_start=False)(pixels, labels)
    assert not model.training
    assert not torch.equal(ours, pixels)
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-6)


def test_pgd_equals_torchattacks_with_same_seeded_random_start(task):
    """torchattacks draws its start with ``uniform_`` on the global CPU generator, which gives the
    same numbers as a fresh ``torch.Generator`` seeded alike."""
    model, pixels, labels = task
    space = SPACES["identity"]
    gen = torch.Generator().manual_seed(123)
    ours = pgd_attack(ce_of(model, labels), pixels, space, eps=EPS, steps=3, step_size=2 / 255, generator=gen)
    torch.manual_seed(123)
    theirs = torchattacks.PGD(model, eps=EPS, alpha=2 / 255, steps=3, random_start=True)(pixels, labels)
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-6)
    torch.manual_seed(124)
    other = torchattacks.PGD(model, eps=EPS, alpha=2 / 255, steps=3, random_start=True)(pixels, labels)
    assert not torch.allclose(ours, other, rtol=0, atol=1e-6)


def test_pgd_equals_torchattacks_with_normalization(task):
    model, pixels, labels = task
    space = SPACES["per_channel"]
    x = space.from_pixels(pixels)
    ours = pgd_attack(ce_of(model, labels), x, space, eps=EPS, steps=5, step_size=2 / 255,
                      generator=torch.Generator().manual_seed(7))
    torch.manual_seed(7)
    wrapped = PixelModel(model, MEAN, STD).eval()
    theirs_pixels = torchattacks.PGD(wrapped, eps=EPS, alpha=2 / 255, steps=5)(pixels, labels)
    assert torch.allclose(space.to_pixels(ours), theirs_pixels, rtol=0, atol=1e-6)
    attack = torchattacks.PGD(model, eps=EPS, alpha=2 / 255, steps=5)
    attack.set_normalization_used(mean=list(MEAN), std=list(STD))
    torch.manual_seed(7)
    theirs_normalized = attack(x, labels)
    assert torch.allclose(ours, theirs_normalized, rtol=0, atol=1e-6)


def test_pgd_leaves_no_parameter_grad_and_works_under_no_grad(task):
    model, pixels, labels = task
    assert all(p.grad is None for p in model.parameters())
    with torch.no_grad():
        x_adv = pgd_attack(ce_of(model, labels), pixels, SPACES["identity"], eps=EPS, steps=2, step_size=EPS)
    assert not x_adv.requires_grad
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("arg", ["eps", "steps", "step_size"])
def test_pgd_rejects_negative_arguments(task, arg):
    model, pixels, labels = task
    kwargs = {"eps": EPS, "steps": 2, "step_size": 1 / 255, arg: -1}
    with pytest.raises(ValueError, match=arg):
        pgd_attack(ce_of(model, labels), pixels, SPACES["identity"], **kwargs)


SMALL_PARAMS = {
    "pgd": {"eps": EPS, "steps": 5},
    "PGD": {"eps": EPS, "steps": 5},
    "MIFGSM": {"eps": EPS, "steps": 5},
    "AutoAttack": {"eps": EPS},
    "Square": {"eps": EPS, "n_queries": 50},
    "APGD": {"eps": EPS, "steps": 5},
    "FGSM": {"eps": EPS},
}


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def check_eval_attack(task, name, params) -> float:
    """Runs the attack twice and checks it; returns the robust accuracy."""
    model, pixels, labels = task
    space = SPACES["per_channel"]
    x = space.from_pixels(pixels)
    buffers = {k: b.clone() for k, b in model.named_buffers()}
    rng = torch.get_rng_state()
    attack = build_eval_attack(name, space, num_classes=4, seed=0, **params)
    x_adv = attack(model, x, labels)
    assert not any(m.training for m in model.modules())
    assert all(torch.equal(b, buffers[k]) for k, b in model.named_buffers())
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None and p.requires_grad for p in model.parameters())
    assert_in_ball(space, x_adv, x, params["eps"])
    robust = accuracy(model, x_adv, labels)
    assert robust <= accuracy(model, x, labels)
    assert torch.equal(attack(model, x, labels), x_adv)
    return robust


@pytest.mark.parametrize("name", [n if n != "AutoAttack" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in EVAL_ATTACKS])
def test_eval_attack_is_bounded_and_keeps_bn_eval_mode_and_rng(task, name):
    """AutoAttack at ε = 8/255 is slow (Square's 5000 queries on the samples that survive)."""
    check_eval_attack(task, name, SMALL_PARAMS[name])


def test_eval_autoattack_with_large_eps_breaks_every_sample(task):
    """At ε = 0.3 APGD-CE fools every sample, so the ensemble stops before its slow members."""
    assert check_eval_attack(task, "AutoAttack", {"eps": 0.3}) == 0.0


def test_parameters_are_frozen_during_torchattacks_and_restored():
    """FAB (inside AutoAttack, reached only at small ε, i.e. in the slow test) calls .backward()."""
    model = tiny_net()
    model[0].bias.requires_grad_(False)
    x = torch.rand(2, 3, 8, 8, requires_grad=True)
    with _parameters_frozen(model):
        model.eval()(x).sum().backward()
    assert x.grad is not None and all(p.grad is None for p in model.parameters())
    assert [p.requires_grad for p in model.parameters()] == [True, False] + [True] * 4


def test_eval_pgd_default_step_is_fedrbn_rule_for_ours_and_torchattacks(task):
    model, pixels, labels = task
    space = SPACES["identity"]
    eps, steps = 16 / 255, 4
    alpha = min(1.25 * eps, eps + 4 / 255) / steps
    reference = torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=False)(pixels, labels)
    for name in ("pgd", "PGD"):
        attack = build_eval_attack(name, space, num_classes=4, eps=eps, steps=steps, random_start=False)
        assert torch.allclose(attack(model, pixels, labels), reference, rtol=0, atol=1e-6), name


@pytest.mark.parametrize("name, params", [
    ("pgd_typo", {}),
    ("pgd", {"alpha": 0.1}),
    ("PGD", {"step_size": 0.1}),
    ("AutoAttack", {"n_classes": 10}),
    ("MIFGSM", {"eps": -0.1}),
    ("pgd", {"steps": "many"}),
    ("Square", {"n_queries": 2.5}),
    ("AutoAttack", {"version": "quick"}),
])
def test_bad_name_or_parameter_is_a_config_error(name, params):
    with pytest.raises(ConfigError, match="adversarial.eval_attacks") as info:
        build_eval_attack(name, SPACES["identity"], num_classes=4, **params)
    assert "\n" not in str(info.value)


def test_autoattack_needs_four_classes():
    with pytest.raises(ConfigError, match="adversarial.eval_attacks.*4 classes"):
        build_eval_attack("AutoAttack", SPACES["identity"], num_classes=3)


@pytest.mark.parametrize("name", ["pgd", "PGD"])
def test_eval_attack_gives_the_same_examples_on_channels_last_batches(task, name):
    """The robust evaluation feeds channels-last batches (metrics/robust_accuracy.py); the random
    start is drawn in NCHW order, so the examples equal those of the NCHW batch (float64: the two
    layouts' sums differ only in rounding, far below a sign flip)."""
    model, pixels, labels = task
    model = copy.deepcopy(model).double()
    space = PixelSpace.of(torch.tensor(MEAN, dtype=torch.float64), torch.tensor(STD, dtype=torch.float64), 3)
    x = space.from_pixels(pixels.double())
    attack = build_eval_attack(name, space, 4, seed=5, eps=EPS, steps=3)
    nchw = attack(model, x, labels)
    channels_last = attack(model, x.contiguous(memory_format=torch.channels_last), labels)
    assert torch.equal(nchw.contiguous(), channels_last.contiguous())
