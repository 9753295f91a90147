"""``aiot results import`` (an export file or another host's store, untrusted) and ``aiot
results prune`` on real stores written through the store's own API and real export files."""

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aiot.device_agent.stats import summarize_ms
from aiot.host.engine.validity import judge
from aiot.host.store import open_store
from aiot.host.store.schema import SCHEMA_VERSION


def _samples(center_ms: float) -> list[int]:
    return [int((center_ms + (i % 21 - 10) / 200) * 1e6) for i in range(105)]


def store_run(store, sweep="night1", center=10.0, threads=1, status="ok", fmt="onnx"):
    """One finished record as the executor writes it."""
    spec = {"device": "pi4", "model": "tiny_cnn", "format": fmt, "threads": threads}
    prov = {"device": {"cpu_model": "Cortex-A72", "cores": 4}, "aiot_version": "0.1.0",
            "runtime": {"backend": "onnxruntime", "version": "1.20"}}
    rec = store.begin("latency", spec, prov, sweep_id=sweep, device="pi4", model="tiny_cnn",
                      format=fmt, threads=threads)
    if status != "ok":
        store.finish(rec.id, status, reason="agent crashed")
        return rec.id
    stats = summarize_ms(_samples(center))
    result = {"stats_ms": stats, "samples_ns": _samples(center)}
    # Judged as the executor judges a run, its verdict kept in the result (what an import
    # judges again).
    result["validity"] = judge(result, 1, prov["device"], threads=threads)
    store.finish(rec.id, "ok", result=result, artifact_sha256="ab" * 32, size_bytes=4096,
                 median_ms=stats["median"], p90_ms=stats["p90"], load_ms=3.5,
                 validity=result["validity"]["verdict"])
    return rec.id


@pytest.fixture
def other_host(tmp_path, cli):
    """Another host's results folder with 6 records, and its JSON export (written by the CLI)."""
    folder = tmp_path / "other"
    with open_store(folder) as store:
        ids = [store_run(store, threads=t, center=10.0 / t) for t in (1, 2, 4)]
        ids += [store_run(store, "night2", threads=t, center=11.0 / t) for t in (1, 2)]
        ids.append(store_run(store, "night2", threads=4, status="failed"))
    export = tmp_path / "other.json"
    cli("--results-dir", str(folder), "results", "export", "--format", "json", "-o", str(export))
    return folder, export, ids


#: How an export file may be laid out: as ``results export`` writes it (read by msgspec, its
#: closing brace found by its indent), a record a line (also msgspec), all on one line (the
#: standard library's decoder). Each hostile case is read in each.
LAYOUTS = {
    "as exported": lambda records: json.dumps(records, indent=2, sort_keys=True) + "\n",
    "a record a line": lambda records: "[\n" + ",\n".join(map(json.dumps, records)) + "\n]\n",
    "one line": json.dumps,
}


def _stored_ids() -> set[str]:
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"]), readonly=True) as store:
        return {r.id for r in store.query()}


def test_export_imports_whole_and_twice_adds_nothing(cli, other_host):
    folder, export, ids = other_host
    first = cli("results", "import", str(export))
    assert first.stdout.strip() == "6 imported, 0 already present, 0 conflicts, 0 refused"
    assert _stored_ids() == set(ids)
    again = cli("results", "import", str(export))
    assert again.stdout.strip() == "0 imported, 6 already present, 0 conflicts, 0 refused"
    # The imported records are the exported ones, field for field.
    exported = {d["id"]: d for d in json.loads(export.read_text())}
    mine = cli.json("results", "list")
    assert {d["id"]: d for d in mine} == exported


