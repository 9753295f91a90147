"""Comparing two result sets (a regression gate) and ranking stored runs (leaderboards).

The pure logic behind ``aiot results compare`` and ``aiot results top``.

**Result sets.** A set is named by one string, tried in this order (:func:`resolve_set`):

1. an existing file written by ``aiot results export --format json``;
2. a sweep id, or a unique prefix of one (an exact id wins over the longer ids it prefixes);
3. a comma list of record ids, each a prefix of at least 4 characters.

Only ``latency`` records count; pending ones are ignored.

**Matching.** Two records measure the same thing when their keys agree
(:func:`aiot.host.store.identity.key`, the one every view groups by): device, model,
binarize algorithm, format, native tool, delegate, CPU cluster, how the agent was started on
an Android device (``via``: shell or app), the requested input shapes, the converter options
(``--opt quant=int8``) and threads (the run spec less its timing params, weights, binary path
and dataset). Within a set the newest ok record of a
key stands for it, else its newest failed or skipped one (a skipped run counts as failed).
Runs left unmatched are paired across devices when exactly one on each side shares the rest
of the key; such a pair is shown as not comparable rather than as two "only in" rows.

**By a field.** :func:`compare_by` splits one set on ``via`` instead: its shell runs are A,
its app runs B, paired on the rest of the key (the app's delta over the shell).

**Not comparable** (marker ``x``, never fails the gate): another device, the same device name
on other hardware (model, SoC, CPU, ABI or core count differ), or, for two ok runs, artifacts
whose sha256 differ (other weights or converter; ``allow_other_artifacts`` compares them).
Differing software (runtime version or binary, agent, OS, kernel, aiot version, timing
params) does not stop a comparison: each pair lists it and the set gets a warning.

**Noise.** Two ok runs are *within noise* when both have a median confidence interval
(``result.stats_ms.median_ci``) and the intervals overlap; a ``median`` check never fails on
such a pair, however large the change between the medians. Without both intervals a change is
taken at face value. Only the median has an interval: the other metrics are judged on the
threshold alone. Native tools that print a mean only are compared (and gated by ``median``
checks) on their means.

**Gate.** A pair fails when B is worse than A by more than a :class:`Check` (``median:5%``,
``load:2ms``, ``accuracy:1pp`` ...) or when an ok run of A failed in B (newly failing).
Only in B, fixed, still failing and not comparable pairs never fail it. A set B that lacks
runs of A, or with which nothing could be compared at all, is *incomplete*
(:attr:`Comparison.incomplete`): the CLI fails it with its own exit code, since a gate that
compared nothing has checked nothing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.store import identity
from aiot.host.store.identity import KEY_FIELDS
from aiot.host.store.store import RunRecord, Store
#: What ``--by`` may split one set on: the field, its baseline value (A) and the other (B).
BY = {"via": ("via", "shell", "app")}
METRICS = ("median", "p90", "mean", "load", "size", "accuracy")
_UNITS = {"median": ("%", "ms"), "p90": ("%", "ms"), "mean": ("%", "ms"), "load": ("%", "ms"),
          "size": ("%",), "accuracy": ("pp",)}
#: asv's markers, plus ~ (within noise), < and > (a run in one set only) and . (failing in both).
MARKERS = {"slower": "+", "faster": "-", "newly failing": "!", "fixed": "*",
           "not comparable": "x", "within noise": "~", "unchanged": " ", "still failing": ".",
           "only in A": "<", "only in B": ">"}
#: What the markers mean, for every view of a comparison.
LEGEND = ("+ slower  - faster  ~ within noise  ! newly failing  * fixed  . failing in both  "
          "x not comparable  < only in A  > only in B")
#: Device facts that make the same device name another machine.
HARDWARE = ("model", "manufacturer", "soc", "cpu_model", "abi", "cores")
#: Software facts that may differ between compared runs (warned about, still compared).
SOFTWARE = (("runtime", "backend"), ("runtime", "version"), ("runtime", "binary_digest"),
            ("device", "distribution"), ("device", "android_version"), ("device", "kernel"),
            ("device", "agent", "agent_version"), ("device", "agent", "python"),
            ("aiot_version",))
_SET_HINT = ("give an export file (aiot results export --format json -o FILE), a sweep id or "
             "record ids; see: aiot results list")


# -- result sets -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResultSet:
    """The latency records a set's name resolved to, and how (file, sweep or records)."""

    name: str
    source: str
    records: list[RunRecord]

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source, "records": len(self.records)}


