"""How the device agent is started on an Android device: ``--via shell`` or ``--via app``."""

from __future__ import annotations

from aiot.core.errors import UsageError

#: ``shell``: from ``adb shell`` (the default, every device); ``app``: through the aiot app.
VIAS = ("shell", "app")


def check_via(via: str) -> str:
    """``via`` canonicalised.

    Raises:
        UsageError: not one of :data:`VIAS`.
    """
    value = via.strip().lower()
    if value not in VIAS:
        raise UsageError(f"unknown --via '{via}'", f"use one of {', '.join(VIAS)} (comma-separated)")
    return value
