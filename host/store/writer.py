"""Who wrote a record: enough to tell, later, whether that process is gone.

A ``pending`` record whose process was killed (SIGKILL, a crash, a reboot) stays pending
forever unless someone closes it. A campaign closes such records when it starts, but only
when it can be sure their writer is gone: same host, same PID namespace, and either another
boot or no process with that pid and start time. Records of live processes, of other hosts
(a results folder on a network share) or of other containers are never touched.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

_PROC = Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _boot_id() -> str | None:
    """This boot's id (Linux): a pid from another boot is certainly gone."""
    return _read(_PROC / "sys" / "kernel" / "random" / "boot_id")


def _pid_namespace() -> str | None:
    """The PID namespace we see (Linux): pids of another namespace are not ours to judge."""
    try:
        return os.readlink(_PROC / "self" / "ns" / "pid")
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time in clock ticks since boot)`` of ``pid`` from /proc, or None."""
    text = _read(_PROC / str(pid) / "stat")
    if not text:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text.rpartition(")")[2].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


@functools.cache
def _writer_of(pid: int) -> dict:
    stat = _stat(pid)
    return {"pid": pid, "host": socket.gethostname(), "boot": _boot_id(),
            "pidns": _pid_namespace(), "start": stat[1] if stat else None}


def this_writer() -> dict:
    """This process as a record's writer (cached per pid: a forked child is another writer)."""
    return _writer_of(os.getpid())


def is_gone(writer: dict | None) -> bool:
    """Whether the process ``writer`` describes has certainly ended (False when unsure)."""
    if not writer or writer.get("host") != socket.gethostname():
        return False
    if writer.get("pidns") != _pid_namespace():
        return False
    boot = _boot_id()
    if boot and writer.get("boot") and writer["boot"] != boot:
        return True  # rebooted since: no process of that boot is left
    pid = writer.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if (_PROC / "self" / "stat").exists():
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):  # no such process, or only its corpse
            return True
        return writer.get("start") is not None and stat[1] != writer["start"]  # pid reused
    try:  # no /proc (macOS): a live pid may be reused, so only "no such process" counts
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
