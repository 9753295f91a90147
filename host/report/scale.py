"""The report of a store of any size: every run listed up to :data:`DETAIL_LIMIT` records, a
summary beyond.

A lab's store holds ~100k records a year. Listing and decoding every one of them at once
(:func:`aiot.host.report.build.collect`) took 5 GB and wrote a 108 MB page. Past
:data:`DETAIL_LIMIT` records the report is built from one streaming pass over the store
(:func:`aiot.host.store.scan.iter_records`, one record in memory at a time) and summarises:

* the first screen, the formats compared, the plots, load times and telemetry as before
  (they already show each key's newest run, or aggregate);
* **trends**: per key (a configuration at one thread count), how its latency moved over the
  months it was measured (first and latest month's median, best, the change);
* the BNN pairs and the VIPS leaderboard over each key's newest ok run (not every run of it);
* the run tables (every run, flagged runs) list the newest :data:`ROW_LIMIT`, and name the
  commands that list the rest (``aiot results list``, ``aiot results export``).

Nothing is kept per record: the pass feeds each run to a
:class:`~aiot.host.report.tally.Tally` (each key's plotted run and trend, the newest rows, a
sample of the telemetry), so memory is bounded by the configurations and months, not the
store (load times aside: 8 bytes a run).

A store at or under the limit gets exactly the report it got before.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from aiot.core.errors import UsageError
from aiot.host.engine.validity import INVALID, emulated
from aiot.host.report.build import (
    LATENCY,
    TRAIN,
    Provenance,
    Report,
    _device_facts,
    _readings,
    _run,
    _training,
    build,
    collect,
    leaderboard,
    version_facts,
    version_rows,
)
from aiot.host.report.page import Column, Section, Table
from aiot.host.report.tally import Tally
from aiot.host.scores.om_infer import match_runs, om_infer
from aiot.host.store import identity, scan

#: Records up to which the report lists every run (the report as it always was).
DETAIL_LIMIT = 2000
#: Rows of each run table in a summarised report.
ROW_LIMIT = 300
#: Entries the pass's caches of shared specs and facts hold at most (as scan.iter_records').
_CACHE_LIMIT = 4096
#: The provenance parts versions are read from (see build.version_facts).
_VERSION_PARTS = ("aiot_version", "git", "host", "runtime", "device", "toolchain")


def report_of(store, source: str, sweep: str | None = None,
              generated_at: str | None = None) -> Report:
    """The report of ``store`` (of one sweep): in full up to :data:`DETAIL_LIMIT` records,
    summarised from one streaming pass beyond.

    Raises:
        UsageError: nothing to report.
    """
    if scan.count(store, sweep) <= DETAIL_LIMIT:
        return build(collect(store, sweep), source, sweep, generated_at)
    return _Pass(sweep).read(scan.iter_records(store, sweep, slim=True)).report(source, generated_at)


class _Pass:
    """What one pass over every record keeps: a :class:`~aiot.host.report.tally.Tally` of the
    latency runs (bounded: see its module) and running tallies for provenance."""

    def __init__(self, sweep: str | None) -> None:
        self.sweep = sweep
        self.tally = Tally(ROW_LIMIT)
        self.trainings: list = []
        self.others: dict[str, list] = {}
        self.devices: dict[str, tuple[str, dict]] = {}  # name → (created_at, device facts)
        self.versions: dict[str, set[str]] = {}
        self.statuses: Counter = Counter()
        self.sweeps: set[str] = set()
        self.first = self.last = None
        self.idents: dict[tuple, tuple] = {}  # see _latency
        self.seen_parts: dict[tuple, tuple] = {}  # provenance parts whose versions are counted
        self.emulated: dict[int, tuple] = {}  # id(device facts) → (them, emulated?)

    def read(self, records) -> _Pass:
        for record in records:
            self._add(record)
            if len(self.idents) + len(self.seen_parts) + len(self.emulated) > _CACHE_LIMIT:
                # Each holds the shared objects its ids name: a store of ever-new device
                # facts (one a session) must not fill memory with them.
                for cache in (self.idents, self.seen_parts, self.emulated):
                    cache.clear()
        if not self.statuses:
            raise UsageError(f"no records in sweep '{self.sweep}' to report on",
                             "see: aiot results list")
        return self

    def _add(self, r) -> None:
        self.statuses[r.status] += 1
        if r.sweep_id:
            self.sweeps.add(r.sweep_id)
        for when in (r.created_at, r.finished_at):
            if when:
                self.first = min(self.first or when, when)
                self.last = max(self.last or when, when)
        parts = tuple(map((r.provenance or {}).get, _VERSION_PARTS))
        if self.seen_parts.setdefault(tuple(map(id, parts)), parts) is parts:  # new ones
            for what, value in version_facts(r):
                self.versions.setdefault(what, set()).add(value)
        if r.kind == TRAIN:
            self.trainings.append(_training(r))
        elif r.kind != LATENCY:
            self.others.setdefault(r.kind, []).append(r)
            return
        else:
            self._latency(r)

    def _latency(self, r) -> None:
        # Records of one configuration share their spec object (scan.iter_records, slim):
        # their key and variant are worked out once. The cache holds the spec, so its id
        # stays its own.
        sig = (id(r.spec), r.device, r.model, r.format, r.threads)
        held = self.idents.get(sig)
        if held is None:
            held = self.idents[sig] = (r.spec, (identity.key(r), identity.variant(r)))
        self.tally.add(_Seen(r, held[1], self._emulated(r)), r)
        for reading in _readings(r):
            self.tally.add_reading(reading)
        info = (r.provenance or {}).get("device")
        name = r.device or (info or {}).get("name") or "—"
        if info and r.created_at >= self.devices.get(name, ("",))[0]:
            self.devices[name] = (r.created_at, info)

    def _emulated(self, r) -> bool:
        info = (r.provenance or {}).get("device") or {}
        held = self.emulated.get(id(info))  # records of one device share its facts' object
        if held is None or held[0] is not info:
            held = self.emulated[id(info)] = (info, emulated(info))
        return held[1]

    def report(self, source: str, generated_at: str | None) -> Report:
        tally = self.tally
        tally.finish(lambda seen: _run(seen.record, seen.ident))
        newest = sorted((record for _run, record in tally.plotted.values()),
                        key=lambda r: r.created_at)
        matching = match_runs(newest)
        provenance = Provenance(
            devices=[_device_facts(n, info) for n, (_t, info) in sorted(self.devices.items())],
            versions=version_rows(self.versions), first=self.first, last=self.last,
            sweeps=sorted(self.sweeps), statuses=dict(self.statuses))
        report = Report(
            generated_at=generated_at or datetime.now(UTC).isoformat(timespec="seconds"),
            source=source, sweep=self.sweep, runs=tally.rows.runs(),
            trainings=self.trainings, matching=matching, om_scores=om_infer(matching.pairs),
            leaderboard=leaderboard(newest), readings=tally.readings(),
            others=self.others, provenance=provenance, row_limit=ROW_LIMIT, tally=tally)
        report.extra = [trend_section(report)]
        return report


class _Seen:
    """A latency record as :meth:`Tally.add` reads it: a whole :class:`Run` is made
    (:func:`build._run`) only of the few the tally keeps."""

    __slots__ = ("created_at", "device", "emulated", "id", "ident", "invalid", "key",
                 "latency_ms", "load_ms", "model_label", "record", "status", "variant")

    def __init__(self, record, ident: tuple, is_emulated: bool) -> None:
        self.record, self.ident = record, ident
        self.id, self.status, self.created_at = record.id, record.status, record.created_at
        self.load_ms, self.invalid = record.load_ms, record.validity == INVALID
        self.device, self.emulated = record.device or "—", is_emulated
        self.key, self.variant = ident
        self.model_label = self.key.configuration.model_label or "—"
        self.latency_ms = identity.latency_ms(record)


# -- trends ------------------------------------------------------------------------------------

def trend_rows(report: Report) -> list[dict]:
    """Per key with ok runs: its latency month by month, summarised (VALID runs where the
    key has any)."""
    rows = [trend.row() for trend in report.tally.trends.values()]
    return sorted(rows, key=lambda d: (d["device"], d["model"], d["variant"],
                                       d["input_shape"] or "", d["threads"] or 0))


def trend_section(report: Report) -> Section:
    cols = (Column("device", "device"), Column("model", "model"), Column("variant", "format"),
            Column("input_shape", "input shape"), Column("threads", "threads", "int"),
            Column("runs", "ok runs", "int"), Column("months", "months", "int"),
            Column("since", "since"), Column("first_ms", "first month ms", "ms"),
            Column("latest_ms", "latest month ms", "ms"), Column("best_ms", "best ms", "ms"),
            Column("change", "latest vs first", "pct"), Column("validity", "validity"))
    intro = ("Each configuration at each thread count over time: the median of its runs in the "
             "first and in the latest month it was measured, its best run, and the change "
             "(VALID runs where it has any).")
    return Section("trends", "Trends per configuration", intro,
                   tables=(Table("trends", "Latency per configuration over time", cols,
                                 tuple(trend_rows(report))),))
