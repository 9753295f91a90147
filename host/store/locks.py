"""Cross-process locks on what a campaign measures: each device, and the sweep id.

Two campaigns on one device would time each other's runs, and the same sweep started twice
would measure every run twice. A campaign holds an ``fcntl.flock`` on
``<state dir>/locks/<what>.lock`` for each device and for its sweep id while it runs; the
second process is refused at once, naming the holder. The kernel drops a flock when its
process ends, however it ends, so a killed campaign never leaves a device locked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from contextlib import ExitStack, contextmanager
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.core.paths import state_dir

try:
    import fcntl
except ImportError:  # Windows: no flock; campaigns are not guarded there
    fcntl = None

log = logging.getLogger(__name__)


class Busy(AiotError):
    """A device or sweep is being measured by another aiot process."""


def locks_dir() -> Path:
    """``<state dir>/locks`` (``$AIOT_STATE_DIR``, else ``~/.local/state/aiot``)."""
    return state_dir() / "locks"


def _lock_file(kind: str, name: str) -> Path:
    """A file name for any device or sweep name (``user@host:22``, ``emulator-5554``)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:60]
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]  # keeps a@b and a_b apart
    return locks_dir() / f"{kind}-{readable}-{digest}.lock"


def _holder(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}  # the holder has not written its name yet


def _busy(kind: str, name: str, holder: dict) -> Busy:
    pid = holder.get("pid", "?")
    sweep = holder.get("sweep")
    if kind == "sweep":
        message = f"sweep {name} is already running in pid {pid}"
    else:
        message = f"{kind} {name} is busy with " + (f"sweep {sweep} of pid {pid}" if sweep else f"pid {pid}")
    return Busy(message, f"wait for it to finish or stop it (kill {pid}), then run this again")


@contextmanager
def _hold(kind: str, name: str, sweep: str, info: dict | None = None):
    """Hold the lock on ``kind name`` (non-blocking) for the block, or raise :class:`Busy`;
    the file names the holder (pid, sweep and ``info``) for other processes."""
    path = _lock_file(kind, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise AiotError(f"cannot lock {kind} {name} ({path}): {exc.strerror or exc}",
                        "set AIOT_STATE_DIR to a writable folder") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(kind, name, _holder(fd)) from None
        # Who holds it, for the next process's message; the lock itself is the flock.
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({**(info or {}), "pid": os.getpid(), "sweep": sweep, kind: name}).encode(), 0)
        except OSError as exc:  # a full state folder: the flock holds all the same
            log.debug("cannot note the holder of %s: %s", path, exc)
        yield
    finally:
        os.close(fd)  # drops the flock


@contextmanager
def campaign_locks(sweep_id: str, devices: Iterable[str], info: dict | None = None):
    """Hold the sweep's lock and every device's for the block; :class:`Busy` (nothing held)
    when another process has one of them. ``info`` (user, host, runs in the sweep) is noted
    in each lock file for :func:`held` to show."""
    if fcntl is None:
        yield
        return
    with ExitStack() as stack:
        stack.enter_context(_hold("sweep", sweep_id, sweep_id, info))
        for device in sorted(set(devices)):
            stack.enter_context(_hold("device", device, sweep_id, info))
        yield


def held(kind: str) -> list[dict]:
    """What other processes hold now: the holder notes of every ``kind`` (``sweep`` or
    ``device``) lock whose flock is held (read from ``/proc/locks`` where there is one, else
    by the holder's pid being alive). Reads only: it never takes a lock, so it never makes a
    starting campaign meet a Busy."""
    folder = locks_dir()
    try:
        paths = sorted(folder.glob(f"{kind}-*.lock"))
    except OSError:
        return []
    locked = _flocked_inodes()
    found = []
    for path in paths:
        try:
            info = os.stat(path)
            note = json.loads(path.read_bytes()[:4096] or b"{}")
        except (OSError, ValueError):
            continue
        pid = note.get("pid")
        alive = (info.st_ino in locked) if locked is not None else (
            isinstance(pid, int) and os.path.exists(f"/proc/{pid}"))
        if alive and isinstance(note, dict):
            found.append(note)
    return found


def _flocked_inodes() -> set[int] | None:
    """Inodes with a FLOCK held, from ``/proc/locks``; None where it cannot be read."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    inodes = set()
    for line in lines:
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].count(":") == 2:
            inodes.add(int(parts[5].rsplit(":", 1)[1]))
    return inodes