def load_export(path: Path) -> list[RunRecord]:
    """The records of a file written by ``aiot results export --format json``."""
    hint = "write one with: aiot results export --format json -o FILE"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path} as a results export: {exc}", hint) from None
    required = ("id", "kind", "status", "created_at", "spec", "provenance")
    if not isinstance(data, list) or not all(
            isinstance(d, dict) and all(k in d for k in required) for d in data):
        raise UsageError(f"{path} is not an aiot results export (a JSON list of records)", hint)
    fields = RunRecord.__dataclass_fields__
    return [RunRecord(**{k: v for k, v in d.items() if k in fields}) for d in data]


def find_sweep(name: str, store: Store) -> str | None:
    """The sweep ``name`` names: itself, else the one sweep id it prefixes."""
    matches = store.sweep_ids(name)
    if name in matches:
        return name
    if len(matches) > 1:
        raise UsageError(f"sweep id '{name}' is ambiguous: {', '.join(matches[:4])}",
                         "give more characters")
    return matches[0] if matches else None


def _by_ids(name: str, store: Store) -> list[RunRecord]:
    parts = [p.strip() for p in name.split(",")]
    found = []
    for part in parts:
        matches = store.with_prefix(part, kind="latency") if len(part) >= 4 else []
        if len(matches) > 1:
            raise UsageError(f"record id '{part}' is ambiguous", "give more characters")
        if not matches:
            what = "a file, a sweep id or a record id" if len(parts) == 1 else "a latency record id"
            raise UsageError(f"'{part}' is not {what}", _SET_HINT)
        found.append(matches[0])
    return found


def resolve_set(name: str, store: Store | None, files: bool = True) -> ResultSet:
    """The result set ``name`` names: an export file, else a sweep id, else record ids.

    Only the set's own records are read from the store (by its sweep or ids' index).

    Args:
        store: where sweeps and records are looked up (unused, may be None, for a file).
        files: whether ``name`` may be a file (False where a remote user names the set: the
            lab view never opens a path a request gives).

    Raises:
        UsageError: nothing matches, an id is ambiguous, or the set has no latency records.
    """
    path = Path(name)
    if files and path.is_file():
        records = [r for r in load_export(path) if r.kind == "latency"]
        chosen = ResultSet(name, "file", records)
    else:
        sweep = find_sweep(name, store) if name else None
        records = store.query(kind="latency", sweep_id=sweep) if sweep is not None else []
        if records:
            chosen = ResultSet(sweep, "sweep", records)
        else:
            chosen = ResultSet(name, "records", _by_ids(name, store))
    if not any(r.status != "pending" for r in chosen.records):
        raise UsageError(f"result set '{name}' has no finished latency records", _SET_HINT)
    return chosen


