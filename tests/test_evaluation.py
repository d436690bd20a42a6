"""Evaluation: the faster path (channels-last weights on the CPU, one pass shared by the global and
per-domain metrics, cache-sized batches) gives the plain computation's numbers and leaves the model
as it was."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from conftest import build_simulation
from fedbn_bench.metrics.base import evaluate


def conv_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 5)).eval()


def test_evaluate_equals_one_plain_pass_and_leaves_the_weights_untouched():
    model, x, y = conv_net(), torch.randn(300, 3, 9, 9), torch.randint(0, 5, (300,))
    before = [(p, p.data_ptr(), p.stride()) for p in model.parameters()]
    with torch.no_grad():
        logits = model(x)
    acc, loss = evaluate(model, x, y, batch_size=64)
    assert acc == (logits.argmax(1) == y).sum().item() / len(y)
    torch.testing.assert_close(loss, F.cross_entropy(logits, y).item(), rtol=1e-5, atol=0)
    for p, address, stride in before:
        assert p.data_ptr() == address and p.stride() == stride and not p.is_inference()


def test_the_model_trains_after_an_evaluation():
    """No inference tensor and no other layout is left in the parameters (autograd would refuse
    inference tensors)."""
    model, x, y = conv_net().train(), torch.randn(16, 3, 9, 9), torch.randint(0, 5, (16,))
    evaluate(model, x, y)
    model.train()
    F.cross_entropy(model(x), y).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_global_and_domain_accuracy_share_one_pass_over_the_test_set(tmp_path):
    sim = build_simulation(["partition=domains", "num_clients=5", "norm=bn"], tmp_path, rounds=1,
                           dtype=torch.float32)
    seen = []
    hook = sim.fed.model.register_forward_hook(lambda m, inputs, out: seen.append(len(inputs[0])))
    row = sim.evaluator.evaluate()
    hook.remove()
    test = sim.fed.data.test
    assert sum(seen) == len(test.y)
    sim.fed.model.load_state_dict(sim.store.global_state)
    for name, idx in sim.fed.domain_test.items():
        assert row[f"acc_{name}"] == evaluate(sim.fed.model, test.x[idx], test.y[idx])[0]
    assert row["test_acc"] == evaluate(sim.fed.model, test.x, test.y, batch_size=1024)[0]


def test_metrics_entries_are_names_or_mappings_with_options(tmp_path):
    """``metrics: [name, {name: ..., option: ...}]``: options reach the metric's constructor; an
    unknown name or option is one ConfigError naming it, raised when the simulation is built."""
    import pytest

    from fedbn_bench.errors import ConfigError
    from fedbn_bench.metrics.base import METRICS, Metric, build_metric

    @METRICS.register("test_constant")
    class Constant(Metric):
        def __init__(self, value: float = 1.0) -> None:
            self.value = value

        def __call__(self, ctx):
            return {"constant": self.value}

    try:
        assert build_metric("test_constant").value == 1.0
        assert build_metric({"name": "test_constant", "value": 2.5}).value == 2.5
        with pytest.raises(ConfigError, match="test_constant.*valu"):
            build_metric({"name": "test_constant", "valu": 2.5})
        with pytest.raises(ConfigError, match="no `name`"):
            build_metric({"value": 2.5})
        with pytest.raises(ConfigError, match="no_such_metric"):
            build_metric("no_such_metric")
    finally:
        METRICS._items.pop("test_constant")


def test_a_run_keeps_one_metric_per_class_and_options():
    """Two entries of one metric with different options are two metrics; an exact repeat is one."""
    from fedbn_bench.engine.simulation import distinct
    from fedbn_bench.metrics.base import build_metric

    a, b, a2 = (build_metric({"name": "bn_statistics_pca", "layer": layer})
                for layer in ("features.1", "classifier.1", "features.1"))
    plain, plain2 = build_metric("global_accuracy"), build_metric("global_accuracy")
    assert distinct([a, b, a2, plain, plain2]) == [a, b, plain]
