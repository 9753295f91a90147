"""The lab view's sessions: who is signed in to this one server, and until when.

A browser that logs in (the view's token and a person's name) gets a session: a random id
(:func:`secrets.token_urlsafe`, 32 bytes) in a cookie whose name carries the view's port, and
a form token of its own. Both live in this process only, so a session ends when it has been
idle :data:`IDLE_S`, :data:`ABSOLUTE_S` after its login, when its person logs out, when anyone
signed in ends every session, and when the view restarts. A cookie copied elsewhere (browsers
send ``127.0.0.1``'s cookies to every port of it) reads nothing once its session has ended,
and a cookie of another view (another port, another process) never matches a session here.
"""

from __future__ import annotations

import math
import re
import secrets
import threading
import time
from dataclasses import dataclass, field

#: A session ends after this many seconds without a request of its person (the live pages'
#: own pushes do not count: a forgotten tab does not keep it open) ...
IDLE_S = 30 * 60.0
#: ... and this many seconds after its login, however busy.
ABSOLUTE_S = 12 * 3600.0
#: Sessions kept at most (the oldest is ended for a new one beyond it).
MAX_SESSIONS = 256
#: Who a person says they are: letters, digits, spaces and ``.-_'``, up to 40 (what a
#: reservation's holder reads as, never markup or terminal control).
NAME = re.compile(r"^[^\W_][\w .'-]{0,39}$")


def cookie_name(port: int) -> str:
    """The session cookie's name for the view on ``port`` (two views on one host, two names)."""
    return f"aiot_lab_view_{port}"


def check_seconds(value: float, what: str) -> float:
    """``value`` if it is a finite number of seconds above zero, else ValueError naming ``what``."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{what} {value} is not a number of seconds above 0")
    return float(value)


def check_name(text: str) -> str | None:
    """``text`` stripped if it can name a person, else None."""
    name = " ".join((text or "").split())
    return name if NAME.match(name) else None


@dataclass
class Session:
    """One signed-in browser: its person's name, its form token, when it began and was last used."""

    name: str
    id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_hex(32))
    started: float = 0.0
    seen: float = 0.0


class Sessions:
    """The sessions of one view, in its memory."""

    def __init__(self, idle_s: float = IDLE_S, absolute_s: float = ABSOLUTE_S, clock=time.monotonic) -> None:
        self.idle_s = check_seconds(idle_s, "the session idle time")
        self.absolute_s = check_seconds(absolute_s, "the session time")
        self._clock = clock
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def start(self, name: str) -> Session:
        """A new session for ``name``."""
        now = self._clock()
        with self._lock:
            self._drop_ended(now)
            while len(self._by_id) >= MAX_SESSIONS:
                oldest = min(self._by_id.values(), key=lambda s: s.started)
                del self._by_id[oldest.id]
            session = Session(name, started=now, seen=now)
            self._by_id[session.id] = session
        return session

    def find(self, session_id: str, touch: bool = True) -> Session | None:
        """The live session of ``session_id`` (its idle time restarted when ``touch``), or None."""
        now = self._clock()
        with self._lock:
            session = self._by_id.get(session_id or "")
            if session is None:
                return None
            if self._ended(session, now):
                del self._by_id[session.id]
                return None
            if touch:
                session.seen = now
            return session

    def end(self, session_id: str) -> bool:
        """End one session; whether it was live."""
        with self._lock:
            return self._by_id.pop(session_id or "", None) is not None

    def end_all(self) -> int:
        """End every session; how many there were."""
        with self._lock:
            count = len(self._by_id)
            self._by_id.clear()
        return count

    def __len__(self) -> int:
        with self._lock:
            self._drop_ended(self._clock())
            return len(self._by_id)

    def _ended(self, session: Session, now: float) -> bool:
        return now - session.seen >= self.idle_s or now - session.started >= self.absolute_s

    def _drop_ended(self, now: float) -> None:
        for session in [s for s in self._by_id.values() if self._ended(s, now)]:
            del self._by_id[session.id]


def say_seconds(seconds: float) -> str:
    """``1800`` as "30 min", ``43200`` as "12 h", ``90`` as "90 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
