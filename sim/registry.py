"""A registry keyed by the YAML ``type`` string (planners, controllers, targets, end effectors).

Adding a new kind = one module + one ``@REGISTRY.register("name")`` + tests + a docs row. An unknown
type raises :class:`~sim.errors.ScenarioError` listing the known ones.

A type whose module is heavy to import (the HQP pulls in qpsolvers and scipy, the G20 hand its bridge)
is announced with :meth:`Registry.register_lazy` (name → module) and imported the first time a scenario
names it, so a run imports only what its scenario uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from dockbench.sim.errors import ScenarioError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a YAML ``type`` string to a class. ``kind`` names the concept in messages."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, type[T]] = {}
        self._lazy: dict[str, str] = {}  # name → module that registers it on import

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@PLANNERS.register("quintic")``."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._entries and self._entries[name] is not cls:
                raise ValueError(f"{self.kind} type {name!r} registered twice")
            self._entries[name] = cls
            cls.type_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def register_lazy(self, name: str, module: str) -> None:
        """Announce type ``name``, registered by importing ``module`` (imported on the first :meth:`get`)."""
        if name not in self._entries:
            self._lazy[name] = module

    def get(self, name: str, *, file: str | None = None, key: str | None = None) -> type[T]:
        """The class registered as ``name``; a ScenarioError listing the known types otherwise."""
        if name not in self._entries and name in self._lazy:
            importlib.import_module(self._lazy[name])  # its @register fills the entry
            if name not in self._entries:
                raise ImportError(f"{self._lazy[name]} did not register the {self.kind} type {name!r}")
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            from dockbench.sim.config import short_repr

            raise ScenarioError(
                f"unknown {self.kind} type {short_repr(name)}; known: {', '.join(self.names())}",
                file=file,
                key=key,
            ) from None

    def names(self) -> list[str]:
        return sorted(set(self._entries) | set(self._lazy))

    def __contains__(self, name: str) -> bool:
        return name in self._entries or name in self._lazy
