"""Comparing two result sets: a regression gate.

The pure logic behind ``aiot results compare``. A set (an export file, a sweep id or record
ids) is resolved by :mod:`aiot.host.store.result_sets`; the leaderboards of ``aiot results
top`` are :mod:`aiot.host.store.leaderboard` (both re-exported here).

**Matching.** Two records measure the same thing when their keys agree
(:func:`aiot.host.store.identity.key`, the one every view groups by): host, device, model,
binarize algorithm, format, native tool, delegate, CPU cluster, how the agent was started on
an Android device (``via``: shell or app), the requested input shapes, the converter options
(``--opt quant=int8``) and threads (the run spec less its timing params, weights, binary path
and dataset). Within a set the newest ok record of a
key stands for it, else its newest failed or skipped one (a skipped run counts as failed).
Runs left unmatched are paired across devices when exactly one on each side shares the rest
of the key; such a pair is shown as not comparable rather than as two "only in" rows.

**By a field.** :func:`compare_by` splits one set on ``via`` instead: its shell runs are A,
its app runs B, paired on the rest of the key (the app's delta over the shell).

**Not comparable** (marker ``x``): another device, another host (:func:`identity.host_of`:
two hosts' ``local`` are two machines) or the same device name on other hardware (model, SoC,
CPU, ABI or core count differ). Differing software (runtime version or binary, agent, OS,
kernel, aiot version, timing params) does not stop a comparison: each pair lists it and the
set gets a warning.

**Another artifact is the comparison.** Two runs of one key whose artifacts' sha256 differ
(the user's model changed between two commits, other weights, another converter) are
compared and judged like any others: guarding a model that changes is the gate's main job.
Every row carries both artifacts' sha256 (``a_sha256``, ``b_sha256``; ``other_artifact``
when they differ), and every view shows them.

**Noise.** Two ok runs are *within noise* when both have a median confidence interval
(``result.stats_ms.median_ci``) and the intervals overlap; a ``median`` check never fails on
such a pair, however large the change between the medians. Without both intervals a change is
taken at face value. Only the median has an interval: the other metrics are judged on the
threshold alone. Native tools that print a mean only are compared (and gated by ``median``
checks) on their means.

**Gate.** A pair fails when B is worse than A by more than a :class:`Check` (``median:5%``,
``load:2ms``, ``accuracy:1pp`` ...), when an ok run of A failed in B (newly failing), and,
with ``fail_on_invalid``, when it was judged on an INVALID run (either side). Only in B,
fixed and still failing pairs never fail it. A pair also fails, whatever the thresholds, when
B's operators fall back outside the engine more than A's, or B ran on another engine
(:func:`aiot.host.store.placement.fallback_failure`, naming them). A failing pair fails the
comparison whatever else is allowed. A set B is *incomplete*
(:attr:`Comparison.incomplete`; the CLI fails it with its own exit code) when nothing could
be compared at all (a gate that compared nothing has checked nothing), when a run of A has
only a not comparable run in B (measured on another machine: no allowance excuses it), or
when runs of A are missing from B, unless ``allow_missing`` says B deliberately covers part
of A. The pairs judged on INVALID runs are counted (:attr:`Comparison.invalid`) in every
verdict.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from aiot.core.errors import UsageError
from aiot.host.store import identity
from aiot.host.store.identity import KEY_FIELDS
from aiot.host.store.leaderboard import Standing, latency_board  # noqa: F401 (re-exported)
from aiot.host.store.placement import fallback_failure
from aiot.host.store.result_sets import (  # noqa: F401 (re-exported)
    ResultSet,
    find_sweep,
    load_export,
    resolve_set,
)
from aiot.host.store.store import RunRecord

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
    a_sha256: str | None = None  # A's artifact (None: not recorded, e.g. a run that failed)
    b_sha256: str | None = None

    @property
    def marker(self) -> str:
        return MARKERS[self.status]

    @property
    def other_artifact(self) -> bool:
        """Whether A and B ran different artifacts (the model, weights or converter changed)."""
        return bool(self.a_sha256 and self.b_sha256 and self.a_sha256 != self.b_sha256)

    @property
    def compared(self) -> bool:
        """Both sides present and comparable: the pair was judged."""
        return bool(self.a_id and self.b_id) and self.status != "not comparable"

    def artifacts(self) -> str:
        """Both artifacts, short: ``1a2b3c4d → 5e6f7a8b``, ``1a2b3c4d`` when the same."""
        a, b = (sha[:8] if sha else "—" for sha in (self.a_sha256, self.b_sha256))
        return a if a == b else f"{a} → {b}"

    def label(self) -> str:
        """The key's run label (:func:`aiot.host.store.identity.label`)."""
        return identity.label(self.key)

    def to_dict(self) -> dict:
        return {**asdict(self), "marker": self.marker, "label": self.label(),
                "other_artifact": self.other_artifact}


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


