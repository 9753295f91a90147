"""Writers of the report: one HTML page, Markdown, or CSV files, into an output folder.

The HTML page is self-contained: CSS inline, no scripts, nothing fetched from anywhere. Its
plots are PNG files beside it (``<img src="latency_threads.png">``) rather than data URIs,
so the images can be reused on their own and the page stays small; copy the folder, not
the page alone. Markdown (``report.md``) links the same PNGs. CSV writes one file per
table with raw numbers (milliseconds, bytes, fractions), no plots, each with the fixed
columns its module names (:data:`CSV_COLUMNS`): a column whose value is the same in every row
(one device, one host) is folded on the page only, never dropped from a file.
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path

from aiot.core.fileio import write_text_atomic
from aiot.core.untrusted import csv_cell, visible
from aiot.host.engine.validity import INVALID
from aiot.host.report import build, measures, robust, scale, summary
from aiot.host.report.page import keys
from aiot.host.report.plots import render

HTML_FILE, MD_FILE = "index.html", "report.md"
FORMATS = ("html", "md", "csv")

#: Each CSV file's header, by file (``<key>.csv``), from the module constant that owns its
#: columns: the same whatever the rows hold. Besides these, a robustness suite's summary
#: (``robust_<suite>_summary.csv``) has :data:`aiot.host.report.robust.SUMMARY_FILE_COLUMNS`
#: and a record kind without a section of its own (``kind_<kind>.csv``)
#: :data:`aiot.host.report.robust.GENERIC_FILE_COLUMNS` (see :func:`csv_header`); a suite's
#: own tables (``robust_<suite>_<table>_<record>.csv``) have the columns the suite gives them.
CSV_COLUMNS = {name: keys(columns) for name, columns in (
    ("runs", build.RUN_COLUMNS), ("flagged", build.RUN_COLUMNS),
    ("best", summary.BEST_COLUMNS), ("formats", summary.FORMATS_FILE_COLUMNS),
    ("operators", summary.OPERATORS_COLUMNS), ("load_time", measures.LOAD_COLUMNS),
    ("telemetry", measures.TELEMETRY_COLUMNS), ("bnn_pairs", build.PAIRS_COLUMNS),
    ("om_infer", build.OM_INFER_COLUMNS), ("leaderboard", build.LEADERBOARD_COLUMNS),
    ("vips_tests", build.VIPS_TESTS_COLUMNS), ("training", build.TRAINING_COLUMNS),
    ("devices", build.DEVICES_COLUMNS), ("versions", build.VERSIONS_COLUMNS),
    ("trends", scale.TRENDS_COLUMNS))}


def csv_header(key: str) -> tuple[str, ...] | None:
    """The header of ``<key>.csv`` (None for a suite's own table: the suite names those)."""
    if key in CSV_COLUMNS:
        return CSV_COLUMNS[key]
    if key.startswith("kind_"):
        return keys(robust.GENERIC_FILE_COLUMNS)
    if key.startswith("robust_") and key.endswith("_summary"):
        return keys(robust.SUMMARY_FILE_COLUMNS)
    return None

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       margin: 0 auto; max-width: 1180px; padding: 0 24px 48px; }
h1 { margin: 24px 0 4px; } h2 { margin-top: 40px; border-bottom: 1px solid #ddd; }
h3 { margin: 20px 0 6px; font-size: 15px; }
.meta { color: #555; margin: 2px 0; }
.banner { padding: 8px 12px; border-radius: 4px; margin: 12px 0; }
.banner.bad { background: #fdecea; border: 1px solid #f5c2c0; }
.banner.good { background: #eaf6ec; border: 1px solid #bfe3c6; }
nav a { margin-right: 14px; }
.intro { color: #444; }
.note { color: #666; font-style: italic; border-left: 3px solid #ccc; padding-left: 10px; }
figure { margin: 16px 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 16px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.invalid td { background: #fdecea; } tr.failed td { background: #fff4e0; }
tr.fastest td { font-weight: 600; background: #eef5fc; }
#summary td { white-space: nowrap; } #summary th { padding: 3px 5px; } #summary td { padding: 2px 5px; }
.badge { display: inline-block; padding: 0 5px; border-radius: 3px; font-weight: 600;
         font-size: 11.5px; background: #d62728; color: #fff; }
footer { margin-top: 48px; color: #888; font-size: 12px; }
"""

_NUMERIC = {"int", "ms", "bytes", "pct", "ratio", "score", "si"}


def cell(kind: str, value) -> str:
    """A value as a person reads it, by column kind; "—" for nothing."""
    if value is None or value == "":
        return "—"
    if kind == "ms":
        return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"
    if kind == "bytes":
        return _size(value)
    if kind == "pct":
        return f"{value * 100:.2f}%"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "score":
        if not isinstance(value, float):
            return str(value)
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if kind == "si":
        return _si(value)
    if kind == "time":
        return str(value)[:19].replace("T", " ")
    if kind == "id":
        return str(value)[:8]
    return str(value)


def _si(value: float) -> str:
    """``151.19G``: AIoTBench's way of printing VOPS."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f}{prefix}"
    return f"{value:.2f}"


def _size(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _summary(report) -> list[str]:
    """The provenance lines under the title (plain text)."""
    p = report.provenance
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(p.statuses.items()))
    sweep = f", sweep {report.sweep}" if report.sweep else ""
    devices = ", ".join(d["device"] for d in p.devices) or "—"
    hosts = sorted({r.host or "not recorded" for r in (*report.runs, *report.plotted_runs())})
    if len(hosts) > 1:  # where the runs were driven from, once that is more than one machine
        devices += f", from hosts {', '.join(hosts)}"
    aiot = next((v["values"] for v in p.versions if v["what"] == "aiot"), "—")
    return [(f"Generated {cell('time', report.generated_at)} UTC from {report.source}{sweep}: "
             f"{statuses} record(s)."),
            f"Devices: {devices}. Measured {cell('time', p.first)} to {cell('time', p.last)} UTC.",
            f"aiot {aiot}; sweeps: {_listed(p.sweeps)}."]


#: Names the summary lists whole; beyond it, the count and both ends (a year of nightly sweeps
#: was a screen of ids above the first table).
LISTED_NAMES = 8


def _listed(names: list[str]) -> str:
    if len(names) <= LISTED_NAMES:
        return ", ".join(names) or "—"
    half = LISTED_NAMES // 2
    return f"{len(names)}: {', '.join(names[:half])}, …, {', '.join(names[-half:])}"


def _invalid_line(report) -> str | None:
    n = report.tally.invalid
    return (f"{n} INVALID run(s): measured but not defensible; flagged in every table "
            "(see 'INVALID and failed runs')." if n else None)


# -- HTML --------------------------------------------------------------------------------------

def escape(text: str) -> str:
    """Text for HTML: markup characters as entities, control characters written out (device
    facts and failure reasons come from the device and may hold either)."""
    return html.escape(visible(str(text)))


def _html_table(table) -> str:
    columns = table.shown()  # a constant column the intro names is folded (a file keeps it)
    head = "".join(f"<th>{escape(c.title)}</th>" for c in columns)
    body = []
    for row in table.rows:
        cls = ("invalid" if row.get("validity") == INVALID
               else "failed" if row.get("status") not in (None, "ok")
               else "fastest" if row.get("fastest") else "")
        tds = []
        for c in columns:
            text = escape(cell(c.kind, row.get(c.key)))
            if c.key == "validity" and row.get(c.key) == INVALID:
                text = f'<span class="badge">{INVALID}</span>'
            num = ' class="num"' if c.kind in _NUMERIC else ""
            title = f' title="{escape(str(row[c.key]))}"' if c.kind == "id" and row.get(c.key) else ""
            tds.append(f"<td{num}{title}>{text}</td>")
        attr = f' class="{cls}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(tds) + "</tr>")
    return (f'<h3 id="t-{escape(table.key)}">{escape(table.title)}</h3>\n<div class="scroll">'
            f"<table><thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body)
            + "\n</tbody></table></div>")


def _html_section(section, plots) -> str:
    parts = [f'<section id="{escape(section.key)}">', f"<h2>{escape(section.title)}</h2>"]
    if section.intro:
        parts.append(f'<p class="intro">{escape(section.intro)}</p>')
    if section.note:
        parts.append(f'<p class="note">{escape(section.note)}</p>')
    for key in section.figures:
        plot = plots[key]
        if not isinstance(plot, str):  # a figure without data is left out (the CLI says why)
            parts.append(f'<figure><img src="{escape(plot.file)}" alt="{escape(plot.title)}" '
                         f'width="{plot.width}" height="{plot.height}"></figure>')
    parts += [_html_table(t) for t in section.tables if t.rows]
    return "\n".join(parts + ["</section>"])


def render_html(report, sections, plots) -> str:
    """The page as one string (CSS inline; images are the ``plots`` files beside it)."""
    invalid = _invalid_line(report)
    banner = (f'<p class="banner bad">⚠ {escape(invalid)}</p>' if invalid else
              '<p class="banner good">No INVALID runs.</p>')
    nav = " ".join(f'<a href="#{escape(s.key)}">{escape(s.title)}</a>' for s in sections)
    meta = "\n".join(f'<p class="meta">{escape(line)}</p>' for line in _summary(report))
    body = "\n".join(_html_section(s, plots) for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>aiot report</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<header>\n"
            f"<h1>aiot report</h1>\n{meta}\n{banner}\n<nav>{nav}</nav>\n</header>\n<main>\n"
            f"{body}\n</main>\n<footer>Written by aiot report. Every row is a stored record: "
            f"aiot results show ID.</footer>\n</body>\n</html>\n")


# -- Markdown ----------------------------------------------------------------------------------

# Backslash-escaped: what would start a link or image ([ ]), emphasis or code, or end a table
# cell (|); HTML's own characters become entities so no renderer runs a device's <script>.
_MD_PUNCT = str.maketrans({c: "\\" + c for c in "\\`*[]|"} | {"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _md_escape(text: str) -> str:
    """Text for one Markdown line or table cell: nothing in it is markup, links or HTML."""
    one_line = " ".join(str(text).splitlines())
    return visible(one_line.translate(_MD_PUNCT))


def _md_table(table) -> str:
    columns = table.shown()
    lines = [f"### {_md_escape(table.title)}", "",
             "| " + " | ".join(_md_escape(c.title) for c in columns) + " |",
             "|" + "|".join("---:" if c.kind in _NUMERIC else "---" for c in columns) + "|"]
    for row in table.rows:
        cells = [_md_escape(cell(c.kind, row.get(c.key))) for c in columns]
        cells = [f"**{v}**" if v == INVALID else v for v in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(report, sections, plots) -> str:
    """The report as Markdown; images link the PNG files beside it."""
    md = _md_escape
    lines = ["# aiot report", "", *(f"{md(line)}  " for line in _summary(report)), ""]
    invalid = _invalid_line(report)
    lines += [f"> ⚠ {md(invalid)}" if invalid else "No INVALID runs.", ""]
    for s in sections:
        lines += [f"## {md(s.title)}", ""] + ([md(s.intro), ""] if s.intro else [])
        lines += [f"> {md(s.note)}", ""] if s.note else []
        for key in s.figures:
            plot = plots[key]
            if not isinstance(plot, str):  # a figure without data is left out
                lines += [f"![{md(plot.title)}]({plot.file})", ""]
        lines += [x for t in s.tables if t.rows for x in (_md_table(t), "")]
    return "\n".join(lines)


# -- writing -----------------------------------------------------------------------------------

def _csv_text(table) -> str:
    """A table's CSV file: every column of its module constant, whatever the rows hold (one
    device or two, a column no row has a value for), raw values, one row per line."""
    table = table.csv()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(keys(table.columns))
    for row in table.rows:
        # Device facts and reasons can start like a formula: no spreadsheet may run them.
        writer.writerow(["" if row.get(c.key) is None else csv_cell(row.get(c.key))
                         for c in table.columns])
    return buf.getvalue()


def _write(path: Path, text: str) -> None:
    write_text_atomic(path, text)
    path.chmod(0o644)  # the atomic write's temp file is private; a report is for sharing


def write(report, fmt: str, out_dir: Path) -> tuple[list[Path], dict]:
    """Write the report as ``fmt`` (html, md, csv) into ``out_dir``.

    Returns:
        the files written, main file first (the page, the Markdown, or the runs CSV), and
        the plots: key → :class:`~aiot.host.report.plots.Plot`, or the note said instead.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = report.sections()
    if fmt == "csv":
        tables = {t.key: t for s in sections for t in s.tables if t.rows}
        main = ["runs"] if "runs" in tables else []
        files = []
        for key in main + sorted(k for k in tables if k not in main):
            _write(out_dir / f"{key}.csv", _csv_text(tables[key]))
            files.append(out_dir / f"{key}.csv")
        return files, {}
    plots = render(report, [k for s in sections for k in s.figures], out_dir)
    # A part whose figures had no data and that has no table rows is left out too.
    sections = [s for s in sections if any(t.rows for t in s.tables)
                or any(not isinstance(plots[k], str) for k in s.figures)]
    name, text = ((HTML_FILE, render_html(report, sections, plots)) if fmt == "html"
                  else (MD_FILE, render_markdown(report, sections, plots)))
    _write(out_dir / name, text)
    images = [out_dir / p.file for p in plots.values() if not isinstance(p, str)]
    return [out_dir / name, *images], plots