# -- thresholds --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """One ``--fail-on`` threshold: B may be worse than A by at most ``limit``.

    ``unit`` is ``%`` (relative to A), ``ms`` (absolute) or ``pp`` (accuracy, percentage
    points). Latency, load time and size are worse when larger, accuracy when smaller.
    """

    metric: str
    limit: float
    unit: str

    def __str__(self) -> str:
        return f"{self.metric}:{self.limit:g}{self.unit}"

    def failure(self, a: float | None, b: float | None, stat: str | None = None) -> str | None:
        """Why B crosses this threshold, or None (also when either value is missing).

        Args:
            stat: the name to report (``mean`` where a ``median`` check fell back to means).
        """
        if a is None or b is None:
            return None
        name = stat or self.metric
        if self.unit == "pp":
            drop = (a - b) * 100
            return f"{name} -{drop:.2f}pp > {self.limit:g}pp" if drop > self.limit else None
        if self.unit == "ms":
            delta = b - a
            return f"{name} +{delta:.4g}ms > {self.limit:g}ms" if delta > self.limit else None
        if a <= 0:
            return None
        change = (b - a) / a * 100
        return f"{name} {change:+.1f}% > {self.limit:g}%" if change > self.limit else None


_CHECK = re.compile(r"^(?:([a-z0-9]+):)?(\d+(?:\.\d*)?)(%|ms|pp)$")


def parse_check(text: str) -> Check:
    """``METRIC:N%``, ``METRIC:Nms`` or ``accuracy:Npp``; a bare ``N%`` means ``median``."""
    hint = ("use METRIC:N% or METRIC:Nms (median, p90, mean, load; size takes % only) "
            "or accuracy:Npp")
    match = _CHECK.match(text.strip().lower())
    if not match:
        raise UsageError(f"bad --fail-on '{text}'", hint)
    metric, limit, unit = match.group(1) or "median", float(match.group(2)), match.group(3)
    if metric not in _UNITS:
        raise UsageError(f"unknown --fail-on metric '{metric}' in '{text}'", hint)
    if unit not in _UNITS[metric]:
        raise UsageError(f"--fail-on '{text}': {metric} takes {' or '.join(_UNITS[metric])}", hint)
    return Check(metric, limit, unit)


# -- comparing ---------------------------------------------------------------------------------

def run_key(record: RunRecord, fields: tuple[str, ...] = KEY_FIELDS) -> tuple:
    """A record's key (:func:`aiot.host.store.identity.key`), as the values of ``fields``."""
    named = identity.key_fields(record)
    return tuple(named[name] for name in fields)


def _stats(record: RunRecord) -> dict:
    return (record.result or {}).get("stats_ms") or {}


def metric_value(record: RunRecord, metric: str) -> float | None:
    """One metric of a record (accuracy as a fraction, size in bytes, the rest in ms)."""
    if metric == "mean":
        return _stats(record).get("mean")
    column = {"median": "median_ms", "p90": "p90_ms", "load": "load_ms", "size": "size_bytes",
              "accuracy": "accuracy"}[metric]
    return getattr(record, column)


def _pair_values(a: RunRecord, b: RunRecord, metric: str) -> tuple[float | None, float | None, str]:
    """(A, B, statistic): ``median`` falls back to means when either run lacks a median, and
    accuracies measured on different datasets are not compared."""
    if metric == "median" and (a.median_ms is None or b.median_ms is None):
        metric_name, metric = "mean", "mean"
    else:
        metric_name = metric
    if metric == "accuracy":
        data = ("dataset", "dataset_limit")
        if any((a.spec or {}).get(k) != (b.spec or {}).get(k) for k in data):
            return None, None, metric_name
    return metric_value(a, metric), metric_value(b, metric), metric_name


def _ci(record: RunRecord) -> tuple[float, float] | None:
    ci = _stats(record).get("median_ci")
    return (ci["low"], ci["high"]) if ci else None


def within_noise(a: RunRecord, b: RunRecord) -> bool | None:
    """Whether the medians' confidence intervals overlap; None when either run has none."""
    ca, cb = _ci(a), _ci(b)
    if ca is None or cb is None:
        return None
    return ca[0] <= cb[1] and cb[0] <= ca[1]


def _fact(provenance: dict, path: tuple) -> object:
    value = provenance
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _differences(a: RunRecord, b: RunRecord, paths) -> list[str]:
    """``'name A vs B'`` for each fact both records know and disagree on."""
    out = []
    for path in paths:
        va, vb = _fact(a.provenance or {}, path), _fact(b.provenance or {}, path)
        if va is not None and vb is not None and va != vb:
            out.append(f"{'.'.join(path)} {va} vs {vb}")
    return out


def environment_differences(a: RunRecord, b: RunRecord) -> list[str]:
    """Software facts and timing params that differ (warned about, still compared)."""
    out = _differences(a, b, SOFTWARE)
    pa, pb = (a.spec or {}).get("params") or {}, (b.spec or {}).get("params") or {}
    for key in sorted(set(pa) & set(pb)):
        if pa[key] != pb[key]:
            out.append(f"params.{key} {pa[key]} vs {pb[key]}")
    return out


