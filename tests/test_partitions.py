"""Tests for fedbn_bench.partition (exact invariants on synthetic labels)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, make_dataclass

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from conftest import CONF, compose_config
from fedbn_bench.partition import (
    PARTITIONS,
    PartitionError,
    client_domains,
    make_partition,
    partition_params,
    partition_table,
    register_partition,
)
from fedbn_bench.partition.gamma import pool_size
from fedbn_bench.partition.iid import IidConfig

K = 10


def balanced_labels(per_class: int = 100, num_classes: int = K, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    return labels[torch.randperm(labels.numel(), generator=g)]


def unbalanced_labels(seed: int = 1) -> torch.Tensor:
    # class k has 20 + 37 * k samples (20 .. 353), N = 1865, shuffled
    g = torch.Generator().manual_seed(seed)
    counts = torch.tensor([20 + 37 * k for k in range(K)])
    labels = torch.arange(K).repeat_interleave(counts)
    return labels[torch.randperm(labels.numel(), generator=g)]


def domain_data(seed: int = 2):
    """3 domains of sizes 300, 450, 600 with the same label mix (balanced over 10 classes)."""
    g = torch.Generator().manual_seed(seed)
    labels, domains = [], []
    for d, size in enumerate((300, 450, 600)):
        labels.append(torch.arange(K).repeat(size // K))
        domains.append(torch.full((size,), d))
    labels, domains = torch.cat(labels), torch.cat(domains)
    perm = torch.randperm(labels.numel(), generator=g)
    return labels[perm], domains[perm]


LABELS = {"balanced": balanced_labels(), "unbalanced": unbalanced_labels()}

# (name, params); each is run on both label sets
CONFIGS = [
    ("iid", {}),
    ("dirichlet", {"alpha": 0.5}),
    ("dirichlet", {"alpha": 0.05, "min_size": 20}),
    ("shards", {}),
    ("shards", {"classes_per_client": 3}),
    ("shards", {"mode": "sorted", "shards_per_client": 2}),
    ("gamma", {"gamma": 0.0}),
    ("gamma", {"gamma": 0.37}),
    ("gamma", {"gamma": 1.0}),
]
CONFIG_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for n, p in CONFIGS]


def assert_valid_partition(parts, n_samples, n_clients):
    assert isinstance(parts, list) and len(parts) == n_clients
    for p in parts:
        assert isinstance(p, torch.Tensor) and p.dtype == torch.int64 and p.dim() == 1
        assert torch.equal(p, p.sort().values)  # documented: ascending
    flat = torch.cat(parts)
    assert flat.numel() == n_samples  # disjoint + complete <=> permutation of range(N)
    assert torch.equal(flat.sort().values, torch.arange(n_samples))


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# ----------------------------------------------------------------------------
# generic invariants
# ----------------------------------------------------------------------------


def test_registry_has_all_partitions():
    assert {"iid", "dirichlet", "shards", "gamma", "domains"} <= set(PARTITIONS)


@pytest.mark.parametrize("label_set", sorted(LABELS))
@pytest.mark.parametrize("name,params", CONFIGS, ids=CONFIG_IDS)
def test_disjoint_complete_deterministic(name, params, label_set):
    labels = LABELS[label_set]
    n = 10
    parts = make_partition(name, labels, n, seed=3, **params)
    assert_valid_partition(parts, labels.numel(), n)
    assert same(parts, make_partition(name, labels, n, seed=3, **params))
    other = make_partition(name, labels, n, seed=4, **params)
    if name == "gamma" and params["gamma"] == 0.0:
        assert same(parts, other)  # no random pool: the split is fixed by the labels
    else:
        assert not same(parts, other)


def test_domains_disjoint_complete_deterministic():
    labels, domains = domain_data()
    parts = make_partition("domains", labels, 6, seed=0, domains=domains)
    assert_valid_partition(parts, labels.numel(), 6)
    assert same(parts, make_partition("domains", labels, 6, seed=0, domains=domains))
    assert not same(parts, make_partition("domains", labels, 6, seed=1, domains=domains))


def test_registry_function_matches_make_partition():
    labels = LABELS["balanced"]
    g = torch.Generator().manual_seed(11)
    direct = PARTITIONS["dirichlet"](labels, 7, g, alpha=0.3)
    assert same(direct, make_partition("dirichlet", labels, 7, 11, alpha=0.3))


def test_accepts_other_label_dtypes_and_devices_free_input():
    labels = LABELS["unbalanced"]
    a = make_partition("iid", labels, 5, 0)
    b = make_partition("iid", labels.to(torch.int32), 5, 0)
    c = make_partition("iid", labels.tolist(), 5, 0)
    assert same(a, b) and same(a, c)


# ----------------------------------------------------------------------------
# iid
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("n_samples,n_clients", [(1000, 10), (1865, 7), (13, 13), (5, 1)])
def test_iid_sizes(n_samples, n_clients):
    labels = torch.arange(n_samples) % 3
    sizes = [p.numel() for p in make_partition("iid", labels, n_clients, 0)]
    base, rem = divmod(n_samples, n_clients)
    assert sizes == [base + 1] * rem + [base] * (n_clients - rem)


# ----------------------------------------------------------------------------
# gamma
# ----------------------------------------------------------------------------


def test_gamma_one_is_near_iid():
    labels = balanced_labels(per_class=1000)  # N = 10000, 10 clients -> 100 per (client, class)
    for seed in range(3):
        parts = make_partition("gamma", labels, 10, seed, gamma=1.0)
        table = partition_table(labels, parts, K)
        counts = torch.tensor(table.filter(like="class_").to_numpy())
        assert (counts > 0).all()
        assert (counts - 100).abs().max() <= 35
        assert table["total"].tolist() == [1000] * 10


def test_gamma_zero_extreme_non_iid():
    labels = LABELS["balanced"]
    parts = make_partition("gamma", labels, 10, 0, gamma=0.0)
    table = partition_table(labels, parts, K)
    counts = table.filter(like="class_").to_numpy()
    # 100 samples per class, 100 per client: client i holds exactly class i
    assert (counts == 100 * torch.eye(10, dtype=torch.int64).numpy()).all()
    # unbalanced: each client is a contiguous label range, so classes are consecutive
    labels = LABELS["unbalanced"]
    parts = make_partition("gamma", labels, 10, 0, gamma=0.0)
    # concatenating the clients' label multisets in client order gives the sorted labels
    got = torch.cat([labels[p].sort().values for p in parts])
    assert torch.equal(got, labels.sort().values)
    # and gamma=0 does not depend on the seed
    assert same(parts, make_partition("gamma", labels, 10, 123, gamma=0.0))


def test_gamma_zero_ten_clients_one_or_two_classes_each():
    for seed in range(3):
        labels = balanced_labels(per_class=97, seed=seed)  # chunks straddle class boundaries
        for p in make_partition("gamma", labels, 10, seed, gamma=0.0):
            assert 1 <= labels[p].unique().numel() <= 2


@pytest.mark.parametrize("gamma", [0.0, 0.01, 0.25, 0.37, 0.5, 0.999, 1.0])
@pytest.mark.parametrize("label_set", sorted(LABELS))
def test_gamma_exact_pool_and_sizes(gamma, label_set):
    labels = LABELS[label_set]
    N, n = labels.numel(), 10
    P = pool_size(gamma, N)
    assert P == math.floor(gamma * N + 0.5)
    parts = make_partition("gamma", labels, n, 5, gamma=gamma)
    sizes = torch.tensor([p.numel() for p in parts])
    assert int(sizes.max() - sizes.min()) <= 1 and int(sizes.sum()) == N

    # reconstruct the heterogeneous part: it is the label-sorted (stable) remainder cut into
    # consecutive chunks, so each client's heterogeneous samples are a contiguous range of it.
    # Equivalently the pool is everything that is not in the chunk structure; check the exact size
    # by recomputing with the same generator stream.
    g = torch.Generator().manual_seed(5)
    perm = torch.randperm(N, generator=g)
    pool = set(perm[:P].tolist())
    rest = perm[P:].sort().values
    rest = rest[torch.argsort(labels[rest], stable=True)]
    H = N - P
    hb, hr = divmod(H, n)
    h_sizes = [hb] * (n - hr) + [hb + 1] * hr
    pb, pr = divmod(P, n)
    p_sizes = [pb + 1] * pr + [pb] * (n - pr)
    start = 0
    for i, p in enumerate(parts):
        members = set(p.tolist())
        chunk = rest[start:start + h_sizes[i]]
        start += h_sizes[i]
        assert set(chunk.tolist()) <= members
        assert len(members & pool) == p_sizes[i]
        assert len(members) == h_sizes[i] + p_sizes[i]


def test_gamma_pool_size_rounding():
    assert pool_size(0.5, 3) == 2
    assert pool_size(0.1, 1000) == 100
    assert pool_size(0.3, 1000) == 300
    assert pool_size(0.0004, 1000) == 0
    assert pool_size(0.0005, 1000) == 1
    assert pool_size(1.0, 1865) == 1865


# ----------------------------------------------------------------------------
# dirichlet
# ----------------------------------------------------------------------------


def mean_tv(labels, parts):
    glob = torch.bincount(labels, minlength=K).double()
    glob /= glob.sum()
    tvs = []
    for p in parts:
        loc = torch.bincount(labels[p], minlength=K).double()
        tvs.append(0.5 * (loc / loc.sum() - glob).abs().sum())
    return float(torch.stack(tvs).mean())


@pytest.mark.parametrize("label_set", sorted(LABELS))
def test_dirichlet_skew_decreases_with_alpha(label_set):
    labels = LABELS[label_set]
    skew = []
    for alpha in (0.05, 0.5, 5.0, 500.0):
        vals = [mean_tv(labels, make_partition("dirichlet", labels, 10, s, alpha=alpha)) for s in range(5)]
        skew.append(sum(vals) / len(vals))
    assert all(a > b for a, b in zip(skew, skew[1:])), skew
    assert skew[0] > 0.5 and skew[-1] < 0.05, skew


@pytest.mark.parametrize("label_set", sorted(LABELS))
@pytest.mark.parametrize("alpha", [0.05, 1.0, 100.0])
def test_dirichlet_min_size(label_set, alpha):
    labels = LABELS[label_set]
    for seed in range(3):
        parts = make_partition("dirichlet", labels, 20, seed, alpha=alpha, min_size=30)
        assert min(p.numel() for p in parts) >= 30


def test_dirichlet_min_size_extreme_alpha_many_clients_is_fast():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (1797,), generator=g)  # digits-sized
    t0 = time.perf_counter()
    for seed in range(3):
        parts = make_partition("dirichlet", labels, 100, seed, alpha=0.01, min_size=10)
        assert_valid_partition(parts, 1797, 100)
        assert min(p.numel() for p in parts) >= 10
    assert time.perf_counter() - t0 < 10.0


def test_dirichlet_min_size_tight():
    # num_clients * min_size == N: every client must get exactly min_size samples
    labels = LABELS["balanced"]
    parts = make_partition("dirichlet", labels, 50, 0, alpha=0.1, min_size=20)
    assert [p.numel() for p in parts] == [20] * 50


def test_dirichlet_min_size_zero_and_huge_alpha():
    labels = LABELS["balanced"]
    parts = make_partition("dirichlet", labels, 10, 0, alpha=1e6, min_size=0)
    table = partition_table(labels, parts, K)
    counts = table.filter(like="class_").to_numpy()
    assert abs(counts - 10).max() <= 1  # essentially uniform proportions


def test_dirichlet_impossible_min_size():
    labels = LABELS["balanced"]  # N = 1000
    with pytest.raises(PartitionError, match="min_size") as e:
        make_partition("dirichlet", labels, 101, 0, alpha=0.5, min_size=10)
    assert "num_clients" in str(e.value)


# ----------------------------------------------------------------------------
# shards
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("label_set", sorted(LABELS))
@pytest.mark.parametrize("n_clients,cpc", [(10, 2), (10, 1), (7, 3), (20, 2), (4, 10), (5, 2), (30, 4)])
def test_shards_classes_per_client(label_set, n_clients, cpc):
    labels = LABELS[label_set]
    parts = make_partition("shards", labels, n_clients, 0, classes_per_client=cpc)
    assert_valid_partition(parts, labels.numel(), n_clients)
    table = partition_table(labels, parts, K)
    counts = torch.tensor(table.filter(like="class_").to_numpy())
    held = counts > 0
    assert (held.sum(1) == cpc).all()  # exactly cpc distinct classes per client
    holders = held.sum(0)
    assert int(holders.max() - holders.min()) <= 1  # classes used as evenly as possible
    assert int(holders.sum()) == n_clients * cpc
    class_counts = torch.bincount(labels, minlength=K)
    for k in range(K):
        c = counts[:, k][held[:, k]]
        assert int(c.sum()) == int(class_counts[k])
        assert int(c.max() - c.min()) <= 1  # each class split evenly among its holders


def test_shards_default_is_two_classes():
    labels = LABELS["balanced"]
    parts = make_partition("shards", labels, 10, 0)
    assert all(labels[p].unique().numel() == 2 for p in parts)
    assert all(p.numel() == 100 for p in parts)


@pytest.mark.parametrize("n_clients,spc", [(10, 2), (5, 4), (20, 1), (7, 3)])
def test_shards_sorted_sizes(n_clients, spc):
    labels = LABELS["balanced"]  # N = 1000
    parts = make_partition("shards", labels, n_clients, 1, mode="sorted", shards_per_client=spc)
    assert_valid_partition(parts, 1000, n_clients)
    S = n_clients * spc
    base, rem = divmod(1000, S)
    sizes = [p.numel() for p in parts]
    for s in sizes:
        assert spc * base <= s <= spc * (base + 1)
    if rem == 0:
        assert sizes == [spc * base] * n_clients
    # each shard is a run of the label-sorted data, so a shard of <= 100 samples spans <= 2 classes
    if base + 1 <= 100:
        for p in parts:
            assert labels[p].unique().numel() <= 2 * spc


def test_shards_sorted_mcmahan_layout():
    # 10 classes x 100, 10 clients x 2 shards of 50: every client gets exactly two half-classes
    labels = LABELS["balanced"]
    parts = make_partition("shards", labels, 10, 7, mode="sorted", shards_per_client=2)
    table = partition_table(labels, parts, K)
    counts = table.filter(like="class_").to_numpy()
    assert set(counts.flatten().tolist()) <= {0, 50, 100}
    assert (counts.sum(1) == 100).all()


# ----------------------------------------------------------------------------
# domains
# ----------------------------------------------------------------------------


def test_domains_one_domain_per_client_and_same_label_mix():
    labels, domains = domain_data()
    for n_clients, cpd in [(3, None), (6, None), (9, 3), (12, None)]:
        kwargs = {} if cpd is None else {"clients_per_domain": cpd}
        parts = make_partition("domains", labels, n_clients, 0, domains=domains, **kwargs)
        assert_valid_partition(parts, labels.numel(), n_clients)
        per = n_clients // 3
        expected_domain = client_domains(n_clients, 3)
        assert torch.equal(expected_domain, torch.arange(n_clients) // per)
        dists = []
        for c, p in enumerate(parts):
            d = domains[p].unique()
            assert d.tolist() == [int(expected_domain[c])]  # one domain, c // clients_per_domain
            dom_size = int((domains == d).sum())
            assert abs(p.numel() - dom_size / per) < 1  # iid split of the domain: near-equal
            cnt = torch.bincount(labels[p], minlength=K)
            dom_cnt = torch.bincount(labels[domains == d], minlength=K)
            assert ((cnt - dom_cnt.double() / per).abs() < 1).all()  # stratified
            dists.append(cnt.double() / cnt.sum())
        dists = torch.stack(dists)
        tv = 0.5 * (dists[:, None, :] - dists[None, :, :]).abs().sum(-1)
        # all clients (of any domain) share the label distribution up to the +-1 rounding per class
        min_size = min(p.numel() for p in parts)
        assert float(tv.max()) <= K / min_size


def test_domains_unequal_label_mix_within_domain_is_preserved():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, K, (2000,), generator=g)
    domains = torch.randint(0, 4, (2000,), generator=g)
    parts = make_partition("domains", labels, 8, 0, domains=domains)
    for c, p in enumerate(parts):
        assert domains[p].unique().tolist() == [c // 2]


def test_client_domains_helper():
    assert client_domains(6, 3).tolist() == [0, 0, 1, 1, 2, 2]
    assert client_domains(4, 4).tolist() == [0, 1, 2, 3]
    assert client_domains(5, 1).tolist() == [0] * 5
    assert client_domains(4, 2).dtype == torch.int64
    with pytest.raises(PartitionError, match="num_clients"):
        client_domains(5, 2)


# ----------------------------------------------------------------------------
# partition_table
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name,params", CONFIGS, ids=CONFIG_IDS)
def test_partition_table(name, params):
    labels = LABELS["unbalanced"]
    parts = make_partition(name, labels, 10, 0, **params)
    table = partition_table(labels, parts, K)
    assert isinstance(table, pd.DataFrame)
    assert table.index.name == "client" and table.index.tolist() == list(range(10))
    assert table.columns.tolist() == [f"class_{k}" for k in range(K)] + ["total"]
    assert table["total"].tolist() == [p.numel() for p in parts]
    assert (table.drop(columns="total").sum(axis=1) == table["total"]).all()
    assert table.drop(columns="total").sum(axis=0).tolist() == torch.bincount(labels, minlength=K).tolist()
    for c, p in enumerate(parts):
        assert table.loc[c, "class_3"] == int((labels[p] == 3).sum())


def test_partition_table_extra_classes_and_bad_num_classes():
    labels = torch.tensor([0, 1, 1, 2])
    table = partition_table(labels, [torch.tensor([0, 1]), torch.tensor([2, 3])], 5)
    assert table.to_numpy().tolist() == [[1, 1, 0, 0, 0, 2], [0, 1, 1, 0, 0, 2]]
    with pytest.raises(PartitionError, match="num_classes"):
        partition_table(labels, [torch.tensor([0, 1, 2, 3])], 2)


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------

BAD = [
    ("dirichlet", {"alpha": 0}, 10, "alpha", "> 0"),
    ("dirichlet", {"alpha": -1.0}, 10, "alpha", "> 0"),
    ("dirichlet", {"alpha": "big"}, 10, "alpha", None),
    ("dirichlet", {"alpha": 1.0, "min_size": -1}, 10, "min_size", None),
    ("dirichlet", {}, 10, "alpha", None),
    ("gamma", {"gamma": 1.5}, 10, "gamma", "[0, 1]"),
    ("gamma", {"gamma": -0.1}, 10, "gamma", "[0, 1]"),
    ("iid", {}, 0, "num_clients", None),
    ("iid", {}, 1001, "num_clients", None),
    ("iid", {}, 2.5, "num_clients", None),
    ("gamma", {"gamma": 0.5}, -3, "num_clients", None),
    ("shards", {"classes_per_client": 11}, 10, "classes_per_client", None),
    ("shards", {"classes_per_client": 0}, 10, "classes_per_client", None),
    ("shards", {"classes_per_client": 2}, 3, "classes_per_client", None),  # 3*2 < 10 classes
    ("shards", {"mode": "sorted", "shards_per_client": 0}, 10, "shards_per_client", None),
    ("shards", {"mode": "sorted", "shards_per_client": 200}, 10, "shards_per_client", None),
    ("shards", {"mode": "random"}, 10, "mode", "classes"),
    ("iid", {"alpha": 0.5}, 10, "alpha", "allowed"),
    ("domains", {}, 10, "no domains", "dataset.num_domains"),
]


@pytest.mark.parametrize("name,params,n_clients,key,extra", BAD)
def test_validation_messages_name_the_key(name, params, n_clients, key, extra):
    labels = LABELS["balanced"]
    with pytest.raises(PartitionError) as e:
        make_partition(name, labels, n_clients, 0, **params)
    msg = str(e.value)
    assert key in msg and "\n" not in msg
    if extra:
        assert extra in msg


def test_unknown_partition_lists_allowed_names():
    with pytest.raises(PartitionError) as e:
        make_partition("nope", LABELS["balanced"], 10, 0)
    msg = str(e.value)
    assert "nope" in msg
    for name in ("iid", "dirichlet", "shards", "gamma", "domains"):
        assert name in msg


def test_domains_validation():
    labels, domains = domain_data()
    with pytest.raises(PartitionError, match="num_clients"):
        make_partition("domains", labels, 7, 0, domains=domains)
    with pytest.raises(PartitionError, match="clients_per_domain"):
        make_partition("domains", labels, 6, 0, domains=domains, clients_per_domain=3)
    with pytest.raises(PartitionError, match="domains"):
        make_partition("domains", labels, 6, 0, domains=domains[:-1])
    with pytest.raises(PartitionError, match="domains"):
        make_partition("domains", labels, 4, 0, domains=torch.where(domains == 1, 3, domains))
    with pytest.raises(PartitionError, match="clients_per_domain"):
        make_partition("domains", labels[:5], 4, 0, domains=torch.tensor([0, 0, 0, 0, 1]))


def test_validation_happens_before_work():
    # a huge bad config must fail immediately (no drawing)
    labels = torch.zeros(2_000_000, dtype=torch.int64)
    t0 = time.perf_counter()
    with pytest.raises(PartitionError, match="alpha"):
        make_partition("dirichlet", labels, 10, 0, alpha=-1)
    assert time.perf_counter() - t0 < 1.0


def test_bad_labels():
    with pytest.raises(PartitionError, match="labels"):
        make_partition("iid", torch.rand(10), 2, 0)
    with pytest.raises(PartitionError, match="labels"):
        make_partition("iid", torch.zeros(2, 5, dtype=torch.int64), 2, 0)
    with pytest.raises(PartitionError, match="labels"):
        make_partition("iid", torch.tensor([0, -1, 2]), 2, 0)


@dataclass
class BrokenConfig:
    name: str = "_test_broken"


def test_register_new_partition_is_checked():
    @register_partition("_test_broken", BrokenConfig)
    def broken(labels, num_clients, generator, *, domains=None):
        return [torch.arange(labels.numel() - 1)] + [torch.empty(0, dtype=torch.int64)] * (num_clients - 1)

    try:
        with pytest.raises(RuntimeError, match="disjoint, complete"):
            make_partition("_test_broken", LABELS["balanced"], 3, 0)
        with pytest.raises(ValueError, match="already registered"):
            @register_partition("iid", IidConfig)
            def other(labels, num_clients, generator, *, domains=None):
                return []
    finally:
        PARTITIONS.unregister("_test_broken")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"name": "_test_schema", "size": 3}, "must have the fields"),
        ({"name": "_test_other"}, "must have the fields"),
        ({"name": "_test_schema"}, "defaults to 0"),
    ],
)
def test_register_checks_the_schema_against_the_function(fields, message):
    """The schema's fields are the function's keyword parameters, with the same defaults."""
    schema = make_dataclass("Schema", [(k, type(v), v) for k, v in fields.items()] + [("alpha", float, 0.0)])

    def fn(labels, num_clients, generator, *, domains=None, alpha: float = 0.5):
        return []

    with pytest.raises(TypeError, match=message):
        register_partition("_test_schema", schema)(fn)
    assert "_test_schema" not in PARTITIONS


def test_every_partition_has_its_schema():
    for name, partition in PARTITIONS.items():
        defaults = partition.schema()
        assert defaults.name == name
        assert set(vars(defaults)) - {"name"} == set(partition.allowed_params)


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF / "partition").glob("*.yaml")))
def test_every_partition_yaml_runs_with_its_defaults(option):
    """The runner's call: ``make_partition(name, labels, n, seed, domains=..., **partition_params(cfg))``."""
    p = compose_config([f"partition={option}"]).partition
    labels, domains = domain_data()
    parts = make_partition(p.name, labels, 6, 0, domains=domains, **partition_params(p))
    assert_valid_partition(parts, labels.numel(), 6)


