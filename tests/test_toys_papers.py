"""The papers' toy figures and FedBN's synthetic experiment: HBN Fig. 2 (toy/hbn_clusters.py on the
project's HBN layer), FedBN Figs. 1-2 (toy/cos_bn.py), FedBN Fig. 9 (dataset fedbn_gaussians, mlp's
init_std, preset fedbn/fig9). Exact invariants of each normalisation and of the cosine loss, the
data's covariances within sampling error, and every figure id drawn to a PNG through make_figures
(toys from records written here; Fig. 9 from its committed run records)."""
from __future__ import annotations

import math

import pytest
import torch

from conftest import CONF, compose_config
from fedbn_bench.data import load_dataset
from fedbn_bench.data.base import DatasetError
from fedbn_bench.data.fedbn_gaussians import covariances
from fedbn_bench.figures.catalog import CATALOG
from fedbn_bench.figures.cli import draw
from fedbn_bench.models import build_model
from fedbn_bench.toy import cos_bn, hbn_clusters
from fedbn_bench.toy.records import TOYS, write_record

ROOT = CONF.parent
EPS = 1e-5
"""HBN's default eps (the toy runs the layer with it)."""


@pytest.fixture(scope="module")
def clusters() -> hbn_clusters.ClusterToy:
    return hbn_clusters.run_clusters(0)


@pytest.fixture(scope="module")
def cos() -> cos_bn.CosToy:
    return cos_bn.run_cos(0)


# -- HBN Fig. 2 ------------------------------------------------------------------------------------

