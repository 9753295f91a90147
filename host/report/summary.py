"""The report's answers: how fast each model is, where (its first screen); the formats of a
model compared on one device (the paper's framework comparison); and the slowest operators
of profiled runs.

Every number comes from :meth:`Report.plotted_runs`: per key the newest ok run, a VALID one
where there is one. A row is one configuration (:mod:`aiot.host.store.identity`): runs at
other input shapes, with other converter options (int8) or started otherwise (``via app``) are
other rows, never merged into the newest.
"""

from __future__ import annotations

from collections import defaultdict

from aiot.host.engine.profiles import TOP_N, top_ops
from aiot.host.engine.validity import short_reasons
from aiot.host.report.page import Column, Section, Table

#: What marks the fastest format of a model on a device, in every writer.
FASTEST = "★ fastest"


def _device(run) -> str:
    return f"{run.device} (emulated)" if run.emulated else run.device


def _groups(runs) -> dict[tuple, list]:
    """Runs by (model, input shape, device, host): the unit every comparison is made within
    (two hosts' ``local`` are two devices)."""
    groups: dict[tuple, list] = defaultdict(list)
    for run in runs:
        groups[(run.model_label, run.input_shape, run.device, run.host)].append(run)
    return groups


def _best(runs):
    """The fastest run of ``runs``: a VALID one where there is one."""
    pool = [r for r in runs if not r.invalid] or runs
    return min(pool, key=lambda r: (r.latency_ms, r.threads or 0))


def best_rows(report) -> list[dict]:
    """Per model, input shape, device and format: the best median and its threads, with the
    ratio to the fastest format of that model on that device."""
    rows = []
    for (model, shape, _device_name, _host), runs in sorted(_groups(report.plotted_runs()).items(),
                                                     key=lambda kv: tuple(x or "" for x in kv[0])):
        by_configuration: dict[tuple, list] = defaultdict(list)
        for run in runs:
            by_configuration[run.configuration].append(run)
        bests = sorted((_best(v) for v in by_configuration.values()), key=lambda r: r.latency_ms)
        fastest = bests[0].latency_ms
        for run in bests:
            rows.append({
                "model": model, "input_shape": shape, "device": _device(run), "host": run.host,
                "variant": run.variant, "runtime": run.runtime, "median_ms": run.latency_ms,
                "threads": run.threads,
                "per_s": 1000.0 / run.latency_ms if run.latency_ms else None,
                "vs_fastest": run.latency_ms / fastest if fastest else None,
                "fastest": FASTEST if run is bests[0] and len(bests) > 1 else None,
                "validity": run.validity, "notes": "; ".join(run.invalid_reasons) or None,
                "why": short_reasons(list(run.invalid_reasons)) or None, "id": run.id})
    return rows


#: ``best.csv``'s columns (and the first screen's, less those it folds).
BEST_COLUMNS = (
    Column("model", "model"), Column("input_shape", "input shape"), Column("device", "device"),
    Column("host", "host"), Column("variant", "format"), Column("runtime", "runtime"),
    Column("median_ms", "best median ms", "ms"), Column("threads", "at threads", "int"),
    Column("per_s", "inf/s", "score"), Column("vs_fastest", "× fastest", "ratio"),
    Column("fastest", ""), Column("validity", "validity"), Column("why", "why INVALID"),
    Column("id", "record", "id"))


