"""Registry, error type, schema and shared helpers for client partitions.

A partition is a pure function

    fn(labels, num_clients, generator, *, domains=None, **params) -> list[Tensor]

registered under a name, together with its config schema, by
``@register_partition(name, Schema)``.  The schema is a dataclass with a ``name`` field and one
field per keyword parameter of ``fn`` (Hydra stores it as ``schema/partition/<name>``, so a
misspelt key fails at composition).  Registration checks that the two agree and wraps ``fn`` so
that every entry of :data:`PARTITIONS` (and the module-level name) validates its inputs the same
way, rejects unknown parameters, and checks that its output really is a partition of
``range(len(labels))``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
from typing import Callable

import torch

from fedbn_bench.errors import UserError
from fedbn_bench.registry import Registry

__all__ = [
    "PARTITIONS",
    "PartitionError",
    "register_partition",
    "parts_from_owner",
    "grouped_order",
    "near_equal_sizes",
    "check_int",
    "check_float",
]

PartitionFn = Callable[..., list[torch.Tensor]]


class PartitionError(UserError):
    """Invalid partition configuration (one-line message naming the config key)."""


# ----------------------------------------------------------------------------
# parameter checks
# ----------------------------------------------------------------------------


def check_int(key: str, value, *, minimum: int | None = None, partition: str = "") -> int:
    """Return ``value`` as an int, or raise PartitionError naming ``key``."""
    where = f" for partition '{partition}'" if partition else ""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and isinstance(value, float) and value.is_integer():
        ok = True
    if not ok and isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        ok = True
    if not ok:
        raise PartitionError(f"{key} must be an integer{where} (got {value!r})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise PartitionError(f"{key} must be >= {minimum}{where} (got {value})")
    return value


def check_float(key: str, value, *, partition: str = "") -> float:
    """Return ``value`` as a finite float, or raise PartitionError naming ``key``."""
    where = f" for partition '{partition}'" if partition else ""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PartitionError(f"{key} must be a number{where} (got {value!r})")
    value = float(value)
    if not math.isfinite(value):
        raise PartitionError(f"{key} must be a finite number{where} (got {value})")
    return value


def _check_labels(labels) -> torch.Tensor:
    labels = torch.as_tensor(labels)
    if labels.dim() != 1:
        raise PartitionError(f"labels must be a 1-D tensor of class ids (got shape {tuple(labels.shape)})")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise PartitionError(f"labels must have an integer dtype (got {labels.dtype})")
    labels = labels.detach().to("cpu", torch.int64)
    if labels.numel() == 0:
        raise PartitionError("labels is empty: the dataset has no samples to partition")
    if int(labels.min()) < 0:
        raise PartitionError("labels must be non-negative class ids")
    return labels


def _check_domains(domains, n: int) -> torch.Tensor:
    domains = torch.as_tensor(domains)
    if domains.dim() != 1 or domains.numel() != n:
        raise PartitionError(
            f"domains must be a 1-D tensor with one domain id per sample "
            f"(got shape {tuple(domains.shape)} for {n} samples)"
        )
    if domains.is_floating_point() or domains.is_complex() or domains.dtype == torch.bool:
        raise PartitionError(f"domains must have an integer dtype (got {domains.dtype})")
    domains = domains.detach().to("cpu", torch.int64)
    if int(domains.min()) < 0:
        raise PartitionError("domains must be non-negative domain ids")
    return domains


def check_num_clients(num_clients, num_samples: int) -> int:
    n = check_int("num_clients", num_clients)
    if n < 1 or n > num_samples:
        raise PartitionError(
            f"num_clients must be between 1 and the number of samples ({num_samples}) (got {n})"
        )
    return n


def _check_output(name: str, parts, n_clients: int, n_samples: int, complete: bool = True) -> list[torch.Tensor]:
    """The parts as int64 index tensors; they must be disjoint and, if ``complete``, cover every sample."""
    if not isinstance(parts, (list, tuple)) or len(parts) != n_clients:
        raise RuntimeError(f"partition '{name}' returned {type(parts).__name__} instead of {n_clients} index tensors")
    out = [torch.as_tensor(p).to(torch.int64).reshape(-1).contiguous() for p in parts]
    flat = torch.cat(out) if out else torch.empty(0, dtype=torch.int64)
    if (complete and flat.numel() != n_samples) or (
        flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= n_samples
                          or int(torch.bincount(flat, minlength=n_samples).max()) != 1)
    ):
        raise RuntimeError(
            f"partition '{name}' did not return a disjoint{', complete' if complete else ''} split of {n_samples} samples"
        )
    return out


# ----------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------


def _keyword_params(fn: PartitionFn) -> dict[str, inspect.Parameter]:
    """The partition's own parameters: keyword-only, other than ``domains``."""
    return {
        p.name: p for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "domains"
    }