def _invalid_failure(side: str, record: RunRecord) -> str:
    """``B INVALID: device busy, CV above limit``: a gate failure of ``fail_on_invalid``."""
    reasons = ((record.result or {}).get("validity") or {}).get("reasons") or []
    names = ", ".join(dict.fromkeys(str(r).partition(":")[0] for r in reasons))
    return f"{side} INVALID" + (f": {names}" if names else "")


def compare_pair(a: RunRecord, b: RunRecord, checks: list[Check],
                 fields: tuple[str, ...] = KEY_FIELDS, fail_on_invalid: bool = False) -> Row:
    """The verdict on two runs of the same key (or of the same key on two devices).

    Args:
        fail_on_invalid: a judged pair with an INVALID run (either side) fails the gate.
    """
    row = Row(dict(zip(fields, run_key(a, fields), strict=True)), "unchanged", a.id, b.id,
              a_sha256=a.artifact_sha256, b_sha256=b.artifact_sha256)
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
    else:  # another artifact included: a changed model is what the gate guards
        for metric in METRICS:
            va, vb, _ = _pair_values(a, b, metric)
            row.metrics[metric] = {"a": va, "b": vb, "change": _change(va, vb, metric)}
        row.stat = _pair_values(a, b, "median")[2]
        _ok_row(row, a, b, checks)
        if (moved := fallback_failure(a.result, b.result)) is not None:
            row.failures.append(moved)  # whatever the thresholds: as a newly failing run
    if fail_on_invalid:
        row.failures += [_invalid_failure(side, record) for side, record in (("A", a), ("B", b))
                         if side in row.invalid]
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
    allow_missing: bool = False  # B deliberately covers part of A: runs it lacks do not fail
    fail_on_invalid: bool = False  # pairs judged on an INVALID run failed (see compare())
    gated: bool = True  # False: a view (``--by`` without ``--fail-on``): B is never incomplete

    @property
    def failing(self) -> list[Row]:
        """The rows that fail the gate (whatever is allowed: a failing row fails it)."""
        return [r for r in self.rows if r.failures]

    @property
    def missing(self) -> list[Row]:
        """A's runs that B lacks (no run of B measures the same thing)."""
        return [r for r in self.rows if r.status == "only in A"]

    @property
    def not_comparable(self) -> list[Row]:
        """A's runs whose only counterpart in B ran on another machine."""
        return [r for r in self.rows if r.status == "not comparable"]

    @property
    def compared(self) -> int:
        """How many pairs were compared (both sides present and comparable)."""
        return sum(1 for r in self.rows if r.compared)

    @property
    def invalid(self) -> list[Row]:
        """The compared pairs judged on an INVALID run (either side)."""
        return [r for r in self.rows if r.compared and r.invalid]

    @property
    def other_artifacts(self) -> list[Row]:
        """The compared pairs whose artifacts differ (the model changed: what the gate guards)."""
        return [r for r in self.rows if r.compared and r.other_artifact]

    @property
    def incomplete(self) -> str | None:
        """Why B cannot stand in for A, or None: nothing compared, a run of A with only a not
        comparable run in B (neither excused by ``allow_missing``), runs of A missing."""
        if not self.gated:
            return None
        unlike = self.not_comparable
        why = f" ({unlike[0].reason})" if unlike else ""
        if self.rows and not self.compared:
            if unlike:
                return f"nothing was compared: {len(unlike)} pair(s) not comparable{why}"
            return "nothing was compared: no run of B measures what a run of A measured"
        if unlike:
            return f"{len(unlike)} run(s) of A have only a not comparable run in B{why}"
        if self.missing and not self.allow_missing:
            return f"{len(self.missing)} run(s) of A missing from B"
        return None

    @property
    def passed(self) -> bool:
        return not self.failing and not self.incomplete

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.rows))

    def verdict(self) -> tuple[str, str]:
        """The verdict as (head, rest): ``("gate failed (median:20%)", "1 run(s) failed; 1
        pair(s) compared (1 of another artifact), 0 judged on INVALID runs")``."""
        checks = ", ".join(str(c) for c in self.checks) or "no thresholds"
        head = f"gate {'passed' if self.passed else 'failed'} ({checks})"
        if self.failing:
            what = f"{len(self.failing)} run(s) failed"
        elif self.incomplete:
            what = f"B is incomplete, {self.incomplete}"
        else:
            what = ", ".join(f"{n} {status}" for status, n in sorted(self.counts().items()))
        other = len(self.other_artifacts)
        strict = self.fail_on_invalid and self.invalid
        tally = (f"{self.compared} pair(s) compared"
                 + (f" ({other} of another artifact)" if other else "")
                 + f", {len(self.invalid)} judged on INVALID runs"
                 + (", each failing the gate (fail-on-invalid)" if strict else ""))
        return head, f"{what}; {tally}"

    def to_dict(self) -> dict:
        head, rest = self.verdict()
        return {"checks": [str(c) for c in self.checks], "passed": self.passed,
                "verdict": f"{head}: {rest}",
                "failing": [r.label() for r in self.failing], "incomplete": self.incomplete,
                "missing": [r.label() for r in self.missing],
                "not_comparable": [r.label() for r in self.not_comparable],
                "compared": self.compared, "invalid": [r.label() for r in self.invalid],
                "other_artifacts": [r.label() for r in self.other_artifacts],
                "allow_missing": self.allow_missing, "fail_on_invalid": self.fail_on_invalid,
                "counts": self.counts(), "warnings": self.warnings,
                "rows": [r.to_dict() for r in self.rows]}


