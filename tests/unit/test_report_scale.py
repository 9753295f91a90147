"""The report of a large store: one streaming pass, summarised (trends, newest runs listed),
the same answers as the full report of the same records."""

from datetime import UTC, datetime, timedelta

import pytest

from aiot.host.report import scale
from aiot.host.report.build import build, collect
from aiot.host.report.html import write
from aiot.host.store import open_store
from tests.unit.test_report import add


@pytest.fixture
def store(tmp_path):
    """Three months of nightly runs of two formats at 1 and 4 threads, slower each month,
    with an INVALID and a failed run."""
    with open_store(tmp_path / "results") as store:
        for month, factor in ((1, 1.0), (2, 1.1), (3, 1.2)):
            for threads in (1, 4):
                for fmt in ("tflite", "onnx"):
                    rid = add(store, threads=threads, fmt=fmt, median=10.0 * factor / threads,
                              temp=50.0, khz=1_500_000)
                    when = datetime(2026, month, 5, tzinfo=UTC) + timedelta(minutes=threads)
                    store._conn.execute("UPDATE runs SET created_at = ? WHERE id = ?",
                                        (when.isoformat(timespec="seconds"), rid))
        add(store, fmt="onnx", threads=8, median=3.0, invalid=("too few samples",))
        add(store, fmt="onnx", threads=8, status="failed", reason="agent crashed")
        yield store


def test_small_store_gets_the_full_report(store):
    report = scale.report_of(store, "results", generated_at="2026-01-02T03:04:05+00:00")
    full = build(collect(store), "results", generated_at="2026-01-02T03:04:05+00:00")
    assert report.row_limit is None and report.extra == []
    assert [s.key for s in report.sections()] == [s.key for s in full.sections()]


def test_large_store_is_summarised_with_the_same_answers(store, monkeypatch, tmp_path):
    monkeypatch.setattr(scale, "DETAIL_LIMIT", 5)
    monkeypatch.setattr(scale, "ROW_LIMIT", 4)
    summarised = scale.report_of(store, "results", generated_at="2026-01-02T03:04:05+00:00")
    full = build(collect(store), "results", generated_at="2026-01-02T03:04:05+00:00")
    # A summarised report holds the newest ROW_LIMIT runs, and counts them all.
    assert (summarised.tally.count, summarised.tally.invalid) == (len(full.runs), 1) == (14, 1)
    assert len(summarised.runs) == 4
    newest = sorted(full.runs, key=lambda r: r.created_at, reverse=True)[:4]
    assert sorted((r.created_at, r.id, r.input_shape, r.mean_ms, r.invalid_reasons)
                  for r in summarised.runs) == sorted(
        (r.created_at, r.id, r.input_shape, r.mean_ms, r.invalid_reasons) for r in newest)
    assert [r.id for r in summarised.plotted_runs()] == [r.id for r in full.plotted_runs()]
    assert summarised.provenance == full.provenance
    assert summarised.readings == full.readings and len(full.readings) == 24
    assert summarised.leaderboard == full.leaderboard
    sections = {s.key: s for s in summarised.sections()}
    # Every table but the run lists reads the same from the pass's tally as from every run.
    tables = {t.key: t.rows for s in full.sections() for t in s.tables}
    assert {t.key: t.rows for s in sections.values() for t in s.tables
            if t.key not in ("runs", "flagged", "trends")} == {
        k: v for k, v in tables.items() if k not in ("runs", "flagged")}
    assert "trends" in sections
    runs = sections["runs"].tables[0]
    assert len(runs.rows) == 4 and "the newest 4 of 14" in runs.title
    assert [r["created_at"] for r in runs.rows] == sorted(
        (r.created_at for r in full.runs), reverse=True)[:4]
    trends = {(r["variant"], r["threads"]): r for r in sections["trends"].tables[0].rows}
    one = trends[("tflite", 1)]
    assert (one["runs"], one["months"], one["since"]) == (3, 3, "2026-01")
    assert one["first_ms"] == 10.0 and one["latest_ms"] == pytest.approx(12.0)
    assert one["change"] == pytest.approx(0.2) and one["best_ms"] == 10.0
    assert trends[("onnx", 8)]["validity"] == "INVALID"
    files, _plots = write(summarised, "md", tmp_path / "out")
    text = files[0].read_text()
    assert "Trends per configuration" in text and "the newest 4 of 14" in text


def test_a_sweep_without_records_says_so(store):
    from aiot.core.errors import UsageError

    with pytest.raises(UsageError, match="no records in sweep 'nope'"):
        scale.report_of(store, "results", sweep="nope")


def test_a_bar_shows_at_most_max_dots_spread_over_its_range():
    from aiot.host.report.plots import MAX_DOTS, _spread

    values = [float(v) for v in range(1000, 0, -1)]
    dots = _spread(values)
    assert len(dots) == MAX_DOTS and dots == sorted(dots)
    assert (dots[0], dots[-1]) == (1.0, 1000.0)
    assert _spread(values[:5]) == values[:5]  # a few runs: every one


def test_the_pass_reads_whole_records_only_of_the_runs_it_shows(store, monkeypatch):
    """The pass reads the records' facts; whole records only of the runs the report shows
    (the newest rows, flagged rows, each key's plotted run and first run), by primary key."""
    from aiot.host.store import scan

    monkeypatch.setattr(scale, "DETAIL_LIMIT", 5)
    monkeypatch.setattr(scale, "ROW_LIMIT", 2)
    asked, real = [], scan.slim_records
    monkeypatch.setattr(scan, "slim_records", lambda s, ids: asked.extend(ids) or real(s, ids))
    report = scale.report_of(store, "results", generated_at="2026-01-02T03:04:05+00:00")
    tally = report.tally
    shown = {r.id for r in (*report.runs, *tally.flagged.runs(), *report.plotted_runs(),
                            *(t.head for t in tally.trends.values()))}
    assert set(asked) == shown and len(set(asked)) < tally.count == 14
