"""``aiot robust sysnoise``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``sysnoise`` command to the ``aiot robust`` group."""
