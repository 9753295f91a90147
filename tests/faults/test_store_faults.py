"""The result store under misuse and concurrent use: exports aimed at the wrong file, two
processes creating or measuring at once, a damaged or truncated store, and sweeps that are
terminated or killed. Nothing here may lose a record or leave one pending for ever.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

#: A sweep whose first run takes 30 s: long enough to be caught running.
SLOW_SWEEP = ("sweep", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", "--threads", "1,2",
              "--min-runs", "3", "--min-s", "30", "--max-s", "30", "--warmup-min-s", "0",
              "--cooldown-max-s", "0")


def _results() -> Path:
    return Path(os.environ["AIOT_RESULTS_DIR"])


def _store() -> Path:
    return _results() / "aiot.sqlite"


def _seed(n: int = 3, **columns) -> list[str]:
    """``n`` finished records written through the store (fast; no measurement)."""
    from aiot.host.store import open_store

    ids = []
    with open_store(_results()) as store:
        for i in range(n):
            spec = {"model": "tiny_cnn", "binarize": "bnn", "cluster": "big",
                    "weights": "w.pt", "pad": "x" * 2000}
            prov = {"converter": {"name": "tflite", "quant": "int8"}, "pad": "y" * 2000}
            rec = store.begin("latency", spec, prov, sweep_id="s", device="local",
                              model="tiny_cnn", format="tflite", threads=1 + i % 4)
            store.finish(rec.id, "ok", median_ms=1.0 + i, validity="VALID", **columns)
            ids.append(rec.id)
    return ids


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _statuses() -> list[tuple[str, str | None]]:
    conn = sqlite3.connect(f"file:{_store()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT status, reason FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()


# -- 1. results export --out ----------------------------------------------------------------------

@pytest.mark.fault("export --out onto the store")
@pytest.mark.parametrize("target", ["aiot.sqlite", "aiot.sqlite-wal", "aiot.sqlite-shm", "hard link"])
def test_export_onto_the_store_is_refused(cli, fault, tmp_path, target):
    _seed()
    before, sha = count_records(), _sha(_store())
    out = _results() / target
    if target == "hard link":
        out = tmp_path / "export.csv"
        os.link(_store(), out)
    result = cli("results", "export", "-f", "csv", "--out", str(out), code=2)
    one_line_error(result, "result store", code=2)
    assert _sha(_store()) == sha
    assert fault.records_lost(before, count_records()) == 0


def _special(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "char device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(path))
        except OSError:
            pytest.skip("the temp path is too long for a socket")
        finally:
            sock.close()
    elif kind == "symlink":
        (tmp_path / "elsewhere.csv").write_text("theirs\n")
        path.symlink_to(tmp_path / "elsewhere.csv")
    return path


@pytest.mark.fault("export --out onto a device, FIFO, socket or link")
@pytest.mark.parametrize("kind", ["char device", "fifo", "socket", "symlink"])
def test_export_onto_special_files_is_refused(cli, fault, tmp_path, kind):
    _seed()
    target = _special(kind, tmp_path)
    mode = os.lstat(target).st_mode
    result = cli("results", "export", "-f", "csv", "--out", str(target), code=2)
    one_line_error(result, str(target), code=2)
    assert os.lstat(target).st_mode == mode  # still what it was, not a regular file
    if kind == "symlink":
        assert (tmp_path / "elsewhere.csv").read_text() == "theirs\n"
    assert [p.name for p in tmp_path.iterdir() if ".part" in p.name] == []
    fault.records_lost(3, count_records())


@pytest.mark.fault("export --out a folder or nothing")
@pytest.mark.parametrize("target", ["", "folder", "under a file"])
def test_export_to_a_folder_or_empty_path_is_refused(cli, fault, tmp_path, target):
    _seed()
    (tmp_path / "file").write_text("x")
    out = {"": "", "folder": str(tmp_path), "under a file": str(tmp_path / "file" / "x.csv")}[target]
    result = cli("results", "export", "-f", "json", "--out", out, code=2)
    one_line_error(result, "--out", code=2)
    assert (tmp_path / "file").read_text() == "x"
    fault.records_lost(3, count_records())


@pytest.mark.fault("export --out over an existing file")
def test_export_replaces_an_existing_file_atomically(cli, fault, tmp_path, monkeypatch):
    _seed()
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "export.json"
    out.write_text("old\n")
    out.chmod(0o640)
    cli("results", "export", "-f", "json", "--out", str(out))
    assert len(json.loads(out.read_text())) == 3
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the file's permissions are kept
    out.write_text("old\n")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)  # the write fails half-way
    result = cli("results", "export", "-f", "json", "--out", str(out), code=2)
    one_line_error(result, "No space left", code=2)
    assert out.read_text() == "old\n"  # the old file, whole, not a torn new one
    assert sorted(p.name for p in out.parent.iterdir()) == ["export.json"]  # no temp file left
    fault.records_lost(3, count_records())


@pytest.mark.fault("CSV export: formulas and missing columns")
def test_csv_export_neutralises_formulas_and_keeps_run_columns(cli, fault):
    from aiot.host.store import open_store

    _seed(1)
    with open_store(_results()) as store:
        for text in ("=HYPERLINK(\"http://x\")", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx"):
            rec = store.begin("latency", {"model": text}, {}, device=text, model=text)
            store.finish(rec.id, "failed", reason=text, median_ms=-1.5)
    rows = list(csv.DictReader(io.StringIO(cli("results", "export", "-f", "csv").stdout, newline="")))
    assert len(rows) == 7
    for row in rows[1:]:
        for column in ("device", "model", "reason"):
            assert row[column].startswith("'"), row[column]
        assert row["median_ms"] == "-1.5"  # a number stays a number
    first = rows[0]
    assert {k: first[k] for k in ("validity", "quant", "binarize", "cluster", "weights")} == {
        "validity": "VALID", "quant": "int8", "binarize": "bnn", "cluster": "big", "weights": "w.pt"}
    fault.records_lost(7, count_records())


# -- 2. two processes creating the store --------------------------------------------------------

_OPENER = """
import sys, time
from pathlib import Path
from aiot.host.store import open_store
folder, ready, go = map(Path, sys.argv[1:])
ready.touch()
while not go.exists():
    time.sleep(0.001)
