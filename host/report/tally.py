"""What the report's sections read of the latency runs, kept as the runs go past: every count,
each key's plotted run, the newest rows of the run tables, load times, trends and telemetry.

A report of a small store feeds every run in (:meth:`Tally.of`, nothing is left out); the
report of a large store (:mod:`aiot.host.report.scale`) feeds one run at a time from a
streaming pass with a ``row_limit``, so what it holds is bounded by the configurations and
the months they were measured in, not by the store:

* the run tables (every run, flagged runs): the newest ``row_limit`` of each (a heap), and
  how many there were;
* per key (a configuration at one thread count, :mod:`aiot.host.store.identity`): its plotted
  run (the newest ok one, VALID where there is one) with its record, and its trend: the
  months it was measured in, its best, and the latencies of its first and of its latest month
  only (a month of nightly runs is ~30 values; the months between are counted, not kept);
* per device: the telemetry readings counted with their range, and an evenly spaced sample
  of at most :data:`READING_LIMIT` of them for the figure;
* load times: 8 bytes per ok run with one (``array('d')`` per device, model and format), kept
  whole since the table's median and the figure's spread need every value (8 MB per million
  runs, the one part that grows with the store).
"""

from __future__ import annotations

import heapq
import itertools
import statistics
from array import array

#: Telemetry readings per device a summarised report keeps for its figure (an evenly spaced
#: sample; the figure draws at most plots.MAX_POINTS of them).
READING_LIMIT = 4000


class Newest:
    """Runs in the order given, or with a ``limit`` the newest ``limit`` of them (by
    ``created_at``), and how many were given."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.seen = limit, 0
        self._kept: list = []  # runs; with a limit a heap of (created_at, order, run)

    def add(self, run) -> None:
        self.seen += 1
        if self.limit is None:
            self._kept.append(run)
        elif len(self._kept) < self.limit:
            heapq.heappush(self._kept, (run.created_at, self.seen, run))
        elif run.created_at >= self._kept[0][0]:
            heapq.heapreplace(self._kept, (run.created_at, self.seen, run))

    def map(self, make) -> None:
        """Each run kept replaced by ``make(run)`` (see :meth:`Tally.finish`)."""
        if self.limit is None:
            self._kept = [make(run) for run in self._kept]
        else:  # the heap's order is the times', which stay
            self._kept = [(t, n, make(run)) for t, n, run in self._kept]

    def runs(self) -> list:
        """Every run as given, or the newest ``limit``, newest first."""
        if self.limit is None:
            return list(self._kept)
        return [run for _t, _n, run in sorted(self._kept, key=lambda x: (x[0], -x[1]),
                                               reverse=True)]


class _Months:
    """Latencies of one key's runs (or of its VALID runs) by month: the months seen, the best,
    and the values of the first and of the latest month."""

    __slots__ = ("best", "first", "first_values", "latest", "latest_values", "months")

    def __init__(self) -> None:
        self.months: set[str] = set()
        self.best = None
        self.first = self.latest = None
        self.first_values: list[float] = []
        self.latest_values: list[float] = []

    def add(self, month: str, ms: float) -> None:
        self.months.add(month)
        self.best = ms if self.best is None else min(self.best, ms)
        if self.first is None or month < self.first:
            self.first, self.first_values = month, []
        if month == self.first:
            self.first_values.append(ms)
        if self.latest is None or month > self.latest:
            self.latest, self.latest_values = month, []
        if month == self.latest:
            self.latest_values.append(ms)


class Trend:
    """One key's ok runs over time (VALID ones apart)."""

    __slots__ = ("every", "head", "runs", "valid")

    def __init__(self, head) -> None:
        self.head = head  # the first run seen: the key's device, model, format, shape, threads
        self.runs = 0
        self.every, self.valid = _Months(), _Months()

    def add(self, run) -> None:
        self.runs += 1
        month = run.created_at[:7]
        self.every.add(month, run.latency_ms)
        if not run.invalid:
            self.valid.add(month, run.latency_ms)

    def row(self) -> dict:
        """Its trends row: the first and latest month's median, the best, the change (VALID
        runs where the key has any)."""
        pool = self.valid if self.valid.months else self.every
        first, latest = statistics.median(pool.first_values), statistics.median(pool.latest_values)
        head = self.head
        return {"device": head.device, "host": getattr(head, "host", None),
                "model": head.model_label, "variant": head.variant,
                "input_shape": head.input_shape, "threads": head.threads, "runs": self.runs,
                "months": len(pool.months), "since": pool.first, "first_ms": first,
                "latest_ms": latest, "best_ms": pool.best,
                "change": latest / first - 1 if first else None,
                "validity": None if pool is self.valid else "INVALID"}


