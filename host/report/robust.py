"""The report's robustness sections: one per suite (``aiot robust sysnoise|corrupt|attack``).

Every suite stores the same result shape (see :mod:`aiot.host.robust.record`): headline
``summary`` scalars, its own ``tables`` and ``curves``, and ``notes``. A section lists every
record's summary (failed ones flagged with their reason), then the tables and curves of the
newest ok record per evaluated target (model, format, device).
"""

from __future__ import annotations

from aiot.host.report.page import Column, Section, Table

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


def _summary_table(kind: str, records) -> Table:
    keys: list[str] = list(dict.fromkeys(
        k for r in records for k in ((r.result or {}).get("summary") or {})))
    rows = []
    for r in sorted(records, key=lambda r: r.created_at):
        summary = (r.result or {}).get("summary") or {}
        rows.append({"device": r.device, "model": r.model, "format": r.format, "status": r.status,
                     "accuracy": r.accuracy, **{k: summary.get(k) for k in keys},
                     "reason": r.reason, "created_at": r.created_at, "id": r.id})
    cols = (Column("device", "device"), Column("model", "model"), Column("format", "format"),
            Column("status", "status"), Column("accuracy", "clean accuracy", "pct"),
            *(Column(k, k.replace("_", " "), "score") for k in keys),
            Column("reason", "reason"), Column("created_at", "recorded", "time"),
            Column("id", "record", "id"))
    return Table(f"{figure_key(kind)}_summary", "Summary per record", cols, tuple(rows))


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
