"""``mlp``: a multilayer perceptron for vector inputs such as the 2-D toy data.

Not a table of one paper: the papers' vector models are small fully connected ReLU networks with a
norm after each hidden linear layer (FedBN §5.2, ABIDE I: "a three-layer fully connected neural
network ... with two BN layers after the first two fully connected layers"; FedBN §4.2 analyses a
two-layer ReLU network with BN). For each hidden size::

    Linear norm(dims=1) ReLU                         <- the last one ends forward_features
    Linear(last hidden -> num_classes)               <- head

so the number of norm layers equals ``len(hidden_sizes)``. Inputs of any shape are flattened, so
``input_shape`` (2,), (64,) or (1, 8, 8) all work; an empty ``hidden_sizes`` gives a linear model
whose features are the flattened input.

``init_std`` (default ``None``: torch's init) draws the weight and the bias of the first hidden
linear layer (each of its neurons' in-connection weights and bias) from ``N(0, init_std²)``: FedBN
App. F initializes ``W_k ~ N(0, α² I)``, ``b_k ~ N(0, α²)`` with ``α = 10`` for "neuron k", and
FedBN's notation makes ``k`` a neuron of the first layer (§4.2: ``v_k``, ``k ∈ [m]``, the parameters
of the first layer, ``m`` the width of the hidden layer; App. A: "parameters for the k-th neuron in
the first layer"). Later hidden layers and the output layer keep torch's init, as do the norm
layers; a model without a hidden layer refuses ``init_std``.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Optional

from torch import Tensor, nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.models.base import FeatureClassifier, check_num_classes, make_norm
from fedbn_bench.models.registry import NormFactory, as_shape, register_model


@register_model("mlp")
class MLP(FeatureClassifier):
    """Fully connected ReLU network; options ``hidden_sizes`` (default (64, 64)) and ``init_std``."""

    def __init__(
        self,
        norm_layer: NormFactory,
        input_shape: tuple[int, ...],
        num_classes: int,
        *,
        hidden_sizes: Sequence[int] = (64, 64),
        init_std: Optional[float] = None,
    ) -> None:
        super().__init__()
        shape = as_shape(input_shape)
        num_classes = check_num_classes(num_classes)
        try:
            sizes = [operator.index(s) for s in hidden_sizes]
        except TypeError as exc:
            raise ConfigError(f"mlp option 'hidden_sizes' must be a list of integers, got {hidden_sizes!r}") from exc
        if any(s < 1 for s in sizes):
            raise ConfigError(f"mlp option 'hidden_sizes' must be positive, got {hidden_sizes!r}")
        layers: list[nn.Module] = [nn.Flatten(1)]
        width = math.prod(shape)
        for size in sizes:
            layers += [nn.Linear(width, size), make_norm(norm_layer, size, 1), nn.ReLU()]
            width = size
        self.hidden_sizes = tuple(sizes)
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)
        self.input_shape, self.num_classes, self.feature_dim = shape, num_classes, width
        if init_std is not None:
            if isinstance(init_std, bool) or not isinstance(init_std, (int, float)) or not init_std > 0:
                raise ConfigError(f"mlp option 'init_std' must be > 0 or null, got {init_std!r}")
            if not sizes:
                raise ValueError("mlp option 'init_std' initializes the first hidden layer (FedBN App. F): "
                                 "give 'hidden_sizes' at least one size")
            first = self.features[1]
            nn.init.normal_(first.weight, std=init_std)
            nn.init.normal_(first.bias, std=init_std)

    def forward_features(self, x: Tensor) -> Tensor:
        return self.features(x)