def test_domains_partition_checks_num_domains():
    labels, domains = domain_data()
    with pytest.raises(PartitionError, match="num_domains"):
        make_partition("domains", labels, 6, 0, domains=domains, num_domains=0)


def test_partition_params_drop_the_name_and_resolve():
    cfg = OmegaConf.create({"alpha": 0.2, "partition": {"name": "dirichlet", "alpha": "${alpha}", "min_size": 3}})
    assert partition_params(cfg.partition) == {"alpha": 0.2, "min_size": 3}
    assert partition_params({"name": "iid"}) == {}


# ----------------------------------------------------------------------------
# dirichlet schemes: per_class (HBN's code, NIID-Bench) and per_client (Hsu et al. 2019)
# ----------------------------------------------------------------------------


def test_dirichlet_per_class_is_the_default_and_unchanged():
    labels = LABELS["balanced"]
    default = make_partition("dirichlet", labels, 10, 0, alpha=0.5)
    assert same(default, make_partition("dirichlet", labels, 10, 0, alpha=0.5, scheme="per_class"))
    # pinned: the sizes this draw had before the per_client scheme existed (results stay valid)
    assert [p.numel() for p in default] == [124, 108, 97, 121, 80, 49, 97, 124, 116, 84]
    assert compose_config([]).partition.scheme == "per_class"


