"""The report's tally: with a row limit, what it holds is bounded by the configurations and
months, not by how many runs go past, and what it answers is what every run gives."""

import statistics
from datetime import UTC, datetime, timedelta

from aiot.host.report import tally as tally_mod
from aiot.host.report.build import Reading, Run
from aiot.host.report.tally import Newest, Tally
from aiot.host.store import identity


def _runs(n: int, keys: int = 3):
    """``n`` ok runs over ``keys`` keys, one a day (a nightly sweep), every 7th INVALID."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
        threads = i % keys + 1
        key = identity.Key(identity.Configuration(
            "pi4", None, "resnet18", None, "onnx", None, None, None, None, None, None), threads)
        when = (start + timedelta(days=i // keys)).isoformat(timespec="seconds")
        yield Run(id=f"r{i}", device="pi4", model="resnet18", format="onnx", threads=threads,
                  status="ok", created_at=when, median_ms=10.0 + i % 5, load_ms=float(i % 11),
                  validity="INVALID" if i % 7 == 0 else "VALID", key=key,
                  model_label="resnet18", variant="onnx", latency_ms=10.0 + i % 5)


def test_a_limited_tally_holds_a_bounded_amount_and_counts_everything():
    runs = list(_runs(3000))
    limited, full = Tally(row_limit=10), Tally.of(runs)
    for run in runs:
        limited.add(run)
    assert (limited.count, limited.invalid) == (full.count, full.invalid) == (3000, 429)
    assert len(limited.rows.runs()) == len(limited.flagged.runs()) == 10
    assert [r.created_at for r in limited.rows.runs()] == sorted(
        (r.created_at for r in runs), reverse=True)[:10]
    assert limited.flagged.seen == 429 and all(r.invalid for r in limited.flagged.runs())
    # Per key: the first and latest month's values only (~30 a month), whatever the months.
    for trend in limited.trends.values():
        assert len(trend.every.first_values) <= 31 and len(trend.every.latest_values) <= 31
    assert {k: t.row() for k, t in limited.trends.items()} == {
        k: t.row() for k, t in full.trends.items()}
    assert {k: r.id for k, (r, _) in limited.plotted.items()} == {
        k: r.id for k, (r, _) in full.plotted.items()}


def test_a_trend_is_the_median_of_its_first_and_latest_month_of_valid_runs():
    runs = list(_runs(900, keys=1))  # Jan 2026 .. Jun 2028, one a day
    row = Tally.of(runs).trends[runs[0].key].row()
    valid = [r for r in runs if not r.invalid]
    months = sorted({r.created_at[:7] for r in valid})
    first = statistics.median(r.latency_ms for r in valid if r.created_at[:7] == months[0])
    latest = statistics.median(r.latency_ms for r in valid if r.created_at[:7] == months[-1])
    assert (row["months"], row["since"], row["runs"]) == (len(months), "2026-01", 900)
    assert (row["first_ms"], row["latest_ms"], row["validity"]) == (first, latest, None)


def test_telemetry_keeps_an_evenly_spaced_sample_and_the_whole_range(monkeypatch):
    monkeypatch.setattr(tally_mod, "READING_LIMIT", 100)
    tally = Tally(row_limit=10)
    for i in range(10_000):
        tally.add_reading(Reading("pi4", float(i), 40.0 + i % 30, 1000.0 + i, f"r{i}"))
    device = tally.telemetry["pi4"]
    kept = tally.readings()
    assert device.readings == 10_000 and 50 <= len(kept) <= 100
    assert (device.temps, device.freqs) == ([40.0, 69.0], [1000.0, 10_999.0])
    gaps = {b.time - a.time for a, b in zip(kept, kept[1:])}
    assert len(gaps) == 1 and kept[0].time == 0.0  # evenly spaced from the first


def test_newest_without_a_limit_keeps_every_run_in_order():
    newest = Newest(None)
    for run in _runs(5):
        newest.add(run)
    assert [r.id for r in newest.runs()] == ["r0", "r1", "r2", "r3", "r4"]


def test_the_summary_names_a_year_of_sweeps_by_count_and_both_ends():
    from aiot.host.report.html import _listed

    assert _listed([]) == "—" and _listed(["a", "b"]) == "a, b"
    names = [f"night{i:05d}" for i in range(357)]
    text = _listed(names)
    assert text.startswith("357: night00000, night00001") and text.endswith("night00356")
    assert text.count("night") == 8
