"""FedRBN Fig. 7 / Fig. 13: the ``bn_statistics_pca`` metric on hand-made BN statistics (coordinates
computed by hand and by an independent eigen-decomposition, equal users on one point, column names,
the global state left alone, bad layers), the ``bn_pca`` recipe on a hand-made run directory (exact
.md cells), the preset's layers on the Digits model, and one FedRBN round recording the projection."""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from torch import nn

from conftest import CONF, build_simulation, compose_config
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.figures.catalog import CATALOG
from fedbn_bench.figures.catalog.fedrbn import BN_LAYERS, NOT_COVERED
from fedbn_bench.figures.cli import main
from fedbn_bench.metrics import EvalContext, build_metric
from fedbn_bench.metrics.bn_statistics_pca import principal_coordinates
from fedbn_bench.models import build_model
from fedbn_bench.norms.dual_bn import DualBatchNorm
from fedbn_bench.norms.fedrbn import FedRBN, FedRBNConfig
from fedbn_bench.records.run_records import RunRecorder

ROOT = CONF.parent


class Net(nn.Module):
    def __init__(self, norm: nn.Module, features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(2, features)
        self.bn = norm


def context(model: nn.Module, local: list[dict[str, torch.Tensor]], domains: list[str] | None = None) -> EvalContext:
    """Users whose own state is the model's global state with ``local`` on top (as ``ClientStore``)."""
    global_state = {k: v.clone() for k, v in model.state_dict().items()}

    def load_client(c: int) -> None:
        model.load_state_dict(global_state)
        model.load_state_dict(local[c], strict=False)

    return EvalContext(model=model, test_x=torch.zeros(1, 2), test_y=torch.zeros(1, dtype=torch.long),
                       load_global=lambda: model.load_state_dict(global_state), load_client=load_client,
                       client_test=[None] * len(local), client_domain=domains or [])


def dual(clean: tuple[list[float], list[float]], adv: tuple[list[float], list[float]]) -> dict[str, torch.Tensor]:
    """A user's dual-BN statistics ((mean, var) of BN_c, of BN_a)."""
    return {"bn.running_mean": torch.tensor(clean[0]), "bn.running_var": torch.tensor(clean[1]),
            "bn.adv_running_mean": torch.tensor(adv[0]), "bn.adv_running_var": torch.tensor(adv[1])}


def test_hand_made_statistics_give_hand_computed_coordinates():
    """One feature, so each (user, branch) vector is (mean, var): (5, 1), (-1, 1), (2, 2), (2, 0), centred
    at (2, 1): the first axis is the mean (spread 3), the second the variance (spread 1)."""
    model = Net(DualBatchNorm(1, 1), 1)
    ctx = context(model, [dual(([5.0], [1.0]), ([-1.0], [1.0])), dual(([2.0], [2.0]), ([2.0], [0.0]))],
                  ["MNIST", "SVHN"])
    row = build_metric({"name": "bn_statistics_pca", "layer": "bn"})(ctx)
    expected = {"bn_pca/bn/0/MNIST/clean/pc1": 3.0, "bn_pca/bn/0/MNIST/clean/pc2": 0.0,
                "bn_pca/bn/0/MNIST/adv/pc1": -3.0, "bn_pca/bn/0/MNIST/adv/pc2": 0.0,
                "bn_pca/bn/1/SVHN/clean/pc1": 0.0, "bn_pca/bn/1/SVHN/clean/pc2": 1.0,
                "bn_pca/bn/1/SVHN/adv/pc1": 0.0, "bn_pca/bn/1/SVHN/adv/pc2": -1.0,
                "bn_pca/bn/explained/pc1": 0.9, "bn_pca/bn/explained/pc2": 0.1}
    assert list(row) == list(expected)
    assert row == {k: pytest.approx(v, abs=1e-12) for k, v in expected.items()}


def test_coordinates_equal_an_independent_pca():
    """Against numpy's eigen-decomposition of the covariance, with the same sign rule (largest loading > 0)."""
    vectors = torch.randn(7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * torch.arange(1, 6)
    coordinates, explained = principal_coordinates(vectors)
    x = vectors.numpy()
    centered = x - x.mean(0)
    values, vecs = np.linalg.eigh(centered.T @ centered)
    order = np.argsort(values)[::-1][:2]
    axes = vecs[:, order]
    axes = axes * np.sign(axes[np.abs(axes).argmax(0), [0, 1]])
    np.testing.assert_allclose(coordinates.numpy(), centered @ axes, rtol=0, atol=1e-10)
    np.testing.assert_allclose(explained.numpy(), values[order] / values.sum(), rtol=0, atol=1e-12)


def test_degenerate_vectors_give_zeros_beyond_their_rank():
    coordinates, explained = principal_coordinates(torch.tensor([[1.0, 2.0]]))
    assert coordinates.tolist() == [[0.0, 0.0]] and explained.tolist() == [0.0, 0.0]
    coordinates, explained = principal_coordinates(torch.tensor([[0.0, 0.0], [2.0, 0.0]]))
    assert coordinates.flatten().tolist() == pytest.approx([-1.0, 0.0, 1.0, 0.0], abs=1e-12)
    assert explained.tolist() == pytest.approx([1.0, 0.0], abs=1e-12)


def test_users_with_equal_statistics_land_on_one_point():
    model = Net(DualBatchNorm(3, 1), 3)
    same = dual(([0.1, -2.0, 3.0], [1.0, 0.5, 2.0]), ([0.4, 1.0, -1.0], [3.0, 0.2, 1.0]))
    other = dual(([1.1, 2.0, 0.0], [0.3, 0.5, 4.0]), ([-0.4, 0.0, 2.0], [1.0, 1.2, 0.7]))
    row = build_metric({"name": "bn_statistics_pca", "layer": "bn"})(context(model, [same, other, same]))
    for branch in ("clean", "adv"):
        for k in (1, 2):
            assert row[f"bn_pca/bn/0/-/{branch}/pc{k}"] == row[f"bn_pca/bn/2/-/{branch}/pc{k}"]
        assert row[f"bn_pca/bn/0/-/{branch}/pc1"] != row[f"bn_pca/bn/1/-/{branch}/pc1"]


def test_plain_bn_is_one_branch_named_bn_and_the_global_state_is_left_alone():
    model = Net(nn.BatchNorm1d(2), 2)
    local = [{"bn.running_mean": torch.tensor([float(c), 1.0]), "bn.running_var": torch.tensor([2.0, float(c * c)])}
             for c in range(3)]
    ctx = context(model, local, ["a/b", "a/b", "c"])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    row = build_metric({"name": "bn_statistics_pca", "layer": "bn"})(ctx)
    assert set(row) == {f"bn_pca/bn/{user}/{domain}/bn/pc{k}" for user, domain in ((0, "a-b"), (1, "a-b"), (2, "c"))
                        for k in (1, 2)} | {"bn_pca/bn/explained/pc1", "bn_pca/bn/explained/pc2"}
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert [c["bn.running_mean"][0].item() for c in local] == [0.0, 1.0, 2.0]


def test_a_bad_or_missing_layer_is_a_config_error_naming_the_bn_layers():
    model = Net(DualBatchNorm(1, 1), 1)
    ctx = context(model, [dual(([0.0], [1.0]), ([0.0], [1.0]))])
    with pytest.raises(ConfigError, match=r"metrics\[\]\.layer='fc' \(bn_statistics_pca\) is not a BN layer of "
                                          r"the model; allowed: bn$"):
        build_metric({"name": "bn_statistics_pca", "layer": "fc"})(ctx)
    for entry in ("bn_statistics_pca", {"name": "bn_statistics_pca", "layer": []},
                  {"name": "bn_statistics_pca", "layer": ["bn", 1]}):
        with pytest.raises(ConfigError, match="needs a `layer`"):
            build_metric(entry)


def test_the_preset_names_digit_cnn_dual_bn_layers():
    """fig7.yaml's metric on digit_cnn with FedRBN's dual BN: both layers have BN_c and BN_a."""
    cfg = compose_config(["experiment=fedrbn/fig7"])
    [entry] = OmegaConf.to_container(cfg.metrics, resolve=True)
    assert entry == {"name": "bn_statistics_pca", "layer": list(BN_LAYERS)}
    assert cfg.model.name == "digit_cnn" and cfg.norm.name == "fedrbn" and cfg.adversarial.at_fraction == 1.0
    model = build_model("digit_cnn", FedRBN(FedRBNConfig()).norm_layer, (3, 28, 28), 10)
    row = build_metric(entry)(context(model, [{}, {}], ["MNIST", "SVHN"]))
    for layer in BN_LAYERS:
        assert f"bn_pca/{layer}/1/SVHN/adv/pc2" in row and f"bn_pca/{layer}/0/MNIST/clean/pc1" in row
    assert "fedrbn/fig7" in CATALOG and "fedrbn/fig13" in CATALOG
    assert "fedrbn/fig7" not in NOT_COVERED and "fedrbn/fig13" not in NOT_COVERED


def pca_columns(layer: str, points: dict[tuple[int, str, str], tuple[float, float]], explained: tuple[float, float]):
    row = {f"bn_pca/{layer}/{u}/{d}/{b}/pc{k + 1}": xy[k] for (u, d, b), xy in points.items() for k in range(2)}
    return {**row, f"bn_pca/{layer}/explained/pc1": explained[0], f"bn_pca/{layer}/explained/pc2": explained[1]}


def write_run(runs: Path, name: str, status: str, rows: list[dict]) -> None:
    run = runs / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0}))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["experiment=fedrbn/fig7", "seed=0"]))
    recorder = RunRecorder(run)
    for row in rows:
        recorder.append_metrics({"test_acc": 0.5, **row})
    (run / "summary.json").write_text(json.dumps({"status": status}))


