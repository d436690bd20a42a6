"""Tests of ``fedbn_bench.models``: shapes, the features/head contract, norm placement, errors."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fedbn_bench.models import MODELS, build_model, model_options, register_model
from fedbn_bench.models import lenet as lenet_module

IMAGE_MODELS = ["fbn_cnn", "simple_cnn", "digit_cnn", "lenet", "resnet20", "resnet18"]
ZOO_MODELS = ["alexnet_bn", "vgg11", "vgg19", "mobilenet_v2", "resnet50"]  # tests/test_model_zoo.py
IMAGE_SHAPES = [(1, 8, 8), (1, 28, 28), (3, 28, 28), (3, 32, 32), (3, 64, 64)]
NUM_CLASSES = 7

# Penultimate feature size F per model and image side (channels do not matter).
FEATURE_DIM = {
    "fbn_cnn": {8: 128, 28: 128, 32: 128, 64: 128},
    "simple_cnn": {8: 128, 28: 128, 32: 128, 64: 128},
    "digit_cnn": {8: 512, 28: 512, 32: 512, 64: 512},
    "lenet": {8: 64, 28: 576, 32: 1024, 64: 4096},
    "resnet20": {8: 64, 28: 64, 32: 64, 64: 64},
    "resnet18": {8: 512, 28: 512, 32: 512, 64: 512},
}
# Flatten size of the conv stack, measured by the dummy forward. The papers' own values are
# fbn_cnn 8192 at 32x32 (FBN Table 1), simple_cnn 1024 at 32x32 (HBN Table 7) and digit_cnn 6272
# at 28x28 (FedBN Table 3).
FLAT_DIM = {
    "fbn_cnn": {8: 512, 28: 6272, 32: 8192, 64: 32768},
    "simple_cnn": {8: 64, 28: 1024, 32: 1024, 64: 4096},
    "digit_cnn": {8: 512, 28: 6272, 32: 8192, 64: 32768},
    "lenet": {8: 64, 28: 576, 32: 1024, 64: 4096},
}

# (model, options) -> the exact norm_layer(num_features, dims) calls, in construction order.
NORM_CALLS = {
    ("fbn_cnn", ()): [(64, 2), (64, 2), (128, 2), (128, 2)],
    ("simple_cnn", ()): [(16, 2), (32, 2), (64, 2)],
    ("digit_cnn", ()): [(64, 2), (64, 2), (128, 2), (2048, 1), (512, 1)],
    ("lenet", ()): [(32, 2), (32, 2), (64, 2)],
    ("lenet", (("variant", "lenet5"),)): [(6, 2), (16, 2)],
    ("resnet20", ()): [(16, 2)] + [(16, 2)] * 6 + [(32, 2)] * 6 + [(64, 2)] * 6,
    # stem + 3 stages of 3 blocks x 2 norms, + one norm in each of the 2 projection shortcuts
    ("resnet20", (("shortcut", "projection"),)): [(16, 2)] * 7 + [(32, 2)] * 7 + [(64, 2)] * 7,
    ("resnet18", ()): None,  # 20 calls, checked by count below
    ("mlp", ()): [(64, 1), (64, 1)],
    ("mlp", (("hidden_sizes", (32, 16, 8)),)): [(32, 1), (16, 1), (8, 1)],
}
NORM_COUNT = {
    ("fbn_cnn", ()): 4,
    ("simple_cnn", ()): 3,
    ("digit_cnn", ()): 5,
    ("lenet", ()): 3,
    ("lenet", (("variant", "lenet5"),)): 2,
    ("resnet20", ()): 19,
    ("resnet20", (("shortcut", "projection"),)): 21,
    ("resnet18", ()): 20,
    ("mlp", ()): 2,
    ("mlp", (("hidden_sizes", (32, 16, 8)),)): 3,
}
NORM_TYPES = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm, nn.LocalResponseNorm)


def bn_factory(c: int, d: int) -> nn.Module:
    return nn.BatchNorm2d(c) if d == 2 else nn.BatchNorm1d(c)


def gn_factory(c: int, d: int) -> nn.Module:
    return nn.GroupNorm(2, c)


def identity_factory(c: int, d: int) -> nn.Module:
    return nn.Identity()


class RecordingNorm(nn.Module):
    """A pass-through 'norm' that records the shapes it sees."""

    def __init__(self, num_features: int, dims: int) -> None:
        super().__init__()
        self.num_features, self.dims = num_features, dims
        self.seen: list[torch.Size] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.shape)
        return x


def shape_for(name: str) -> tuple[int, ...]:
    return (2,) if name == "mlp" else (1, 8, 8)


def count_norms(model: nn.Module, types: tuple[type, ...] = NORM_TYPES) -> int:
    return sum(isinstance(m, types) for m in model.modules())


def test_registry_names() -> None:
    assert set(MODELS) == set(IMAGE_MODELS) | set(ZOO_MODELS) | {"mlp"}


@pytest.mark.parametrize("shape", IMAGE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_image_model_shapes(name: str, shape: tuple[int, int, int]) -> None:
    model = build_model(name, bn_factory, shape, NUM_CLASSES)
    side = shape[-1]
    assert model.training
    head_inputs: list[torch.Tensor] = []
    model.head.register_forward_hook(lambda mod, args, out: head_inputs.append(args[0]))
    # one train-mode forward (batch statistics); the head's input is the penultimate feature map
    assert model(torch.randn(2, *shape)).shape == (2, NUM_CLASSES)
    assert head_inputs[0].shape == (2, FEATURE_DIM[name][side])
    assert model.feature_dim == FEATURE_DIM[name][side]
    if name in FLAT_DIM:
        assert model.flat_dim == FLAT_DIM[name][side]
    assert isinstance(model.head, nn.Linear)
    assert (model.head.in_features, model.head.out_features) == (FEATURE_DIM[name][side], NUM_CLASSES)


@pytest.mark.parametrize("name", IMAGE_MODELS + ["mlp"])
def test_forward_is_head_of_features(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, bn_factory, shape_for(name), NUM_CLASSES)
    x = torch.randn(4, *shape_for(name))
    model(x)  # move the running statistics away from their initial values
    model.eval()
    feats = model.forward_features(x)
    assert feats.shape == (4, model.feature_dim)
    logits = model(x)
    torch.testing.assert_close(logits, model.head(feats), rtol=0, atol=0)
    # raw logits, not log-probabilities
    assert not torch.allclose(logits.exp().sum(1), torch.ones(4))


@pytest.mark.parametrize("shape", [(2,), (64,)])
def test_mlp_shapes_and_head_contract(shape: tuple[int]) -> None:
    model = build_model("mlp", bn_factory, shape, NUM_CLASSES)
    x = torch.randn(5, *shape)
    assert model(x).shape == (5, NUM_CLASSES)
    model.eval()
    feats = model.forward_features(x)
    assert feats.shape == (5, 64)
    assert (model.head.in_features, model.head.out_features) == (64, NUM_CLASSES)
    torch.testing.assert_close(model(x), model.head(feats), rtol=0, atol=0)


def test_mlp_hidden_sizes_and_image_input() -> None:
    model = build_model("mlp", bn_factory, (1, 8, 8), 3, hidden_sizes=[32, 16])
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64, 32), (32, 16), (16, 3)]
    assert model(torch.randn(4, 1, 8, 8)).shape == (4, 3)
    linear = build_model("mlp", bn_factory, (2,), 3, hidden_sizes=[])
    assert count_norms(linear) == 0
    assert linear.forward_features(torch.ones(4, 2)).shape == (4, 2)


@pytest.mark.parametrize("key", list(NORM_CALLS), ids=lambda k: k[0] + "".join(f"-{v}" for _, v in k[1]))
def test_norm_layers_match_paper_table(key: tuple[str, tuple]) -> None:
    name, opts = key
    made: list[RecordingNorm] = []

    def factory(c: int, d: int) -> nn.Module:
        made.append(RecordingNorm(c, d))
        return made[-1]

    model = build_model(name, factory, shape_for(name), NUM_CLASSES, **dict(opts))
    assert len(made) == NORM_COUNT[key]
    if NORM_CALLS[key] is not None:
        assert [(m.num_features, m.dims) for m in made] == NORM_CALLS[key]
    assert all(m.dims in (1, 2) for m in made)
    # every factory product is a registered submodule, and sits on the forward path exactly once,
    # on a tensor of the promised layout: (N, C, H, W) for dims=2 and (N, C) for dims=1
    assert count_norms(model, (RecordingNorm,)) == len(made)
    for m in made:
        m.seen.clear()
    model(torch.randn(2, *shape_for(name)))
    for m in made:
        assert len(m.seen) == 1
        assert len(m.seen[0]) == (4 if m.dims == 2 else 2)
        assert m.seen[0][1] == m.num_features


@pytest.mark.parametrize("name", IMAGE_MODELS + ["mlp"])
def test_norm_count_with_real_layers(name: str) -> None:
    bn = build_model(name, bn_factory, shape_for(name), NUM_CLASSES)
    gn = build_model(name, gn_factory, shape_for(name), NUM_CLASSES)
    assert count_norms(bn) == NORM_COUNT[(name, ())]
    assert count_norms(gn, (nn.GroupNorm,)) == NORM_COUNT[(name, ())]
    assert gn(torch.randn(2, *shape_for(name))).shape == (2, NUM_CLASSES)


@pytest.mark.parametrize("name", IMAGE_MODELS + ["mlp"])
def test_identity_factory_gives_no_norm_modules(name: str) -> None:
    model = build_model(name, identity_factory, shape_for(name), NUM_CLASSES)
    assert count_norms(model) == 0
    assert model(torch.randn(2, *shape_for(name))).shape == (2, NUM_CLASSES)


@pytest.mark.parametrize("name", IMAGE_MODELS + ["mlp"])
def test_shape_probe_leaves_norm_state_untouched(name: str) -> None:
    model = build_model(name, bn_factory, shape_for(name), NUM_CLASSES)
    assert all(m.training for m in model.modules())
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            assert int(m.num_batches_tracked) == 0
            assert torch.count_nonzero(m.running_mean) == 0


def test_fbn_cnn_layer_order_and_dropout() -> None:
    model = build_model("fbn_cnn", bn_factory, (3, 32, 32), 10)
    kinds = [type(m).__name__ for m in model.features]
    block = ["Conv2d", "ReLU", "BatchNorm2d"]
    assert kinds == block * 2 + ["MaxPool2d", "Dropout"] + block * 2 + ["MaxPool2d", "Dropout", "Flatten"]
    assert [m.p for m in model.modules() if isinstance(m, nn.Dropout)] == [0.25, 0.25]
    assert (model.fc.in_features, model.fc.out_features) == (8192, 128)
    no_drop = build_model("fbn_cnn", bn_factory, (3, 32, 32), 10, dropout=0.0)
    assert [m.p for m in no_drop.modules() if isinstance(m, nn.Dropout)] == [0.0, 0.0]


def test_resnet20_parameter_counts() -> None:
    # CIFAR ResNet-20 with BN, 10 classes: 0.27M parameters (He et al. 2016, Table 6).
    model = build_model("resnet20", bn_factory, (3, 32, 32), 10)
    assert sum(p.numel() for p in model.parameters()) == 269_722
    assert not any(m.kernel_size == (1, 1) for m in model.modules() if isinstance(m, nn.Conv2d))
    proj = build_model("resnet20", bn_factory, (3, 32, 32), 10, shortcut="projection")
    assert sum(m.kernel_size == (1, 1) for m in proj.modules() if isinstance(m, nn.Conv2d)) == 2


def test_resnet18_stem_options() -> None:
    small = build_model("resnet18", bn_factory, (1, 64, 64), 10)
    assert small.small_input
    assert small.backbone.conv1.kernel_size == (3, 3) and small.backbone.conv1.stride == (1, 1)
    assert small.backbone.conv1.in_channels == 1
    assert isinstance(small.backbone.maxpool, nn.Identity)
    assert small.head is not small.backbone.fc and isinstance(small.backbone.fc, nn.Identity)

    large = build_model("resnet18", bn_factory, (3, 72, 72), 10)
    assert not large.small_input
    assert large.backbone.conv1.kernel_size == (7, 7)
    assert isinstance(large.backbone.maxpool, nn.MaxPool2d)

    forced = build_model("resnet18", bn_factory, (1, 8, 8), 10, small_input=False)
    assert forced.backbone.conv1.kernel_size == (7, 7) and forced.backbone.conv1.in_channels == 1
    assert forced(torch.randn(2, 1, 8, 8)).shape == (2, 10)
    # the model keeps no reference to the factory (it may be a method of a large object)
    assert small.backbone._norm_layer is None
    copied = copy.deepcopy(small)
    assert copied.backbone.conv1.weight is not small.backbone.conv1.weight


@pytest.mark.parametrize("variant", ["hsieh", "lenet5"])
def test_lenet_min_side_and_zero_padding(variant: str) -> None:
    side = lenet_module.MIN_SIDE[variant]
    exact = build_model("lenet", bn_factory, (1, side, side), 10, variant=variant)
    assert isinstance(exact.pad, nn.Identity)
    exact.eval()
    assert exact(torch.randn(2, 1, side, side)).shape == (2, 10)
    with pytest.raises(RuntimeError):  # MIN_SIDE is the true minimum of the unpadded network
        exact.features(torch.randn(2, 1, side - 1, side - 1))

    small = build_model("lenet", bn_factory, (1, 5, side + 3), 10, variant=variant)
    assert isinstance(small.pad, nn.ZeroPad2d)
    padded = small.pad(torch.ones(1, 1, 5, side + 3))
    assert padded.shape[-2:] == (side, side + 3)
    assert padded.sum() == 5 * (side + 3)  # zeros only were added
    assert small(torch.randn(2, 1, 5, side + 3)).shape == (2, 10)


def test_lenet5_padding_on_digits() -> None:
    model = build_model("lenet", bn_factory, (1, 8, 8), 10, variant="lenet5")
    assert model.pad(torch.zeros(1, 1, 8, 8)).shape[-2:] == (13, 13)
    assert model.flat_dim == 16
    assert build_model("lenet", bn_factory, (3, 32, 32), 10, variant="lenet5").flat_dim == 400


def test_model_options_listing() -> None:
    assert model_options("fbn_cnn") == {"dropout": 0.25, "width": 1.0}
    assert model_options("simple_cnn") == {}
    assert model_options("resnet18") == {"small_input": None, "pretrained": False}


def test_fbn_cnn_width_scales_the_convolutions_only() -> None:
    """Table 1's channels (64, 64, 128, 128) at width 1; half of each at 0.5; the 128-unit hidden layer kept."""
    for width, channels in ((1.0, [64, 64, 128, 128]), (0.5, [32, 32, 64, 64])):
        model = build_model("fbn_cnn", bn_factory, (1, 28, 28), 10, width=width)
        convs = [m for m in model.features if isinstance(m, torch.nn.Conv2d)]
        assert [c.out_channels for c in convs] == channels
        assert model.fc.in_features == channels[-1] * 7 * 7 and model.fc.out_features == 128
    with pytest.raises(ValueError, match="width"):
        build_model("fbn_cnn", bn_factory, (1, 28, 28), 10, width=0)