def biased(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.mean(0), x.var(0, correction=0)


def test_clusters_are_the_papers_setting_and_seeded(clusters):
    raw = clusters.panels["raw"]
    assert [len(c) for c in raw] == [300, 200]
    for c, center, std in zip(raw, hbn_clusters.CENTERS, hbn_clusters.STDS):
        assert torch.allclose(c.mean(0), torch.tensor(center, dtype=torch.float64), atol=4 * std / math.sqrt(len(c)))
    again = hbn_clusters.run_clusters(0)
    assert all(torch.equal(a, b) for p in hbn_clusters.PANELS for a, b in zip(clusters.panels[p], again.panels[p]))
    assert not torch.equal(hbn_clusters.run_clusters(1).panels["raw"][0], raw[0])


def test_global_statistics_are_the_unions_mean_and_unbiased_variance(clusters):
    union = torch.cat(clusters.panels["raw"])
    assert torch.allclose(clusters.global_mean, union.mean(0), rtol=0, atol=1e-12)
    assert torch.allclose(clusters.global_var, union.var(0, correction=1), rtol=1e-12, atol=0)


def test_local_normalisation_gives_each_cluster_mean_0_and_std_1(clusters):
    for x, out in zip(clusters.panels["raw"], clusters.panels["local"]):
        mean, var = biased(out)
        assert torch.allclose(mean, torch.zeros(2, dtype=torch.float64), rtol=0, atol=1e-12)
        # std 1 up to the layer's eps: var_out = σ² / (σ² + eps) exactly
        assert torch.allclose(var, biased(x)[1] / (biased(x)[1] + EPS), rtol=1e-12, atol=0)


def test_global_normalisation_gives_the_union_mean_0_and_std_1(clusters):
    union_out, union = torch.cat(clusters.panels["global"]), torch.cat(clusters.panels["raw"])
    mean, var = biased(union_out)
    assert torch.allclose(mean, torch.zeros(2, dtype=torch.float64), rtol=0, atol=1e-12)
    n = len(union)
    # Eq. 8's variance is unbiased: the biased variance of the output is (n-1)/n (up to eps)
    assert torch.allclose(var, biased(union)[1] / (clusters.global_var + EPS), rtol=1e-12, atol=0)
    assert torch.allclose(var, torch.full((2,), (n - 1) / n, dtype=torch.float64), rtol=1e-5, atol=0)


@pytest.mark.parametrize("k,local", [(0, 0.7), (1, 0.3)])
def test_hybrid_statistics_are_the_stated_mixtures_of_means_and_variances(clusters, k, local):
    x, out = clusters.panels["raw"][k], clusters.panels["hybrid"][k]
    mu_b, var_b = biased(x)
    mu_mix = local * mu_b + (1 - local) * clusters.global_mean
    var_mix = local * var_b + (1 - local) * clusters.global_var
    # recover the moments the layer normalised with from its output: out = (x - μ̂) / sqrt(σ̂² + eps)
    scale = out.std(0, correction=0) / x.std(0, correction=0)
    assert torch.allclose(1 / scale.square() - EPS, var_mix, rtol=1e-10, atol=0)
    assert torch.allclose(mu_b - out.mean(0) / scale, mu_mix, rtol=0, atol=1e-10)


# -- FedBN Figs. 1-2 -------------------------------------------------------------------------------

def test_cos_loss_by_hand():
    client = cos_bn.Client(torch.tensor([2.0], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64))
    assert cos_bn.loss(client, math.pi, 2.0).item() == pytest.approx(4.0, abs=1e-15)  # (1 - cos π)²
    assert cos_bn.loss(client, math.pi / 4, 1.0).item() == pytest.approx(1.0, abs=1e-15)  # cos(π/2) = 0
    pair = cos_bn.Client(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert cos_bn.loss(pair, 0.0).item() == pytest.approx(0.5, abs=1e-15)  # ((0 - 1)² + 0) / 2


def test_local_bn_makes_the_loss_curves_of_rescaled_inputs_identical():
    """x₂ = 3 x₁ with the same targets: with BN (γ = σ̂) the two curves coincide; without BN,
    client 2's curve is client 1's with w rescaled by 3."""
    one = cos_bn.draw_clients(5, sigmas=(1.0,))[0]
    two = cos_bn.Client(3.0 * one.x, one.y)
    ws = cos_bn.grid(cos_bn.W_RANGE, 301)
    assert two.gamma == pytest.approx(3.0 * one.gamma, rel=1e-14)
    assert torch.allclose(cos_bn.loss(two, ws, two.gamma), cos_bn.loss(one, ws, one.gamma), rtol=0, atol=1e-12)
    assert torch.allclose(cos_bn.loss(two, ws), cos_bn.loss(one, 3.0 * ws), rtol=0, atol=1e-12)
    assert not torch.allclose(cos_bn.loss(two, ws), cos_bn.loss(one, ws), atol=1e-3)


def test_cos_toy_optima_and_averages_show_the_papers_points(cos):
    o = cos.optima
    # without BN the optima are w_true / σ_k (8 and 2); with local BN both are w_true (4)
    assert o["no_bn_w"] == pytest.approx([cos_bn.W_TRUE / s for s in cos_bn.SIGMAS], abs=0.05)
    assert o["bn_w"] == pytest.approx([cos_bn.W_TRUE] * 2, abs=0.1)
    assert o["bn_gamma"] == pytest.approx(list(cos_bn.SIGMAS), rel=0.1)
    # averaging the no-BN optima is poor on both clients; FedBN's (w̄, γ₁*) is as good as client 1's own
    for own, avg in zip(o["no_bn_loss_at_own"], o["no_bn_loss_at_avg"]):
        assert avg > 10 * own
    loss = o["client1_loss"]
    assert loss["avg_w_avg_gamma"] > 10 * loss["own"]
    assert loss["avg_w_local_gamma"] < 1.5 * loss["own"]
    # the surface is client 1's loss on the grid
    w, g = cos.surface_w[7], cos.surface_gamma[5]
    assert cos.surface[5, 7].item() == pytest.approx(cos_bn.loss(cos.clients[0], w, g).item(), rel=1e-13)


def test_cos_toy_is_seeded(cos):
    again = cos_bn.draw_clients(0)
    assert all(torch.equal(a.x, b.x) and torch.equal(a.y, b.y) for a, b in zip(cos.clients, again))
    assert not torch.equal(cos_bn.draw_clients(1)[0].x, again[0].x)


# -- the toy figures through make_figures ----------------------------------------------------------

TOY_FIGURES = {"hbn/fig2": "hbn_clusters", "fedbn/fig1": "fedbn_cos", "fedbn/fig2": "fedbn_cos"}


def test_toy_declarations_read_their_toys_records():
    for fid, toy in TOY_FIGURES.items():
        assert CATALOG[fid].options["toy"] == toy and CATALOG[fid].runs == TOYS[toy].runs


@pytest.mark.parametrize("fid", TOY_FIGURES)
def test_every_toy_figure_renders_from_its_record(tmp_path, fid):
    write_record(tmp_path, TOY_FIGURES[fid], seed=0)
    job = draw(CATALOG[fid], tmp_path, CONF)
    assert job is not None and not job.problems
    png = job.image_stem.with_suffix(".png")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    md = job.md_path.read_text()
    assert job.md_path.is_relative_to(tmp_path) and "Missing or failed: none." in md
    if fid == "hbn/fig2":
        local = [line for line in md.splitlines() if line.startswith("| (b) local statistics | ")]
        assert len(local) == 2 and all(line.endswith(" | (1.00, 1.00) |") for line in local)
    if fid == "fedbn/fig2":
        assert "| (w̄, γ₁*) |" in md


def test_a_toy_figure_without_its_record_is_missing(tmp_path, capsys):
    assert draw(CATALOG["fedbn/fig1"], tmp_path, CONF) is None
    assert "fedbn/fig1: missing: no run under" in capsys.readouterr().err


# -- FedBN Fig. 9: data, model, preset, figure ---------------------------------------------------

def test_gaussians_have_the_stated_covariances_within_sampling_error():
    n = 2000
    data = load_dataset("fedbn_gaussians", seed=3, samples_per_class=n, test_samples_per_class=1)
    assert data.domain_names == ["diagonal", "full"] and data.input_shape == (10,)
    x, y, d = data.train.x.double(), data.train.y, data.train.domain
    for domain, sigma in enumerate(covariances(10, 0.5)):
        for label, mean in ((0, -1.0), (1, 1.0)):
            part = x[(d == domain) & (y == label)]
            assert len(part) == n
            assert torch.allclose(part.mean(0), torch.full((10,), mean, dtype=torch.float64), atol=0.1)
            centered = part - part.mean(0)
            # an entry's sampling sd is sqrt((1 + Σᵢⱼ²) / n) <= 0.032: 4 sd
            assert (centered.T @ centered / n - sigma).abs().max() < 0.13, (domain, label)
    sigma2 = covariances(10, 0.5)[1]
    assert sigma2[0, 1] == 0.5 and sigma2[0, 9] == pytest.approx(0.5**9, rel=1e-15) and torch.equal(sigma2, sigma2.T)


def test_gaussians_are_seed_deterministic_and_checked():
    a, b = load_dataset("fedbn_gaussians", seed=1), load_dataset("fedbn_gaussians", seed=1)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.domain, b.test.domain)
    assert not torch.equal(load_dataset("fedbn_gaussians", seed=2).train.x, a.train.x)
    assert torch.bincount(a.train.domain * 2 + a.train.y).tolist() == [50, 50, 50, 50]
    with pytest.raises(DatasetError, match="rho"):
        load_dataset("fedbn_gaussians", rho=1.0)


def test_mlp_init_std_draws_the_first_hidden_layer_only_from_n_0_alpha2():
    """FedBN App. F's W_k, b_k ~ N(0, α²) for the first layer's neurons k (§4.2, App. A); every later
    linear layer, the output layer included, keeps torch's init: |w| <= 1/sqrt(fan_in)."""
    bn = lambda c, d: torch.nn.BatchNorm1d(c)  # noqa: E731
    torch.manual_seed(0)
    model = build_model("mlp", bn, (10,), 2, hidden_sizes=(100, 50), init_std=10.0)
    first, second, head = model.features[1], model.features[4], model.head
    assert first.weight.std().item() == pytest.approx(10.0, rel=0.05)
    assert first.bias.std().item() == pytest.approx(10.0, rel=0.2)
    for layer in (second, head):
        bound = 1 / math.sqrt(layer.in_features)
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
    assert torch.equal(model.features[2].weight, torch.ones(100))
    default = build_model("mlp", bn, (10,), 2, hidden_sizes=(100,))
    assert default.features[1].weight.abs().max() <= 1 / math.sqrt(10)
    with pytest.raises(ValueError, match="init_std"):
        build_model("mlp", bn, (10,), 2, init_std=0.0)
    with pytest.raises(ValueError, match="hidden_sizes"):
        build_model("mlp", bn, (10,), 2, hidden_sizes=(), init_std=10.0)


def test_fig9_preset_is_the_papers_setting():
    for method, norm in (("fedavg", "bn"), ("fedbn", "fedbn")):
        cfg = compose_config(["experiment=fedbn/fig9", f"+experiment/fedbn/method={method}"])
        assert (cfg.norm.name, cfg.algo.name, cfg.dataset.name) == (norm, "fedavg", "fedbn_gaussians")
        assert cfg.algo.lr == 1e-5 and cfg.rounds == 600 and cfg.algo.local_steps == 1 and cfg.num_clients == 2
        assert list(cfg.model.options.hidden_sizes) == [100] and cfg.model.options.init_std == 10
        assert cfg.batch_size == 2 * cfg.dataset.options.samples_per_class  # one full-batch step per round
        assert cfg.algo.momentum == 0 and cfg.algo.weight_decay == 0 and cfg.algo.clip_grad_norm is None


def test_fig9_draws_from_its_committed_runs(tmp_path):
    job = draw(CATALOG["fedbn/fig9"], ROOT, CONF, out=tmp_path)
    assert job is not None and not job.problems
    assert {r.override("experiment/fedbn/method") for r in job.runs} == {"fedavg", "fedbn"}
    assert all(len(r.rows) == 600 and r.status == "completed" for r in job.runs)
    assert (tmp_path / "fig9.png").read_bytes()[:4] == b"\x89PNG"