def summary_section(report):
    """The first screen: how fast is each model, where (None without a measured run)."""
    rows = best_rows(report)
    if not rows:
        return None
    devices, hosts = {r["device"] for r in rows}, {r["host"] for r in rows}
    emulated = report.tally.emulated
    intro = ("Per model and device, each format's best median latency over the thread counts "
             "measured (inf/s: inferences per second, one after another), and how it compares "
             "with the fastest format of that model there.")
    # One line per row and no wider than the page, so every configuration of a sweep is on
    # the first screen: one device (one host) is named once, in the intro, not in every row;
    # best.csv keeps both columns.
    host = next(iter(hosts)) if len(hosts) == 1 else None
    if len(devices) == 1:
        intro += f" Every row was measured on {next(iter(devices))}" + (
            f" from host {host}." if host else ".")
    elif host:
        intro += f" Every row was measured from host {host}."
    if emulated:
        intro += " Times on emulated devices are the host's, under emulation: not a phone's."
    return Section("summary", "How fast is each model, where", intro, note=_invalid_note(rows),
                   tables=(Table("best", "Best median per model, device and format", BEST_COLUMNS,
                                 tuple(rows), fold=("device", "host")),))


def _invalid_note(rows: list[dict]) -> str | None:
    """One line under the first screen's title: why its INVALID rows are, counted, and where
    each run's whole reasons are (a row shows their names only, so every row fits one line
    and every configuration fits the first screen)."""
    counts: dict[str, int] = {}
    for row in rows:
        for name in filter(None, (row.get("why") or "").split("; ")):
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    invalid = sum(1 for row in rows if row.get("why"))
    named = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"{invalid} of {len(rows)} rows are INVALID: {named}. Each run's reasons, with what to "
            "do, are under 'INVALID and failed runs' and in aiot results show RECORD.")


def format_rows(report) -> tuple[list[dict], list[int], list[dict]]:
    """Where one device measured several formats of one model (at one input shape): each
    format's median per thread count, its best, and which is fastest; the thread counts; and
    the same as ``formats.csv``'s rows, one per format and thread count
    (:data:`FORMATS_FILE_COLUMNS`)."""
    rows, all_threads, file_rows = [], set(), []
    for (model, shape, _, _), runs in sorted(_groups(report.plotted_runs()).items(),
                                          key=lambda kv: tuple(x or "" for x in kv[0])):
        configs = sorted({r.configuration for r in runs}, key=str)  # one per variant shown
        if len(configs) < 2:
            continue
        threads = sorted({r.threads for r in runs if r.threads})
        all_threads.update(threads)
        per = {(r.configuration, r.threads): r for r in runs}
        fastest_at = {t: min((per[c, t] for c in configs if (c, t) in per),
                             key=lambda r: r.latency_ms).configuration
                      for t in threads if sum((c, t) in per for c in configs) > 1}
        bests = {c: _best([r for r in runs if r.configuration == c]) for c in configs}
        top = min(bests.values(), key=lambda r: r.latency_ms)
        for config in sorted(configs, key=lambda c: bests[c].latency_ms):
            best = bests[config]
            row = {"device": _device(best), "host": best.host, "model": model,
                   "input_shape": shape, "variant": best.variant, "runtime": best.runtime,
                   "best_ms": best.latency_ms, "best_threads": best.threads, "vs_fastest": best.latency_ms / top.latency_ms,
                   "fastest": FASTEST if best is top else None,
                   "fastest_at": ", ".join(f"{t}t" for t, c in fastest_at.items() if c == config)
                   or None,
                   "validity": "INVALID" if any(r.invalid for r in runs if r.configuration == config)
                   else None}
            row.update({f"t{t}": per[config, t].latency_ms for t in threads if (config, t) in per})
            rows.append(row)
            file_rows += _file_rows(row, [per[config, t] for t in threads if (config, t) in per],
                                    {t for t, c in fastest_at.items() if c == config})
    return rows, sorted(all_threads), file_rows


def _file_rows(row: dict, runs: list, fastest_at: set[int]) -> list[dict]:
    """A formats row as ``formats.csv``'s: one per thread count it was measured at (``runs``),
    each with that run's median, validity and id; one with the row alone without any."""
    common = {c.key: row.get(c.key) for c in FORMATS_FILE_COLUMNS}
    return [{**common, "threads": run.threads, "median_ms": run.latency_ms,
             "fastest_at_threads": FASTEST if run.threads in fastest_at else None,
             "validity": run.validity, "id": run.id} for run in runs] or [common]


