"""Where a result came from: host, aiot version, git commit, time."""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
from pathlib import Path

import aiot
from aiot.host.store.identity import this_host
from aiot.host.store.store import utc_now


@functools.cache
def git_commit() -> dict | None:
    """Commit id and dirty flag of the aiot source checkout, or None when installed from a wheel."""
    root = Path(aiot.__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return {"id": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


@functools.cache
def _host_facts() -> dict:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def host_info() -> dict:
    """The workstation that drove the run: its host id (:func:`aiot.host.store.identity.this_host`,
    part of every run's identity), name, platform and Python."""
    return {"id": this_host(), **_host_facts()}


def base_provenance() -> dict:
    """Provenance fields shared by every record; callers add device, artifact and runtime."""
    return {
        "aiot_version": aiot.__version__,
        "git": git_commit(),
        "host": host_info(),
        "recorded_at": utc_now(),
    }
