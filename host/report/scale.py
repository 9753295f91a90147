"""The report of a store of any size: every run listed up to :data:`DETAIL_LIMIT` records, a
summary beyond.

A lab's store holds ~100k records a year. Listing and decoding every one of them at once
(:func:`aiot.host.report.build.collect`) took 5 GB and wrote a 108 MB page. Past
:data:`DETAIL_LIMIT` records the report is built from one pass over the records' facts
(:mod:`aiot.host.store.facts`: ~100 bytes a record, kept by the store with each record), whole
records read by primary key only for the runs it shows, and summarises:

* the first screen, the formats compared, the plots, load times and telemetry as before
  (they already show each key's newest run, or aggregate);
* **trends**: per key (a configuration at one thread count), how its latency moved over the
  months it was measured (first and latest month's median, best, the change);
* the BNN pairs and the VIPS leaderboard over each key's newest ok run (not every run of it);
* the run tables (every run, flagged runs) list the newest :data:`ROW_LIMIT`, and name the
  commands that list the rest (``aiot results list``, ``aiot results export``).

Nothing is kept per record: the pass feeds each run's facts to a
:class:`~aiot.host.report.tally.Tally` (each key's plotted run and trend, the newest rows, a
sample of the telemetry), so memory is bounded by the configurations and months, not the
store (load times aside: 8 bytes a run).

A store at or under the limit gets exactly the report it got before.
"""

from __future__ import annotations

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
from aiot.host.store import facts, identity, scan

#: Records up to which the report lists every run (the report as it always was).
DETAIL_LIMIT = 2000
#: Rows of each run table in a summarised report.
ROW_LIMIT = 300


def report_of(store, source: str, sweep: str | None = None,
              generated_at: str | None = None, host: str | None = None) -> Report:
    """The report of ``store`` (of one sweep, of one host's runs): in full up to
    :data:`DETAIL_LIMIT` records, summarised from one pass over the records' facts beyond.

    Raises:
        UsageError: nothing to report.
        StoreError: the store's facts disagree with its records (see
            :func:`aiot.host.store.facts.require`).
    """
    if scan.count(store, sweep, host) <= DETAIL_LIMIT:
        return build(collect(store, sweep, host), source, sweep, generated_at)
    facts.require(store)
    return _Pass(sweep, host).read(store).report(store, source, generated_at)


class _Pass:
    """What one pass over every record's facts (:mod:`aiot.host.store.facts`) keeps: a
    :class:`~aiot.host.report.tally.Tally` of the latency runs (bounded: see its module) and
    running tallies for provenance. Whole records are read (by primary key) only of the runs
    the tally keeps, the trainings and the other kinds."""

    def __init__(self, sweep: str | None, host: str | None = None) -> None:
        self.sweep, self.host = sweep, host
        self.tally = Tally(ROW_LIMIT)
        self.devices: dict[str, tuple[str, dict]] = {}  # name → (created_at, device facts)
        self.statuses: dict[str, int] = {}
        self.sweeps: set[str] = set()
        self.first = self.last = None
        self.versions: dict[str, set[str]] = {}
        self.others: list[tuple[str, str]] = []  # (kind, id) of the records not latency runs

    def read(self, store) -> _Pass:
        texts = facts.texts(store)
        idents = _Made(lambda n: _ident(facts.key_of(texts[n])))
        parts = _Made(lambda n: facts.parts_of(texts[n]))
        provs = _Made(lambda n: (parts[n].get("device"), emulated(parts[n].get("device") or {})))
        statuses, sweeps, seen_parts = self.statuses, self.sweeps, set()
        early, late = "\uffff", ""  # no time seen yet
        for f in facts.iter_facts(store, self.sweep):  # facts.FACTS
            if self.host and idents[f[10]][0].configuration.host != self.host:
                continue
            run_id, kind, status, sweep_id, created_at, finished_at = f[:6]
            statuses[status] = statuses.get(status, 0) + 1
            if sweep_id:
                sweeps.add(sweep_id)
            for when in (created_at, finished_at):
                if when:
                    if when < early:
                        early = when
                    if when > late:
                        late = when
            seen_parts.add(f[11])
            if kind == LATENCY:
                self._latency(f, idents, provs)
            else:
                self.others.append((kind, run_id))
        if not statuses:
            raise UsageError(f"no records in sweep '{self.sweep}' to report on",
                             "see: aiot results list")
        self.first, self.last = (early, late) if late else (None, None)
        for n in seen_parts:
            for what, value in version_facts(_Facts(parts[n])):
                self.versions.setdefault(what, set()).add(value)
        return self

    def _latency(self, f: tuple, idents: dict, provs: dict) -> None:
        run_id, created_at, device, state = f[0], f[4], f[6], f[12]
        info, is_emulated = provs[f[11]]
        self.tally.add(_Seen(f, idents[f[10]], is_emulated))
        if state is not None:
            device_state = facts.state_of(state)
            if device_state:
                for reading in _readings(_Facts({"device_state": device_state}, device, run_id)):
                    self.tally.add_reading(reading)
        name = device or (info or {}).get("name") or "—"
        if info and created_at >= self.devices.get(name, ("",))[0]:
            self.devices[name] = (created_at, info)

    def report(self, store, source: str, generated_at: str | None) -> Report:
        tally = self.tally
        kept = [*(seen for seen in tally.rows.runs()), *tally.flagged.runs(),
                *(seen for seen, _record in tally.plotted.values()),
                *(trend.head for trend in tally.trends.values())]
        records = scan.slim_records(store, [*(seen.id for seen in kept),
                                            *(run_id for _kind, run_id in self.others)])
        tally.finish(lambda seen: _run(records[seen.id], seen.ident[:2]))
        tally.plotted = {key: (run, records[run.id]) for key, (run, _) in tally.plotted.items()}
        trainings, others = [], {}
        for kind, run_id in self.others:
            if kind == TRAIN:
                trainings.append(_training(records[run_id]))
            else:
                others.setdefault(kind, []).append(records[run_id])
        newest = sorted((record for _run, record in tally.plotted.values()),
                        key=lambda r: r.created_at)
        matching = match_runs(newest)
        provenance = Provenance(
            devices=[_device_facts(n, info) for n, (_t, info) in sorted(self.devices.items())],
            versions=version_rows(self.versions), first=self.first, last=self.last,
            sweeps=sorted(self.sweeps), statuses=self.statuses)
        report = Report(
            generated_at=generated_at or datetime.now(UTC).isoformat(timespec="seconds"),
            source=source, sweep=self.sweep, runs=tally.rows.runs(),
            trainings=trainings, matching=matching, om_scores=om_infer(matching.pairs),
            leaderboard=leaderboard(newest), readings=tally.readings(),
            others=others, provenance=provenance, row_limit=ROW_LIMIT, tally=tally)
        report.extra = [trend_section(report)]
        return report