class Telemetry:
    """One device's readings: how many, their range, and (with a limit) an evenly spaced
    sample of them."""

    __slots__ = ("freqs", "kept", "limit", "readings", "stride", "temps")

    def __init__(self, limit: int | None) -> None:
        self.readings, self.stride, self.limit = 0, 1, limit
        self.kept: list[tuple] = []  # (order, reading)
        self.temps: list = [None, None]  # min, max
        self.freqs: list = [None, None]

    def add(self, order: int, reading) -> None:
        if reading.temp_c is not None:
            _widen(self.temps, reading.temp_c)
        if reading.freq_mhz is not None:
            _widen(self.freqs, reading.freq_mhz)
        if self.readings % self.stride == 0:
            self.kept.append((order, reading))
            if self.limit is not None and len(self.kept) > self.limit:
                # Every other one kept so far, and every other one from now on: still evenly
                # spaced over everything seen.
                self.kept, self.stride = self.kept[::2], self.stride * 2
        self.readings += 1


def _widen(span: list, value: float) -> None:
    span[0] = value if span[0] is None else min(span[0], value)
    span[1] = value if span[1] is None else max(span[1], value)


class Tally:
    """Everything the report's sections read of the latency runs (see the module)."""

    def __init__(self, row_limit: int | None = None) -> None:
        self.count = self.invalid = 0
        self.emulated = False  # some run was measured on an emulated device
        self.rows, self.flagged = Newest(row_limit), Newest(row_limit)
        self.plotted: dict = {}  # key → (run, its record or None)
        self.trends: dict = {}  # key → Trend
        self.loads: dict[tuple, array] = {}  # (device, host, model label, variant) → load times
        self.telemetry: dict[str, Telemetry] = {}  # device → its readings
        self._reading_limit = None if row_limit is None else READING_LIMIT
        self._order = itertools.count()

    @classmethod
    def of(cls, runs, readings=()) -> Tally:
        """Every one of ``runs`` and ``readings`` (the report of a small store)."""
        tally = cls()
        for run in runs:
            tally.add(run)
        for reading in readings:
            tally.add_reading(reading)
        return tally

    def add(self, run, record=None) -> None:
        """One latency run (``record``: the store record it was made from, for the scores
        that read records)."""
        self.count += 1
        self.invalid += run.invalid
        self.emulated = self.emulated or run.emulated
        self.rows.add(run)
        if run.invalid or run.status in ("failed", "pending"):
            self.flagged.add(run)
        if run.status != "ok":
            return
        if run.load_ms is not None:
            key = (run.device, run.host, run.model_label, run.variant)
            loads = self.loads.get(key)
            if loads is None:  # (setdefault would make an array for every run)
                loads = self.loads[key] = array("d")
            loads.append(run.load_ms)
        if run.latency_ms is None:
            return
        held = self.plotted.get(run.key)
        if held is None or _better(run, held[0]):
            self.plotted[run.key] = (run, record)
        trend = self.trends.get(run.key)
        if trend is None:
            trend = self.trends[run.key] = Trend(run)
        trend.add(run)

    def finish(self, make) -> None:
        """What is kept made into runs by ``make``, for a pass that added stand-ins (anything
        with the attributes :meth:`add` reads) so as to make a whole run only of the few
        kept."""
        self.rows.map(make)
        self.flagged.map(make)
        self.plotted = {key: (make(run), record) for key, (run, record) in self.plotted.items()}
        for trend in self.trends.values():
            trend.head = make(trend.head)

    def add_reading(self, reading) -> None:
        device = self.telemetry.get(reading.device)
        if device is None:
            device = self.telemetry[reading.device] = Telemetry(self._reading_limit)
        device.add(next(self._order), reading)

    def readings(self) -> list:
        """The readings kept (every one without a limit), oldest first."""
        kept = [x for device in self.telemetry.values() for x in device.kept]
        return [reading for _order, reading in sorted(kept, key=lambda x: (x[1].time, x[0]))]

    def invalid_ids(self) -> set[str]:
        """The INVALID runs' ids among those held: every one without a limit; with one, every
        plotted run's (what the scores are made of) and the newest flagged ones."""
        held = itertools.chain(self.flagged.runs(), (run for run, _ in self.plotted.values()))
        return {run.id for run in held if run.invalid}


def _better(run, held) -> bool:
    """Whether ``run`` stands for its key rather than ``held``: a VALID run over an INVALID
    one, else the newer (of two as new, the later given)."""
    if run.invalid != held.invalid:
        return held.invalid
    return run.created_at >= held.created_at