#: ``formats.csv``'s columns: one row per format and thread count, so the file's columns never
#: follow the thread counts measured (the page has a column per thread count).
FORMATS_FILE_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("input_shape", "input shape"), Column("variant", "format"),
    Column("runtime", "runtime"), Column("threads", "threads", "int"),
    Column("median_ms", "median ms", "ms"), Column("fastest_at_threads", "fastest at threads"),
    Column("best_ms", "best ms", "ms"), Column("best_threads", "at threads", "int"),
    Column("vs_fastest", "× fastest", "ratio"), Column("fastest", ""),
    Column("validity", "validity"), Column("id", "record", "id"))


def formats_section(report):
    """Formats compared per device (None unless some device measured two formats of a model)."""
    rows, threads, file_rows = format_rows(report)
    if not rows:
        return None
    cols = (Column("device", "device"), Column("host", "host"), Column("model", "model"),
            Column("input_shape", "input shape"), Column("variant", "format"),
            Column("runtime", "runtime"),
            *(Column(f"t{t}", f"{t} thread{'s' if t > 1 else ''} ms", "ms") for t in threads),
            Column("best_ms", "best ms", "ms"), Column("best_threads", "at threads", "int"),
            Column("vs_fastest", "× fastest", "ratio"), Column("fastest", ""),
            Column("fastest_at", "fastest at"), Column("validity", "validity"))
    intro = ("The same model in each format on the same device: median latency per thread count "
             "(the newest run of each), the best of each format, its ratio to the fastest, and at "
             "which thread counts each format was the fastest. A flagged row has an INVALID run.")
    return Section("formats", "Formats compared", intro,
                   tables=(Table("formats", "Format vs median latency", cols, tuple(rows),
                                 fold=("host",),
                                 file=Table("formats", "Format vs median latency",
                                            FORMATS_FILE_COLUMNS, tuple(file_rows))),))


def operator_rows(report, top: int = TOP_N) -> list[dict]:
    """The ``top`` slowest operators of each profiled configuration's newest run, and a row
    saying why where the runtime had no profiler."""
    rows = []
    for run in report.plotted_runs():
        profile = run.profile
        if not profile:
            continue
        where = {"device": _device(run), "host": run.host, "model": run.model_label,
                 "input_shape": run.input_shape,
                 "variant": run.variant, "threads": run.threads}
        if not profile.get("available"):
            rows.append({**where, "notes": f"no per-operator times: {profile.get('reason')}",
                         "id": run.id})
            continue
        for rank, op in enumerate(top_ops(profile, top), 1):
            rows.append({**where, "rank": rank, "op": op.get("name"), "type": op.get("type"),
                         "ms": op.get("ms"), "pct": (op.get("pct") or 0) / 100,
                         "notes": profile.get("tool") if rank == 1 else None, "id": run.id})
    return rows


#: ``operators.csv``'s columns.
OPERATORS_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("input_shape", "input shape"), Column("variant", "format"),
    Column("threads", "threads", "int"), Column("rank", "#", "int"), Column("op", "operator"),
    Column("type", "type"), Column("ms", "ms / inference", "ms"),
    Column("pct", "share", "pct"), Column("notes", "profiler"), Column("id", "record", "id"))


def operators_section(report):
    """The slowest operators of profiled runs (None when no run was profiled)."""
    rows = operator_rows(report)
    if not rows:
        return None
    intro = (f"Per profiled run (aiot run/sweep --profile) its {TOP_N} slowest operators, time per "
             "inference from the runtime's own profiler in a pass of its own after the timed run "
             "(a profiler adds its own cost to every operator, so the sum need not match the "
             "median).")
    return Section("operators", "Slowest operators", intro,
                   tables=(Table("operators", "Slowest operators per profiled run",
                                 OPERATORS_COLUMNS, tuple(rows), fold=("host",)),))
