"""Checks of the composed config that a schema cannot express (ranges, consistency).

Each failure raises ``ConfigError`` naming the key and what is allowed, before data is loaded.
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import fields
from typing import Any

from omegaconf import OmegaConf

from fedbn_bench.algorithms.schedules import validate_schedule
from fedbn_bench.config.schema import Config
from fedbn_bench.engine.run_loop import EVAL_STATISTICS
from fedbn_bench.errors import ConfigError
from fedbn_bench.partition.dirichlet import SCHEMES

log = logging.getLogger("fedbn_bench")

DEVICES = ("auto", "cpu", "cuda")
ENGINES = ("auto", "loop", "vmap", "packed")
LOGGERS = ("wandb", "none")
LOGGER_MODES = ("offline", "online", "disabled")
SMALL_CLIENTS = ("auto", "refuse", "skip", "cycle")
CROSS_DEVICE_CLIENTS = 100
"""Above this many clients ``small_clients=auto`` cycles (a cross-device federation, LEAF-style:
a few samples a client); at or below it, it refuses (the papers' cross-silo settings: 5 to 100
clients, where a client smaller than a batch is a mistake in the config)."""
CLIENT_TEST = ("domain", "shard")
MAX_REPLICAS = 100
"""More seeds than this are a sweep (``-m seed=...``), not one stacked run with a directory per seed."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def nearest(word: str, choices: list[str]) -> str:
    """`` did you mean `x`?`` for the choices closest to ``word`` (empty when none is close)."""
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    return f" Did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""


def unknown_key(key: str, leaf: str, allowed: list[str], owner: str | None, hint: str = "") -> str:
    """The error for ``key`` (last part ``leaf``), which ``owner`` (``None``: the top level) lacks; it has ``allowed``
    (``hint``: a sentence after the nearest key)."""
    if owner is None:
        return f"unknown key `{key}`.{nearest(leaf, allowed)}{hint} `python run.py --help` lists the groups and keys"
    return f"unknown key `{key}`: {owner} takes {', '.join(allowed)}.{nearest(leaf, allowed)}{hint}"


def check_known_keys(cfg: Any) -> None:
    """Every top-level key of ``cfg`` is a key of the schema (``Config``): Hydra lets ``+key=value``
    add any key, and a misspelt ``+nrom=fbn`` would otherwise run the default norm. Hydra's own node
    (``hydra``, present when a config is composed with ``return_hydra_config=True``) is not ours to check."""
    legal = [f.name for f in fields(Config)] + ["hydra"]
    for key in cfg:
        _require(key in legal, unknown_key(key, key, legal, None))