def test_store_of_another_host_merges_read_only(cli, other_host):
    folder, _export, ids = other_host
    other = folder / "aiot.sqlite"
    before = other.read_bytes()
    result = cli("results", "import", str(other))
    assert result.stdout.strip() == "6 imported, 0 already present, 0 conflicts, 0 refused"
    assert other.read_bytes() == before  # read-only: not migrated, not written
    assert _stored_ids() == set(ids)
    # An export of the same records then adds nothing: the same ids are the same records.
    cli("results", "import", str(_export))


def test_a_changed_record_is_a_conflict_never_overwritten(cli, other_host, tmp_path):
    _folder, export, ids = other_host
    cli("results", "import", str(export))
    records = json.loads(export.read_text())
    # The same id, another number (its median would be refused: it must be its stats_ms's).
    records[0]["load_ms"] = records[0]["load_ms"] * 2
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(records))
    result = cli("results", "import", str(changed), code=1)
    assert result.stdout.strip() == "0 imported, 5 already present, 1 conflicts, 0 refused"
    assert f"conflict: record {records[0]['id']} differs" in result.stderr
    assert cli.record(records[0]["id"]).load_ms == records[0]["load_ms"] / 2


HOSTILE = {
    "NaN median": ("median_ms", float("nan"), "median_ms is nan, not a finite number"),
    "negative latency": ("p90_ms", -3.0, "p90_ms -3.0 is outside 0.0..∞"),
    "latency of hours": ("load_ms", 1e300, "load_ms is 1e+300 ms, above the 1e+07 ms"),
    "huge reason": ("reason", "x" * 100_000, "reason is 100000 characters long"),
    "latency as text": ("median_ms", "fast", "median_ms is str, not a number"),
    "threads as bool": ("threads", True, "threads is bool, not an integer"),
    "unknown status": ("status", "great", "unknown status 'great'"),
    "malformed id": ("id", "../../etc", "no well-formed id"),
    "spec not an object": ("spec", [1, 2], "spec is list, not an object"),
    "pending": ("status", "pending", "is pending"),
    "bad time": ("created_at", "yesterday", "created_at 'yesterday' is not an ISO 8601 time"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_record_is_refused_naming_it_the_rest_imported(cli, other_host, tmp_path, case,
                                                               layout):
    _folder, export, ids = other_host
    name, value, why = HOSTILE[case]
    records = json.loads(export.read_text())
    records[2][name] = value
    bad = tmp_path / "bad.json"
    bad.write_text(LAYOUTS[layout](records))  # NaN written as JSON's NaN, as json.dumps does
    result = cli("results", "import", str(bad), code=1)
    assert result.stdout.strip() == "5 imported, 0 already present, 0 conflicts, 1 refused"
    refusal = [line for line in result.stderr.splitlines() if line.startswith("refused:")]
    assert len(refusal) == 1 and why in refusal[0], result.stderr
    if name != "id":
        assert ids[2] in refusal[0]
    assert ids[2] not in _stored_ids() and len(_stored_ids()) == 5


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_fields_of_a_newer_aiot_are_left_out_and_counted(cli, other_host, tmp_path, layout):
    _folder, export, ids = other_host
    records = json.loads(export.read_text())
    records[2]["gpu_watts"] = 3.0
    newer = tmp_path / "newer.json"
    newer.write_text(LAYOUTS[layout](records))
    result = cli("results", "import", str(newer))
    assert result.stdout.strip() == ("6 imported, 0 already present, 0 conflicts, 0 refused; "
                                     "ignored fields this aiot does not know: gpu_watts "
                                     "(in 1 records)")
    assert "gpu_watts" not in json.dumps(cli.json("results", "list"))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_duplicate_ids_in_one_file_store_one(cli, other_host, tmp_path, layout):
    _folder, export, ids = other_host
    records = json.loads(export.read_text())
    twice = tmp_path / "twice.json"
    twice.write_text(LAYOUTS[layout](records + [records[1]]))
    result = cli("results", "import", str(twice))
    assert result.stdout.strip() == "6 imported, 1 already present, 0 conflicts, 0 refused"
    other = dict(records[1], reason="edited")
    twice.write_text(LAYOUTS[layout]([records[1], other]))
    result = cli("results", "import", str(twice), code=1)
    assert "1 conflicts" in result.stdout


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_reads_the_records_the_standard_library_reads(other_host, tmp_path, layout):
    """The fast reading (msgspec) gives each record's text and columns as json reads them, and
    is the one used for the layouts aiot writes."""
    from aiot.host.store.importing import read_export

    _folder, export, _ids = other_host
    records = json.loads(export.read_text())
    path = tmp_path / "laid.json"
    path.write_text(LAYOUTS[layout](records))
    items = list(read_export(path))
    assert [json.loads(item.text) for item in items] == records
    for item, record in zip(items, records, strict=True):
        assert {k: v for k, v in item.data.items() if k not in ("spec", "result", "provenance")} \
            == {k: v for k, v in record.items() if k not in ("spec", "result", "provenance")}
    assert all(item.by_msgspec for item in items) == (layout != "one line")
    assert [item.data["provenance"] for item in items] == [r["provenance"] for r in records]


def test_truncated_export_keeps_whole_batches_and_resumes(cli, other_host, tmp_path, monkeypatch):
    from aiot.host.store import importing

    _folder, export, ids = other_host
    monkeypatch.setattr(importing, "BATCH", 2)
    text = export.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: int(len(text) * 0.75)])  # ends in the middle of record 5
    result = cli("results", "import", str(cut), code=2)
    assert "is not a whole results export: it ends in the middle of a record" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("error:")
    stored = _stored_ids()
    assert 0 < len(stored) < 6 and stored <= set(ids)
    assert cli("results", "import", str(export)).stdout.strip() == (
        f"{6 - len(stored)} imported, {len(stored)} already present, 0 conflicts, 0 refused")