@pytest.mark.parametrize("label_set", sorted(LABELS))
@pytest.mark.parametrize("n_clients", [7, 10, 33])
@pytest.mark.parametrize("alpha", [0.05, 0.5, 50.0])
def test_dirichlet_per_client_exact_invariants(label_set, n_clients, alpha):
    labels = LABELS[label_set]
    n = labels.numel()
    parts = make_partition("dirichlet", labels, n_clients, 3, alpha=alpha, scheme="per_client")
    assert_valid_partition(parts, n, n_clients)  # disjoint and covering
    sizes = [p.numel() for p in parts]
    base, rem = divmod(n, n_clients)
    assert sizes == [base + 1] * rem + [base] * (n_clients - rem)  # N/n each, larger ones first
    assert same(parts, make_partition("dirichlet", labels, n_clients, 3, alpha=alpha, scheme="per_client"))
    assert not same(parts, make_partition("dirichlet", labels, n_clients, 4, alpha=alpha, scheme="per_client"))


@pytest.mark.parametrize("label_set", sorted(LABELS))
@pytest.mark.parametrize("scheme", ["per_class", "per_client"])
def test_dirichlet_schemes_approach_iid_for_large_alpha(label_set, scheme):
    """Large alpha: every client's label mix is the global one (for per_client: the prior p of
    Dir(alpha * p), so the unbalanced set checks that the prior is used, not a uniform vector)."""
    labels = LABELS[label_set]
    skew = [mean_tv(labels, make_partition("dirichlet", labels, 10, s, alpha=a, scheme=scheme, min_size=0))
            for s in range(3) for a in (1e4, 0.1)]
    iid_like, skewed = skew[0::2], skew[1::2]
    assert max(iid_like) < 0.03 and min(skewed) > 0.3, skew


