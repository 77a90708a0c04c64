"""A registry keyed by the YAML ``type`` string (planners, controllers, targets, end effectors).

Adding a new kind = one module + one ``@REGISTRY.register("name")`` + tests + a docs row. An unknown
type raises :class:`~sim.errors.ScenarioError` listing the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from sim.errors import ScenarioError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a YAML ``type`` string to a class. ``kind`` names the concept in messages."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@PLANNERS.register("quintic")``."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._entries and self._entries[name] is not cls:
                raise ValueError(f"{self.kind} type {name!r} registered twice")
            self._entries[name] = cls
            cls.type_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def get(self, name: str, *, file: str | None = None, key: str | None = None) -> type[T]:
        """The class registered as ``name``; a ScenarioError listing the known types otherwise."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            from sim.config import short_repr

            raise ScenarioError(
                f"unknown {self.kind} type {short_repr(name)}; known: {', '.join(sorted(self._entries))}",
                file=file,
                key=key,
            ) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries
