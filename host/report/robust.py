"""The report's robustness sections: one per suite (``aiot robust sysnoise|corrupt|attack``).

Every suite stores the same result shape (see :mod:`aiot.host.robust.record`): headline
``summary`` scalars, its own ``tables`` and ``curves``, and ``notes``. A section lists every
record's summary (failed ones flagged with their reason), then the tables and curves of the
newest ok record per evaluated target (model, format, device). A record kind with no suite
here (an imported one, a newer aiot's) gets a section listing its result's own scalars.

Their CSV files keep fixed columns though the metrics differ by suite, by record and by kind:
a summary's or a kind's file has one row per record and metric (:data:`SUMMARY_FILE_COLUMNS`,
:data:`GENERIC_FILE_COLUMNS`) where the page has a column per metric.
"""

from __future__ import annotations

from aiot.host.report.page import Column, Section, Table
from aiot.host.store import identity

#: kind -> (section title, what the suite measures)
SUITES = {
    "robust-sysnoise": ("Robustness: system noise (SysNoise)",
                        ("Accuracy and top-1 flips when one step of the deployment pipeline changes "
                        "(JPEG decoder, resizer, colour conversion, precision, inference variant, "
                        "platform): dACC = ACC_reference - ACC_option, mean and max per noise type.")),
    "robust-corrupt": ("Robustness: natural corruptions",
                       ("ImageNet-C corruptions x severities through the evaluated model: accuracy, "
                       "corruption gap G = A_clean - A_corr (BiBench), NCI and mNR (RobustMQ), and "
                       "flip probability over sequences of increasing perturbation.")),
    "robust-attack": ("Robustness: adversarial attacks",
                      ("Accuracy under white-box, transfer and black-box attacks (ARBiBench, RobustMQ): "
                      "on the PyTorch reference and on the deployed artifact, with queries spent.")),
}


def figure_key(kind: str) -> str:
    return kind.replace("-", "_")


def newest_per_target(records) -> list:
    """The newest ok record of each (model, format, device), oldest target first."""
    newest: dict[tuple, object] = {}
    for r in sorted(records, key=lambda r: r.created_at):
        if r.status == "ok" and r.result:
            newest[(r.model, r.format, r.device)] = r
    return list(newest.values())


def target_label(record) -> str:
    return f"{record.model} · {record.format} @ {record.device}"


_HEAD = (Column("device", "device"), Column("host", "host"), Column("model", "model"),
         Column("format", "format"), Column("status", "status"),
         Column("accuracy", "clean accuracy", "pct"))
_TAIL = (Column("reason", "reason"), Column("created_at", "recorded", "time"),
         Column("id", "record", "id"))

#: ``<suite>_summary.csv``'s columns (``robust_sysnoise_summary.csv``, ...): one row per record
#: and headline metric, since the metrics differ by suite and by what a run evaluated (the
#: page has a column per metric); a record without any (a failed one) has one row, ``metric``
#: empty.
SUMMARY_FILE_COLUMNS = (*_HEAD, Column("metric", "metric"), Column("value", "value", "score"),
                        *_TAIL)


def _summary_table(kind: str, records) -> Table:
    keys: list[str] = list(dict.fromkeys(
        k for r in records for k in ((r.result or {}).get("summary") or {})))
    rows, long = [], []
    for r in sorted(records, key=lambda r: r.created_at):
        summary = (r.result or {}).get("summary") or {}
        head = {"device": r.device, "host": identity.host_name_of(r), "model": r.model,
                "format": r.format, "status": r.status, "accuracy": r.accuracy}
        tail = {"reason": r.reason, "created_at": r.created_at, "id": r.id}
        rows.append({**head, **{k: summary.get(k) for k in keys}, **tail})
        long += [{**head, "metric": k, "value": v, **tail} for k, v in summary.items()] or [
            {**head, **tail}]
    cols = (*_HEAD, *(Column(k, k.replace("_", " "), "score") for k in keys), *_TAIL)
    key = f"{figure_key(kind)}_summary"
    return Table(key, "Summary per record", cols, tuple(rows), fold=("host",),
                 file=Table(key, "Summary per record", SUMMARY_FILE_COLUMNS, tuple(long)))


