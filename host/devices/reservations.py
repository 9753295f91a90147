"""Reservations: a technician holds a device for a while, with a note; others' sweeps wait.

They live in ``reservations.json`` next to the inventory (``$AIOT_RESERVATIONS`` overrides):
a reservation is about an inventoried device of this host, as the inventory is, and the
engine's preflight (:mod:`aiot.host.engine.gates`) reads it before anything converts without
opening (or migrating) the result store. Writes are atomic (a temp file renamed over it) and
serialised by a flock, so two ``devices reserve`` at once never lose one; an expired
reservation is ignored when read and dropped at the next write.

A file that cannot be read (not JSON, truncated, not the shape aiot writes, unreadable) frees
nothing: every device counts as held by :data:`UNKNOWN_HOLDER` until someone moves the file
away or fixes it, and every command that meets it says so in one line naming the file
(:class:`DamagedReservations`). The holder is this process's operating-system account, never
an environment variable (``$LOGNAME`` and ``$USER`` say whatever their setter likes).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import shlex
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiot.core import environment
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
#: Who holds every device while the reservations file cannot be read.
UNKNOWN_HOLDER = "unknown (damaged reservations file)"
#: A held device's end while the file cannot be read (the lab view shows "... until" it).
UNTIL_REPAIRED = "its file is repaired"


class Reserved(AiotError):
    """A device is reserved by someone else."""


class DamagedReservations(Reserved):
    """The reservations file cannot be read: no device counts as free until it is moved away
    or fixed (a truncated file must not free every device)."""

    def __init__(self, path: Path, why: str, device: str | None = None) -> None:
        where = f"the reservations file {path} is damaged ({why})"
        message = (f"{device} counts as reserved: {where}" if device is not None
                   else f"{where}; every device counts as reserved until it is fixed")
        super().__init__(message, f"move it away to free every device (mv {shlex.quote(str(path))} "
                                  f"{shlex.quote(str(path) + '.damaged')}), or fix it")
        self.path, self.why = path, why

    def holding(self, device: str) -> DamagedReservations:
        """The same damage, as the refusal of ``device``."""
        return DamagedReservations(self.path, self.why, device)


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
        """Whether it still holds (its end is in the future, or cannot be read)."""
        try:
            return _parse(self.until) > (now or datetime.now(UTC))
        except (TypeError, ValueError):
            return True


class Unreadable(dict):
    """What :func:`load` returns for a damaged file: every device is held by
    :data:`UNKNOWN_HOLDER` (``get`` and ``[]`` answer for any name), the damage in ``damage``
    and in each reservation's note, for pages that show it rather than fail."""

    def __init__(self, damage: DamagedReservations) -> None:
        super().__init__()
        self.damage = damage

    def __missing__(self, device: str) -> Reservation:
        return Reservation(device, UNKNOWN_HOLDER, "?", UNTIL_REPAIRED, self.damage.message)

    def get(self, device, default=None) -> Reservation:
        return self[device]

    def __contains__(self, device) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


def reservations_path() -> Path:
    """``$AIOT_RESERVATIONS``, else ``reservations.json`` beside the inventory."""
    return Path(environment.get("AIOT_RESERVATIONS") or inventory_path().with_name("reservations.json"))


def current_user() -> str:
    """Who this process acts for: the name of its operating-system account (its effective
    uid), else ``uid<N>``; never ``$LOGNAME``/``$USER``, which anyone sets to anyone."""
    try:
        import pwd
    except ImportError:  # Windows: no uids; its account name
        return getpass.getuser()
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (a container's)
        return f"uid{uid}"


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
    """The active reservations by device; none for an absent file. A damaged one (see
    :func:`read`) never raises here: it returns an :class:`Unreadable`, in which every device
    is held by :data:`UNKNOWN_HOLDER` (what the lab view shows, and sweeps refuse)."""
    try:
        return read(path, now)
    except DamagedReservations as damage:
        return Unreadable(damage)


def read(path: Path | None = None, now: datetime | None = None) -> dict[str, Reservation]:
    """The active reservations by device; none for an absent file.

    Raises:
        DamagedReservations: the file cannot be read, is not JSON (a truncated write of
            another program, an editor's slip), or is not the shape aiot writes (one line
            naming the file and what is wrong in it).
    """
    path = path or reservations_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise DamagedReservations(path, f"it cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DamagedReservations(path, "it is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise DamagedReservations(path, f"it is not JSON{where}: {getattr(exc, 'msg', exc)}") from None
    items = raw.get("reservations") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        found = f'its "reservations" is {_short(items)}' if isinstance(raw, dict) else f"it holds {_short(raw)}"
        raise DamagedReservations(path, f'{found}, not a list of reservations')
    found = {}
    for number, item in enumerate(items, 1):
        res = _entry(path, number, item)
        if res.active(now):
            found[res.device] = res
    return found


def _entry(path: Path, number: int, item) -> Reservation:
    """Entry ``number`` of the file as a Reservation (DamagedReservations if it is not one:
    which device it was meant to hold cannot be trusted)."""
    fields = ("device", "user", "host", "until")
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k] for k in fields):
        missing = [k for k in fields if not isinstance(item, dict) or not isinstance(item.get(k), str)
                   or not item[k]]
        raise DamagedReservations(path, f"entry {number} is not a reservation: it has no {', '.join(missing)}")
    try:
        _parse(item["until"])
    except ValueError:
        raise DamagedReservations(path, f"entry {number}'s until {_short(item['until'])} is not a time") from None
    return Reservation(*(item[k] for k in fields), note=str(item.get("note", ""))[:NOTE_MAX],
                       since=str(item.get("since", "")))


def _short(value) -> str:
    """``value`` as JSON, cut to a few words (it is quoted in a one-line error)."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def reserve(device: str, duration: timedelta, note: str = "", user: str | None = None,
            path: Path | None = None, *, holder: str | None = None) -> Reservation:
    """Reserve ``device`` for ``duration`` as ``holder`` (``user`` is the same, by position;
    default: this process's OS account, :func:`current_user`); the holder may extend their own.
    Only a caller that authenticated someone (the lab view, for its signed-in person) names one.

    Raises:
        Reserved: someone else holds it.
        DamagedReservations: the file cannot be read (nothing is written over it).
    """
    import socket

    user = holder or user or current_user()
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
            path: Path | None = None, *, holder: str | None = None) -> Reservation | None:
    """End ``device``'s reservation (``holder``'s own — ``user`` is the same, by position;
    default: this OS account — or anyone's with ``force``); returns it, or None when it had none.

    Raises:
        Reserved: it is someone else's (and not ``force``).
        DamagedReservations: the file cannot be read (nothing is written over it).
    """
    user = holder or user or current_user()
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
        DamagedReservations: the file cannot be read (no device is free then), naming the
            first device and the file.
    """
    user = user or current_user()
    held = load()
    for device in devices:
        if isinstance(held, Unreadable):
            raise held.damage.holding(device)
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
        yield target, read(target)
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