def test_recipe_tables_the_final_evaluation_and_names_missing_columns_and_failed_runs(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    early = pca_columns("classifier.1", {(0, "MNIST", "clean"): (9.0, 9.0), (0, "MNIST", "adv"): (9.0, 9.0),
                                         (1, "SVHN", "clean"): (9.0, 9.0)}, (0.5, 0.5))
    final = pca_columns("classifier.1", {(0, "MNIST", "clean"): (1.5, -2.25), (0, "MNIST", "adv"): (-0.125, 3.0),
                                         (1, "SVHN", "clean"): (1234567.0, 0.0001)}, (0.9, 0.05))
    write_run(runs, "seed0", "completed", [{"round": 5, **early}, {"round": 10, **final}])
    write_run(runs, "seed1", "failed", [{"round": 5, **early}])
    assert main(["fedrbn/fig7", "--runs", str(runs), "--out", str(out)], repo=ROOT) == 0
    lines = (out / "fig7.md").read_text().splitlines()
    start = lines.index("## seed0: bn4 (classifier.1), round 10")
    assert lines[start + 2] == "PC1 explains 90.00 % and PC2 5.00 % of the variance."
    assert lines[start + 4:start + 9] == ["| user | domain | branch | PC1 | PC2 |", "|---:|---|---|---:|---:|",
                                          "| 0 | MNIST | BN_c | 1.5 | -2.25 |", "| 0 | MNIST | BN_a | -0.125 | 3 |",
                                          "| 1 | SVHN | BN_c | 1.235e+06 | 0.0001 |"]
    assert "- run seed1 is failed (not drawn)" in lines
    for ext in ("png", "pdf"):
        assert (out / f"fig7.{ext}").stat().st_size > 0
    assert main(["fedrbn/fig13", "--runs", str(runs), "--out", str(out)], repo=ROOT) == 0
    lines = (out / "fig13.md").read_text().splitlines()
    assert ("- run seed0 has no bn_pca/features.1 columns (metrics: [{name: bn_statistics_pca, layer: features.1}])"
            in lines)
    assert "## seed0: bn4 (classifier.1), round 10" in lines


def test_a_fedrbn_run_records_the_projection_of_its_users_own_statistics(tmp_path):
    """One round of FedRBN with every user AT (loop engine), the metric on two of fbn_cnn's BN layers:
    the final metrics.csv row equals the projection of the store's per-user dual-BN statistics."""
    overrides = ["dataset=sklearn_digits", "partition=domains", "num_clients=5", "model=fbn_cnn", "norm=fedrbn",
                 "adversarial=pgd_at", "adversarial.at_fraction=1.0", "adversarial.steps=1",
                 "adversarial.eval_attacks.0.steps=1", "algo.local_steps=1", "batch_size=16", "seed=0"]
    metric = build_metric({"name": "bn_statistics_pca", "layer": ["features.2", "features.5"]})
    sim = build_simulation(overrides, tmp_path, rounds=1, dtype=torch.float32,
                           simulation=partial(Simulation, extra_metrics=[metric]))
    sim.run()
    header, *rows = [line.split(",") for line in (tmp_path / "metrics.csv").read_text().splitlines()]
    local = sim.store.client_local
    domains = [sim.fed.data.domain_names[r.domain] for r in sim.store.records]
    for layer in ("features.2", "features.5"):
        vectors = torch.stack([torch.cat([local[c][f"{layer}.{p}running_mean"], local[c][f"{layer}.{p}running_var"]])
                               for c in range(5) for p in ("", "adv_")])
        assert not torch.equal(vectors[0], vectors[1])  # BN_c and BN_a both trained
        expected = principal_coordinates(vectors)[0]
        for c in range(5):
            for b, branch in enumerate(("clean", "adv")):
                for k in (1, 2):
                    value = float(rows[-1][header.index(f"bn_pca/{layer}/{c}/{domains[c]}/{branch}/pc{k}")])
                    assert value == pytest.approx(expected[2 * c + b, k - 1].item(), rel=1e-4, abs=1e-6)