def _result_tables(kind: str, record) -> list[Table]:
    tables = []
    for t in (record.result or {}).get("tables") or []:
        columns = list(t.get("columns") or [])
        rows = tuple(dict(zip(columns, row)) for row in t.get("rows") or [])
        kinds = {c: "score" if any(isinstance(r.get(c), float) for r in rows) else "text" for c in columns}
        key = f"{figure_key(kind)}_{t.get('name', 'table')}_{record.id[:8]}"
        tables.append(Table(key, f"{t.get('title', t.get('name', ''))} ({target_label(record)})",
                            tuple(Column(c, c.replace("_", " "), kinds[c]) for c in columns), rows))
    return tables


def sections(others: dict[str, list]) -> list[Section]:
    """One section per suite with records, in the order of :data:`SUITES`."""
    out = []
    for kind, (title, intro) in SUITES.items():
        records = others.get(kind)
        if not records:
            continue
        shown = newest_per_target(records)
        notes = [n for r in shown for n in (r.result or {}).get("notes") or []]
        tables = [_summary_table(kind, records)] + [t for r in shown for t in _result_tables(kind, r)]
        has_curves = any((r.result or {}).get("curves") for r in shown)
        out.append(Section(f"robust-{kind.split('-', 1)[1]}", title,
                           intro + "".join(f" {n}" if n.endswith(".") else f" {n}." for n in dict.fromkeys(notes)),
                           (figure_key(kind),) if has_curves else (), tuple(tables),
                           None if shown else "no finished record of this suite yet"))
    return out


# -- kinds without a section of their own ------------------------------------------------------

#: The columns every record of another kind has, first on the page (its own metrics follow).
_OTHER_HEAD = ("device", "host", "model", "format", "status", "accuracy")

#: ``kind_<kind>.csv``'s columns: one row per record and metric (the result's own scalars,
#: which differ by kind and by record), so the file's columns never follow the metrics; a
#: record without one has a row with ``metric`` empty.
GENERIC_FILE_COLUMNS = (
    *(Column(k, k, "score" if k == "accuracy" else "text") for k in _OTHER_HEAD),
    Column("metric", "metric"), Column("value", "value"), Column("validity", "validity"),
    Column("id", "record", "id"))


def kind_table(key: str, title: str, rows: list[dict]) -> Table:
    """Columns from the rows' own keys (first-seen order); numbers formatted as scores. Its
    CSV file is long: one row per record and metric (:data:`GENERIC_FILE_COLUMNS`)."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    kinds = {k: "score" if any(isinstance(r.get(k), float) for r in rows) else "text" for k in keys}
    flat = tuple({k: ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                  for k, v in row.items()} for row in rows)
    fixed = (*_OTHER_HEAD, "validity", "id")
    long = []
    for row in flat:
        head = {k: row.get(k) for k in fixed}
        metrics = [(k, v) for k, v in row.items() if k not in fixed]
        long += [{**head, "metric": k, "value": v} for k, v in metrics] or [head]
    return Table(key, title, tuple(Column(k, k.replace("_", " "), kinds[k]) for k in keys), flat,
                 fold=("host",), file=Table(key, title, GENERIC_FILE_COLUMNS, tuple(long)))


def kind_rows(records) -> list[dict]:
    """Common columns plus the result's scalar entries (the kind's own metrics)."""
    rows = []
    for r in records:
        scalars = {k: v for k, v in (r.result or {}).items()
                   if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        rows.append({"device": r.device, "host": identity.host_name_of(r), "model": r.model,
                     "format": r.format, "status": r.status, "accuracy": r.accuracy,
                     **{k: v for k, v in scalars.items() if k != "host"},
                     "validity": r.validity, "id": r.id})
    return rows


def kind_sections(others: dict[str, list]) -> list[Section]:
    """One section per record kind that is neither a suite of :data:`SUITES` nor latency or
    train (an imported kind, a newer aiot's), listing its records' own metrics."""
    return [Section(f"kind-{kind}", f"Robustness: {kind}",
                    f"Records of kind '{kind}' with their own metrics.",
                    tables=(kind_table(f"kind_{kind}", kind, kind_rows(records)),))
            for kind, records in sorted(others.items()) if kind not in SUITES]
