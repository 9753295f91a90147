"""Issue 49: an import is as untrusted as a device. Two real stores stand for two hosts
(``AIOT_HOST_ID`` set to ``lab-b`` while the second is written through the store's own API, and
its export written by the CLI); every file and store here is forged from them, byte for byte,
and imported by the real CLI into this test's store (host ``lab-a``), which holds runs of its
own that no import may lose.

Each case asserts what must hold: a bad record refused in one line naming it (the others
imported), a file or store that is not whole refused in one line with exit 2, no traceback,
no record of this store lost, and every reader (``aiot report``, ``results list``/``show``,
``results export --format csv``, the lab view's devices page) still working on records of odd
types already in a store.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aiot.device_agent.stats import summarize_ms
from aiot.host.engine.validity import ValidityPolicy, judge
from aiot.host.store import foreign, identity, open_store
from tests.faults.conftest import count_records, one_line_error

HOST_A, HOST_B = "lab-a", "lab-b"


def _samples(center_ms: float) -> list[int]:
    return [int((center_ms + (i % 21 - 10) / 200) * 1e6) for i in range(105)]


def store_run(store, threads: int = 1, center: float = 10.0, device: str = "pi4",
              provenance: dict | None = None) -> str:
    """One finished run as the executor records it: statistics of its samples, judged
    (under the default limits) and kept in its result."""
    spec = {"device": device, "model": "tiny_cnn", "format": "onnx", "threads": threads,
            "params": {"min_runs": 10}}
    prov = provenance or {
        "device": {"cpu_model": "Cortex-A72", "cores": 4, "soc": "BCM2711", "processors": 4},
        "runtime": {"backend": "onnxruntime", "version": "1.20"}, "aiot_version": "0.1.0",
        "device_state": {"throttling": [], "changes": [],
                         "before": {"cpu_temp_max_c": 40.0, "cpu_freq_khz": {"0": 1500000},
                                    "timestamp": 1.0},
                         "after": {"cpu_temp_max_c": 41.0, "cpu_freq_khz": {"0": 1500000},
                                   "timestamp": 2.0}}}
    rec = store.begin("latency", spec, prov, sweep_id="night1", device=device, model="tiny_cnn",
                      format="onnx", threads=threads)
    stats = summarize_ms(_samples(center))
    result = {"stats_ms": stats, "samples_ns": _samples(center), "load_ms": 3.5}
    device_info = prov["device"] if isinstance(prov.get("device"), dict) else {}
    result["validity"] = judge(result, 10, device_info, threads=threads, policy=ValidityPolicy())
    store.finish(rec.id, "ok", result=result, artifact_sha256="ab" * 32, size_bytes=4096,
                 median_ms=stats["median"], p90_ms=stats["p90"], load_ms=3.5,
                 validity=result["validity"]["verdict"])
    return rec.id


@pytest.fixture
def hosts(tmp_path, cli, monkeypatch):
    """This test's store (host lab-a) with two runs of its own, and host lab-b's store (three
    runs, written as lab-b) with its export (written by the CLI, as lab-b)."""
    monkeypatch.setenv(identity.HOST_ENV, HOST_B)
    other = tmp_path / "lab-b"
    with open_store(other) as store:
        ids = [store_run(store, threads=t, center=10.0 / t) for t in (1, 2, 4)]
    export = tmp_path / "lab-b.json"
    cli("--results-dir", str(other), "results", "export", "--format", "json", "-o", str(export))
    monkeypatch.setenv(identity.HOST_ENV, HOST_A)
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        for threads in (1, 2):
            store_run(store, threads=threads, device="local")
    return other / "aiot.sqlite", export, ids


def _records(export: Path) -> list[dict]:
    return json.loads(export.read_text())


def _write(path: Path, records: list[dict], layout: str = "as exported") -> Path:
    text = (json.dumps(records, indent=2, sort_keys=True) if layout == "as exported"
            else "[\n" + ",\n".join(map(json.dumps, records)) + "\n]")
    path.write_text(text + "\n")
    return path


def _refusals(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("refused:")]


def _stored(record_id: str) -> dict | None:
    conn = sqlite3.connect(Path(os.environ["AIOT_RESULTS_DIR"]) / "aiot.sqlite")
    try:
        row = conn.execute("SELECT validity, result_json FROM runs WHERE id = ?",
                           (record_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else {"validity": row[0], "result": json.loads(row[1])}


def _set(record: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for name in parents:
        record = record[name]
    record[last] = value


def _import_one_bad(cli, fault, tmp_path, export, ids, change, why: str,
                    layout: str = "as exported"):
    """Import lab-b's export with record 2 changed by ``change``: it is refused in one line
    naming it and saying ``why``, the other two are imported, nothing of this store is lost."""
    records = _records(export)
    change(records[1])
    before = count_records()
    result = cli("results", "import", str(_write(tmp_path / "bad.json", records, layout)), code=1)
    assert result.stdout.strip() == "2 imported, 0 already present, 0 conflicts, 1 refused"
    refused = _refusals(result)
    assert len(refused) == 1 and ids[1] in refused[0] and why in refused[0], result.stderr
    assert "Traceback" not in result.output
    assert _stored(ids[1]) is None
    assert fault.records_lost(before, count_records()) == 0 and count_records() == before + 2
    return refused[0]


# -- statistics no device could have measured ---------------------------------------------------

def _median_zero(r):
    r["median_ms"] = 0.0


def _p90_below_median(r):
    r["p90_ms"] = r["median_ms"] / 2


def _hours(r):
    r["median_ms"] = r["p90_ms"] = 1e300


def _column_not_its_stats(r):
    r["median_ms"] = r["result"]["stats_ms"]["median"] * 3
    r["p90_ms"] = r["median_ms"] * 1.01


def _negative_inside_stats(r):
    r["result"]["stats_ms"]["median"] = -5.0


def _stats_out_of_order(r):
    r["result"]["stats_ms"]["p90"] = r["result"]["stats_ms"]["median"] / 2


BAD_STATS = {
    "median 0": (_median_zero, "median_ms is 0, not a latency (an ok run's is above 0 ms)"),
    "p90 below the median": (_p90_below_median, "is below median_ms"),
    "1e300 ms": (_hours, "median_ms is 1e+300 ms, above the 1e+07 ms a run may take"),
    "median column not its stats_ms's": (_column_not_its_stats,
                                         "differs from its result's stats_ms.median"),
    "median -5 inside result.stats_ms": (_negative_inside_stats,
                                         "result.stats_ms.median is -5, not > 0"),
    "stats_ms out of order": (_stats_out_of_order, "is above stats_ms.p90"),
}


@pytest.mark.fault("an imported record's impossible statistics")
@pytest.mark.parametrize("case", sorted(BAD_STATS))
def test_statistics_no_device_could_measure_are_refused(cli, fault, hosts, tmp_path, case):
    _store, export, ids = hosts
    change, why = BAD_STATS[case]
    _import_one_bad(cli, fault, tmp_path, export, ids, change, why)


@pytest.mark.fault("impossible statistics in another host's store")
def test_statistics_in_another_store_are_refused(cli, fault, hosts):
    store, _export, ids = hosts
    conn = sqlite3.connect(store)
    conn.execute("UPDATE runs SET median_ms = 0 WHERE id = ?", (ids[0],))
    conn.execute("UPDATE runs SET result_json = json_set(result_json, '$.stats_ms.median', -5) "
                 "WHERE id = ?", (ids[1],))
    conn.commit()
    conn.close()
    before = count_records()
    result = cli("results", "import", str(store), code=1)
    assert result.stdout.strip() == "1 imported, 0 already present, 0 conflicts, 2 refused"
    assert f"refused: record {ids[0]} median_ms is 0, not a latency" in result.stderr
    assert f"refused: record {ids[1]} result.stats_ms.median is -5, not > 0" in result.stderr
    assert fault.records_lost(before, count_records()) == 0


# -- the verdict is judged here, never taken from the file --------------------------------------

@pytest.mark.fault("an imported record's verdict taken from the file")
def test_the_verdict_is_judged_again_not_taken_from_the_file(cli, fault, hosts, tmp_path):
    _store, export, ids = hosts
    records = _records(export)
    # Record 1 says VALID of a run its own telemetry says was throttled; record 2 says INVALID
    # of a clean run; record 3 is as lab-b judged it.
    records[0]["provenance"]["device_state"]["throttling"] = ["cpu0 capped at 600 MHz"]
    assert records[0]["validity"] == records[0]["result"]["validity"]["verdict"] == "VALID"
    records[1]["validity"] = "INVALID"
    records[1]["result"]["validity"] = {"verdict": "INVALID", "reasons": ["made up"],
                                        "limits": ValidityPolicy().limits()}
    before = count_records()
    result = cli("results", "import", str(_write(tmp_path / "said.json", records)))
    assert result.stdout.strip() == ("3 imported, 0 already present, 0 conflicts, 0 refused, "
                                     "2 verdicts judged again")
    assert (f"judged again: record {ids[0]} says VALID, judged here INVALID "
            "(throttling detected)") in result.stderr
    assert f"judged again: record {ids[1]} says INVALID, judged here VALID" in result.stderr
    first, second, third = (_stored(i) for i in ids)
    assert first["validity"] == first["result"]["validity"]["verdict"] == "INVALID"
    assert first["result"]["validity"]["reasons"] == [
        "throttling detected: cpu0 capped at 600 MHz"]
    assert second["validity"] == "VALID" and second["result"]["validity"]["reasons"] == []
    assert third["result"]["validity"] == records[2]["result"]["validity"]
    listed = {r["id"]: r for r in cli.json("results", "list")}
    assert listed[ids[0]]["validity"] == "INVALID"
    # Imported again: the same records, judged the same (nothing changes, no conflict).
    again = cli("results", "import", str(tmp_path / "said.json"))
    assert again.stdout.strip().startswith("0 imported, 3 already present, 0 conflicts")
    assert fault.records_lost(before, count_records()) == 0


@pytest.mark.fault("a verdict on a record that has none (a failed run)")
def test_a_verdict_on_a_failed_run_is_not_stored(cli, fault, hosts, tmp_path):
    _store, export, ids = hosts
    records = _records(export)
    records[2].update(status="failed", reason="agent crashed", median_ms=None, p90_ms=None)
    result = cli("results", "import", str(_write(tmp_path / "failed.json", records)))
    assert (f"judged again: record {ids[2]} says VALID, judged here no verdict (not an ok "
            "latency run)") in result.stderr
    stored = _stored(ids[2])
    assert stored["validity"] is None and "validity" not in stored["result"]


@pytest.mark.fault("an import without a judge (a script) takes no verdict")
def test_without_a_judge_the_verdict_is_stored_unjudged(hosts):
    from aiot.host.store.importing import import_records

    _store, export, ids = hosts
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        summary = import_records(store, export)
    assert summary.line() == ("3 imported, 0 already present, 0 conflicts, 0 refused, "
                              "3 unjudged")
    for rid in ids:
        stored = _stored(rid)
        assert stored["validity"] is None and "validity" not in stored["result"]


# -- provenance of odd types: refused at import, tolerated by every reader ----------------------

ODD = {
    "device is text": ("provenance.device", "pixel-7",
                       "provenance.device is str, not an object"),
    "a CPU frequency 'fast'": ("provenance.device_state.after.cpu_freq_khz", {"0": "fast"},
                               "provenance.device_state.after.cpu_freq_khz.0 is str, not a number"),
    "telemetry that is text": ("provenance.device_state", "hot",
                               "provenance.device_state is str, not an object"),
    "cores 'four'": ("provenance.device.cores", "four",
                     "provenance.device.cores is str, not an integer"),
    "runtime that is text": ("provenance.runtime", "onnx",
                             "provenance.runtime is str, not an object"),
    "device labels that are text": ("provenance.device.labels", "emulated",
                                    "provenance.device.labels is str, not an object"),
    "artifact that is a number": ("provenance.artifact", 5,
                                  "provenance.artifact is int, not an object"),
    "verdict that is text": ("result.validity", "VALID", "result.validity is str, not an object"),
    "inputs that are text": ("result.inputs", "x", "result.inputs is str, not a list"),
    "input shapes that are text": ("spec.input_shapes", "1x3", "spec.input_shapes is str"),
}


@pytest.mark.fault("odd-typed provenance in an import")
@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_typed_provenance_is_refused_at_import(cli, fault, hosts, tmp_path, case):
    _store, export, ids = hosts
    path, value, why = ODD[case]
    line = _import_one_bad(cli, fault, tmp_path, export, ids,
                           lambda r: _set(r, path, value), why, layout="a record a line")
    assert line.endswith("(aiot writes no such record)")


def _lab_view_devices_page(results_dir: Path) -> str:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from aiot.host.labview.server import ViewConfig, create_app

    view = TestClient(create_app(ViewConfig(results_dir, "t0ken", every_s=0.05)),
                      base_url="http://127.0.0.1:8470", raise_server_exceptions=False)
    assert view.post("/login", data={"token": "t0ken", "name": "tess"},
                     follow_redirects=False).status_code == 303
    page = view.get("/")
    assert page.status_code == 200, page.text[-2000:]
    return page.text


@pytest.mark.fault("odd-typed provenance already in a store: every reader")
def test_every_reader_tolerates_odd_types_already_in_a_store(cli, fault, hosts, tmp_path):
    """A store written before imports were checked (or damaged) holds records of this host's
    ``local`` device with each odd shape, written through the store's own API: the report,
    the list, show, the CSV export and the lab view's devices page show "—" for what they
    cannot read, and ``results check`` counts them."""
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    odd_ids = []
    with open_store(results) as store:
        good = store.get(store.query(device="local")[0].id)
        for path, value, _why in ODD.values():
            record = copy.deepcopy({"spec": good.spec, "provenance": good.provenance,
                                    "result": good.result})
            _set(record, path, value)
            rec = store.begin("latency", record["spec"], record["provenance"], sweep_id="odd",
                              device="local", model="tiny_cnn", format="onnx", threads=1)
            store.finish(rec.id, "ok", result=record["result"], median_ms=good.median_ms,
                         p90_ms=good.p90_ms, load_ms=3.5, validity="VALID")
            odd_ids.append(rec.id)
    before = count_records()
    report = cli("report", "-o", str(tmp_path / "report"))
    assert "Traceback" not in report.output and (tmp_path / "report" / "index.html").exists()
    listed = cli("results", "list", "--limit", "0")
    assert all(rid[:8] in listed.stdout for rid in odd_ids)
    assert len(cli.json("results", "list")) == before
    csv = cli("results", "export", "--format", "csv").stdout
    assert csv.count("\n") == before + 1
    for rid in odd_ids:
        shown = cli("results", "show", rid)
        assert rid in shown.stdout
    assert "— · — cores · —" in cli("results", "show", odd_ids[0]).stdout  # device: text
    assert "local" in _lab_view_devices_page(results)
    check = cli("results", "check", code=1)
    said = " ".join(check.stderr.split())
    assert f"{len(odd_ids)} of them hold fields of a type aiot does not write" in said
    assert f"unreadable: record {odd_ids[0]} provenance.device is str, not an object" in said
    assert sum(line.startswith("unreadable: record ") for line in check.stderr.splitlines()) == 5
    assert "Traceback" not in check.output
    assert fault.records_lost(before, count_records()) == 0


# -- another store that is not whole -----------------------------------------------------------

@pytest.mark.fault("another store's schema_version is text")
def test_a_store_whose_schema_version_is_text_is_refused_in_one_line(cli, fault, hosts):
    store, _export, _ids = hosts
    conn = sqlite3.connect(store)
    conn.execute("UPDATE meta SET value = 'seven' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = count_records()
    result = cli("results", "import", str(store), code=2)
    one_line_error(result, "its schema_version is 'seven', not a version number", code=2)
    assert fault.records_lost(before, count_records()) == 0 and count_records() == before


@pytest.mark.fault("another store's runs table lacks a column")
def test_a_store_missing_a_column_is_refused_in_one_line(cli, fault, hosts):
    store, _export, _ids = hosts
    conn = sqlite3.connect(store)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] != "median_ms"]
    conn.executescript(f"CREATE TABLE runs_cut AS SELECT {', '.join(columns)} FROM runs; "
                       "DROP TABLE runs; ALTER TABLE runs_cut RENAME TO runs;")
    conn.close()
    before = count_records()
    result = cli("results", "import", str(store), code=2)
    one_line_error(result, "its runs table lacks column(s) median_ms", code=2)
    assert count_records() == before and fault.records_lost(before, count_records()) == 0


# -- records the decoder cannot read -----------------------------------------------------------

DEEP = 200_000


@pytest.mark.fault("200 000 levels of JSON nesting in an export")
@pytest.mark.parametrize("layout", ["as exported", "a record a line"])
def test_a_record_nested_200000_deep_is_refused_in_one_line(cli, fault, hosts, tmp_path, layout):
    _store, export, ids = hosts
    records = _records(export)
    records[1]["spec"]["deep"] = "@DEEP@"
    text = _write(tmp_path / "deep.json", records, layout).read_text()
    (tmp_path / "deep.json").write_text(text.replace('"@DEEP@"', "[" * DEEP + "]" * DEEP))
    before = count_records()
    result = cli("results", "import", str(tmp_path / "deep.json"), code=1)
    assert result.stdout.strip() == "2 imported, 0 already present, 0 conflicts, 1 refused"
    assert (f"refused: record {ids[1]} (record 2 of the file) cannot be read: it is nested "
            "deeper than any record aiot writes") in result.stderr
    assert "Traceback" not in result.output
    assert fault.records_lost(before, count_records()) == 0


@pytest.mark.fault("deep nesting in another store, and past the depth cap")
def test_deep_nesting_in_a_store_or_past_the_cap_is_refused(cli, fault, hosts):
    store, _export, ids = hosts
    conn = sqlite3.connect(store)
    conn.execute("UPDATE runs SET provenance_json = ? WHERE id = ?",
                 ('{"x": ' + "[" * DEEP + "]" * DEEP + "}", ids[0]))
    conn.execute("UPDATE runs SET spec_json = json_set(spec_json, '$.odd', json(?)) WHERE id = ?",
                 ("[" * 40 + "]" * 40, ids[1]))
    conn.commit()
    conn.close()
    result = cli("results", "import", str(store), code=1)
    assert result.stdout.strip() == "1 imported, 0 already present, 0 conflicts, 2 refused"
    assert (f"refused: record {ids[0]} provenance is nested deeper than any record aiot "
            "writes") in result.stderr
    assert f"refused: record {ids[1]} spec.odd" in result.stderr
    assert "is nested more than 32 levels deep" in result.stderr


@pytest.mark.fault("a 10^400 integer")
@pytest.mark.parametrize("where", ["threads", "result.stats_ms.count", "provenance.extra"])
def test_a_huge_integer_is_refused_in_one_line(cli, fault, hosts, tmp_path, where):
    _store, export, ids = hosts
    line = _import_one_bad(cli, fault, tmp_path, export, ids,
                           lambda r: _set(r, where, 10 ** 400), "is an integer of 401 digits")
    assert line.startswith(f"refused: record {ids[1]} {where}"), line


@pytest.mark.fault("an integer of 5000 digits (past Python's int() limit)")
def test_an_integer_past_pythons_limit_is_refused_in_one_line(cli, fault, hosts, tmp_path):
    _store, export, ids = hosts
    records = _records(export)
    records[1]["result"]["stats_ms"]["count"] = "@HUGE@"
    text = _write(tmp_path / "huge.json", records, "a record a line").read_text()
    (tmp_path / "huge.json").write_text(text.replace('"@HUGE@"', "1" + "0" * 5000))
    before = count_records()
    result = cli("results", "import", str(tmp_path / "huge.json"), code=1)
    assert result.stdout.strip() == "2 imported, 0 already present, 0 conflicts, 1 refused"
    assert (f"refused: record {ids[1]} (record 2 of the file) cannot be read: it holds an "
            f"integer of more than {sys.get_int_max_str_digits()} digits") in result.stderr
    assert fault.records_lost(before, count_records()) == 0


# -- a file that is an export after all; a row too long to read --------------------------------

@pytest.mark.fault("an export file starting with a UTF-8 byte order mark")
def test_an_export_with_a_byte_order_mark_is_imported(cli, fault, hosts, tmp_path):
    _store, export, ids = hosts
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + export.read_bytes())
    result = cli("results", "import", str(bom))
    assert result.stdout.strip() == "3 imported, 0 already present, 0 conflicts, 0 refused"
    assert all(_stored(rid) is not None for rid in ids)


_MEASURE = """
import json, resource, sys, tracemalloc
from pathlib import Path
from aiot.host.store import open_store
from aiot.host.store.importing import import_records
with open_store(Path(sys.argv[1])) as store:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    summary = import_records(store, Path(sys.argv[2]))
    peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"line": summary.line(), "refused": summary.refused, "python_peak": peak,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rss_before_kb": before}))