def test_unknown_model_name_lists_allowed() -> None:
    with pytest.raises(ValueError) as info:
        build_model("vgg_fantasy", bn_factory, (3, 32, 32), 10)
    message = str(info.value)
    assert "vgg_fantasy" in message
    for name in MODELS:
        assert name in message


def test_unknown_option_is_named() -> None:
    with pytest.raises(TypeError) as info:
        build_model("fbn_cnn", bn_factory, (3, 32, 32), 10, dropuot=0.1)
    assert "dropuot" in str(info.value) and "dropout" in str(info.value)
    with pytest.raises(TypeError, match="'width'.*none"):
        build_model("simple_cnn", bn_factory, (3, 32, 32), 10, width=2)


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("fbn_cnn", {"dropout": 1.5}, "dropout"),
        ("lenet", {"variant": "alexnet"}, "variant"),
        ("resnet20", {"shortcut": "dense"}, "shortcut"),
        ("resnet18", {"small_input": "yes"}, "small_input"),
        ("mlp", {"hidden_sizes": [64, 0]}, "hidden_sizes"),
        ("mlp", {"hidden_sizes": ["a"]}, "hidden_sizes"),
    ],
)
def test_bad_option_values(name: str, options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_model(name, bn_factory, shape_for(name), 10, **options)


def test_bad_shapes_classes_and_factories() -> None:
    with pytest.raises(ValueError, match=r"simple_cnn.*\(C, H, W\)"):
        build_model("simple_cnn", bn_factory, (64,), 10)
    with pytest.raises(ValueError, match="input_shape"):
        build_model("mlp", bn_factory, (0,), 10)
    with pytest.raises(ValueError, match="num_classes"):
        build_model("mlp", bn_factory, (2,), 0)
    with pytest.raises(TypeError, match="norm_layer"):
        build_model("mlp", "bn", (2,), 2)
    with pytest.raises(TypeError, match="nn.Module"):
        build_model("mlp", lambda c, d: None, (2,), 2)
    # lists (e.g. from a config file) are accepted as shapes
    assert build_model("simple_cnn", bn_factory, [1, 8, 8], 2).input_shape == (1, 8, 8)


def test_register_model_validates_builders() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_model("mlp")(lambda norm_layer, input_shape, num_classes: nn.Linear(1, 1))
    with pytest.raises(TypeError, match="keyword-only"):

        @register_model("_bad_test_model")
        def bad(norm_layer, input_shape, num_classes, width=3):  # type: ignore[no-untyped-def]
            return nn.Linear(1, 1)

    assert "_bad_test_model" not in MODELS


# --------------------------------------------------------------------------- Hsieh's BN-LeNet has no affine


ALL_NORMS = ["bn", "fbn", "fixbn", "hbn", "gn", "ln", "in", "fedbn"]


def _built_norm(name: str):
    from conftest import compose_config
    from fedbn_bench.norms import build_norm

    return build_norm(compose_config([f"norm={name}"]).norm)


@pytest.mark.parametrize("norm_name", ["bn", "fbn"])
def test_hsieh_lenet_norms_have_no_affine_by_default(norm_name: str) -> None:
    norm = _built_norm(norm_name)
    model = norm.prepare_model(build_model("lenet", norm.norm_layer, (3, 32, 32), 10))
    layers = [m for m in model.modules() if isinstance(m, norm.layer_types)]
    assert len(layers) == 3 and all(m.weight is None and m.bias is None for m in layers)
    # only the three convolutions (no bias) and the head are learned
    assert sorted(name for name, _ in model.named_parameters()) == [
        "features.0.weight", "features.4.weight", "features.8.weight", "head.bias", "head.weight"]
    assert model(torch.randn(4, 3, 32, 32)).shape == (4, 10)
    affine = build_model("lenet", norm.norm_layer, (3, 32, 32), 10, affine=True)
    assert sum(p.numel() for p in affine.parameters()) - sum(p.numel() for p in model.parameters()) == 2 * (32 + 32 + 64)
    lenet5 = build_model("lenet", norm.norm_layer, (3, 32, 32), 10, variant="lenet5")
    assert all(m.weight is not None for m in lenet5.modules() if isinstance(m, norm.layer_types))
    lenet5_plain = build_model("lenet", norm.norm_layer, (3, 32, 32), 10, variant="lenet5", affine=False)
    assert all(m.weight is None for m in lenet5_plain.modules() if isinstance(m, norm.layer_types))


@pytest.mark.parametrize("norm_name", ALL_NORMS)
def test_without_affine_equals_the_identity_affine(norm_name: str) -> None:
    """Every norm method's layer without weight/bias computes what it computes with gamma=1,
    beta=0 (its initial affine), in training and evaluation, and has no affine state."""
    from fedbn_bench.models.base import without_affine

    norm = _built_norm(norm_name)
    torch.manual_seed(0)
    full, plain = norm.norm_layer(8, 2), without_affine(norm.norm_layer(8, 2))
    assert not {"weight", "bias"} & set(plain.state_dict())
    assert not any(name in ("weight", "bias") for name, _ in plain.named_parameters())
    x = torch.randn(6, 8, 5, 5)
    for training in (True, False):
        full.train(training), plain.train(training)
        assert torch.allclose(full(x), plain(x), atol=1e-6), training


def test_lenet_affine_option_is_checked() -> None:
    with pytest.raises(ValueError, match="lenet option 'affine' must be true, false or null"):
        build_model("lenet", bn_factory, (3, 32, 32), 10, affine="yes")


@pytest.mark.parametrize("norm_name", ["bn", "fbn"])
def test_hsieh_lenet_trains_one_round_on_loop_and_packed(norm_name: str, tmp_path) -> None:
    from conftest import compose_config
    from fedbn_bench.runner import run_experiment

    acc = {}
    for engine in ("loop", "packed"):
        cfg = compose_config(["debug=default", "model=lenet", f"norm={norm_name}", f"engine={engine}", "rounds=1"])
        summary = run_experiment(cfg, tmp_path / engine)
        assert summary["status"] == "completed"
        acc[engine] = summary["final_test_acc"]
    assert abs(acc["loop"] - acc["packed"]) < 0.02


def test_hsieh_lenet_with_fixbn_freeze_affine_reaches_stage_two() -> None:
    """FixBN's ``freeze_affine`` reads the layers' ``affine`` flag: it must say False once the
    affine parameters are gone."""
    from conftest import compose_config
    from fedbn_bench.norms import build_norm

    norm = build_norm(compose_config(["norm=fixbn", "norm.freeze_affine=true"]).norm)
    model = norm.prepare_model(build_model("lenet", norm.norm_layer, (3, 32, 32), 10))
    norm.on_round_start(9, 10, model)  # stage II
    assert norm.frozen and all(not m.affine for m in norm.norm_modules(model).values())
    assert model.train()(torch.randn(4, 3, 32, 32)).shape == (4, 10)
