"""Small helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import os
import time


def process_gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` left this machine's process table within ``within`` seconds (a zombie
    counts as present)."""
    deadline = time.monotonic() + within
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
