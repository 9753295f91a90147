"""The verdict of ``aiot results compare`` as files a CI shows: JUnit XML (GitLab's and
Jenkins' test reports) and a Markdown summary (GitHub's job summary).

Both hold every row: its configuration, A's and B's latency and change, both artifacts'
sha256 (short) and the gate's reasons. In the JUnit file each configuration is one test case:
a ``<failure>`` when its row fails the gate (a regression, a newly failing run, an INVALID run
under ``--fail-on-invalid``), an ``<error>`` when it makes B incomplete (a run of A missing
from B, or only a not comparable run of B: the check could not be made), ``<skipped>`` when
there is nothing to check (only in B, failing in both, a missing run ``--allow-missing``
excuses), and a pass otherwise.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from aiot.host.cli._output import fmt_ms
from aiot.host.store.compare import LEGEND, Comparison, ResultSet, Row
from aiot.host.store.identity import format_label, model_label

SUITE = "aiot results compare"
#: What XML 1.0 cannot hold (control characters a device's strings may carry).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def latency_cells(row: Row) -> tuple[str, str, str]:
    """A's and B's latency (ms) and the change, as every view writes them (``—``: none)."""
    latency = row.metrics.get(row.stat or "median") or {}
    change = latency.get("change")
    return (fmt_ms(latency.get("a")), fmt_ms(latency.get("b")),
            "—" if change is None else f"{change:+.1%}")


def reasons(row: Row) -> list[str]:
    """The row's gate failures, then why it has no verdict, then what else it notes."""
    notes = list(row.failures)
    if row.reason and row.status != "newly failing":
        notes.append(row.reason)
    if row.other_artifact:
        notes.append("another artifact")
    if row.stat == "mean":
        notes.append("means (no medians)")
    notes += [f"{side} INVALID" for side in row.invalid
              if not any(f.startswith(f"{side} INVALID") for f in row.failures)]
    return notes + row.environment


def short_sha(sha: str | None) -> str:
    return sha[:8] if sha else "—"


def heading(a: ResultSet, b: ResultSet) -> str:
    return (f"B {b.name} ({b.source}, {len(b.records)} runs) vs "
            f"A {a.name} ({a.source}, {len(a.records)} runs)")


# -- JUnit XML ---------------------------------------------------------------------------------

def _xml(text: object) -> str:
    return _NOT_XML.sub("?", str(text))


def _outcome(row: Row, result: Comparison) -> tuple[str, str, str] | None:
    """(element, type, message) of a row's test case; None: it passed."""
    if row.failures:
        return "failure", row.status, "; ".join(row.failures)
    blocking = result.gated and not result.passed
    if row.status == "not comparable":
        return ("error" if blocking else "skipped"), row.status, f"not comparable: {row.reason}"
    if row.status == "only in A":
        if blocking and not result.allow_missing:
            return "error", "missing", "only in A: B has no run of this configuration"
        return "skipped", "missing", "only in A: B has no run of this configuration (allowed)"
    if row.status == "only in B":
        return "skipped", row.status, "only in B: the baseline has no run of it"
    if row.status == "still failing":
        return "skipped", row.status, f"failing in A and B: {row.reason or 'no reason recorded'}"
    return None


def _detail(row: Row) -> str:
    a, b, change = latency_cells(row)
    parts = [f"{row.status}: A {a} ms, B {b} ms, {change} ({row.stat or 'median'})",
             f"artifact A {short_sha(row.a_sha256)}, B {short_sha(row.b_sha256)}",
             f"records A {(row.a_id or '—')[:8]}, B {(row.b_id or '—')[:8]}"]
    notes = reasons(row)
    return "; ".join(parts + ([" / ".join(notes)] if notes else []))


def junit_xml(result: Comparison, a: ResultSet, b: ResultSet) -> str:
    """The comparison as JUnit XML: one ``<testcase>`` per row (classname: model.format,
    name: the run's label) in one suite named ``aiot results compare``."""
    cases, totals = [], {"failure": 0, "error": 0, "skipped": 0}
    for row in result.rows:
        model = model_label(row.key.get("model"), row.key.get("binarize"))
        case = ET.Element("testcase", classname=_xml(f"{model}.{format_label(row.key)}"),
                          name=_xml(row.label()))
        outcome = _outcome(row, result)
        if outcome is not None:
            element, kind, text = outcome
            totals[element] += 1
            ET.SubElement(case, element, type=_xml(kind), message=_xml(text))
        ET.SubElement(case, "system-out").text = _xml(_detail(row))
        cases.append(case)
    head, rest = result.verdict()
    counts = {"tests": str(len(cases)), "failures": str(totals["failure"]),
              "errors": str(totals["error"]), "skipped": str(totals["skipped"])}
    root = ET.Element("testsuites", name=SUITE, **counts)
    suite = ET.SubElement(root, "testsuite", name=SUITE, **counts)
    properties = ET.SubElement(suite, "properties")
    for name, value in (("a", f"{a.name} ({a.source})"), ("b", f"{b.name} ({b.source})"),
                        ("checks", ", ".join(str(c) for c in result.checks)),
                        ("verdict", f"{head}: {rest}")):
        ET.SubElement(properties, "property", name=name, value=_xml(value))
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# -- Markdown ----------------------------------------------------------------------------------

def _md(text: object) -> str:
    """A table cell's text: no line breaks or control characters, pipes escaped, no HTML (a
    device's strings)."""
    text = " ".join(_NOT_XML.sub("?", str(text)).split())
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|"))


def markdown(result: Comparison, a: ResultSet, b: ResultSet) -> str:
    """The comparison as a Markdown summary: the verdict, then a table of every row."""
    head, rest = result.verdict()
    lines = [f"### {SUITE}: {_md(head)}", "", f"**{_md(head)}**: {_md(rest)}", "",
             _md(heading(a, b)), ""]
    lines += [f"- warning: {_md(w)}" for w in result.warnings]
    lines += [""] if result.warnings else []
    lines += ["| | status | run | A ms | B ms | change | A sha | B sha | reasons |",
              "|---|---|---|---|---|---|---|---|---|"]
    for row in result.rows:
        marker = f"`{row.marker}`" if row.marker.strip() else ""
        a_ms, b_ms, change = latency_cells(row)
        lines.append("| " + " | ".join([
            marker, row.status, _md(row.label()), a_ms, b_ms, change,
            f"`{short_sha(row.a_sha256)}`", f"`{short_sha(row.b_sha256)}`",
            _md("; ".join(reasons(row)))]) + " |")
    lines += ["", _md(LEGEND), ""]
    return "\n".join(lines)
