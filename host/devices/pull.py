"""Bring files a device produced back into the results folder, safely.

Files that runs leave on a device (profiles and logs of native benchmark binaries, outputs a
user put there) live in ``<workdir>/outputs/``. ``aiot pull DEVICE`` copies them into
``<results>/pulled/<device>/``. File names come from the device, so a compromised or buggy
device could name a file ``../../.bashrc``: every name is checked and every destination is
resolved and confirmed to lie inside the destination folder before anything is written.

A file that cannot be kept is refused alone, with its reason, and the others are pulled: a
name that is not a plain file name, one longer than :data:`NAME_MAX_BYTES`, a file over what
is left of the pull's size limit (:data:`DEFAULT_MAX_BYTES`, ``--max-bytes``,
``$AIOT_PULL_MAX_BYTES``; a file that grows past it while it comes is stopped there). Each file
comes to a short temp name in the destination folder and is renamed into place whole, so a
stopped or refused pull leaves no part of a file; what was pulled before stays.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import AiotError, DeviceCommandError, FileTooLarge, UsageError
from aiot.core.units import size_text
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)

OUTPUTS = "outputs"
#: The most one pull brings back, all its files together, unless ``--max-bytes`` or
#: ``$AIOT_PULL_MAX_BYTES`` says otherwise (a device cannot fill the host's disk).
DEFAULT_MAX_BYTES = 1 << 30
MAX_BYTES_ENV = "AIOT_PULL_MAX_BYTES"
#: The longest device file name kept, in bytes (UTF-8): file systems take 255 at most (some,
#: as eCryptfs, 143), and the results folder is copied, archived and synced elsewhere.
NAME_MAX_BYTES = 200
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class Refused(AiotError):
    """One device file that is not pulled (the others are): why, in one line."""


class UnsafeName(Refused):
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


def parse_max_bytes(text: str | None) -> int:
    """A pull's size limit from ``--max-bytes``/``$AIOT_PULL_MAX_BYTES``: bytes, or with a
    binary unit (``500M``, ``2G``, ``2GiB``); :data:`DEFAULT_MAX_BYTES` when not given.

    Raises:
        UsageError: not a size, or zero.
    """
    if text is None or not str(text).strip():
        return DEFAULT_MAX_BYTES
    found = _SIZE.match(str(text))
    size = int(found[1]) * _UNITS[found[2].lower()] if found else 0
    if size <= 0:
        raise UsageError(f"--max-bytes ({MAX_BYTES_ENV}) '{text}' is not a size above 0",
                         "give bytes or a size such as 500M or 2G")
    return size


def pull_outputs(transport: Transport, dest: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Pulled]:
    """Copy every file of the device's outputs folder into ``dest``, ``max_bytes`` at most in
    all; a file that cannot be kept is refused (:class:`Refused`, its reason in ``refused``),
    not pulled, and the others are."""
    dest.mkdir(parents=True, exist_ok=True)
    pulled, left = [], max_bytes
    folder = outputs_dir(transport)
    for name in list_outputs(transport):
        try:
            got = _pull_one(transport, posixpath.join(folder, name), name, dest, left, max_bytes)
        except Refused as exc:
            log.info("%s", exc.message)
            pulled.append(Pulled(name, None, 0, refused=exc.message))
            continue
        left -= got.size
        pulled.append(got)
    return pulled


def _pull_one(transport: Transport, remote: str, name: str, dest: Path, left: int, limit: int) -> Pulled:
    """``remote`` into ``dest/name`` through a short temp name, ``left`` bytes at most.

    Raises:
        Refused: the name or the size cannot be kept (nothing is written then).
    """
    try:
        length = len(os.fsencode(name))
    except UnicodeError:
        length = len(name.encode("utf-8", "replace"))
    if length > NAME_MAX_BYTES:
        raise Refused(f"refused device file name {name!r}: {length} bytes long, over the "
                      f"{NAME_MAX_BYTES} a pulled file's name may have (rename it on the device)")
    local = safe_destination(dest, name)
    found = transport.stat(remote)
    if found is None or found.is_dir:
        raise Refused(f"refused device file {name!r}: the device has no such file now (it went, "
                      "or its name is not UTF-8)")
    if found.size > left:
        raise Refused(_too_large(name, f"{size_text(found.size)} ({found.size:,} bytes)", left, limit))
    tmp = dest / f".aiot-pull-{secrets.token_hex(6)}.part"
    try:
        try:
            transport.pull(remote, tmp, max_bytes=left)
        except FileTooLarge:
            raise Refused(_too_large(name, "it grew while it came", left, limit, kept=False)) from None
        size = tmp.stat().st_size
        if size > left:
            raise Refused(_too_large(name, f"{size:,} bytes came", left, limit, kept=False))
        try:
            os.replace(tmp, local)
        except OSError as exc:
            if exc.errno not in (errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL):
                raise
            raise Refused(f"refused device file name {name!r}: this folder's file system takes "
                          f"no such name ({exc.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return Pulled(name, local, size)


def _too_large(name: str, size: str, left: int, limit: int, kept: bool = True) -> str:
    """A size refusal in one line: which file, how large, which limit and what was left of it."""
    what = (f"this pull's limit of {size_text(limit)} ({limit:,} bytes)" if left == limit else
            f"the {size_text(left)} ({left:,} bytes) left of this pull's limit of {size_text(limit)} "
            f"({limit:,} bytes)")
    return (f"refused device file {name!r}: {size}, over {what}{'' if kept else '; nothing of it kept'} "
            f"(--max-bytes or {MAX_BYTES_ENV} raises the limit)")


__all__ = ["DEFAULT_MAX_BYTES", "MAX_BYTES_ENV", "NAME_MAX_BYTES", "OUTPUTS", "Pulled", "Refused", "UnsafeName",
           "list_outputs", "outputs_dir", "parse_max_bytes", "pull_outputs", "safe_destination"]
