"""``engine=packed``: the round's clients packed into the channels of one grouped network.

The stack of ``stacked.py`` (same loading, padding, masking and algorithm hooks as ``engine=vmap``),
with one step of all active clients computed by a *packed* copy of the model instead of
``torch.func.vmap``. Client ``i`` owns channel block ``i`` of every layer, and the batch axis
holds the ``B`` samples that every client draws at this step:

* ``Conv2d(cin, cout, groups=g)`` becomes one convolution with ``groups = n * g`` over
  ``(B, n * cin, H, W)``; the stacked weights ``(n, cout, cin/g, k, k)`` are viewed as
  ``(n * cout, cin/g, k, k)``. ``Linear`` becomes one batched matrix product over the client axis.
* ``BatchNorm`` over ``n * C`` channels: a channel's batch statistics and running statistics are
  computed from its own client's batch only, so they equal the per-client ones exactly; the
  running statistics are updated in place in the stack. ``GroupNorm(g, C)`` becomes
  ``GroupNorm(n * g, n * C)`` (LayerNorm and InstanceNorm are GroupNorm here, see
  ``norms/per_sample.py``).
* Element-wise layers, pooling, dropout and ``Flatten`` work unchanged (a channel-major flatten
  of the packed maps is client-major). Residual additions and similar forward code work too.

Why a second vectorized backend: on CPU ``vmap`` turns the stacked convolutions into grouped
convolutions in NCHW layout, the slow kernels there (functorch cannot batch channels-last
tensors), while the packed network runs its image inputs channels-last, where the CPU's
grouped-convolution, pooling and BatchNorm kernels are several times faster. Measured in
``results/bench/README.md``; ``engine=auto`` uses it on CPU for local batches up to 16
(``select.py``).

Safety: a model qualifies only if every module with parameters or buffers has a packing rule
(``core.packing.PACKING_RULES``: torch's layers there, a norm method's layers in the norm's own
module) and every other leaf module is known to act per channel (``PER_CHANNEL``);
then a self-check runs the packed copy on two different client states and compares it with the
model itself (``self_check``), which catches forward code that mixes channels or hard-codes a
reshape. Dropout draws differ from ``loop`` (same distribution, one draw per packed step).
"""
from __future__ import annotations

import copy
from typing import Optional

import torch
from torch import nn
from torch.func import functional_call

from fedbn_bench.core.packing import PACKING_RULES, PER_CHANNEL, PackedLayer
from fedbn_bench.core.trees import prefix
from fedbn_bench.core.updates import State
from fedbn_bench.engine.backends.base import TrainingContext
from fedbn_bench.engine.backends.stacked import StackedBackend


def unpackable_module(model: nn.Module) -> Optional[str]:
    """A description of the first module without a packing rule, or ``None``."""
    for name, module in model.named_modules():
        kind = type(module)
        if kind in PACKING_RULES:
            if kind is nn.Conv2d and module.padding_mode != "zeros":
                return f"{name} pads with padding_mode='{module.padding_mode}'"
            continue
        own_state = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
        is_leaf = next(module.children(), None) is None
        if own_state or (is_leaf and not isinstance(module, tuple(PER_CHANNEL))):
            return f"{name or 'the model'} ({kind.__name__}) has no packing rule"
    return None


