"""Small helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def fast(min_runs: int = 3, *, warmup_runs: int | None = None, cooldown: bool = True) -> tuple[str, ...]:
    """Timing flags of a run that measures just enough for a test (``*FAST`` after ``aiot run``
    or ``sweep``): ``min_runs`` timed runs, no minimum seconds, no minimum warm-up time,
    ``warmup_runs`` warm-up runs where given, and no cool-down wait unless ``cooldown`` is False."""
    flags = ["--min-runs", str(min_runs), "--min-s", "0"]
    if warmup_runs is not None:
        flags += ["--warmup-runs", str(warmup_runs)]
    flags += ["--warmup-min-s", "0"]
    if cooldown:
        flags += ["--cooldown-max-s", "0"]
    return tuple(flags)


#: The usual :func:`fast` flags: three timed runs.
FAST = fast()


def single_error(result, *fragments: str) -> str:
    """The one ``error:`` line of a CLI result that failed cleanly (no traceback), after checking
    that its stderr names every one of ``fragments``."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return errors[0]


def process_gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` left this machine's process table within ``within`` seconds (a zombie
    counts as present)."""
    deadline = time.monotonic() + within
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class KillAfterFirstRun:
    """A campaign listener that kills ``victim``'s emulator (its server and everything below
    it, agent included) once its first run has ended; the device stays in the inventory, as a
    crashed phone or board would."""

    def __init__(self, victim: str) -> None:
        import threading

        from aiot.host.engine.runs import NullListener

        self._null = NullListener()
        self.victim, self.killed = victim, threading.Event()

    def on_run_end(self, record) -> None:
        from aiot.host.emulator.state import load_all

        if record.device == self.victim and not self.killed.is_set():
            self.killed.set()
            (state,) = [s for s in load_all() if s.name == self.victim]
            state.terminate()

    def __getattr__(self, name):  # every other event: as the null listener does
        return getattr(self._null, name)


def stored_run_key(record) -> str:
    """The campaign's run key of a stored record (from its spec)."""
    from aiot.host.engine.campaign import _digest

    return _digest(record.spec)[:16]


def stop_emulators(*names: str) -> None:
    """Stop these emulators where they still run (a test's clean-up)."""
    from aiot.core.errors import AiotError
    from aiot.host.emulator import manager

    for name in names:
        try:
            manager.stop(name)
        except AiotError:
            pass  # already stopped


def load_bench_script(name: str) -> ModuleType:
    """bench/<name>.py loaded from its file (the bench folder is scripts, not a package), with
    bench/ on the path only while it imports its ``_common``-style neighbours."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def proc_cmdline(pid: int) -> str:
    """A process's command line from /proc ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_comm(pid: int) -> str:
    """A process's name from /proc ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def proc_state(pid: int) -> str:
    """A process's state from /proc (``R``, ``S``, ``T``, ``Z``…; "" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return ""


def proc_gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` ends (or is only a zombie its parent has not reaped) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc_state(pid) in ("", "Z"):
            return True
        time.sleep(0.05)
    return False
