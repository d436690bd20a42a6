"""FedSAM (Qu et al. 2022), MOON (Li, He, Song 2021) and FedWon (Zhuang & Lyu 2024): reductions to
FedAvg in float64, their definitions on hand-built tensors (SAM's radius, MOON's Eq. 2, AGC per
unit, scaled weight standardization), statistics untouched by the extra passes, MOON's loop
fallback, bad options, and 2-round runs on the norms (engine equivalence: test_engine_equivalence)."""
from __future__ import annotations

import copy
import logging
import math

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from conftest import build_simulation, compose_config
from fedbn_bench.algorithms import ALGORITHMS, build_algorithm
from fedbn_bench.algorithms.fedsam import sam_perturbation
from fedbn_bench.algorithms.fedwon import RELU_GAMMA, FedWonConfig, ScaledWSConv2d, adaptive_clip, standardize
from fedbn_bench.algorithms.moon import ProjectionHead, contrastive_loss, representation
from fedbn_bench.engine.select import select_engine
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import build_federation, run_experiment

BASE = ["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=32", "alpha=0.3", "lr=0.05"]
F64 = {"rtol": 1e-9, "atol": 1e-11}


def simulate(overrides: list[str], tmp_path, rounds: int = 2):
    sim = build_simulation([*BASE, *overrides], tmp_path / "_".join(overrides), rounds)
    for r in range(rounds):
        sim.run_round(r)
    return sim


@pytest.mark.parametrize("norm", ["bn", "fbn", "hbn"])
@pytest.mark.parametrize("overrides", [
    ["algo=fedsam", "algo.rho=0"],
    ["algo=moon", "algo.mu=0", "algo.projection_head=false"],
])
def test_reduces_to_fedavg_in_float64(overrides, norm, tmp_path):
    """ρ = 0 and μ = 0 are FedAvg to rounding, BN statistics included: SAM's second pass and MOON's
    reference passes leave every buffer as it was (a second update would move running_mean)."""
    fedavg = simulate(["algo=fedavg", f"norm={norm}"], tmp_path).store
    other = simulate([*overrides, f"norm={norm}"], tmp_path).store
    start = simulate(["algo=fedavg", f"norm={norm}"], tmp_path, rounds=0).store.global_state
    assert any(not torch.equal(start[k], v) for k, v in fedavg.global_state.items()), "the run trained"
    assert fedavg.global_state.keys() == other.global_state.keys()
    assert any("running_mean" in k or "mean" in k for k in fedavg.global_state), "statistics are compared"
    for k in fedavg.global_state:
        torch.testing.assert_close(other.global_state[k], fedavg.global_state[k], **F64, msg=k)


@pytest.mark.parametrize("overrides", [["algo=fedsam", "algo.rho=0.5"], ["algo=moon", "algo.mu=5"],
                                       ["algo=fedwon", "norm=none"]])
def test_the_extra_term_changes_the_run(overrides, tmp_path):
    fedavg = simulate(["algo=fedavg", "norm=none" if "norm=none" in overrides else "norm=bn"], tmp_path, 2)
    other = simulate(overrides, tmp_path, 2)
    shared = fedavg.store.global_state.keys() & other.store.global_state.keys()
    assert any(not torch.allclose(other.store.global_state[k], fedavg.store.global_state[k], rtol=1e-6)
               for k in shared), overrides


@pytest.mark.parametrize("clients", [None, 3])
def test_sam_perturbation_has_norm_rho_along_the_gradient(clients):
    g = torch.Generator().manual_seed(0)
    lead = (clients,) if clients else ()
    grads = {"w": torch.randn(*lead, 4, 3, generator=g, dtype=torch.float64),
             "b": torch.randn(*lead, 4, generator=g, dtype=torch.float64)}
    norm = torch.zeros(lead, dtype=torch.float64)
    eps = sam_perturbation(grads, 0.05, norm)
    for i in range(clients or 1):
        pick = (lambda t: t[i]) if clients else (lambda t: t)
        flat_g = torch.cat([pick(grads[k]).flatten() for k in grads])
        flat_e = torch.cat([pick(eps[k]).flatten() for k in grads])
        assert flat_e.norm().item() == pytest.approx(0.05, rel=1e-12)
        torch.testing.assert_close(flat_e, 0.05 * flat_g / flat_g.norm(), **F64)
        assert pick(norm).item() == pytest.approx(flat_g.norm().item())


def test_moon_contrastive_loss_is_eq_2():
    g = torch.Generator().manual_seed(1)
    z, z_glob, z_prev = (torch.randn(5, 7, generator=g, dtype=torch.float64) for _ in range(3))
    tau = 0.5
    expected = []
    for a, b, c in zip(z, z_glob, z_prev):
        pos = math.exp(F.cosine_similarity(a, b, dim=0).item() / tau)
        neg = math.exp(F.cosine_similarity(a, c, dim=0).item() / tau)
        expected.append(-math.log(pos / (pos + neg)))
    assert contrastive_loss(z, z_glob, z_prev, tau).item() == pytest.approx(sum(expected) / 5, rel=1e-12)