def test_dirichlet_per_client_tiny_alpha_one_dominant_class():
    labels = LABELS["balanced"]  # 100 per class; 20 clients of 50: one class can fill two clients
    for seed in range(5):
        parts = make_partition("dirichlet", labels, 20, seed, alpha=0.01, scheme="per_client")
        top = [int(torch.bincount(labels[p], minlength=K).max()) / p.numel() for p in parts]
        assert min(top) >= 0.9 and sum(top) / len(top) >= 0.98, top
        assert {p.numel() for p in parts} == {50}
    # per_class at the same alpha gives unequal sizes (some clients nearly empty)
    sizes = [p.numel() for p in make_partition("dirichlet", labels, 20, 0, alpha=0.01, min_size=0)]
    assert max(sizes) - min(sizes) > 50


def test_dirichlet_per_client_classes_run_out_and_absent_labels():
    # 3 present classes of very different sizes, label 1 absent; small alpha makes clients compete
    labels = torch.tensor([0] * 5 + [2] * 40 + [3] * 15)
    for seed in range(10):
        parts = make_partition("dirichlet", labels, 6, seed, alpha=0.05, scheme="per_client")
        assert_valid_partition(parts, 60, 6)
        assert [p.numel() for p in parts] == [10] * 6


def test_dirichlet_min_size_zero_keeps_empty_clients():
    labels = LABELS["balanced"]
    sizes = [p.numel() for p in make_partition("dirichlet", labels, 50, 0, alpha=0.05, min_size=0)]
    assert min(sizes) == 0 and sum(sizes) == labels.numel()


def test_dirichlet_bad_scheme_names_the_key():
    with pytest.raises(PartitionError) as e:
        make_partition("dirichlet", LABELS["balanced"], 10, 0, alpha=0.5, scheme="hsu")
    assert "scheme" in str(e.value) and "per_class, per_client" in str(e.value) and "'hsu'" in str(e.value)


def test_dirichlet_scheme_composes_from_the_command_line():
    p = compose_config(["partition=dirichlet", "partition.scheme=per_client", "alpha=0.3"]).partition
    assert partition_params(p) == {"alpha": 0.3, "min_size": "auto", "scheme": "per_client"}