def validate_config(cfg: Any) -> None:
    """Raise ``ConfigError`` for the first invalid value of ``cfg``."""
    check_known_keys(cfg)
    p = cfg.partition
    # the aliases are checked whichever partition reads them: a value no partition can mean is refused
    _require(cfg.alpha > 0, f"alpha={cfg.alpha} is invalid: the Dirichlet concentration `alpha` must be > 0")
    _require(0 <= cfg.gamma <= 1, f"gamma={cfg.gamma} is invalid: gamma-similarity `gamma` must be in [0, 1]")
    _require(cfg.dirichlet_scheme in SCHEMES,
             f"dirichlet_scheme='{cfg.dirichlet_scheme}' is unknown; allowed: {', '.join(SCHEMES)}")
    _require(cfg.crop_padding >= 0, f"crop_padding={cfg.crop_padding} is invalid: must be >= 0 (0: no padding)")
    if p.name == "dirichlet":
        _require(p.alpha > 0, f"alpha={p.alpha} is invalid: the Dirichlet concentration `alpha` must be > 0")
        _require(p.scheme in SCHEMES,
                 f"partition.scheme='{p.scheme}' is unknown; allowed: {', '.join(SCHEMES)}")
    if p.name == "gamma":
        _require(0 <= p.gamma <= 1, f"gamma={p.gamma} is invalid: gamma-similarity `gamma` must be in [0, 1]")
    _require(cfg.eval_statistics in EVAL_STATISTICS,
             f"eval_statistics='{cfg.eval_statistics}' is unknown; allowed: {', '.join(EVAL_STATISTICS)}")
    _require(cfg.client_test in CLIENT_TEST,
             f"client_test='{cfg.client_test}' is unknown; allowed: {', '.join(CLIENT_TEST)}")
    validate_evaluation(cfg.evaluation)
    for i, transform in enumerate(cfg.transforms):
        _require(OmegaConf.is_dict(transform) and "name" in transform,
                 f"transforms[{i}]={transform!r} is invalid: each entry is a mapping {{name: <transform>, ...}}")
    _require(cfg.seed >= 0, f"seed={cfg.seed} is invalid: `seed` must be >= 0")
    _require(1 <= cfg.replicas <= MAX_REPLICAS, f"replicas={cfg.replicas} is invalid: the number of seeds trained "
             f"together must be in [1, {MAX_REPLICAS}] (more seeds: a sweep over `seed`)")
    if cfg.replicas > 1:
        _require(not cfg.resume, f"resume={cfg.resume} with replicas={cfg.replicas}: resume each replica's run "
                 "directory on its own (resume=<dir>/seed_<s> seed=<s> replicas=1, with the original overrides)")
        _require(not cfg.count_macs, f"count_macs=true with replicas={cfg.replicas}: count the MACs of a single "
                 "run (replicas=1); the replicas' round is trained as one")
    _require(cfg.rounds >= 1, f"rounds={cfg.rounds} is invalid: `rounds` must be >= 1")
    _require(cfg.num_clients >= 1, f"num_clients={cfg.num_clients} is invalid: `num_clients` must be >= 1")
    _require(
        1 <= cfg.clients_per_round <= cfg.num_clients,
        f"clients_per_round={cfg.clients_per_round} is invalid: must be in [1, num_clients={cfg.num_clients}]",
    )
    _require(cfg.dataset.eval_batch_size is None or cfg.dataset.eval_batch_size >= 1,
             f"dataset.eval_batch_size={cfg.dataset.eval_batch_size} is invalid: must be >= 1, or null "
             "(128 on the CPU, 1024 on CUDA)")
    _require(cfg.dataset.test_samples is None or cfg.dataset.test_samples >= 1,
             f"dataset.test_samples={cfg.dataset.test_samples} is invalid: must be >= 1, or null (the whole test set)")
    _require(cfg.batch_size >= 1, f"batch_size={cfg.batch_size} is invalid: `batch_size` must be >= 1")
    _require(cfg.eval_every >= 1, f"eval_every={cfg.eval_every} is invalid: `eval_every` must be >= 1")
    _require(
        0 <= cfg.val_fraction < 1,
        f"val_fraction={cfg.val_fraction} is invalid: the share of each client's training data held out "
        "for validation must be in [0, 1)",
    )
    _require(
        cfg.checkpoint_every >= 0,
        f"checkpoint_every={cfg.checkpoint_every} is invalid: must be >= 0 (0 writes no checkpoint)",
    )
    if "num_clients" in cfg.algo:
        _require(1 <= cfg.algo.num_clients <= cfg.num_clients,
                 f"algo.num_clients={cfg.algo.num_clients} is invalid: SCAFFOLD's N, the clients whose control "
                 f"variates the server averages, is in [1, num_clients={cfg.num_clients}] (default: num_clients)")
    if "num_clients" in cfg.norm:
        _require(1 <= cfg.norm.num_clients <= cfg.num_clients,
                 f"norm.num_clients={cfg.norm.num_clients} is invalid: FBN's n, the clients whose statistics the "
                 f"server combines, is in [1, num_clients={cfg.num_clients}] (default: clients_per_round)")
    _require(cfg.algo.lr > 0, f"lr={cfg.algo.lr} is invalid: the learning rate `lr` must be > 0")
    _require(
        cfg.small_clients in SMALL_CLIENTS,
        f"small_clients='{cfg.small_clients}' is unknown; allowed: {', '.join(SMALL_CLIENTS)}",
    )
    _require(cfg.device in DEVICES, f"device='{cfg.device}' is unknown; allowed: {', '.join(DEVICES)}")
    _require(cfg.engine.name in ENGINES, f"engine.name='{cfg.engine.name}' is unknown; allowed: {', '.join(ENGINES)}")
    _require(cfg.logger.name in LOGGERS, f"logger.name='{cfg.logger.name}' is unknown; allowed: {', '.join(LOGGERS)}")
    _require(
        cfg.logger.mode in LOGGER_MODES,
        f"logger.mode='{cfg.logger.mode}' is unknown; allowed: {', '.join(LOGGER_MODES)}",
    )
    try:
        validate_schedule(cfg.algo.schedule, "algo.schedule")
    except ValueError as err:
        raise ConfigError(str(err)) from None


