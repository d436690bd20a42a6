"""The one name -> object registry behind every pluggable part: norms, algorithms, models,
datasets and partitions.

A new method is one module that decorates its class or function with ``@REGISTRY.register("name")``;
the package ``__init__`` imports every module of its folder, so nothing else needs editing.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Generic, Iterator, TypeVar

from fedbn_bench.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects of one ``kind`` (``"norm"``, ``"partition"``, ...).

    ``error`` is the exception type that ``get`` raises for an unknown name (a one-line message
    listing the allowed names). ``check(name, obj)``, if given, runs when ``obj`` is registered:
    it raises for a malformed object and returns what is stored (``obj`` itself or a wrapper).
    """

    def __init__(
        self,
        kind: str,
        *,
        error: type[Exception] = ConfigError,
        check: Callable[[str, T], T] | None = None,
    ) -> None:
        self.kind = kind
        self.error = error
        self._check = check
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator storing its argument under ``name``; returns what was stored.

        A name can be taken once; registering the same definition again (same module and
        qualified name, e.g. after ``importlib.reload``) replaces it.
        """

        def decorate(obj: T) -> T:
            existing = self._items.get(name)
            if existing is not None and _definition(existing) != _definition(obj):
                raise ValueError(f"{self.kind} '{name}' is already registered by {_definition(existing)[0]}")
            stored = obj if self._check is None else self._check(name, obj)
            self._items[name] = stored
            return stored

        return decorate

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a no-op when absent), e.g. a temporary entry registered by a test."""
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        """The object registered as ``name``; raises ``self.error`` listing the allowed names."""
        if name not in self._items:
            raise self.error(f"unknown {self.kind} '{name}'; allowed: {', '.join(self.names())}")
        return self._items[name]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """``(name, object)`` pairs, sorted by name."""
        return [(name, self._items[name]) for name in self.names()]

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


def _definition(obj: Any) -> tuple[str, str]:
    """Where ``obj`` is defined: (module, qualified name)."""
    return getattr(obj, "__module__", ""), getattr(obj, "__qualname__", repr(obj))


def import_submodules(package_name: str, package_path: Any) -> None:
    """Import every module of a package so that their ``register`` decorators run."""
    for module in pkgutil.iter_modules(package_path):
        importlib.import_module(f"{package_name}.{module.name}")