def packed_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose layers run ``n`` packed clients (see the module docstring)."""
    packed = copy.deepcopy(model)
    sources = dict(model.named_modules())
    for name, module in list(packed.named_modules()):
        rule = PACKING_RULES.get(type(module))
        if rule is None:
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = packed.get_submodule(parent_name) if parent_name else packed
        setattr(parent, attr, rule(sources[name]))
    pool_before_relu(packed)
    return packed


def pool_before_relu(model: nn.Module) -> None:
    """In every ``nn.Sequential``, swap ``ReLU`` followed by ``MaxPool2d`` into ``MaxPool2d`` then
    ``ReLU``: the same outputs and gradients (both maps are monotone, so the window maximum and its
    first position are the same either way, and the gradient is zero where the maximum is not
    positive), with the ReLU on a quarter of the elements."""
    for seq in model.modules():
        if not isinstance(seq, nn.Sequential):
            continue
        keys = list(seq._modules)
        for a, b in zip(keys, keys[1:]):
            if type(seq._modules[a]) is nn.ReLU and type(seq._modules[b]) is nn.MaxPool2d:
                seq._modules[a], seq._modules[b] = seq._modules[b], seq._modules[a]


def pack_input(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """``(n, B, C, ...)`` client batches as one ``(B, n * C, ...)`` batch (channels-last for images)."""
    n, b = x.shape[:2]
    if x.dim() == 5 and channels_last:
        c, h, w = x.shape[2:]
        nhwc = x.permute(1, 3, 4, 0, 2).contiguous()
        return nhwc.view(b, h, w, n * c).permute(0, 3, 1, 2)
    return x.transpose(0, 1).reshape(b, n * x.shape[2], *x.shape[3:])


def unpack_output(out: torch.Tensor, n: int) -> torch.Tensor:
    """``(B, n * K)`` packed logits as ``(n, B, K)``."""
    return out.view(out.shape[0], n, -1).transpose(0, 1)


def self_check(model: nn.Module, sample: torch.Tensor, channels_last: bool) -> Optional[str]:
    """Run the packed copy on two client states (the model's and a perturbed one) in eval mode and
    compare with the model itself; a description of the mismatch, or ``None``."""
    source = copy.deepcopy(model).eval()
    states = [{k: v.clone() for k, v in source.state_dict().items()}]
    gen = torch.Generator(device="cpu").manual_seed(0)
    states.append({k: v * (1 + 0.1 * torch.randn(v.shape, generator=gen, device="cpu").to(v)) if v.is_floating_point() else v
                   for k, v in states[0].items()})
    expected = []
    with torch.no_grad():
        for state in states:
            source.load_state_dict(state)
            expected.append(source(sample))
        packed = packed_copy(source).eval()
        stacked = {k: torch.stack([s[k] for s in states]) for k in states[0]}
        x = pack_input(torch.stack([sample, sample]), channels_last)
        got = unpack_output(functional_call(packed, stacked, (x,)), 2)
    for i, want in enumerate(expected):
        if got[i].shape != want.shape or not torch.allclose(got[i], want, rtol=1e-3, atol=1e-4):
            return "the model's forward mixes the packed clients' channels (e.g. a concatenation or a fixed reshape)"
    return None


def unsupported_reason(model: nn.Module, sample: torch.Tensor) -> Optional[str]:
    """Why ``engine=packed`` cannot run ``model``, or ``None`` when it can (``sample``: a few
    training inputs, for the self-check)."""
    return unpackable_module(model) or self_check(model, sample, sample.dim() == 4)


class PackedBackend(StackedBackend):
    """Trains the sampled clients of a round as one packed network."""

    def __init__(self, ctx: TrainingContext) -> None:
        super().__init__(ctx)
        self.packed = packed_copy(ctx.model)
        self.runner = self.packed
        self.channels_last = len(ctx.train.x.shape) == 4  # a memory-mapped split (data/lazy.py) has a shape, no dim()
        self.layers = {f"{name}.{k}" if name else k: (module, k) for name, module in self.packed.named_modules()
                       if isinstance(module, PackedLayer) for k in (*module._parameters, *module._buffers)}
        self.forms: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.ones: dict[tuple[int, torch.dtype], torch.Tensor] = {}
        self.inputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def empty_stack(self, count: int, like: torch.Tensor) -> torch.Tensor:
        """Layouts that spare a copy per step: convolution weights ``(n, cout, cin, k, k)`` stored
        so that their packed view ``(n * cout, cin, k, k)`` is channels-last, the layout of the
        packed maps; linear weights ``(n, out, in)`` stored as ``(n, in, out)``, the operand of the
        batched product, whose gradient then arrives in the same layout. (Tensors of the same
        shape in the algorithm's local tree, e.g. momentum buffers, get the same layout, so the
        fused SGD kernel sees matching memory orders.)"""
        if like.dim() == 4 and self.channels_last:
            cout, cin, kh, kw = like.shape
            return like.new_empty((count, cout, kh, kw, cin)).permute(0, 1, 4, 2, 3)
        if like.dim() == 2:
            return like.new_empty((count, like.shape[1], like.shape[0])).transpose(1, 2)
        return super().empty_stack(count, like)

    def logits(self, state: State, x: torch.Tensor) -> torch.Tensor:
        return unpack_output(functional_call(self.packed, state, (self.packed_input(x),)), x.shape[0])

    def empty_batches(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """Labels ``(clients, steps, B)`` step-major, ``(steps, clients, B)`` in memory: a step's
        labels of all clients are one contiguous block, which the loss flattens without a copy."""
        if len(shape) == 3:
            return like.new_zeros((shape[1], shape[0], shape[2])).transpose(0, 1)
        return super().empty_batches(shape, like)

    def step_batches(self, x: torch.Tensor, y: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The stacked backend's step batches; their packed inputs are made here for the whole
        round at once (one ``pack_input`` of all steps' samples, each step's input a view of it)."""
        steps = super().step_batches(x, y)
        packed = pack_input(x.flatten(1, 2), self.channels_last)  # every step's B samples as one batch
        per_step = packed.view(len(steps), x.shape[2], *packed.shape[1:]).unbind()
        self.inputs = {id(xb): (xb, p) for (xb, _), p in zip(steps, per_step)}
        return steps

    def packed_input(self, x: torch.Tensor) -> torch.Tensor:
        """``pack_input(x)``, made once per round for a step's batches of all clients."""
        known = self.inputs.get(id(x))
        return known[1] if known is not None and known[0] is x else pack_input(x, self.channels_last)

    def packed_forms(self, state: State) -> State:
        """``state``'s tensors in their layers' packed forms (``PackedLayer.pack``), the trainable
        ones as leaves of the step's graph. Made once per stack: while every client trains, the
        same stacks come back at each step, so the step issues no layout or ``detach``
        operations; the in-place updates of the stacks reach the forms, views of them."""
        out = {}
        for k, v in state.items():
            cached = self.forms.get(k)
            if cached is None or cached[0] is not v:
                layer, name = self.layers.get(k, (None, k))
                form = v if layer is None else layer.pack(name, v)
                cached = self.forms[k] = (v, form.detach().requires_grad_() if k in self.trainable else form)
            out[k] = cached[1]
        return out

    def forward_backward(self, params: State, buffers: State, x: torch.Tensor, y: torch.Tensor, n: int):
        state = self.packed_forms({**params, **prefix(buffers, n)})
        leaves = [k for k in params if k in self.trainable]
        self.packed.train()
        with torch.enable_grad():
            losses = self.ctx.algo.loss(self.logits(state, x), y)
            key = (n, losses.dtype)
            if key not in self.ones:  # d(sum of losses)/d(losses), made once per shape
                self.ones[key] = losses.new_ones(n)
            grads = torch.autograd.grad(losses, [state[k] for k in leaves], self.ones[key])
        return {k: g if g.shape == params[k].shape else g.view(params[k].shape) for k, g in zip(leaves, grads)}, \
            losses.detach()
