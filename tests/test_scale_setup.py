"""Setup at cross-device scale (issue 58): the default partition and small-client policy let
10,000 clients share Fashion-MNIST's 60,000 samples (6 a client), and setup stays O(N)."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import compose_config
from fedbn_bench.config.validate import validate_client_sizes
from fedbn_bench.engine.sampling import draw_batches, generator
from fedbn_bench.errors import ConfigError
from fedbn_bench.partition import PartitionError, make_partition
from fedbn_bench.runner import run_experiment

SMALL = ["model=simple_cnn", "num_clients=5", "clients_per_round=3", "batch_size=32", "eval_every=1"]


def test_min_size_auto_is_ten_where_it_can_hold_and_one_where_it_cannot():
    labels = torch.arange(60_000) % 10
    parts = make_partition("dirichlet", labels, 10_000, 0, alpha=0.3, min_size="auto")
    sizes = torch.tensor([len(p) for p in parts])
    assert sizes.min() >= 1 and sizes.sum() == 60_000 and sizes.max() > 6  # skewed, not repaired flat
    small = make_partition("dirichlet", labels[:1000], 20, 0, alpha=0.3, min_size="auto")
    ten = make_partition("dirichlet", labels[:1000], 20, 0, alpha=0.3, min_size=10)
    assert all(torch.equal(a, b) for a, b in zip(small, ten, strict=True))
    with pytest.raises(PartitionError, match="min_size"):
        make_partition("dirichlet", labels, 10_000, 0, alpha=0.3, min_size=10)  # an explicit value stays checked


def test_the_default_partition_scales_and_small_clients_cycle_only_past_a_hundred_clients():
    """small_clients=auto: a cross-device federation (more than 100 clients) cycles its small
    clients; the papers' settings (100 clients or fewer) refuse them as before."""
    from fedbn_bench.config.validate import small_clients_policy

    cfg = compose_config(["num_clients=10000", "clients_per_round=10"])
    assert cfg.partition.min_size == "auto" and cfg.small_clients == "auto"
    assert small_clients_policy("auto", 10_000) == "cycle" and small_clients_policy("auto", 101) == "cycle"
    assert small_clients_policy("auto", 100) == "refuse" and small_clients_policy("skip", 10_000) == "skip"


def test_cycle_gives_a_small_client_one_batch_of_its_samples_repeated():
    idx = torch.tensor([10, 11, 12, 13, 14, 15])
    batches = draw_batches(idx, 16, 3, generator(0, 1, 2))
    assert batches.shape == (3, 16)
    for row in batches:
        counts = torch.bincount(row - 10, minlength=6)
        assert set(counts.tolist()) <= {2, 3} and counts.sum() == 16  # each sample 16 // 6 or one more time
    full = torch.arange(40)
    assert torch.equal(draw_batches(full, 16, 3, generator(0, 1, 2)), draw_batches(full, 16, 3, generator(0, 1, 2)))


def test_cycle_refuses_only_empty_clients_in_one_line():
    validate_client_sizes([6, 1, 30], 16, needs_two=True, small_clients="cycle")
    with pytest.raises(ConfigError, match="client 1 holds no samples"):
        validate_client_sizes([6, 0, 30], 16, needs_two=True, small_clients="cycle")
    with pytest.raises(ConfigError, match="batch_size=100 is larger than the clients' 36 training samples"):
        validate_client_sizes([6, 30], 100, needs_two=True, small_clients="cycle")


def test_a_store_of_ten_thousand_clients_checkpoints_as_a_few_tensors():
    """FedBN's local keys and the records of 10,000 clients: the checkpoint holds one stack per
    key and one tensor per index field (not one per client), and loads back to equal state."""
    from fedbn_bench.engine.checkpoint import content_digest
    from fedbn_bench.engine.clients import ClientStore
    from fedbn_bench.engine.federation import ClientRecord

    n = 10_000
    global_state = {"w": torch.randn(8, 4), "bn.running_mean": torch.zeros(8), "bn.num_batches_tracked": torch.tensor(0)}
    order = torch.randperm(6 * n)
    records = [ClientRecord(order[6 * c: 6 * c + 6], test_indices=torch.tensor([c])) for c in range(n)]
    store = ClientStore(global_state, ["bn.running_mean", "bn.num_batches_tracked"], records)
    store.keep(3, {"bn.running_mean": torch.ones(8), "bn.num_batches_tracked": torch.tensor(5)},
               {"control": {"w": torch.full((8, 4), 2.0)}})
    state = store.state_dict()
    assert state["client_algo_state"]["stacks"]["control/w"].shape == (1, 8, 4)  # the one client that holds it
    tensors = []
    tree = [state["client_local"], state["client_algo_state"], state["records"]]
    while tree:
        item = tree.pop()
        if isinstance(item, torch.Tensor):
            tensors.append(item)
        elif isinstance(item, dict):
            tree.extend(item.values())
        elif isinstance(item, (list, tuple)):
            tree.extend(item)
    assert len(tensors) <= 10  # a few stacks and index tensors, not one per client
    content_digest(state)
    again = ClientStore(global_state, ["bn.running_mean", "bn.num_batches_tracked"], records[:1])
    again.load_state_dict(state)
    assert len(again.records) == n and torch.equal(again.records[17].indices, records[17].indices)
    assert torch.equal(again.records[17].test_indices, torch.tensor([17]))
    assert torch.equal(again.client_local[3]["bn.running_mean"], torch.ones(8))
    assert int(again.client_local[3]["bn.num_batches_tracked"]) == 5
    assert torch.equal(again.client_local[4]["bn.running_mean"], torch.zeros(8))
    assert torch.equal(again.client_algo_state[3]["control"]["w"], torch.full((8, 4), 2.0))
    assert again.client_algo_state[4] == {}


