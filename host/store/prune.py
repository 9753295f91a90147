"""``aiot results prune``: retention for a store that grows by a lab's nightly sweeps.

Which records go:

* ``older_than``: records created before now less that age;
* ``keep``: all but the newest N of each kind and key (a configuration at one thread count,
  :func:`aiot.host.store.identity.key`, the one every view groups by: a 1-thread and a 4-thread
  run are two keys, so keeping the newest 3 keeps three of each);
* both: records that are older *and* not among the newest N of their key (the newest N are
  kept however old, so a configuration measured once a year keeps its last runs).

Never pruned: pending records, and every record of a sweep that still has a pending one (a
sweep running now, or stopped and to be resumed: resuming skips the runs its ok records
hold, so pruning them would make it measure them again).

All deletions are one transaction (pruned whole or not at all); ``vacuum`` then gives the
freed pages back to the disk (it rewrites the file, taking as long as a copy of it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiot.core.errors import UsageError
from aiot.host.store import identity
from aiot.host.store.store import Store

_AGE = re.compile(r"(\d+)\s*([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}
#: Columns a record's key is made of (its spec holds the rest; its host is a column made from
#: its provenance), and whether it was imported: no result or provenance read.
_SCAN = ("SELECT id, kind, status, sweep_id, created_at, device, model, format, threads, host, "
         "imported_at, spec_json FROM runs WHERE status != 'pending'")


def parse_age(text: str) -> timedelta:
    """``90d``, ``12h``, ``4w`` as a timedelta.

    Raises:
        UsageError: anything else.
    """
    found = _AGE.fullmatch(text.strip().lower())
    if not found or int(found[1]) == 0:
        raise UsageError(f"cannot read the age '{text}'", "give hours, days or weeks: 12h, 90d, 4w")
    return timedelta(**{_UNITS[found[2]]: int(found[1])})


@dataclass
class PruneSummary:
    """What a prune removed (or, dry, would remove) and what it kept on purpose."""

    pruned: list[dict] = field(default_factory=list)  # id, kind, status, created_at, label
    kept_running: int = 0  # finished records of sweeps with pending ones
    host: str | None = None  # only this host's records were looked at
    total: int = 0  # finished records looked at
    dry_run: bool = False
    vacuumed: bool = False

    def counts(self) -> dict[str, int]:
        return dict(Counter(r["status"] for r in self.pruned))

    def by_host(self) -> dict[str, dict[str, int]]:
        """``{host: {"own": n, "imported": n}}`` of what goes (a record without a host id
        under its host name, or ``unrecorded``)."""
        counts: dict[str, dict[str, int]] = {}
        for r in self.pruned:
            per = counts.setdefault(r["host"] or "unrecorded", {"own": 0, "imported": 0})
            per["imported" if r["imported"] else "own"] += 1
        return dict(sorted(counts.items()))

    def host_lines(self) -> list[str]:
        """One line per host: how many of its records go, own and imported."""
        verb = "would prune" if self.dry_run else "prunes"
        return [f"{verb} {n['own'] + n['imported']} of host {host} ("
                f"{n['own']} measured here, {n['imported']} imported)"
                for host, n in self.by_host().items()]

    def line(self) -> str:
        verb = "would prune" if self.dry_run else "pruned"
        by = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        kept = (f"; kept {self.kept_running} of sweeps still pending" if self.kept_running else "")
        return (f"{verb} {len(self.pruned)} of {self.total} finished records"
                f"{f' ({by})' if by else ''}{kept}{'; vacuumed' if self.vacuumed else ''}")

    def to_dict(self) -> dict:
        return {"dry_run": self.dry_run, "pruned": len(self.pruned), "by_status": self.counts(),
                "by_host": self.by_host(), "host": self.host,
                "kept_running": self.kept_running, "finished": self.total,
                "vacuumed": self.vacuumed, "records": self.pruned}


class _Row:
    """A scanned row as :mod:`identity` reads a record (columns, then the spec)."""

    __slots__ = ("id", "kind", "status", "sweep_id", "created_at", "device", "model", "format",
                 "threads", "host", "imported_at", "spec")

    def __init__(self, row) -> None:
        for name in self.__slots__[:-1]:
            setattr(self, name, row[name])
        try:
            self.spec = json.loads(row["spec_json"])
        except (TypeError, ValueError):
            self.spec = {}


def _when(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _running_sweeps(conn) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT DISTINCT sweep_id FROM runs WHERE status = 'pending' AND sweep_id IS NOT NULL")}


def _choose(rows: list[_Row], cutoff: datetime | None, keep: int | None) -> list[_Row]:
    """The rows that go: older than ``cutoff`` (if given) and not the newest ``keep`` of
    their kind and key (if given)."""
    newest: set[str] = set()
    if keep is not None:
        groups: dict[tuple, list[_Row]] = {}
        for row in rows:
            groups.setdefault((row.kind, identity.key(row)), []).append(row)
        for group in groups.values():
            # This store's own runs first, then imported ones: an imported record (whatever
            # date it claims) never displaces one measured here from the newest N.
            group.sort(key=lambda r: (r.imported_at is None,
                                      _when(r.created_at) or datetime.min.replace(tzinfo=UTC)),
                       reverse=True)
            newest.update(r.id for r in group[:keep])
    chosen = []
    for row in rows:
        if row.id in newest:
            continue
        if cutoff is not None:
            when = _when(row.created_at)
            if when is None or when >= cutoff:  # an unreadable time is never "old"
                continue
        chosen.append(row)
    return chosen


def prune(store: Store, older_than: timedelta | None = None, keep: int | None = None,
          dry_run: bool = False, vacuum: bool = False, now: datetime | None = None,
          host: str | None = None, confirm=None) -> PruneSummary:
    """Remove (or, ``dry_run``, only name) the records the retention rules let go.

    The newest N of a key are per host (the host is part of the key), this store's own runs
    ranked before imported ones.

    Args:
        host: only records of this host id are looked at (and may go).
        confirm: called with the summary of what would go before anything is deleted; a
            false answer deletes nothing (the summary then says so, as a dry run).

    Raises:
        UsageError: neither rule given, or ``keep`` < 1.
    """
    if older_than is None and keep is None:
        raise UsageError("prune needs --older-than, --keep or both",
                         "e.g. aiot results prune --older-than 90d --keep 5 --dry-run")
    if keep is not None and keep < 1:
        raise UsageError(f"--keep must be ≥ 1, got {keep}")
    cutoff = (now or datetime.now(UTC)) - older_than if older_than is not None else None
    with store._errors():
        running = _running_sweeps(store._conn)
        scan, args = (_SCAN + " AND host = ?", (host,)) if host else (_SCAN, ())
        rows = [_Row(r) for r in store._conn.execute(scan, args)]
    summary = PruneSummary(total=len(rows), dry_run=dry_run, host=host)
    idle = [r for r in rows if r.sweep_id is None or r.sweep_id not in running]
    summary.kept_running = len(rows) - len(idle)
    chosen = _choose(idle, cutoff, keep)
    if not dry_run and chosen and confirm is not None:
        asked = PruneSummary(_named(chosen), kept_running=summary.kept_running,
                             total=summary.total, dry_run=True, host=host)
        if not confirm(asked):
            summary.dry_run = True
            summary.pruned = asked.pruned
            return summary
    if not dry_run and chosen:
        chosen = _delete(store, chosen)
    summary.pruned = _named(chosen)
    if vacuum and not dry_run:
        with store._errors():
            store._conn.execute("VACUUM")
        summary.vacuumed = True
    return summary


def _named(rows: list[_Row]) -> list[dict]:
    return [{"id": r.id, "kind": r.kind, "status": r.status, "created_at": r.created_at,
             "sweep_id": r.sweep_id, "host": r.host, "imported": r.imported_at is not None,
             "label": identity.label(r)} for r in rows]


def _delete(store: Store, chosen: list[_Row]) -> list[_Row]:
    """Delete ``chosen`` in one transaction, less records of a sweep that began pending runs
    since the scan; returns what was deleted."""
    with store._transaction() as conn:
        running = _running_sweeps(conn)
        chosen = [r for r in chosen if r.sweep_id is None or r.sweep_id not in running]
        ids = [r.id for r in chosen]
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            conn.execute(f"DELETE FROM runs WHERE status != 'pending' AND id IN "
                         f"({', '.join('?' * len(part))})", part)
    return chosen
