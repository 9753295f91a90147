"""One-line notices from library code to whoever drives it: the CLI prints them on stderr
(``aiot.host.cli.app`` sets the sink); without a sink they go to the log. Each text is said
once per process, however often the code that says it runs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_sink: Callable[[str], None] | None = None
_said: set[str] = set()
_lock = threading.Lock()


def set_sink(sink: Callable[[str], None] | None) -> None:
    """Where notices go from now on (None: the log); what was said may be said again."""
    global _sink
    with _lock:
        _sink = sink
        _said.clear()


#: What a warning starts with (the CLI shows it in yellow).
WARNING = "warning: "


def say(text: str) -> None:
    """Tell the user ``text`` (plain text, not markup) once."""
    with _lock:
        if text in _said:
            return
        _said.add(text)
        sink = _sink
    if sink is None:
        log.info("%s", text)
    else:
        sink(text)


def warn(text: str) -> None:
    """Warn the user: ``text`` said once, after :data:`WARNING`."""
    say(WARNING + text)