@pytest.mark.parametrize("content, why", [
    (b'{"id": 1}', "not an aiot results export (a JSON list of records)"),
    (b"[1, 2] trailing", "data after the list of records"),
    (b'[{"a": 1} {"b": 2}]', "after a record"),
    (b"\xff\xfe[", "not UTF-8"),
    (b"", "not an aiot results export"),
])
def test_files_that_are_not_exports_are_refused_whole(cli, tmp_path, content, why):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = cli("results", "import", str(bad), code=2)
    assert why in result.stderr and "Traceback" not in result.stderr
    assert _stored_ids() == set()


def test_a_sqlite_file_that_is_not_a_store_or_is_newer_is_refused(cli, other_host, tmp_path):
    folder, _export, _ids = other_host
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    result = cli("results", "import", str(foreign), code=2)
    assert "is a SQLite file but not an aiot result store" in result.stderr
    newer = folder / "aiot.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    result = cli("results", "import", str(newer), code=1)
    assert f"has schema v{SCHEMA_VERSION + 1}, this aiot reads up to v{SCHEMA_VERSION}" in result.stderr
    assert _stored_ids() == set()


def test_hostile_rows_in_another_store_are_refused(cli, other_host):
    folder, _export, ids = other_host
    conn = sqlite3.connect(folder / "aiot.sqlite")
    conn.execute("UPDATE runs SET spec_json = '{not json' WHERE id = ?", (ids[0],))
    conn.execute("UPDATE runs SET load_ms = -1 WHERE id = ?", (ids[1],))
    conn.commit()
    conn.close()
    result = cli("results", "import", str(folder / "aiot.sqlite"), code=1)
    assert result.stdout.strip() == "4 imported, 0 already present, 0 conflicts, 2 refused"
    assert f"refused: record {ids[0]} spec is str, not an object" in result.stderr


# -- prune -------------------------------------------------------------------------------------

def _age(record_id: str, days: int) -> None:
    """Make a stored record ``days`` old (as a store a year in use holds them)."""
    when = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        store._conn.execute("UPDATE runs SET created_at = ? WHERE id = ?", (when, record_id))