@dataclass
class Row:
    """One key's runs in A and B, with the verdict.

    ``metrics`` maps each metric to ``{"a", "b", "change"}``: the relative change for
    latency, load and size, the difference in percentage points for accuracy.
    """

    key: dict
    status: str
    a_id: str | None = None
    b_id: str | None = None
    stat: str | None = None  # the latency statistic the status compares: median or mean
    metrics: dict = field(default_factory=dict)
    noise: bool | None = None  # the median CIs overlap (None: a CI missing)
    reason: str | None = None  # why not comparable, or why a run failed
    environment: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # "A" / "B": an INVALID verdict
    failures: list[str] = field(default_factory=list)  # the gate's reasons; empty: passes

    @property
    def marker(self) -> str:
        return MARKERS[self.status]

    def label(self) -> str:
        """The key's run label (:func:`aiot.host.store.identity.label`)."""
        return identity.label(self.key)

    def to_dict(self) -> dict:
        return {**asdict(self), "marker": self.marker, "label": self.label()}


def _change(a: float | None, b: float | None, metric: str) -> float | None:
    if a is None or b is None:
        return None
    if metric == "accuracy":
        return (b - a) * 100
    return (b - a) / a if a else None


def _ok_row(row: Row, a: RunRecord, b: RunRecord, checks: list[Check]) -> None:
    """Status and gate failures of two comparable ok runs."""
    va, vb, row.stat = _pair_values(a, b, "median")
    row.noise = within_noise(a, b) if row.stat == "median" else None
    if va is None or vb is None or va == vb:
        row.status = "unchanged"
    elif row.noise:
        row.status = "within noise"
    else:
        row.status = "slower" if vb > va else "faster"
    for check in checks:
        va, vb, stat = _pair_values(a, b, check.metric)
        if check.metric == "median" and row.noise:
            continue  # overlapping CIs: the change may be noise
        failure = check.failure(va, vb, stat)
        if failure:
            row.failures.append(failure)


def compare_pair(a: RunRecord, b: RunRecord, checks: list[Check],
                 allow_other_artifacts: bool = False, fields: tuple[str, ...] = KEY_FIELDS) -> Row:
    """The verdict on two runs of the same key (or of the same key on two devices)."""
    row = Row(dict(zip(fields, run_key(a, fields), strict=True)), "unchanged", a.id, b.id)
    row.invalid = [side for side, r in (("A", a), ("B", b)) if r.validity == "INVALID"]
    hardware = _differences(a, b, [("device", fact) for fact in HARDWARE])
    host_a, host_b = identity.host_of(a), identity.host_of(b)
    other_host = host_a is not None and host_b is not None and host_a != host_b
    if a.device != b.device or other_host or hardware:
        row.status = "not comparable"
        row.reason = (f"device {a.device} vs {b.device}" if a.device != b.device else
                      f"host {host_a} vs {host_b} (another machine)" if other_host else
                      hardware[0])
        return row
    row.environment = environment_differences(a, b)
    if host_a != host_b:  # one side written before host ids were recorded
        row.environment.append(f"host {host_a or 'not recorded'} vs {host_b or 'not recorded'}")
    a_ok, b_ok = a.status == "ok", b.status == "ok"
    if not (a_ok and b_ok):
        row.status = ("newly failing" if a_ok else "fixed" if b_ok else "still failing")
        row.reason = (b if not b_ok else a).reason
        if row.status == "newly failing":
            row.failures.append(f"newly {b.status}: {b.reason or 'no reason recorded'}")
        return row
    for metric in METRICS:  # shown for not comparable artifacts too, as asv does
        va, vb, _ = _pair_values(a, b, metric)
        row.metrics[metric] = {"a": va, "b": vb, "change": _change(va, vb, metric)}
    row.stat = _pair_values(a, b, "median")[2]
    sha_a, sha_b = a.artifact_sha256, b.artifact_sha256
    if sha_a and sha_b and sha_a != sha_b and not allow_other_artifacts:
        row.status = "not comparable"
        row.reason = f"artifact sha256 {sha_a[:8]} vs {sha_b[:8]} (other weights or converter)"
        return row
    _ok_row(row, a, b, checks)
    return row