def test_moon_keeps_each_clients_previous_model_and_adds_a_projection_head(tmp_path):
    sim = simulate(["algo=moon", "algo.local_steps=1"], tmp_path, rounds=1)
    assert isinstance(sim.fed.model.head, ProjectionHead)
    assert sim.fed.model.head.l2.out_features == 256
    trained = [c for c, s in enumerate(sim.store.client_algo_state) if s]
    assert len(trained) == 3
    params = dict(sim.fed.model.named_parameters())
    for c in trained:
        previous = sim.store.client_algo_state[c]["previous"]
        assert previous.keys() == params.keys()
        assert any(not torch.equal(previous[k], sim.store.global_state[k]) for k in previous), "its own model"


def moon_client(tmp_path):
    """MOON's model (BN, float64, train mode), algorithm and one batch of 16 training samples."""
    sim = build_simulation([*BASE, "algo=moon", "norm=bn"], tmp_path, rounds=1)
    data = sim.fed.data.train
    return sim.fed.model.train(), sim.fed.algo, data.x[:16], data.y[:16]


def test_moon_reference_models_use_the_received_statistics(tmp_path):
    """z_glob and z_prev are computed with the BN running statistics the client received, not with
    those the step's own train-mode forward has already moved (the MOON code runs its global model
    with the statistics it received)."""
    model, algo, x, y = moon_client(tmp_path)
    received = copy.deepcopy(model)
    g = torch.Generator().manual_seed(4)
    params = {k: p.detach() for k, p in model.named_parameters()}
    previous = {k: p + 0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype) for k, p in params.items()}
    loss = algo.model_loss(model, x, y, algo.start(params, {"previous": previous}))
    moved = {k for k, b in model.named_buffers() if not torch.equal(b, received.get_buffer(k))}
    assert any(k.endswith("running_mean") for k in moved), "the step's forward moved the statistics"

    def z_eval(reference: nn.Module) -> torch.Tensor:
        reference.eval()
        return representation(reference, reference.forward_features(x))

    prev = copy.deepcopy(received)
    prev.load_state_dict(previous, strict=False)
    ref = copy.deepcopy(received)
    h = ref.forward_features(x)
    expected = F.cross_entropy(ref.head(h), y) + algo.cfg.mu * contrastive_loss(
        representation(ref, h), z_eval(copy.deepcopy(received)), z_eval(prev), algo.cfg.tau)
    torch.testing.assert_close(loss, expected, **F64)


def test_moon_first_round_is_the_cross_entropy_alone(tmp_path):
    """No previous model yet: ℓ_con = 0 exactly, as the MOON code's empty round-0 pool (a positive
    pair alone), not −log ½ = ln 2 from the received model standing in for the previous one."""
    model, algo, x, y = moon_client(tmp_path)
    expected = F.cross_entropy(copy.deepcopy(model)(x), y)
    params = {k: p.detach() for k, p in model.named_parameters()}
    local = algo.start(params, {})
    torch.testing.assert_close(algo.model_loss(model, x, y, local), expected, **F64)
    assert "previous" not in local and "global" not in local, "no reference model is kept"


def test_moon_first_round_trains_and_logs_as_without_the_contrastive_term(tmp_path):
    """Round 0 with μ = 5 equals μ = 0: the same weights and statistics and the same logged loss."""
    sims = [build_simulation([*BASE, "algo=moon", "norm=bn", f"algo.mu={mu}"], tmp_path / f"mu{mu}", rounds=1)
            for mu in (5, 0)]
    losses = [sim.run_round(0) for sim in sims]
    torch.testing.assert_close(losses[0], losses[1], **F64)
    for k, v in sims[1].store.global_state.items():
        torch.testing.assert_close(sims[0].store.global_state[k], v, **F64, msg=k)


def test_moon_falls_back_to_loop_with_its_reason(caplog):
    cfg = compose_config([*BASE, "algo=moon", "batch_size=8"])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        assert select_engine("packed", fed, 8, 3, torch.device("cpu")) == "loop"
    assert "algo=moon" in caplog.text and "model_loss" in caplog.text