def _warnings(rows: list[Row], fail_on_invalid: bool = False) -> list[str]:
    compared = [r for r in rows if r.compared]
    fields = Counter(d.split(" ")[0] for r in compared for d in r.environment)
    warnings = [] if compared else ["no run of A matches a run of B: nothing was compared"]
    if fields:
        names = ", ".join(f"{name} ({n} of {len(compared)})" for name, n in fields.most_common())
        warnings.append(f"environments differ: {names}")
    invalid = sum(1 for r in compared if r.invalid)
    if invalid:
        verdict = "they fail the gate" if fail_on_invalid else "--fail-on-invalid fails them"
        warnings.append(f"{invalid} compared pair(s) were judged on an INVALID run "
                        f"(why: aiot results show ID; {verdict})")
    return warnings


def compare(a: list[RunRecord], b: list[RunRecord], checks: list[Check], *,
            fields: tuple[str, ...] = KEY_FIELDS, fail_on_invalid: bool = False) -> Comparison:
    """Match A's runs with B's and judge every pair against ``checks``.

    Args:
        a: the baseline's latency records.
        b: the candidate's latency records.
        checks: the gate's thresholds (newly failing runs fail it whatever they are).
        fields: what two runs must share to be paired (:data:`KEY_FIELDS`, less the field a
            :func:`compare_by` splits on).
        fail_on_invalid: a compared pair with an INVALID run fails the gate.
    """
    ra, rb = representatives(a, fields), representatives(b, fields)
    rows = [compare_pair(ra[k], rb[k], checks, fields, fail_on_invalid) for k in ra if k in rb]
    only_a = {k: r for k, r in ra.items() if k not in rb}
    only_b = {k: r for k, r in rb.items() if k not in ra}
    for ia, ib in _cross_device(only_a, only_b, fields):
        rows.append(compare_pair(ia, ib, checks, fields, fail_on_invalid))
        only_a.pop(run_key(ia, fields))
        only_b.pop(run_key(ib, fields))
    rows += [Row(dict(zip(fields, k, strict=True)), "only in A", a_id=r.id,
                 a_sha256=r.artifact_sha256) for k, r in only_a.items()]
    rows += [Row(dict(zip(fields, k, strict=True)), "only in B", b_id=r.id,
                 b_sha256=r.artifact_sha256) for k, r in only_b.items()]
    rows.sort(key=_order)
    return Comparison(checks, rows, _warnings(rows, fail_on_invalid),
                      fail_on_invalid=fail_on_invalid)


def by_value(record: RunRecord, by: str) -> str:
    """The value of ``--by`` field ``by`` a record has (a shell run's spec leaves ``via`` out)."""
    field, base, _ = BY[by]
    return identity.key_fields(record)[field] or base


def compare_by(records: list[RunRecord], by: str, checks: list[Check],
               fail_on_invalid: bool = False) -> Comparison:
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
    return compare(a, b, checks, fields=fields, fail_on_invalid=fail_on_invalid)