def representatives(records: list[RunRecord],
                    fields: tuple[str, ...] = KEY_FIELDS) -> dict[tuple, RunRecord]:
    """Per key: the newest ok record, else the newest failed or skipped one."""
    chosen: dict[tuple, RunRecord] = {}
    for record in sorted(records, key=lambda r: (r.created_at or "", r.finished_at or "")):
        if record.status == "pending":
            continue
        key = run_key(record, fields)
        held = chosen.get(key)
        if held is None or record.status == "ok" or held.status != "ok":
            chosen[key] = record
    return chosen


#: What a run's key may differ in and its runs still be paired (then judged): the machine.
_MACHINE = ("device", "host")


def _cross_device(only_a: dict, only_b: dict,
                  fields: tuple[str, ...] = KEY_FIELDS) -> list[tuple[RunRecord, RunRecord]]:
    """Unmatched runs that share all of the key but the device and host, one on each side."""
    rest = [i for i, name in enumerate(fields) if name not in _MACHINE]

    def by_rest(side):
        groups: dict[tuple, list] = {}
        for key, record in side.items():
            groups.setdefault(tuple(key[i] for i in rest), []).append(record)
        return groups

    rest_a, rest_b = by_rest(only_a), by_rest(only_b)
    return [(rest_a[k][0], rest_b[k][0]) for k in rest_a
            if len(rest_a[k]) == 1 and len(rest_b.get(k, ())) == 1]


def _order(row: Row) -> tuple:
    """By key, field by field; a missing value first, thread counts as numbers."""
    return tuple((v is not None, v if isinstance(v, int) else str(v)) for v in row.key.values())


@dataclass
class Comparison:
    """Every row of a comparison, the checks it was gated on, and set-level warnings."""

    checks: list[Check]
    rows: list[Row]
    warnings: list[str]
    allow_missing: bool = False  # B may cover part of A: missing runs do not fail the gate

    @property
    def failing(self) -> list[Row]:
        """The rows that fail the gate."""
        return [r for r in self.rows if r.failures]

    @property
    def missing(self) -> list[Row]:
        """A's runs that B lacks (no run of B measures the same thing)."""
        return [r for r in self.rows if r.status == "only in A"]

    @property
    def compared(self) -> int:
        """How many pairs were compared (both sides present and comparable)."""
        return sum(1 for r in self.rows if r.a_id and r.b_id and r.status != "not comparable")

    @property
    def incomplete(self) -> str | None:
        """Why B cannot stand in for A (runs of A missing, nothing compared), or None."""
        if self.allow_missing:
            return None
        if self.rows and not self.compared:
            return "nothing was compared: no run of B measures what a run of A measured"
        if self.missing:
            return f"{len(self.missing)} run(s) of A missing from B"
        return None

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.rows))

    def to_dict(self) -> dict:
        return {"checks": [str(c) for c in self.checks],
                "passed": not self.failing and not self.incomplete,
                "failing": [r.label() for r in self.failing], "incomplete": self.incomplete,
                "missing": [r.label() for r in self.missing], "counts": self.counts(),
                "warnings": self.warnings, "rows": [r.to_dict() for r in self.rows]}


def _warnings(rows: list[Row]) -> list[str]:
    compared = [r for r in rows if r.a_id and r.b_id and r.status != "not comparable"]
    fields = Counter(d.split(" ")[0] for r in compared for d in r.environment)
    warnings = [] if compared else ["no run of A matches a run of B: nothing was compared"]
    if fields:
        names = ", ".join(f"{name} ({n} of {len(compared)})" for name, n in fields.most_common())
        warnings.append(f"environments differ: {names}")
    invalid = sum(1 for r in compared if r.invalid)
    if invalid:
        warnings.append(f"{invalid} compared pair(s) include an INVALID run "
                        "(see: aiot results show ID)")
    return warnings