"""


@pytest.mark.fault("one 200 MB row in another host's store")
def test_a_200_mb_row_is_refused_unread_with_bounded_memory(fault, hosts, tmp_path):
    store, _export, ids = hosts
    conn = sqlite3.connect(store)
    conn.execute("UPDATE runs SET reason = ? WHERE id = ?", ("x" * 200_000_000, ids[1]))
    conn.commit()
    conn.close()
    before = count_records()
    done = subprocess.run([sys.executable, "-c", _MEASURE, os.environ["AIOT_RESULTS_DIR"],
                           str(store)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["line"].startswith("2 imported, 0 already present, 0 conflicts, 1 refused")
    [refused] = measured["refused"]
    assert refused.startswith(f"record {ids[1]} is 2000") and refused.endswith(
        f"characters long (at most {foreign.MAX_ROW_CHARS}): not read"), refused
    # Python never holds the row: its heap stays far below the row's 200 MB.
    assert measured["python_peak"] < 32 * 2 ** 20, measured
    # SQLite measures the row in its own memory, once (one copy of it, freed): the process
    # stays far below the 822 MB an import took when it read the row whole.
    assert measured["rss_kb"] - measured["rss_before_kb"] < 300 * 1024, measured
    assert fault.records_lost(before, count_records()) == 0


# -- times later than the import -----------------------------------------------------------------

@pytest.mark.fault("records dated in the year 9999")
@pytest.mark.parametrize("field", ["created_at", "finished_at"])
def test_a_record_from_the_future_is_refused(cli, fault, hosts, tmp_path, field):
    _store, export, ids = hosts
    line = _import_one_bad(cli, fault, tmp_path, export, ids,
                           lambda r: r.update({field: "9999-12-31T23:59:59+00:00"}),
                           f"{field} 9999-12-31T23:59:59+00:00 is in the future")
    assert line.endswith("(more than 10 minutes past this host's clock)"), line


@pytest.mark.fault("a host whose clock is a few minutes ahead")
def test_a_clock_a_few_minutes_ahead_is_not_the_future(cli, fault, hosts, tmp_path):
    _store, export, ids = hosts
    records = _records(export)
    ahead = (datetime.now(UTC) + timedelta(minutes=5)).isoformat(timespec="seconds")
    records[0]["created_at"] = records[0]["finished_at"] = ahead
    result = cli("results", "import", str(_write(tmp_path / "ahead.json", records)))
    assert result.stdout.strip() == "3 imported, 0 already present, 0 conflicts, 0 refused"
