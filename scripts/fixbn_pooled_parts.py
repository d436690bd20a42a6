"""Which part of the BN statistics the pooled re-estimation of FixBN §3.4 corrects: the means or the variances.
The diagnosis of claim fixbn/sec3_4_pooled_statistics (its metric ``pooled_bn`` logs only the channel mean of each
layer's variance).

    python scripts/fixbn_pooled_parts.py RUN_DIR     (a norm=bn run: RUN_DIR/.hydra/config.yaml, RUN_DIR/checkpoint.pt)

Rebuilds the run's data, partition and model from its config, loads the global model of its last checkpoint (the
FedAvg-averaged statistics, FixBN Eq. 2) and re-estimates every BN layer on the pooled training data exactly as the
metric does (``metrics.pooled_bn.reestimate``: the same batches, shuffled with the run's seed). Prints, per BN layer,
the channel mean of |μ_avg − μ_pool| / σ_pool (the averaged mean's shift in the pooled standard deviations) and of
|log(σ²_avg / σ²_pool)|; then the test accuracy with the averaged statistics, the pooled ones, and the two mixtures
(pooled means with averaged variances, averaged means with pooled variances).
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf
from torch import nn

from fedbn_bench.config.validate import validate_config
from fedbn_bench.engine.checkpoint import load_checkpoint
from fedbn_bench.errors import UserError
from fedbn_bench.metrics.base import evaluate, seeded_generator
from fedbn_bench.metrics.bn_layers import statistics_layers
from fedbn_bench.metrics.pooled_bn import SHUFFLE_STREAM, reestimate
from fedbn_bench.runner import build_federation

EPS = 1e-5
"""BN's ε, added to a variance before its square root."""


def layer_gaps(averaged: nn.Module, pooled: nn.Module) -> list[tuple[str, float, float]]:
    """Per BN layer ``(name, mean shift, mean |log variance ratio|)`` of ``averaged`` against ``pooled``."""
    out = []
    for name, layer in statistics_layers(averaged, "fixbn_pooled_parts").items():
        ref = dict(pooled.named_modules())[name]
        mean_a, var_a = layer.running_mean.double(), layer.running_var.double()
        mean_p, var_p = ref.running_mean.double(), ref.running_var.double()
        shift = ((mean_a - mean_p).abs() / (var_p + EPS).sqrt()).mean().item()
        out.append((name, shift, ((var_a + EPS) / (var_p + EPS)).log().abs().mean().item()))
    return out


def mixed(averaged: nn.Module, pooled: nn.Module, part: str) -> nn.Module:
    """``averaged`` with the pooled ``part`` (``running_mean`` or ``running_var``) in every BN layer."""
    twin = copy.deepcopy(averaged)
    state = twin.state_dict()
    for key, value in pooled.state_dict().items():
        if key.endswith(f".{part}"):
            state[key] = value.clone()
    twin.load_state_dict(state)
    return twin.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a norm=bn run directory with .hydra/config.yaml and checkpoint.pt")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        cfg = OmegaConf.load(args.run / ".hydra" / "config.yaml")
        validate_config(cfg)
        state = load_checkpoint(args.run)
        fed, _ = build_federation(cfg, torch.device("cpu"))
    except (UserError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = fed.model
    model.load_state_dict(state["store"]["global_state"])
    model.eval()
    data = fed.data
    pooled_idx = torch.cat([c.indices for c in fed.clients])
    pooled = reestimate(model, data.train.x, data.train.y, pooled_idx, int(cfg.batch_size),
                        seeded_generator(int(cfg.seed), SHUFFLE_STREAM))
    print(f"round {state['rounds_completed']}; per BN layer: mean shift |μ_avg − μ_pool| / σ_pool, |log var ratio|")
    for name, shift, log_ratio in layer_gaps(model, pooled):
        print(f"  {name}: {shift:.3f} {log_ratio:.3f}")
    cases = {"averaged": model, "pooled": pooled, "pooled means, averaged variances": mixed(model, pooled, "running_mean"),
             "averaged means, pooled variances": mixed(model, pooled, "running_var")}
    for label, net in cases.items():
        acc, loss = evaluate(net, data.test.x, data.test.y)
        print(f"test accuracy, {label}: {100 * acc:.2f} % (loss {loss:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
