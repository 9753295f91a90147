"""The lab view's analysis pages: two result sets compared (what ``aiot results compare``
computes, with its default gate) and a sweep's report (what ``aiot report --sweep`` writes),
both read from the store by the same code the CLI uses.

A set is named only by a sweep id (or a unique prefix) or record ids: a request never names a
file, so the view opens no path a browser gave it.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.report.html import write
from aiot.host.report.scale import report_of
from aiot.host.store import open_store
from aiot.host.store.compare import Comparison, ResultSet, compare, find_sweep, parse_check, resolve_set

#: The gate a comparison page shows its verdicts against: ``results compare``'s default.
DEFAULT_CHECK = "median:5%"
#: What a report folder may hold that the view serves (its page and its plots; no other name).
REPORT_FILE = re.compile(r"^(index\.html|[a-z0-9_]+\.png)$")


@dataclass
class ComparedSets:
    """Two sets and their comparison, for the page."""

    a: ResultSet
    b: ResultSet
    result: Comparison


def compare_sets(results_dir: Path, a: str, b: str) -> ComparedSets:
    """Set ``b`` compared with baseline ``a`` (each a sweep id, a prefix of one, or record ids).

    Raises:
        UsageError: a set names nothing, is ambiguous or has no finished latency records.
    """
    a, b = a.strip(), b.strip()
    if not a or not b:
        raise UsageError("a comparison needs two result sets, A and B",
                         "give a sweep id (or a prefix) or record ids for each")
    with open_store(results_dir, readonly=True) as store:
        set_a, set_b = (resolve_set(name, store, files=False) for name in (a, b))
    return ComparedSets(set_a, set_b, compare(set_a.records, set_b.records, [parse_check(DEFAULT_CHECK)]))


class SweepReports:
    """Reports of single sweeps, written once into a private folder of this view and rewritten
    when the sweep's records change (a running sweep's report follows it)."""

    def __init__(self) -> None:
        self._root = tempfile.TemporaryDirectory(prefix="aiot-view-reports-")
        self._lock = threading.Lock()  # one report written at a time (matplotlib is not threadsafe)

    def folder(self, results_dir: Path, name: str) -> tuple[str, Path]:
        """The sweep ``name`` names and the folder holding its report (written if needed).

        Raises:
            UsageError: no sweep has that id or prefix, or it is ambiguous.
        """
        with self._lock, open_store(results_dir, readonly=True) as store:
            sweep = find_sweep(name.strip(), store) if name.strip() else None
            if sweep is None:
                raise UsageError(f"no sweep '{name}' in the store", "pick one on the campaigns page")
            state = repr(sorted(store.sweep_counts(sweep).items()))
            folder = Path(self._root.name) / hashlib.sha256(f"{sweep}\0{state}".encode()).hexdigest()[:20]
            if not (folder / "index.html").is_file():
                write(report_of(store, source=str(results_dir), sweep=sweep), "html", folder)
        return sweep, folder

    @staticmethod
    def file(folder: Path, name: str) -> Path | None:
        """``name`` inside a report ``folder`` if it is one of the report's files, else None."""
        if not REPORT_FILE.match(name):
            return None
        path = folder / name
        return path if path.is_file() else None

    def close(self) -> None:
        """Remove every report written."""
        self._root.cleanup()