with open_store(folder) as store:
    store.finish(store.begin("latency", {}, {}).id, "ok")
"""


@pytest.mark.fault("two processes create the store at once")
def test_processes_creating_a_new_store_at_once(fault, tmp_path):
    tries, per_try = 10, 4
    failures, lost = [], 0
    for attempt in range(tries):
        folder, go = tmp_path / f"try{attempt}", tmp_path / f"go{attempt}"
        folder.mkdir()
        ready = [tmp_path / f"ready{attempt}.{i}" for i in range(per_try)]
        procs = [subprocess.Popen([sys.executable, "-c", _OPENER, str(folder), str(r), str(go)],
                                  stderr=subprocess.PIPE, text=True) for r in ready]
        while not all(r.exists() for r in ready):  # every process imported aiot: start together
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        go.touch()
        for proc in procs:
            _out, err = proc.communicate(timeout=120)
            if proc.returncode:
                failures.append(err.strip().splitlines()[-1:])
        lost += per_try - count_records(folder)
    fault.tried(tries)
    fault.records_lost(lost, 0)
    assert failures == []
    assert lost == 0


# -- 3. damaged and truncated stores ---------------------------------------------------------------

def _damage_middle(path: Path) -> None:
    """Overwrite 16 KiB in the middle of the file, as a bad sector or a stray write would."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xde\xad\xbe\xef" * 4096)


