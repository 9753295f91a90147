"""Bring files a device produced back into the results folder, safely.

Files that runs leave on a device (profiles and logs of native benchmark binaries, outputs a
user put there) live in ``<workdir>/outputs/``. ``aiot pull DEVICE`` copies them into
``<results>/pulled/<device>/``. File names come from the device, so a compromised or buggy
device could name a file ``../../.bashrc``: every name is checked and every destination is
resolved and confirmed to lie inside the destination folder before anything is written.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import AiotError, DeviceCommandError
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)

OUTPUTS = "outputs"


class UnsafeName(AiotError):
    """A device-provided file name that could write outside its destination folder."""


@dataclass(frozen=True)
class Pulled:
    """One file copied from the device (or refused, with the reason)."""

    name: str
    local: Path | None
    size: int
    refused: str | None = None


def outputs_dir(transport: Transport) -> str:
    """The device folder whose files ``aiot pull`` brings back."""
    return posixpath.join(transport.workdir(), OUTPUTS)


def safe_destination(folder: Path, name: str) -> Path:
    """``folder / name`` if ``name`` is a plain file name that stays inside ``folder``.

    Raises:
        UnsafeName: empty, ``.``/``..``, a path separator, a NUL or control character, or a
            destination that resolves (through symlinks) outside ``folder``.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise UnsafeName(f"refused device file name {name!r}: not a plain file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UnsafeName(f"refused device file name {name!r}: control characters")
    root = folder.resolve()
    target = (root / name).resolve()
    if target.parent != root:
        raise UnsafeName(f"refused device file name {name!r}: it resolves outside {root}")
    return target


def list_outputs(transport: Transport) -> list[str]:
    """Names of the regular files in the device's outputs folder (NUL-separated, so any name survives)."""
    folder = outputs_dir(transport)
    if not transport.exists(folder):
        return []
    res = transport.shell(["find", folder, "-mindepth", "1", "-maxdepth", "1", "-type", "f", "-print0"],
                          timeout=60)
    if not res.ok:
        raise DeviceCommandError(transport.name, res)
    return sorted(posixpath.basename(p) for p in res.stdout.split("\0") if p)


def pull_outputs(transport: Transport, dest: Path) -> list[Pulled]:
    """Copy every file of the device's outputs folder into ``dest``; unsafe names are refused, not pulled."""
    dest.mkdir(parents=True, exist_ok=True)
    pulled = []
    for name in list_outputs(transport):
        try:
            local = safe_destination(dest, name)
        except UnsafeName as exc:
            log.warning("%s", exc.message)
            pulled.append(Pulled(name, None, 0, refused=exc.message))
            continue
        transport.pull(posixpath.join(outputs_dir(transport), name), local)
        pulled.append(Pulled(name, local, local.stat().st_size))
    return pulled


__all__ = ["OUTPUTS", "Pulled", "UnsafeName", "list_outputs", "outputs_dir", "pull_outputs", "safe_destination"]