def _check_schema(name: str, fn: PartitionFn, schema: type) -> None:
    """``schema`` must be a dataclass named ``name`` whose other fields are ``fn``'s parameters,
    with the same defaults where ``fn`` has one."""
    params = _keyword_params(fn)
    defaults = schema()
    fields = {f.name for f in dataclasses.fields(schema)} - {"name"}
    if fields != set(params) or defaults.name != name:
        raise TypeError(
            f"schema {schema.__name__} of partition '{name}' must have the fields name='{name}', "
            f"{', '.join(sorted(params)) or '(no others)'}; got name={defaults.name!r}, {', '.join(sorted(fields))}"
        )
    for key, p in params.items():
        if p.default is not p.empty and getattr(defaults, key) != p.default:
            raise TypeError(f"schema {schema.__name__} of partition '{name}': {key} defaults to "
                            f"{getattr(defaults, key)!r}, the function to {p.default!r}")


def _checked(name: str, fn: PartitionFn) -> PartitionFn:
    """Registry check: validate ``fn``'s schema and wrap ``fn`` with the shared input/output checks."""
    schema = fn.schema  # type: ignore[attr-defined]
    _check_schema(name, fn, schema)
    params = _keyword_params(fn)
    allowed = sorted(params)
    required = [key for key, p in params.items() if p.default is p.empty]

    @functools.wraps(fn)
    def wrapper(labels, num_clients, generator, *, domains=None, **kwargs):
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            allowed_txt = ", ".join(allowed) if allowed else "none"
            raise PartitionError(
                f"unknown parameter(s) {', '.join(unknown)} for partition '{name}'; allowed: {allowed_txt}"
            )
        missing = [key for key in required if key not in kwargs]
        if missing:
            raise PartitionError(f"{', '.join(missing)} must be set for partition '{name}'")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator (got {type(generator).__name__})")
        labels = _check_labels(labels)
        n = check_num_clients(num_clients, labels.numel())
        if domains is not None:
            domains = _check_domains(domains, labels.numel())
        parts = fn(labels, n, generator, domains=domains, **kwargs)
        subsampled = kwargs.get("samples_per_client") is not None  # leaves samples out on purpose
        return _check_output(name, parts, n, labels.numel(), complete=not subsampled)

    wrapper.allowed_params = tuple(allowed)  # type: ignore[attr-defined]
    return wrapper


PARTITIONS: Registry[PartitionFn] = Registry("partition", error=PartitionError, check=_checked)
"""name -> partition function (wrapped); ``PARTITIONS.get(name).schema`` is its config dataclass."""


def register_partition(name: str, schema: type) -> Callable[[PartitionFn], PartitionFn]:
    """Register a partition function and its config schema: ``@register_partition("dirichlet", DirichletConfig)``.

    The decorated function receives already-validated ``labels`` (CPU int64),
    ``num_clients`` (int in [1, N]), the caller's ``torch.Generator``, optional
    validated ``domains`` and its own keyword parameters.  Its keyword-only
    parameters (other than ``domains``) define the allowed config keys and must
    be the fields of ``schema`` besides ``name``.
    """

    def decorate(fn: PartitionFn) -> PartitionFn:
        fn.schema = schema  # type: ignore[attr-defined]
        return PARTITIONS.register(name)(fn)

    return decorate


# ----------------------------------------------------------------------------
# vectorized building blocks
# ----------------------------------------------------------------------------


def parts_from_owner(owner: torch.Tensor, num_clients: int) -> list[torch.Tensor]:
    """Turn a per-sample client id tensor into per-client index tensors.

    ``owner[i]`` is the client of sample ``i`` (-1: no client).  Each returned tensor is sorted
    ascending (stable argsort of the owner ids keeps the original index order).
    """
    owner = owner.to(torch.int64)
    kept = torch.nonzero(owner >= 0).flatten()
    order = kept[torch.argsort(owner[kept], stable=True)]
    sizes = torch.bincount(owner[kept], minlength=num_clients)
    return list(torch.split(order, sizes.tolist()))


def grouped_order(key: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Sample indices sorted by ``key`` with a random order inside each key group."""
    perm = torch.randperm(key.numel(), generator=generator)
    return perm[torch.argsort(key[perm], stable=True)]


def near_equal_sizes(total: int, parts: int, *, extra_first: bool = True) -> torch.Tensor:
    """Sizes of ``parts`` near-equal chunks of ``total`` (differ by at most 1).

    The ``total % parts`` larger chunks are the first ones, or the last ones
    when ``extra_first`` is False.
    """
    base, rem = divmod(total, parts)
    sizes = torch.full((parts,), base, dtype=torch.int64)
    if rem:
        if extra_first:
            sizes[:rem] += 1
        else:
            sizes[parts - rem:] += 1
    return sizes