def test_the_clients_state_is_one_stack_per_leaf_nested_algorithm_state_included():
    """Every leaf of the clients' states is one (clients, ...) stack, allocated at its first value;
    a client reads back exactly what it stored and nothing before it stores."""
    from fedbn_bench.engine.clients import ClientStore
    from fedbn_bench.engine.federation import ClientRecord

    records = [ClientRecord(torch.arange(4)) for _ in range(3)]
    store = ClientStore({"bn.running_mean": torch.zeros(8), "w": torch.zeros(5)}, ["bn.running_mean"], records)
    assert store.client_state_bytes() == 3 * 8 * 4
    control = torch.randn(5, dtype=torch.float64)
    store.keep(1, store.client_local[1], {"control": {"w": control}})
    assert store.client_state_bytes() == 3 * 8 * 4 + 3 * 5 * 8
    assert store.memory.describe() == {"client_state_mb": (3 * 8 * 4 + 3 * 5 * 8) / 2**20}
    assert torch.equal(store.client_algo_state[1]["control"]["w"], control)
    assert store.client_algo_state[0] == {} and store.client_algo_state[2] == {}
    control.add_(1)  # stored by copy: the caller's tensor is not the store's
    assert not torch.equal(store.client_algo_state[1]["control"]["w"], control)


def test_client_state_past_its_memory_limit_is_memory_mapped_and_the_summary_says_so(tmp_path):
    """engine.client_state_memory_mb=0: every stack a file, and the run's numbers are those of
    the run held in memory, bit for bit (FedBN's local BN and SCAFFOLD's controls)."""
    runs = {}
    (tmp_path / "0" / "client_state_killed").mkdir(parents=True)  # what a SIGKILLed run leaves
    for limit in ("none", "0"):
        runs[limit] = run_experiment(compose_config([*SMALL, "norm=fedbn", "algo=scaffold", "rounds=2",
                                                     f"engine.client_state_memory_mb={limit}"]), tmp_path / limit)
    kept, spilled = (pd.read_csv(tmp_path / limit / "metrics.csv").drop(columns="wall_s") for limit in runs)
    assert kept.to_csv() == spilled.to_csv() and len(kept) == 2
    assert "client_state_spilled_mb" not in runs["none"]
    assert runs["0"]["client_state_spilled_mb"] == runs["0"]["client_state_mb"] > 0
    assert not list((tmp_path / "0").glob("client_state_*"))  # the files go with the run, a killed run's too


def test_a_bad_client_state_memory_limit_is_one_error_before_training(tmp_path):
    with pytest.raises(ConfigError, match="engine.client_state_memory_mb='lots'.*auto, none or a number"):
        run_experiment(compose_config([*SMALL, "engine.client_state_memory_mb=lots"]), tmp_path)
    assert not (tmp_path / "metrics.csv").exists()


def test_auto_refuses_small_clients_in_a_hundred_and_cycles_them_past_it(tmp_path):
    """The same small clients: one error line at 100 clients (the papers' range), a run at 150."""
    small = ["partition=dirichlet", "alpha=0.3", "batch_size=32", "clients_per_round=5", "rounds=1", "eval_every=1"]
    with pytest.raises(ConfigError, match="small_clients=skip"):
        run_experiment(compose_config([*small, "num_clients=100"]), tmp_path / "n100")
    summary = run_experiment(compose_config([*small, "num_clients=150"]), tmp_path / "n150")
    assert summary["status"] == "completed" and summary["rounds_completed"] == 1