EVAL_CLIENT_TEST = ("partition", "whole")


def validate_evaluation(e: Any) -> None:
    """``evaluation``: ``clients`` a positive number or ``all``, ``client_test`` known."""
    _require(e.clients == "all" or (isinstance(e.clients, int) and not isinstance(e.clients, bool) and e.clients >= 1),
             f"evaluation.clients={e.clients} is invalid: the clients an evaluation tests, a number >= 1 or `all`")
    _require(e.client_test in EVAL_CLIENT_TEST, f"evaluation.client_test='{e.client_test}' is unknown; allowed: "
             f"{', '.join(EVAL_CLIENT_TEST)}")


def small_clients_policy(setting: str, num_clients: int) -> str:
    """``small_clients`` with ``auto`` resolved: ``cycle`` above ``CROSS_DEVICE_CLIENTS`` clients, else ``refuse``."""
    if setting != "auto":
        return setting
    return "cycle" if num_clients > CROSS_DEVICE_CLIENTS else "refuse"


def validate_client_sizes(sizes: list[int], batch_size: int, needs_two: bool, small_clients: str = "refuse") -> None:
    """Clients smaller than one batch (local batches drop the last partial one, so they cannot train).

    ``small_clients="refuse"``: every client must hold a full batch.  ``"skip"`` (HBN's code,
    ``FedAvg_main.py`` and its siblings: a sampled client with fewer than B samples neither trains
    nor uploads, ``engine.sampling.participating``): at least one client must hold a batch, and a
    warning says how many never train.  ``"cycle"`` (what ``auto``, the default, picks above
    ``CROSS_DEVICE_CLIENTS`` clients; cross-device federations of a few samples a client): such a client trains one batch an epoch of its samples repeated
    (``engine.sampling.draw_batches``); only an empty client is refused.  BN also needs batches
    of two or more.
    """
    small = [i for i, size in enumerate(sizes) if size < batch_size]
    if small_clients == "cycle":
        _require(batch_size <= sum(sizes), f"batch_size={batch_size} is larger than the clients' {sum(sizes)} "
                 "training samples together; lower `batch_size`")
        empty = [i for i, size in enumerate(sizes) if size == 0]
        _require(not empty, f"small_clients=cycle but client {empty[0] if empty else 0} holds no samples "
                 f"({len(empty)} of {len(sizes)} clients are empty); lower `num_clients` or set `partition.min_size`")
        if small:
            log.warning("small_clients=cycle: %d of %d clients hold fewer than batch_size=%d samples; each of their "
                        "steps is one batch of their samples repeated", len(small), len(sizes), batch_size)
        _require(not needs_two or batch_size >= 2, "batch_size=1 is invalid with batch statistics: `batch_size` must be >= 2")
        return
    if small_clients == "refuse" and small:
        client = min(range(len(sizes)), key=sizes.__getitem__)
        raise ConfigError(
            f"batch_size={batch_size} is larger than client {client}'s data ({sizes[client]} samples; "
            f"{len(small)} of {len(sizes)} clients hold fewer than {batch_size}); lower `batch_size` or "
            "`num_clients`, raise `partition.min_size`, or set `small_clients=skip` to leave such "
            "clients out of every round (HBN's code)"
        )
    _require(
        len(small) < len(sizes),
        f"small_clients=skip but no client holds a full batch of batch_size={batch_size} (largest client: "
        f"{max(sizes)} samples); lower `batch_size` or `num_clients`",
    )
    if small:
        log.warning("small_clients=skip: %d of %d clients hold fewer than batch_size=%d samples and will never "
                    "train or upload", len(small), len(sizes), batch_size)
    _require(not needs_two or batch_size >= 2, "batch_size=1 is invalid with batch statistics: `batch_size` must be >= 2")


def validate_validation_split(sizes: list[int], train_sizes: list[int], batch_size: int, val_fraction: float) -> None:
    """Holding out ``val_fraction`` of each client's data for validation must leave every client
    that held a full batch with a full batch of training data."""
    for client, (size, train) in enumerate(zip(sizes, train_sizes)):
        _require(
            train >= batch_size or size < batch_size,
            f"val_fraction={val_fraction} leaves client {client} {train} of its {size} samples for training, "
            f"fewer than batch_size={batch_size}; lower `val_fraction` or `batch_size`",
        )