class _Made(dict):
    """Values made by ``make`` from their key on first use (a key's ident, a provenance's
    facts: few, each made once however many runs name it)."""

    def __init__(self, make) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, n):
        value = self[n] = self.make(n)
        return value


def _ident(key: identity.Key) -> tuple:
    """A key, its variant and model label (as build._run names them)."""
    variant = identity.variant({**key.configuration._asdict(), "threads": key.threads})
    return key, variant, key.configuration.model_label or "—"


class _Facts:
    """A record as :func:`build.version_facts` and :func:`build._readings` read it, made of
    its facts."""

    __slots__ = ("device", "id", "provenance")

    def __init__(self, provenance: dict, device: str | None = None, run_id: str = "") -> None:
        self.provenance, self.device, self.id = provenance, device, run_id


class _Seen:
    """A latency run as :meth:`Tally.add` reads it, made of its facts: a whole :class:`Run`
    is made (:func:`build._run`) only of the few the tally keeps."""

    __slots__ = ("created_at", "device", "emulated", "host", "id", "ident", "invalid", "key",
                 "latency_ms", "load_ms", "model_label", "status", "variant")

    def __init__(self, f: tuple, ident: tuple, is_emulated: bool) -> None:
        # f: facts.FACTS; ident: _ident's
        self.id, _kind, self.status, _sweep, self.created_at, _finished, device, validity, \
            self.latency_ms, self.load_ms = f[:10]
        self.key, self.variant, self.model_label = ident
        self.ident, self.host = ident, self.key.configuration.host
        self.invalid, self.device, self.emulated = validity == INVALID, device or "—", is_emulated


# -- trends ------------------------------------------------------------------------------------

def trend_rows(report: Report) -> list[dict]:
    """Per key with ok runs: its latency month by month, summarised (VALID runs where the
    key has any)."""
    rows = [trend.row() for trend in report.tally.trends.values()]
    return sorted(rows, key=lambda d: (d["device"], d["host"] or "", d["model"], d["variant"],
                                       d["input_shape"] or "", d["threads"] or 0))


#: ``trends.csv``'s columns (a summarised report's): one row per configuration and threads.
TRENDS_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("variant", "format"), Column("input_shape", "input shape"),
    Column("threads", "threads", "int"), Column("runs", "ok runs", "int"),
    Column("months", "months", "int"), Column("since", "since"),
    Column("first_ms", "first month ms", "ms"), Column("latest_ms", "latest month ms", "ms"),
    Column("best_ms", "best ms", "ms"), Column("change", "latest vs first", "pct"),
    Column("validity", "validity"))


def trend_section(report: Report) -> Section:
    intro = ("Each configuration at each thread count over time: the median of its runs in the "
             "first and in the latest month it was measured, its best run, and the change "
             "(VALID runs where it has any).")
    return Section("trends", "Trends per configuration", intro,
                   tables=(Table("trends", "Latency per configuration over time", TRENDS_COLUMNS,
                                 tuple(trend_rows(report)), fold=("host",)),))
