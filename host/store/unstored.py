"""Finished records the store could not take when they finished, kept until it can.

A run that finished while another process held the store's write lock past aiot's wait
(:mod:`aiot.host.store.busy`) is not thrown away: what closes its record (status, result,
summary columns) goes to ``<results dir>/unstored/<record id>.json``. The next aiot command
that writes the store (a run, a sweep, ``aiot results recover``) closes the record with it
while the record is still pending, then removes the file. A run that finished after its
store was damaged under it is kept the same way, for ``aiot results recover``.

On a disk too full for even that, an empty file whose name says what happened
(``<record id>.<status>.ENOSPC``: a name needs no data block) lets the next command close
the record as failed for want of space, rather than as merely interrupted.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

from aiot.core.diskfull import DISK_ERRNOS
from aiot.core.errors import StoreError
from aiot.core.fileio import write_text_atomic

log = logging.getLogger(__name__)

FOLDER = "unstored"


def folder(store_path: Path) -> Path:
    """Where the finished records of the store at ``store_path`` wait to be written."""
    return store_path.parent / FOLDER


def keep(store_path: Path, record_id: str, columns: dict) -> Path:
    """Keep ``columns`` (the ``runs`` columns that close ``record_id``) beside the store.

    Raises:
        OSError: it could not be written either (a full or read-only disk).
    """
    target = folder(store_path) / f"{record_id}.json"
    target.parent.mkdir(exist_ok=True)
    write_text_atomic(target, json.dumps({"id": record_id, "columns": columns}))
    return target


def kept_error(store_path: Path, record_id: str, columns: dict, exc: StoreError,
               later: str) -> StoreError:
    """The failure of a finished record that the store did not take (locked past the wait,
    damaged): kept beside it (the error says where, and that ``later`` stores it), or lost if
    even that cannot be written."""
    try:
        target = keep(store_path, record_id, columns)
    except OSError as why:
        return StoreError(f"{exc.message}; the finished run {record_id[:8]} could not be kept "
                          f"either ({why.strerror or why}) and is lost", exc.hint)
    return type(exc)(f"{exc.message}; the finished run {record_id[:8]} is kept in {target} "
                     f"and written into the store by {later}", exc.hint)


def failed_columns(status: str, reason: str | None, code: int, where: Path, when: str) -> dict:
    """The columns that close a record as failed because its result (finished as
    ``status``, with ``reason``) did not fit on the disk (``code``: ENOSPC or EDQUOT)."""
    if status != "failed" or not reason:
        what = "measured, but its result could not be stored" if status == "ok" else "not stored"
        reason = f"{what}: {DISK_ERRNOS[code]} in {where}"
    return {"status": "failed", "reason": reason, "finished_at": when}


def mark(store_path: Path, record_id: str, status: str, code: int) -> bool:
    """Leave an empty file saying that ``record_id`` (finished as ``status``) could not be
    stored for want of space (``code``: ENOSPC or EDQUOT); False when even that failed."""
    try:
        folder(store_path).mkdir(exist_ok=True)
        (folder(store_path) / f"{record_id}.{status}.{errno.errorcode[code]}").touch()
    except OSError:
        return False
    return True


def _marked(path: Path, when: str) -> tuple[Path, str, dict] | None:
    """A :func:`mark` file as the columns that close its record as failed."""
    record_id, status, name = (path.name.split(".") + ["", ""])[:3]
    code = getattr(errno, name, None)
    if code not in DISK_ERRNOS:
        return None
    return path, record_id, failed_columns(status, None, code, path.parent.parent, when)


def kept(store_path: Path, when: str = "") -> list[tuple[Path, str, dict]]:
    """Every kept record of the store at ``store_path``: (file, record id, columns); a
    :func:`mark` file closes its record as failed, ``when``."""
    found = []
    try:
        files = sorted(folder(store_path).iterdir())
    except OSError:
        return []
    for path in files:
        if not path.name.endswith(".json"):
            found += [m for m in [_marked(path, when)] if m is not None]
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            found.append((path, str(doc["id"]), dict(doc["columns"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable kept record %s: %s", path, exc)
    return found