def _readable_rows(path: Path) -> int:
    """Rows of ``runs`` that plain sqlite3 reads one by one from a damaged file, their JSON
    whole (the reference for what a recovery can save)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    readable = 0
    try:
        for rowid in range(1, 2 * 400 + 1):
            try:
                row = conn.execute("SELECT spec_json, provenance_json FROM runs WHERE rowid = ?",
                                   (rowid,)).fetchone()
                readable += row is not None and all(json.loads(text) is not None for text in row)
            except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError):
                continue
    finally:
        conn.close()
    return readable


@pytest.mark.fault("damaged store")
def test_a_damaged_store_is_refused_for_reading_and_writing(cli, fault):
    _seed(400)
    _damage_middle(_store())
    sha = _sha(_store())
    for args in (("results", "list"), ("results", "export"), ("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST)):
        result = cli(*args, code=1)
        one_line_error(result, "is damaged", "recover", code=1)
    assert _sha(_store()) == sha  # nothing was written into it
    fault.records_lost(0, 0)


@pytest.mark.fault("damaged store recovered")
def test_results_recover_copies_what_a_damaged_store_still_holds(cli, fault):
    _seed(400)
    sha = _sha(_store())
    result = cli("results", "recover", code=2)  # a healthy store is not touched
    one_line_error(result, "not damaged", code=2)
    assert _sha(_store()) == sha and count_records() == 400
    _damage_middle(_store())
    readable = _readable_rows(_store())
    cli("results", "recover")
    kept = [p for p in _results().iterdir() if p.name.startswith("aiot.sqlite.damaged-") and
            not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1  # the damaged store is kept, not deleted
    recovered = count_records()
    assert recovered >= 360, recovered  # 16 KiB of 1.7 MB destroyed: most records survive
    assert len(cli.json("results", "list")) == recovered  # the new store is a working one
    # The injected damage destroyed some rows; aiot must lose none that plain SQLite can still read.
    assert recovered >= readable, (recovered, readable)
    fault.records_lost(readable, recovered)


@pytest.mark.fault("truncated (0-byte) store")
def test_an_empty_store_file_is_refused(cli, fault):
    _results().mkdir(parents=True, exist_ok=True)
    _store().write_bytes(b"")
    for args in (("results", "list"), ("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST)):
        result = cli(*args, code=1)
        one_line_error(result, "empty (0 bytes)", code=1)
    assert _store().stat().st_size == 0  # not silently made a fresh store
    fault.records_lost(0, 0)


# -- 4. a sweep terminated or killed ---------------------------------------------------------------

def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "aiot", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_pending(proc: subprocess.Popen, timeout: float = 180.0) -> None:
    """Until ``proc`` has a pending record (its first run started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            if ("pending", None) in _statuses():
                return
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the sweep never started a run")


@pytest.mark.fault("sweep terminated (SIGTERM)")
def test_a_terminated_sweep_leaves_no_pending_record(fault):
    proc = _start(*SLOW_SWEEP)
    _wait_for_pending(proc)
    before = count_records()
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    statuses = _statuses()
    assert statuses and all(status != "pending" for status, _ in statuses), statuses
    assert ("failed", "terminated (SIGTERM)") in statuses
    fault.records_lost(before, count_records())


@pytest.mark.fault("sweep killed (SIGKILL)")
def test_a_killed_sweeps_pending_records_are_failed_by_the_next_run(cli, fault):
    from aiot.host.store import open_store

    proc = _start(*SLOW_SWEEP)
    _wait_for_pending(proc)
    proc.kill()
    proc.communicate(timeout=60)
    # Pending records that are not the dead process's: this (live) process's, another host's.
    with open_store(_results()) as store:
        live = store.begin("latency", {}, {}).id
        remote = store.begin("latency", {}, {}).id
    conn = sqlite3.connect(_store())
    conn.execute("UPDATE runs SET writer_json = ? WHERE id = ?",
                 (json.dumps({"pid": 1, "host": "another-host", "boot": "x", "pidns": "y", "start": "1"}), remote))
    conn.commit()
    conn.close()
    before = count_records()
    cli("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST)  # also shows the lock is free
    with open_store(_results()) as store:
        reaped = [r for r in store.query(status="failed") if f"process {proc.pid}" in (r.reason or "")]
        assert len(reaped) == 1 and "ended before finishing" in reaped[0].reason
        assert store.get(live).status == "pending" and store.get(remote).status == "pending"
        assert store.query(status="pending") and len(store.query(status="pending")) == 2
    fault.records_lost(before, count_records() - 1)  # the new run's record is one more


@pytest.mark.fault("pending record of a reused pid")
def test_a_pending_record_is_reaped_only_when_its_process_is_gone(fault):
    """A pid now used by another process (other start time) is gone; this live one is not."""
    from aiot.host.store import open_store
    from aiot.host.store.writer import is_gone, this_writer

    me = this_writer()
    assert not is_gone(me)
    assert is_gone({**me, "start": "1"})  # the same pid, started at another time
    assert is_gone({**me, "boot": "another-boot"})  # a pid of an earlier boot
    assert not is_gone({**me, "host": "another-host"}) and not is_gone(None)
    with open_store(_results()) as store:
        reused = store.begin("latency", {}, {}).id
        live = store.begin("latency", {}, {}).id
    conn = sqlite3.connect(_store())
    conn.execute("UPDATE runs SET writer_json = ? WHERE id = ?", (json.dumps({**me, "start": "1"}), reused))
    conn.commit()
    conn.close()
    with open_store(_results()) as store:
        assert store.reap_stale() == 1
        assert store.get(reused).status == "failed" and store.get(live).status == "pending"
    fault.records_lost(2, count_records())


# -- 5. the same sweep twice at once -------------------------------------------------------------

@pytest.mark.fault("same sweep started twice at once")
def test_a_second_campaign_on_a_busy_device_is_refused(cli, fault):
    first = _start(*SLOW_SWEEP)
    try:
        _wait_for_pending(first)
        before = count_records()
        second = _start(*SLOW_SWEEP)
        _out, err = second.communicate(timeout=180)
        assert second.returncode == 1, err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert errors == [errors[0]] and f"pid {first.pid}" in errors[0] and "Traceback" not in err, err
        result = cli("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST, code=1)
        one_line_error(result, "device local is busy", f"pid {first.pid}", code=1)
        assert count_records() == before  # the refused ones measured nothing
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    cli("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST)  # free once it ended
    fault.records_lost(before + 1, count_records())
