"""The doctor's verdict (:class:`Check`) and the checks of a device's work dir: can aiot write
there, how much room is free. A failed push asks them what went wrong
(:func:`explain_push_failure`), so they sit below both :mod:`aiot.host.devices.deploy` and
:mod:`aiot.host.devices.doctor`.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass

from aiot.core.errors import DeviceStorageError, TransportError
from aiot.core.units import MIB, size_text
from aiot.host.devices.entry import inventory_path
from aiot.host.transports.base import ShellResult, Transport

LOW_SPACE_MB = 200


@dataclass(frozen=True)
class Check:
    """One verdict of the doctor.

    Args:
        name: what was checked ("reachable", "workdir", "python", "numpy", ...).
        ok: False when something must be fixed before benchmarks can run.
        detail: what was found, in one line.
        fix: what the user should do, in one line (None when there is nothing to do).
        warn: passed, but worth a look (little free space, a phone without Python).
    """

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    warn: bool = False

    @property
    def status(self) -> str:
        """``ok``, ``warn`` or ``fail``."""
        return "fail" if not self.ok else "warn" if self.warn else "ok"


def explain_push_failure(transport: Transport, exc: TransportError) -> TransportError:
    """The error to report for a failed push: the workdir's problem (unwritable, full) if it has one.

    A push fails with the transport's words ("Failure", "[Errno 30] ..."); the workdir and
    free-space checks say what is wrong and what to do. When they find nothing, or the device
    is gone, the original error stands.
    """
    try:
        verdict = check_workdir(transport)
        if verdict.ok:
            verdict = check_space(transport)
    except TransportError:
        return exc
    if verdict.ok and not verdict.warn:
        return exc
    full = " (ENOSPC)" if verdict.name == "free space" else ""
    return DeviceStorageError(f"push to '{transport.name}' failed{full}: {verdict.detail}",
                              verdict.fix)


def check_workdir(transport: Transport) -> Check:
    """The workdir exists or can be created, and a file can be written and removed in it."""
    workdir = transport.workdir()
    found = transport.stat(workdir)
    if found is not None and not found.is_dir:
        return Check("workdir", False, f"{workdir} is a file, not a folder", _workdir_fix(transport))
    made = transport.shell(["mkdir", "-p", workdir], timeout=30)
    if not made.ok:
        return Check("workdir", False, f"cannot create {workdir}: {last_line(made)}",
                     _workdir_fix(transport))
    probe = posixpath.join(workdir, f".aiot-doctor-{uuid.uuid4().hex[:8]}")
    wrote = transport.shell(["touch", probe], timeout=30)
    transport.shell(["rm", "-f", probe], timeout=30)
    if not wrote.ok:
        return Check("workdir", False, f"{workdir} is not writable: {last_line(wrote)}",
                     _workdir_fix(transport))
    return Check("workdir", True, f"{workdir} is writable" + ("" if found else " (created)"))


def check_space(transport: Transport) -> Check:
    """Free space in the workdir; a warning below :data:`LOW_SPACE_MB`."""
    workdir = transport.workdir()
    df = transport.shell(["df", "-Pk", workdir], timeout=30)
    free_kib = parse_df(df.stdout) if df.ok else None
    if free_kib is None:
        return Check("free space", True, f"df could not tell: {last_line(df)}", warn=True)
    free = free_kib * 1024
    if free < LOW_SPACE_MB * MIB:
        return Check("free space", True, f"only {size_text(free)} free in {workdir}",
                     f"free some space on the device (models and data need {LOW_SPACE_MB} MiB or more)",
                     warn=True)
    return Check("free space", True, f"{size_text(free)} free in {workdir}")


def parse_df(text: str) -> int | None:
    """Available KiB from ``df -Pk`` output (names and mount points may hold spaces)."""
    for line in text.splitlines()[1:]:
        m = re.search(r"\s(\d+)\s+(\d+)\s+(\d+)\s+\d+%\s", line + " ")
        if m:
            return int(m.group(3))
    return None


def last_line(result: ShellResult) -> str:
    """The last line a failed command printed (stderr first), or its exit code."""
    lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return lines[-1] if lines else f"exit code {result.exit_code}"


def inventory_setting(transport: Transport, key: str) -> str:
    """How to change ``key`` of ``transport``'s device in the inventory, for a fix line."""
    return f'set {key} = "PATH" under [devices.{transport.name}] in {inventory_path()}'


def _workdir_fix(transport: Transport) -> str:
    if transport.kind == "local":
        return "point AIOT_LOCAL_WORKDIR at a writable folder"
    return f"make {transport.workdir()} writable, or {inventory_setting(transport, 'workdir')}"
