"""Evaluation at cross-device scale (issue 58): a test split per client that follows its training
partition, a sample of clients per evaluation, each client's model evaluated batched, and the
per-client values in long form (``client_metrics.csv``)."""
from __future__ import annotations

import torch

from fedbn_bench.partition import follow_partition, make_partition


def test_test_split_follows_each_clients_share_of_every_class():
    """Client c holds of each class k the share of class k's test samples that it holds of its
    training samples (rounded at the cumulative shares): disjoint, covering the test set."""
    train_y = torch.arange(6000) % 10
    test_y = torch.arange(1000) % 10
    parts = make_partition("dirichlet", train_y, 20, 0, alpha=0.3, min_size=10)
    split = follow_partition(train_y, parts, test_y, 10, torch.Generator().manual_seed(0))
    flat = torch.cat(split)
    assert len(split) == 20 and flat.unique().numel() == flat.numel() == 1000
    for part, test in zip(parts, split):
        train_counts = torch.bincount(train_y[part], minlength=10)
        test_counts = torch.bincount(test_y[test], minlength=10)
        assert torch.all((test_counts - train_counts * 100 / 600).abs() <= 1)  # 100 of 600 per class


def test_a_class_without_training_samples_goes_to_no_client():
    train_y = torch.tensor([0, 0, 1, 1])
    test_y = torch.tensor([0, 1, 2, 2, 0])
    split = follow_partition(train_y, [torch.tensor([0, 1]), torch.tensor([2, 3])], test_y, 3,
                             torch.Generator().manual_seed(0))
    assert sorted(split[0].tolist()) == [0, 4] and split[1].tolist() == [1]


# -- which clients an evaluation tests, and the batched evaluation ------------------------------
import csv  # noqa: E402

import pytest  # noqa: E402
from torch import nn  # noqa: E402

from conftest import compose_config  # noqa: E402
from fedbn_bench.engine.sampling import evaluated_clients  # noqa: E402
from fedbn_bench.errors import ConfigError  # noqa: E402
from fedbn_bench.metrics import METRICS, EvalContext, evaluate  # noqa: E402
from fedbn_bench.metrics.client_batch import batched_client_outcomes  # noqa: E402
from fedbn_bench.records.reader import read_run  # noqa: E402
from fedbn_bench.runner import run_experiment  # noqa: E402


def test_an_evaluation_draws_its_clients_from_seed_and_round():
    drawn = evaluated_clients(10_000, 100, 0, 20)
    assert drawn == evaluated_clients(10_000, 100, 0, 20) == sorted(set(drawn)) and len(drawn) == 100
    assert drawn != evaluated_clients(10_000, 100, 0, 25) and drawn != evaluated_clients(10_000, 100, 1, 20)
    assert evaluated_clients(100, 100, 0, 20) is None and evaluated_clients(50, None, 0, 20) is None


def small_bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))


def client_states(model: nn.Module, n: int) -> list[dict[str, torch.Tensor]]:
    """``n`` clients' own BN keys (random statistics and affine parameters)."""
    g = torch.Generator().manual_seed(1)
    keys = [k for k in model.state_dict() if k.startswith("1.")]
    return [{k: (torch.rand(model.state_dict()[k].shape, generator=g) + 0.5 if model.state_dict()[k].is_floating_point()
                 else model.state_dict()[k]) for k in keys} for _ in range(n)]


def test_only_the_drawn_clients_are_tested_and_their_values_go_long_form():
    model = small_bn_model()
    own = client_states(model, 10)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(50, 1, 8, 8, generator=g), torch.randint(0, 3, (50,), generator=g)
    loaded = []
    shared = {k: v for k, v in model.state_dict().items() if not k.startswith("1.")}

    def load(c):
        loaded.append(c)
        model.load_state_dict({**shared, **own[c]})

    tests = [torch.arange(5 * c, 5 * c + 5) for c in range(10)]
    ctx = EvalContext(model=model, test_x=x, test_y=y, load_global=lambda: None, load_client=load,
                      client_test=tests, clients=[1, 4, 7])
    row = METRICS.get("client_accuracy")()(ctx)
    assert sorted(set(loaded)) == [1, 4, 7]
    accs = {}
    for c in (1, 4, 7):
        model.load_state_dict({**shared, **own[c]})
        accs[c] = evaluate(model, x[tests[c]], y[tests[c]])[0]
    assert ctx.client_values["client_acc"] == accs
    assert row["test_acc"] == pytest.approx(sum(accs.values()) / 3)
    assert not any(k.startswith("client_acc_") and k[11:].isdigit() for k in row)


def test_batched_evaluation_equals_one_client_at_a_time():
    """Every client's own BN state over the shared weights, in one vectorized pass, gives each
    client's accuracy exactly and its loss to float rounding; test splits of unequal sizes (one
    empty, one longer than a unit) are padded and masked."""
    model = small_bn_model()
    own = client_states(model, 5)
    shared = {k: v for k, v in model.state_dict().items() if not k.startswith("1.")}
    g = torch.Generator().manual_seed(3)
    sizes = [7, 0, 1, 20, 3]
    data = [(torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)) for n in sizes]
    batched = batched_client_outcomes(model, shared, lambda c: own[c], list(range(5)), data, batch_size=8)
    for c, (xc, yc) in enumerate(data):
        model.load_state_dict({**shared, **own[c]})
        acc, loss = evaluate(model, xc, yc, batch_size=8)
        assert batched[c][0] == acc and batched[c][1] == pytest.approx(loss, rel=1e-5, abs=1e-6)


# -- a run: long-form per-client records, the evaluation named, bad input -----------------------
TINY = ["debug=default", "norm=fedbn", "num_clients=6", "clients_per_round=2", "partition=iid", "batch_size=8"]


def test_a_sampled_run_writes_client_metrics_long_form_and_names_its_evaluation(tmp_path):
    summary = run_experiment(compose_config([*TINY, "evaluation.clients=4"]), tmp_path)
    assert summary["evaluation"] == ("client models: 4 of 6 clients drawn per evaluation, each on its split of the "
                                     "test set following its training partition")
    with (tmp_path / "metrics.csv").open() as f:
        header = next(csv.reader(f))
    assert not [c for c in header if c.startswith("client_acc_") and c[11:].isdigit()]
    run = read_run(tmp_path)
    for round_number in (1, 2):
        assert sorted(run.client_values("client_acc")[round_number]) == evaluated_clients(6, 4, 0, round_number)
        row = next(r for r in run.rows if r["round"] == round_number)
        values = run.client_values("client_acc")[round_number].values()
        assert row["client_acc_mean"] == pytest.approx(sum(values) / 4, abs=1e-6)


def test_the_reader_gives_old_wide_columns_and_long_form_alike(tmp_path):
    committed = read_run("results/fedrbn/table1_state_digits/runs/digits_20-lambda0.5/clean")
    wide = committed.client_values("client_acc")
    last = committed.rows[-1]
    assert wide[int(last["round"])][0] == last["client_acc_0"] and len(wide[int(last["round"])]) > 1
    (tmp_path / "client_metrics.csv").write_text("round,client,metric,value\n5,3,client_acc,0.5\n5,9,client_acc,1\n")
    assert read_run(tmp_path).client_values("client_acc") == {5: {3: 0.5, 9: 1.0}}


@pytest.mark.parametrize("value", ["0", "-3", "some"])
def test_an_invalid_number_of_evaluated_clients_is_refused_before_training(tmp_path, value):
    with pytest.raises(ConfigError, match="evaluation.clients"):
        run_experiment(compose_config([*TINY, f"evaluation.clients={value}"]), tmp_path)
