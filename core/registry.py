"""A small named registry used for converters, models, datasets and devices."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from aiot.core.errors import UnknownName

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names (and aliases) to entries; unknown names fail with suggestions.

    Args:
        kind: what the entries are, used in error messages ("model", "format").
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def add(self, name: str, entry: T, aliases: tuple[str, ...] = ()) -> T:
        """Register ``entry`` under ``name``; a duplicate name is a programming error."""
        if name in self._entries or name in self._aliases:
            raise ValueError(f"{self.kind} '{name}' registered twice")
        self._entries[name] = entry
        for alias in aliases:
            self._aliases[alias] = name
        return entry

    def register(self, name: str, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        """Decorator form of :meth:`add`; returns the decorated object unchanged."""

        def decorate(entry: T) -> T:
            return self.add(name, entry, aliases)

        return decorate

    def canonical(self, name: str) -> str:
        """The registered name for ``name`` or one of its aliases (case-insensitive)."""
        key = name.strip().lower()
        if key in self._entries:
            return key
        if key in self._aliases:
            return self._aliases[key]
        raise UnknownName(self.kind, name, self.names(listed=True))

    def get(self, name: str) -> T:
        """The entry for ``name``; raises :class:`UnknownName` with close matches."""
        return self._entries[self.canonical(name)]

    def names(self, listed: bool = False) -> list[str]:
        """Registered names in registration order; ``listed``: without the entries marked
        ``internal`` (aiot's own test entries, usable by name but shown to no user)."""
        return [n for n, e in self._entries.items()
                if not (listed and getattr(e, "internal", False))]

    def __contains__(self, name: str) -> bool:
        key = name.strip().lower()
        return key in self._entries or key in self._aliases

    def __iter__(self) -> Iterator[T]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)
