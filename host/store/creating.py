"""Making a new store whole, refusing an empty or newer one, and migrating an older one."""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from pathlib import Path

from aiot.core.diskfull import DISK_ERRNOS, disk_errno, read_only_mount
from aiot.core.errors import StoreError
from aiot.core.fileio import new_file_mode
from aiot.host.store.schema import MIGRATIONS, SCHEMA_VERSION, current_version


def create(path: Path) -> None:
    """Make a new store at ``path`` whole: build it beside, then link it into place.

    Two processes creating the store at once each build their own; the first link wins and
    the other's copy is dropped, so nobody ever opens a half-made (or 0-byte) store.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        os.chmod(tmp_path, new_file_mode(path))  # as sqlite would make it, not mkstemp's 0600
        conn = sqlite3.connect(tmp_path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")  # kept in the file's header
            conn.execute("BEGIN IMMEDIATE")
            migrate(conn, path)
            conn.execute("COMMIT")
        finally:
            conn.close()
        try:
            os.link(tmp_path, path)
        except FileExistsError:
            pass  # another process created it first: theirs is as good as ours
        except OSError:  # a filesystem without hard links: rename, unless someone beat us
            if not path.exists():
                os.replace(tmp_path, path)
    except (OSError, sqlite3.Error) as exc:
        code = disk_errno(exc) or (errno.EROFS if read_only_mount(path) else None)
        detail = DISK_ERRNOS[code] if code is not None else exc
        raise StoreError(f"cannot create result store {path}: {detail}",
                         "pass --results-dir or set AIOT_RESULTS_DIR to a writable folder") from None
    finally:
        tmp_path.unlink(missing_ok=True)


def refuse_empty(path: Path) -> None:
    """aiot never leaves a 0-byte store (see :func:`_create`): one was truncated by someone,
    and starting afresh in it would hide that its records are gone."""
    try:
        empty = path.is_file() and path.stat().st_size == 0
    except OSError:
        return  # connecting reports what is wrong
    if empty:
        raise StoreError(
            f"result store {path} is empty (0 bytes): not a store aiot made, someone truncated it",
            f"restore it from a backup, or move it away (mv {path} {path}.empty) to start a new store")


def refuse_newer(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema v{version}, this aiot reads up to v{SCHEMA_VERSION}",
            "upgrade aiot to read these results",
        )


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring ``conn`` to :data:`SCHEMA_VERSION` inside the caller's write transaction.

    The version is read again under the write lock: another process may have migrated the
    store between our first look and the lock (two first runs at once).
    """
    version = current_version(conn)
    refuse_newer(path, version)
    while version < SCHEMA_VERSION:
        MIGRATIONS[version](conn)
        version += 1
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                 (str(version),))