def compare(a: list[RunRecord], b: list[RunRecord], checks: list[Check],
            allow_other_artifacts: bool = False, fields: tuple[str, ...] = KEY_FIELDS) -> Comparison:
    """Match A's runs with B's and judge every pair against ``checks``.

    Args:
        a: the baseline's latency records.
        b: the candidate's latency records.
        checks: the gate's thresholds (newly failing runs fail it whatever they are).
        allow_other_artifacts: compare ok runs whose artifact hashes differ.
        fields: what two runs must share to be paired (:data:`KEY_FIELDS`, less the field a
            :func:`compare_by` splits on).
    """
    ra, rb = representatives(a, fields), representatives(b, fields)
    rows = [compare_pair(ra[k], rb[k], checks, allow_other_artifacts, fields) for k in ra if k in rb]
    only_a = {k: r for k, r in ra.items() if k not in rb}
    only_b = {k: r for k, r in rb.items() if k not in ra}
    for ia, ib in _cross_device(only_a, only_b, fields):
        rows.append(compare_pair(ia, ib, checks, allow_other_artifacts, fields))
        only_a.pop(run_key(ia, fields))
        only_b.pop(run_key(ib, fields))
    rows += [Row(dict(zip(fields, k, strict=True)), "only in A", a_id=r.id)
             for k, r in only_a.items()]
    rows += [Row(dict(zip(fields, k, strict=True)), "only in B", b_id=r.id)
             for k, r in only_b.items()]
    rows.sort(key=_order)
    return Comparison(checks, rows, _warnings(rows))


def by_value(record: RunRecord, by: str) -> str:
    """The value of ``--by`` field ``by`` a record has (a shell run's spec leaves ``via`` out)."""
    field, base, _ = BY[by]
    return identity.key_fields(record)[field] or base


def compare_by(records: list[RunRecord], by: str, checks: list[Check],
               allow_other_artifacts: bool = False) -> Comparison:
    """One set's runs split on ``by`` and compared: A its baseline value's runs (``via``:
    shell), B the other's (app), paired on every other key field. E.g. the shell-vs-app
    delta per model, format and thread count of a ``sweep --via app,shell``.

    Raises:
        UsageError: ``by`` is not one of :data:`BY`.
    """
    if by not in BY:
        raise UsageError(f"unknown --by '{by}'", f"use one of {', '.join(BY)}")
    field, base, other = BY[by]
    fields = tuple(f for f in KEY_FIELDS if f != field)
    a = [r for r in records if by_value(r, by) == base]
    b = [r for r in records if by_value(r, by) == other]
    return compare(a, b, checks, allow_other_artifacts, fields)


# -- leaderboards ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Standing:
    """One place of the latency leaderboard: the best run of its key."""

    rank: int
    record_id: str
    device: str | None
    model: str | None
    binarize: str | None
    format: str | None
    threads: int | None
    native: str | None
    stat: str  # median, or mean for a native tool that prints a mean only
    latency_ms: float
    p90_ms: float | None
    size_bytes: int | None
    variant: str = ""  # how it ran: tflite[quant=int8]+nnapi (benchmark_model) @big via app
    label: str = ""  # the run's one label (aiot.host.store.identity.label)

    def to_dict(self) -> dict:
        return asdict(self)


def latency_board(records: list[RunRecord]) -> list[Standing]:
    """The fastest ok VALID run per key (:func:`aiot.host.store.identity.key`), fastest first.

    A key is the configuration every view groups by: an int8 run, a ``--via app`` run and a
    native tool's run of the same model are places of their own, never hidden behind a
    faster configuration's.
    """
    best: dict[tuple, tuple[float, str, RunRecord]] = {}
    for r in records:
        latency = identity.latency(r) if r.kind == "latency" else None
        if latency is None or r.validity != "VALID":
            continue
        key = identity.key(r)
        if key not in best or latency.ms < best[key][0]:
            best[key] = (latency.ms, latency.stat, r)
    ranked = sorted(best.values(), key=lambda item: item[0])
    return [Standing(rank, r.id, r.device, r.model, (r.spec or {}).get("binarize"), r.format,
                     r.threads, (r.spec or {}).get("native"), stat, ms, r.p90_ms, r.size_bytes,
                     identity.variant(r), identity.label(r))
            for rank, (ms, stat, r) in enumerate(ranked, start=1)]
