"""Where emulators keep their files and how a later command finds a running one.

Each emulator has a folder ``<state dir>/emulators/<name>/`` holding its keys, config,
device filesystem and ``state.json`` (kind, pid, port, ...). The state dir is
``$AIOT_STATE_DIR``, else ``$XDG_STATE_HOME/aiot`` (default ``~/.local/state/aiot``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiot.core.fileio import load_states, write_text_atomic
from aiot.core.paths import state_dir


def emulators_dir() -> Path:
    return state_dir() / "emulators"



def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a process of another user counts; a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True

@dataclass
class EmulatorState:
    """A started emulator."""

    name: str
    kind: str  # "ssh" | "adb"
    arch: str
    pid: int
    port: int
    folder: str
    started_at: float = field(default_factory=time.time)
    extra: dict = field(default_factory=dict)

    def save(self) -> None:
        write_text_atomic(Path(self.folder) / "state.json", json.dumps(asdict(self), indent=2))

    def alive(self) -> bool:
        """Whether the emulator's server process still runs."""
        return process_alive(self.pid)

    def terminate(self, grace_s: float = 3.0) -> None:
        """Stop the server and everything it forked, like a device that is switched off.

        sshd forks one process per connection; killing only the listener would leave open
        sessions alive, which no real device does when it goes away.
        """
        if not self.alive():
            return
        victims = [self.pid, *descendants(self.pid)]
        for pid in victims:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.05)
        for pid in victims:
            _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(pid: int) -> list[int]:
    """PIDs of every process below ``pid`` (from /proc; empty where /proc is unavailable)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def load_all() -> list[EmulatorState]:
    """Every emulator that has a state file."""
    return load_states(sorted(emulators_dir().glob("*/state.json")), EmulatorState)
