"""Full disks and read-only folders, named as such.

A write that fails for want of space (``ENOSPC``, ``EDQUOT``) or on a read-only mount
(``EROFS``) is not a bug, not a damaged file and not a lost link: retrying cannot fix it and
the user can, by freeing space or pointing aiot elsewhere. These helpers recognise such a
failure wherever it surfaces (an ``OSError``, SQLite's "database or disk is full", a
toolchain's message quoting ``[Errno 28]``) and turn it into one :class:`DiskError` line that
names the errno and the folder.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AiotError

#: The errnos a user fixes on their disk, with how aiot names them.
DISK_ERRNOS = {errno.ENOSPC: "No space left on device (ENOSPC)",
               errno.EDQUOT: "Disk quota exceeded (EDQUOT)",
               errno.EROFS: "Read-only file system (EROFS)"}

#: How those failures read in text (a toolchain's message, SQLite's error), by errno.
_WORDS = ((errno.ENOSPC, ("No space left on device", "[Errno 28]", "database or disk is full",
                          "disk is full")),
          (errno.EDQUOT, ("Disk quota exceeded", "[Errno 122]")),
          (errno.EROFS, ("Read-only file system", "[Errno 30]", "readonly database")))


class DiskError(AiotError, OSError):
    """A write failed because the disk is full or the folder is on a read-only mount.

    Not transient: a campaign records it once instead of retrying the device. Also an
    ``OSError`` (with its ``errno``), so code that handles a failed write still catches it.
    """

    transient = False

    def __init__(self, code: int, what: str, where: Path | str | None = None) -> None:
        place = f" in {where}" if where else ""
        hint = ("mount it read-write, or point aiot at a writable folder (--results-dir, "
                "AIOT_RESULTS_DIR, AIOT_CACHE_DIR, AIOT_STATE_DIR)" if code == errno.EROFS else
                "free some space there, or point aiot at another disk (--results-dir, "
                "AIOT_RESULTS_DIR, AIOT_CACHE_DIR, AIOT_STATE_DIR)")
        super().__init__(f"{what}: {DISK_ERRNOS[code]}{place}", hint)
        self.errno = code
        self.what, self.where = what, where

    def __reduce__(self):  # pickled across processes (a lab node's failure) as it was made
        return type(self), (self.errno, self.what, self.where)


def disk_errno(exc: BaseException | None) -> int | None:
    """The disk errno (:data:`DISK_ERRNOS`) behind ``exc``, its causes or its message, or None.

    A read-only error from SQLite ("attempt to write a readonly database") counts only when
    its cause is a read-only mount; :func:`store_errno` checks that with the store's path.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "errno", None)
        if code in DISK_ERRNOS:
            return code
        text = str(exc)
        for found, words in _WORDS:
            if any(w in text for w in words):
                return found
        exc = exc.__cause__ or exc.__context__
    return None


def read_only_mount(path: Path | str) -> bool:
    """Whether ``path`` (or the nearest folder above it that exists) is on a read-only mount."""
    place = Path(path)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return bool(os.statvfs(place).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def free_bytes(path: Path | str) -> int | None:
    """Free bytes for an unprivileged writer on ``path``'s file system (nearest existing
    folder), or None when it cannot be told."""
    place = Path(path)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        found = os.statvfs(place)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


def store_errno(exc: BaseException, path: Path) -> int | None:
    """The disk errno behind a SQLite failure on the store at ``path``: ENOSPC for "disk is
    full" (or an I/O or open failure on a folder with no space left), EROFS for a store on a
    read-only mount, else None (a real problem of the store itself)."""
    code = disk_errno(exc)
    if code is not None and code != errno.EROFS:
        return code
    if read_only_mount(path):
        return errno.EROFS
    if type(exc).__module__ == "sqlite3" and any(w in str(exc) for w in (
            "disk I/O error", "unable to open database file", "readonly database")):
        free = free_bytes(path.parent)
        if free is not None and free < 64 * 1024:
            return errno.ENOSPC
    return code


def as_disk_error(exc: BaseException, what: str, where: Path | str | None = None) -> DiskError | None:
    """``exc`` as a :class:`DiskError` (``what`` failed, ``where``), or None when it is no
    full disk or read-only mount. Without ``where``, the failed file's folder, else the aiot
    folders (``AIOT_*_DIR``) that are full or read-only now."""
    code = disk_errno(exc)
    if code is None and where is not None and isinstance(exc, OSError) and read_only_mount(where):
        code = errno.EROFS
    if code is None:
        return None
    if where is None:
        where = getattr(exc, "filename", None)
        where = Path(where).parent if where else ", ".join(_full_folders(code)) or None
    return DiskError(code, what, where)


#: The folders aiot writes to, by the variables that move them.
_FOLDER_VARIABLES = ("AIOT_RESULTS_DIR", "AIOT_STATE_DIR", "AIOT_CACHE_DIR", "AIOT_WEIGHTS_DIR",
                     "AIOT_LOCAL_WORKDIR")


def _full_folders(code: int) -> list[str]:
    """The aiot folders set in the environment that are read-only (EROFS) or nearly full."""
    found = []
    for variable in _FOLDER_VARIABLES:
        folder = environment.get(variable)
        if not folder:
            continue
        if code == errno.EROFS and read_only_mount(folder):
            found.append(folder)
        elif code != errno.EROFS and (free_bytes(folder) or 0) < 1 << 20:
            found.append(folder)
    return list(dict.fromkeys(found))