@pytest.fixture
def aged():
    """Four nights of one sweep (1 and 4 threads), 200, 100, 10 and 1 days old."""
    ids = {}
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        for days in (200, 100, 10, 1):
            ids[days] = [store_run(store, f"night{days}", threads=t) for t in (1, 4)]
    for days, pair in ids.items():
        for rid in pair:
            _age(rid, days)
    return ids


def test_prune_dry_run_names_what_would_go_and_changes_nothing(cli, aged):
    dry = cli("results", "prune", "--older-than", "90d", "--dry-run")
    assert dry.stdout.strip() == "would prune 4 of 8 finished records (4 ok)"
    gone = {*aged[200], *aged[100]}
    assert sum(f"would prune {rid[:8]}" in dry.stderr for rid in gone) == 4
    assert len(_stored_ids()) == 8
    real = cli("results", "prune", "--older-than", "90d")
    assert real.stdout.strip() == "pruned 4 of 8 finished records (4 ok)"
    assert _stored_ids() == {*aged[10], *aged[1]}


def test_prune_keep_newest_per_configuration_and_threads(cli, aged):
    assert cli.json("results", "prune", "--keep", "1", "--dry-run")["pruned"] == 6
    result = cli("results", "prune", "--keep", "3", "--older-than", "150d", "--vacuum")
    assert result.stdout.strip() == "pruned 2 of 8 finished records (2 ok); vacuumed"
    assert _stored_ids() == {*aged[100], *aged[10], *aged[1]}
    cli("results", "prune", "--keep", "1")
    assert _stored_ids() == set(aged[1])  # the newest of 1 thread and of 4 threads


def test_prune_never_takes_a_running_sweep(cli, aged):
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        store.begin("latency", {"device": "pi4", "model": "tiny_cnn", "format": "onnx",
                                "threads": 2}, {}, sweep_id="night200", device="pi4")
    result = cli("results", "prune", "--older-than", "90d")
    assert result.stdout.strip() == "pruned 2 of 8 finished records (2 ok); kept 2 of sweeps still pending"
    assert set(aged[200]) <= _stored_ids()
    assert len(_stored_ids()) == 7  # the pending record too


def test_prune_needs_a_rule_and_a_readable_age(cli):
    assert "prune needs --older-than, --keep or both" in cli("results", "prune", code=2).stderr
    assert "cannot read the age '3 months'" in cli("results", "prune", "--older-than", "3 months",
                                                   code=2).stderr


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_field_given_twice_is_refused_not_stored_as_sqlite_reads_it(cli, other_host, tmp_path,
                                                                      layout):
    _folder, export, ids = other_host
    records = json.loads(export.read_text())
    # Python and msgspec keep the last "spec", SQLite's json_extract the first: stored would
    # be the text.
    text = LAYOUTS[layout](records)
    twice = text.replace('"spec": {', '"spec": "rm -rf", "spec": {', 1)
    bad = tmp_path / "twice.json"
    bad.write_text(twice)
    result = cli("results", "import", str(bad), code=1)
    assert result.stdout.strip() == "5 imported, 0 already present, 0 conflicts, 1 refused"
    assert f"refused: record {ids[0]} has a field given twice" in result.stderr
    assert ids[0] not in _stored_ids()


def test_nan_inside_another_stores_result_is_refused(cli, other_host):
    folder, _export, ids = other_host
    conn = sqlite3.connect(folder / "aiot.sqlite")
    conn.execute("UPDATE runs SET result_json = ? WHERE id = ?",
                 (json.dumps({"stats_ms": {"median": float("nan")}}), ids[0]))
    conn.commit()
    conn.close()
    result = cli("results", "import", str(folder / "aiot.sqlite"), code=1)
    assert f"refused: record {ids[0]} holds a NaN or infinite number" in result.stderr
    assert "5 imported" in result.stdout
