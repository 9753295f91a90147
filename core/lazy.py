"""Lazy public names for a package (PEP 562): a light package that names what its heavy
modules define (torch, NumPy) and imports a module only when one of its names is used."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_attributes(package: str, table: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``table`` maps each public name to the
    submodule defining it; the first use imports that submodule and keeps the value in the
    package, so later uses are plain attribute reads."""

    def __getattr__(name: str) -> object:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
