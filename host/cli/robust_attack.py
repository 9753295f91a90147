"""``aiot robust attack``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``attack`` command to the ``aiot robust`` group."""
