"""What the agent says on stdout: protocol lines (``emit``), its ``hello``, and error text.

Every command, the ``serve`` loop and the ``session`` supervisor speak through these, so they
sit below all of them (see ``protocol.py`` for the line format the host decodes).
"""

from __future__ import annotations

import os
import platform
import sys

from . import AGENT_VERSION, backends, protocol, seccomp


def emit(event: str, **fields) -> None:
    """Print one protocol line and flush so the host sees progress live.

    One write per line, newline included: ``print`` writes the newline separately, which an
    unbuffered stdout (``PYTHONUNBUFFERED``) turns into two writes, and over ADB into two
    stream packets, the second waiting for the first's acknowledgement (~40 ms measured on
    the emulated device when the ACK was delayed).
    """
    sys.stdout.write(protocol.encode(event, **fields) + "\n")
    sys.stdout.flush()


def hello() -> dict:
    """What this agent and device can do."""
    return {
        "agent_version": AGENT_VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "runtimes": backends.versions(),
        # How the agent's Python came to the device: "aiot-aarch64-glibc:<hash>" when it is
        # the runtime aiot pushed to a phone (its bin/python3 sets it), else None.
        "runtime": os.environ.get("AIOT_RUNTIME"),
        # System calls the Android app's seccomp filter trapped and the agent skipped (None:
        # not started by the app, no handler).
        "sigsys_skipped": seccomp.skipped(),
    }


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 500 characters), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
