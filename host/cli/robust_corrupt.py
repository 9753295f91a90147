"""``aiot robust corrupt``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``corrupt`` command to the ``aiot robust`` group."""
