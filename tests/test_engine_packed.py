"""``engine=packed`` building blocks: the packed layout, the guards that keep unsupported models on
``loop``, and the shared SGD step (whose fused path must not see non-contiguous stacks)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbn_bench.algorithms.sgd import sgd_step
from fedbn_bench.engine.backends import packed


class TinyNet(nn.Module):
    """conv -> BN -> ReLU -> pool -> flatten -> linear, with a hook to break the packed layout."""

    def __init__(self, extra: nn.Module | None = None, mix_channels: bool = False, padding_mode: str = "zeros") -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, padding_mode=padding_mode)
        self.bn = nn.BatchNorm2d(4)
        self.extra = extra or nn.Identity()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 3)
        self.mix_channels = mix_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.extra(self.pool(torch.relu(self.bn(self.conv(x)))))
        if self.mix_channels:
            h = h.flip(1)  # reverses the channel axis: packed clients swap their maps
        return self.fc(torch.flatten(h, 1))


def reason(model: nn.Module) -> str | None:
    torch.manual_seed(0)
    return packed.unsupported_reason(model, torch.randn(2, 2, 8, 8))


def test_a_per_channel_model_qualifies():
    torch.manual_seed(0)
    assert reason(TinyNet()) is None


@pytest.mark.parametrize(("model", "expected"), [
    (TinyNet(mix_channels=True), "mixes the packed clients' channels"),
    (TinyNet(extra=nn.LayerNorm([4, 4, 4])), "extra (LayerNorm) has no packing rule"),
    (TinyNet(extra=nn.Softmax(dim=1)), "extra (Softmax) has no packing rule"),
    (TinyNet(padding_mode="reflect"), "padding_mode='reflect'"),
])
def test_models_the_packed_network_cannot_express_are_refused(model, expected):
    assert expected in reason(model)


def test_packed_input_holds_client_i_in_channel_block_i():
    x = torch.randn(3, 5, 2, 4, 4)  # 3 clients, batch 5, 2 channels
    for channels_last in (False, True):
        p = packed.pack_input(x, channels_last)
        assert p.shape == (5, 6, 4, 4)
        assert p.is_contiguous(memory_format=torch.channels_last) == channels_last
        for i in range(3):
            assert torch.equal(p[:, 2 * i: 2 * i + 2], x[i])
    logits = torch.randn(5, 3 * 7)
    assert torch.equal(packed.unpack_output(logits, 3)[1], logits[:, 7:14])


def test_packed_forward_equals_each_clients_forward_in_training_mode():
    """Outputs and updated running statistics of 3 packed clients = 3 separate BN networks."""
    torch.manual_seed(0)
    nets = [TinyNet().train() for _ in range(3)]
    x = torch.randn(3, 6, 2, 8, 8)
    stacked = {k: torch.stack([n.state_dict()[k].clone() for n in nets]) for k in nets[0].state_dict()}
    net = packed.packed_copy(nets[0]).train()
    out = packed.unpack_output(torch.func.functional_call(net, stacked, (packed.pack_input(x, True),)), 3)
    for i, n in enumerate(nets):
        torch.testing.assert_close(out[i], n(x[i]), rtol=1e-5, atol=1e-5)
        for k in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
            torch.testing.assert_close(stacked[k][i], n.state_dict()[k], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_sgd_step_equals_torch_optim_sgd(layout):
    """Two momentum-SGD steps of 2 stacked clients (one with a started buffer from momentum
    carry, one starting from zero, which must equal torch's fresh buffer) against
    torch.optim.SGD per client, including permuted (channels-last) stacks whose gradients arrive
    contiguous, on which torch's fused kernel is wrong unless the gradient is first put in the
    weight's layout."""
    torch.manual_seed(0)
    shape = (2, 8, 3, 3, 5)
    p = torch.randn(shape) if layout == "contiguous" else torch.randn(2, 8, 3, 5, 3).permute(0, 1, 2, 4, 3)
    p = p.contiguous() if layout == "contiguous" else p
    start = torch.randn(p.shape[1:])
    grads = [torch.randn(p.shape) for _ in range(2)]
    params, bufs = {"w": p.clone()}, {"w": torch.zeros_like(p)}
    bufs["w"][0].copy_(start)
    for g in grads:
        sgd_step(params, {"w": g.clone()}, bufs, lr=0.1, momentum=0.9, decay=1e-3)
    for i in range(2):
        w = nn.Parameter(p[i].clone())
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=1e-3)
        if i == 0:
            opt.state[w]["momentum_buffer"] = start.clone()
        for g in grads:
            w.grad = g[i].clone()
            opt.step()
        torch.testing.assert_close(params["w"][i], w.detach(), rtol=1e-6, atol=1e-6)