@pytest.mark.parametrize("clients", [None, 2])
def test_agc_clips_each_unit_as_brock_et_al(clients):
    """Rows whose ‖G_i‖/max(‖W_i‖, 1e-3) exceeds λ are scaled to exactly that ratio; the others and
    the skipped head are unchanged (Brock et al. 2021b, Eq. 3)."""
    g = torch.Generator().manual_seed(2)
    lead = (clients,) if clients else ()
    params = {"conv.weight": torch.randn(*lead, 4, 2, 3, 3, generator=g, dtype=torch.float64),
              "conv.bias": torch.randn(*lead, 4, generator=g, dtype=torch.float64),
              "head.weight": torch.randn(*lead, 3, 4, generator=g, dtype=torch.float64)}
    grads = {k: torch.randn(v.shape, generator=g, dtype=torch.float64) * s
             for (k, v), s in zip(params.items(), (0.02, 10.0, 10.0))}
    grads["conv.weight"][..., 0, :, :, :] *= 100  # unit 0 clipped, the others (0.02 scale) not
    out = adaptive_clip(grads, params, 0.05, 1e-3, len(lead), ("head.",))
    torch.testing.assert_close(out["head.weight"], grads["head.weight"])
    for i in range(clients or 1):
        pick = (lambda t: t[i]) if clients else (lambda t: t)
        w, gw, ow = pick(params["conv.weight"]), pick(grads["conv.weight"]), pick(out["conv.weight"])
        for unit in range(4):
            ratio = gw[unit].norm() / w[unit].norm().clamp(min=1e-3)
            if ratio > 0.05:
                assert ow[unit].norm().item() == pytest.approx(0.05 * w[unit].norm().item(), rel=1e-12)
                torch.testing.assert_close(ow[unit] / ow[unit].norm(), gw[unit] / gw[unit].norm(), **F64)
            else:
                torch.testing.assert_close(ow[unit], gw[unit])
        assert (gw[0].norm() / w[0].norm()).item() > 0.05 > (gw[1].norm() / w[1].norm()).item()
        b, gb, ob = pick(params["conv.bias"]), pick(grads["conv.bias"]), pick(out["conv.bias"])
        assert ob.norm().item() == pytest.approx(min(gb.norm().item(), 0.05 * b.norm().item()), rel=1e-12)


def test_scaled_weight_standardization_centres_and_scales_each_unit():
    """Each unit's kernel has mean 0 and squared norm γ² (unit gain), and the layer convolves with it."""
    conv = nn.Conv2d(3, 5, 3).double()
    ws = ScaledWSConv2d(conv, gamma=RELU_GAMMA, eps=1e-4)
    torch.testing.assert_close(ws.weight, conv.weight)
    std = standardize(conv.weight, ws.gain, RELU_GAMMA, 1e-4)
    flat = std.flatten(1)
    torch.testing.assert_close(flat.mean(1), torch.zeros(5, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(flat.square().sum(1), torch.full((5,), RELU_GAMMA ** 2, dtype=torch.float64), **F64)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    torch.testing.assert_close(ws(x), F.conv2d(x, std, ws.bias), **F64)


def test_fedwon_yaml_gamma_is_the_relu_constant():
    """conf/algo/fedwon.yaml's γ is √(2/(1 − 1/π)) ≈ 1.7128585 (Brock et al. 2021a's ReLU
    constant), the dataclass's default."""
    gamma = compose_config(["algo=fedwon"]).algo.ws_gamma
    assert gamma == pytest.approx(math.sqrt(2 / (1 - 1 / math.pi)), rel=1e-12)
    assert gamma == FedWonConfig().ws_gamma


@pytest.mark.parametrize(("name", "override", "key"), [
    ("fedsam", "algo.rho=-1", "algo.rho"), ("moon", "algo.tau=0", "algo.tau"), ("moon", "algo.mu=-1", "algo.mu"),
    ("fedwon", "algo.agc_clip=0", "algo.agc_clip"),
])
def test_bad_options_name_the_key(name, override, key, tmp_path):
    with pytest.raises(ConfigError, match=key):
        run_experiment(compose_config([f"algo={name}", override, "rounds=1"]), tmp_path)


@pytest.mark.parametrize("norm", ["bn", "fedbn", "fbn", "hbn", "gn"])
@pytest.mark.parametrize("name", ["fedsam", "moon", "fedwon"])
def test_runs_two_rounds_on_every_norm(name, norm, tmp_path):
    summary = run_experiment(compose_config([f"algo={name}", f"norm={norm}", "rounds=2", "algo.local_steps=2",
                                             "num_clients=4"]), tmp_path)
    assert summary["status"] == "completed"


def test_fedwon_standardizes_every_convolution_and_composes_with_hbn():
    cfg = compose_config([*BASE, "algo=fedwon", "norm=hbn"])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    convs = [m for m in fed.model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 3 and all(isinstance(m, ScaledWSConv2d) for m in convs)
    assert any(type(m).__name__ == "HybridBatchNorm" for m in fed.model.modules())


def test_algorithm_objects_build_from_their_dataclass():
    for name in ("fedsam", "moon", "fedwon"):
        algo = build_algorithm(OmegaConf.structured(ALGORITHMS.get(name).config_class()))
        assert algo.cfg.name == name
