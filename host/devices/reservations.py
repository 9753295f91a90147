"""Reservations: a technician holds a device for a while, with a note; others' sweeps wait.

They live in ``reservations.json`` next to the inventory (``$AIOT_RESERVATIONS`` overrides):
a reservation is about an inventoried device of this host, as the inventory is, and the
engine's preflight (:mod:`aiot.host.engine.gates`) reads it before anything converts without
opening (or migrating) the result store. Writes are atomic and serialised by a flock, so two
``devices reserve`` at once never lose one; an expired reservation is ignored when read and
dropped at the next write.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiot.core.errors import AiotError, UsageError
from aiot.core.fileio import write_text_atomic
from aiot.host.devices.entry import check_name, inventory_path

try:
    import fcntl
except ImportError:  # Windows: writes are atomic but not serialised
    fcntl = None

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 3600}
#: The longest reservation (a forgotten one must not hold a phone for ever).
MAX_HOURS = 24 * 14
NOTE_MAX = 200


class Reserved(AiotError):
    """A device is reserved by someone else."""


@dataclass(frozen=True)
class Reservation:
    """``device`` held by ``user`` (on ``host``) until ``until`` (ISO 8601, UTC)."""

    device: str
    user: str
    host: str
    until: str
    note: str = ""
    since: str = ""

    def active(self, now: datetime | None = None) -> bool:
        """Whether it still holds (its end is in the future)."""
        return _parse(self.until) > (now or datetime.now(UTC))


def reservations_path() -> Path:
    """``$AIOT_RESERVATIONS``, else ``reservations.json`` beside the inventory."""
    return Path(os.environ.get("AIOT_RESERVATIONS") or inventory_path().with_name("reservations.json"))


def current_user() -> str:
    """Who this process acts for: the OS user name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def parse_duration(text: str) -> timedelta:
    """``2h``, ``30m``, ``1d``, ``90s`` or a bare number of hours.

    Raises:
        UsageError: not a duration, zero, or longer than :data:`MAX_HOURS`.
    """
    found = _DURATION.match(text or "")
    if not found:
        raise UsageError(f"--for '{text}' is not a duration", "give e.g. 2h, 30m or 1d")
    seconds = float(found[1]) * _UNIT_S[found[2]]
    if seconds <= 0 or seconds > MAX_HOURS * 3600:
        raise UsageError(f"--for '{text}' is outside 1 s to {MAX_HOURS} h", "give e.g. 2h, 30m or 1d")
    return timedelta(seconds=seconds)


def check_device(name: str) -> str:
    """``name`` if it can be reserved (``local`` or a valid device name), else UsageError."""
    return name if name == "local" else check_name(name)


def load(path: Path | None = None, now: datetime | None = None) -> dict[str, Reservation]:
    """The active reservations by device (an absent or unreadable file: none; a damaged
    entry is skipped — a reservation is a courtesy, never a reason for a crash)."""
    path = path or reservations_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = {}
    for item in raw.get("reservations", []) if isinstance(raw, dict) else []:
        try:
            res = Reservation(**{k: str(item[k]) for k in ("device", "user", "host", "until")},
                              note=str(item.get("note", ""))[:NOTE_MAX], since=str(item.get("since", "")))
            if res.active(now):
                found[res.device] = res
        except (KeyError, TypeError, ValueError):
            continue
    return found


def reserve(device: str, duration: timedelta, note: str = "", user: str | None = None,
            path: Path | None = None) -> Reservation:
    """Reserve ``device`` for ``duration`` as ``user`` (default: this OS user); the holder
    may extend their own.

    Raises:
        Reserved: someone else holds it.
    """
    import socket

    user = user or current_user()
    now = datetime.now(UTC)
    with _locked(path) as (target, held):
        other = held.get(device)
        if other is not None and other.user != user:
            raise refusal(other)
        res = Reservation(device, user, socket.gethostname(), _iso(now + duration),
                          " ".join(note.split())[:NOTE_MAX], _iso(now))
        held[device] = res
        _save(target, held)
    return res


def release(device: str, user: str | None = None, force: bool = False,
            path: Path | None = None) -> Reservation | None:
    """End ``device``'s reservation (``user``'s own, or anyone's with ``force``); returns it,
    or None when it had none.

    Raises:
        Reserved: it is someone else's (and not ``force``).
    """
    user = user or current_user()
    with _locked(path) as (target, held):
        res = held.get(device)
        if res is None:
            return None
        if res.user != user and not force:
            raise Reserved(f"{device} is reserved by {res.user}, not by you",
                           "only its holder releases it (or: aiot devices release --force)")
        del held[device]
        _save(target, held)
    return res


def check_free(devices, user: str | None = None) -> None:
    """Refuse a sweep on a device someone else has reserved (one line naming who, until when).

    Raises:
        Reserved: the first such device.
    """
    user = user or current_user()
    held = load()
    for device in devices:
        res = held.get(device)
        if res is not None and res.user != user:
            raise refusal(res)


def refusal(res: Reservation) -> Reserved:
    """The one-line refusal for a device ``res`` holds."""
    note = f": {res.note}" if res.note else ""
    return Reserved(f"{res.device} is reserved by {res.user}@{res.host} until {res.until}{note}",
                    f"wait until then, ask {res.user} to run aiot devices release {res.device}, "
                    "or choose another device")


@contextlib.contextmanager
def _locked(path: Path | None):
    target = path or reservations_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.with_name(target.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield target, load(target)
    finally:
        os.close(fd)


def _save(path: Path, held: dict[str, Reservation]) -> None:
    items = [asdict(r) for r in sorted(held.values(), key=lambda r: r.device)]
    write_text_atomic(path, json.dumps({"reservations": items}, indent=1) + "\n")


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _parse(text: str) -> datetime:
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=UTC)
