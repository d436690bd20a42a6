"""CPU stand-ins for what a CUDA device is strict about (used by ``test_gpu_strictness.py``).

* ``HostSyncCounter`` counts the calls that force a host synchronisation on a GPU: a tensor's value
  read by Python (``item``, ``tolist``, ``bool``/``int``/``float``/``index`` of a tensor, ``equal``,
  ``allclose``), data-dependent output shapes (``nonzero``, ``masked_select``, ``unique``), copies to
  the host (``cpu``, ``numpy``), and every ``Tensor.to`` that names a device or another tensor (on a
  GPU a host tensor moved there per step is a synchronous copy; on the CPU it is a no-op, so it is
  counted wherever it is written). ``torch.cuda.set_sync_debug_mode`` catches the first two kinds
  on a GPU (``tests/test_cuda.py``); this counts them on any machine.
* ``HostTensorCounter`` counts, below autograd, the operations that bring host data onto the device:
  a tensor made from Python values (``torch.tensor``, ``torch.as_tensor`` of a number: ``lift_fresh``),
  and every copy between devices or ``_to_copy`` naming a device. Inside a captured CUDA graph each of
  them is illegal (a host-to-device copy) or frozen, and outside one it costs a synchronous transfer.
* ``CudaShapeRules`` checks the arguments of the normalization and convolution functions as CUDA's
  kernels require them (the CPU kernels accept some of these, or fail far from the cause) and
  raises ``AssertionError`` naming the rule and the call site.
"""
from __future__ import annotations

import collections
import traceback
from typing import Any, Callable, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNCING = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "is_nonzero", "equal", "allclose",
           "nonzero", "masked_select", "unique", "unique_consecutive", "cpu", "numpy"}


def call_site(package: str = "fedbn_bench") -> str:
    """The innermost frames of ``package`` on the current stack, innermost first."""
    frames = [f for f in traceback.extract_stack()[:-2] if f"/{package}/" in f.filename]
    return " <- ".join(f"{f.filename.split(f'/{package}/')[-1]}:{f.lineno}" for f in frames[-3:][::-1]) or "?"


def _names_a_device(args: tuple, kwargs: dict) -> bool:
    return "device" in kwargs or any(isinstance(a, (torch.Tensor, torch.device, str)) for a in args[1:])


class HostSyncCounter(TorchFunctionMode):
    """Counts host-synchronising calls by (name, call site) while active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter = collections.Counter()

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Optional[dict] = None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in SYNCING or (name == "to" and _names_a_device(args, kwargs)):
            self.calls[(name, call_site())] += 1
        return func(*args, **kwargs)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


HOST_DATA = {"lift_fresh", "lift_fresh_copy"}


def _moves_between_devices(name: str, args: tuple, kwargs: dict) -> bool:
    if name == "_to_copy":
        return "device" in kwargs
    if name == "copy_":
        return args[0].device != args[1].device
    return False


class HostTensorCounter(TorchDispatchMode):
    """Counts, by (operation, call site), the ATen calls that carry host data onto a device (see the
    module docstring): on the CPU they run, on a GPU each is a host-to-device copy."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in HOST_DATA or _moves_between_devices(name, args, kwargs):
            self.calls[(name, call_site())] += 1
        return func(*args, **kwargs)


def _check_batch_norm(args: tuple, kwargs: dict) -> Optional[str]:
    names = ("input", "running_mean", "running_var", "weight", "bias")
    given = {**dict(zip(names, args)), **{k: v for k, v in kwargs.items() if k in names}}
    channels = given["input"].shape[1]
    for key in names[1:]:
        t = given.get(key)
        if t is not None and (t.dim() != 1 or t.numel() != channels):
            return f"batch_norm's {key} must be 1-D with {channels} entries (the input's channels), got {tuple(t.shape)}"
        if t is not None and not t.is_contiguous():
            return f"batch_norm's {key} must be contiguous"
    return None


def _check_conv2d(args: tuple, kwargs: dict) -> Optional[str]:
    x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
    if x.dim() != 4 or weight.dim() != 4:
        return f"conv2d wants a 4-D input and weight, got {x.dim()}-D and {weight.dim()}-D"
    if x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        return (f"conv2d's channels do not match: input {x.shape[1]}, weight {tuple(weight.shape)}, "
                f"groups {groups}")
    if bias is not None and (bias.dim() != 1 or bias.numel() != weight.shape[0]):
        return f"conv2d's bias must be 1-D with {weight.shape[0]} entries, got {tuple(bias.shape)}"
    return None


def _check_group_norm(args: tuple, kwargs: dict) -> Optional[str]:
    x, groups = args[0], args[1] if len(args) > 1 else kwargs["num_groups"]
    if x.shape[1] % groups:
        return f"group_norm's {x.shape[1]} channels are not divisible into {groups} groups"
    for i, key in ((2, "weight"), (3, "bias")):
        t = args[i] if len(args) > i else kwargs.get(key)
        if t is not None and (t.dim() != 1 or t.numel() != x.shape[1]):
            return f"group_norm's {key} must be 1-D with {x.shape[1]} entries, got {tuple(t.shape)}"
    return None


RULES = {"batch_norm": _check_batch_norm, "conv2d": _check_conv2d, "group_norm": _check_group_norm}


class CudaShapeRules(TorchFunctionMode):
    """Raises ``AssertionError`` (rule and call site) when a checked function gets arguments a
    CUDA kernel refuses; ``checked`` counts the calls seen per function."""

    def __init__(self) -> None:
        super().__init__()
        self.checked: collections.Counter = collections.Counter()

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Optional[dict] = None):
        kwargs = kwargs or {}
        rule = RULES.get(getattr(func, "__name__", ""))
        if rule is not None:
            self.checked[func.__name__] += 1
            problem = rule(args, kwargs)
            if problem:
                raise AssertionError(f"{problem} (at {call_site()})")
        return func(*args, **kwargs)
