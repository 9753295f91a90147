"""Round 4, conversions without an end and the conversion cache's trust; words that sent users
the wrong way. Real processes and signals: a real ``aiot convert`` whose real toolchain child
is stopped with SIGSTOP or interrupted with SIGINT, a warm toolchain server's real child
stopped, a real read-only mount as aiot's cache, cache entries whose real owner and mode say
another account could have written them, real stores with an old schema and broken JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from aiot.converters import api
from aiot.converters.sidecar import sidecar_path
from aiot.core import stage_limit, toolchains, warm_toolchain
from aiot.core.toolchains import runtime_python
from aiot.host.emulator.state import descendants
from aiot.host.store import open_store
from tests.faults.conftest import count_records, one_line_error
from tests.faults.test_disk_faults import small_disk  # noqa: F401 (a fixture)
from tests.helpers import FAST, proc_cmdline, proc_comm, proc_gone

needs_lce = pytest.mark.skipif(runtime_python("lce") is None,
                               reason="needs the lce toolchain (aiot toolchains install lce)")

#: The stage limit of the tests that stop a conversion's child (seconds).
LIMIT_S = 6


def _descendant(root: int, marker: str, timeout: float = 90.0, alive=lambda: True) -> int:
    """The pid of ``root``'s descendant whose command line holds ``marker`` (or named after
    it: a warm server's child), once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert alive()
        for pid in descendants(root):
            if marker in proc_cmdline(pid) or proc_comm(pid) == marker[:15]:
                return pid
        time.sleep(0.05)
    pytest.fail(f"no child running {marker} appeared")


def _convert(model: str, fmt: str, **env: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "aiot", "convert", model, "-f", fmt]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def _artifacts() -> list[Path]:
    folder = Path(os.environ["AIOT_RESULTS_DIR"]) / "artifacts"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- a conversion can hang for ever --------------------------------------------------------------


@needs_lce
@pytest.mark.usefixtures("fresh_conversions")
@pytest.mark.fault("conversion whose toolchain child is stopped (SIGSTOP)")
def test_a_stopped_toolchain_child_runs_into_the_stage_limit(fault):
    # A fresh interpreter per command (no warm server): the child is `python build.py`.
    proc = _convert("tiny_bnn", "lce", AIOT_CONVERT_TIMEOUT_S=str(LIMIT_S), AIOT_WARM_TOOLCHAINS="0")
    child = _descendant(proc.pid, "build.py", alive=lambda: proc.poll() is None)
    os.kill(child, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        _out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        os.kill(child, signal.SIGKILL)
        pytest.fail("aiot convert still waits on its stopped child")
    took = time.monotonic() - stopped
    assert proc.returncode == 1, err
    assert _errors(err) == [
        f"error: conversion of tiny_bnn to lce: stage 'export' ran past its {LIMIT_S} s limit "
        f"(AIOT_CONVERT_TIMEOUT_S); the 'lce' toolchain process (build.py) {child} (stopped by "
        "a signal: it was not running) was killed"], err
    assert "hint: a process stopped by SIGSTOP" in err and "Traceback" not in err
    assert took < LIMIT_S + 5, f"{took:.1f} s after the stop"
    assert proc_gone(child), f"the stopped child {child} outlived aiot"
    assert _artifacts() == []


_HANGING = '''
import time
import torch


def make():
    time.sleep(3600)  # a factory that waits for something that never comes
    return torch.nn.Linear(4, 2), torch.zeros(1, 4)
'''


@pytest.mark.usefixtures("fresh_conversions")
@pytest.mark.fault("warm toolchain's child stopped (SIGSTOP) during a conversion")
def test_a_stopped_child_of_a_warm_toolchain_server_runs_into_the_stage_limit(fault, tmp_path,
                                                                              monkeypatch):
    """The same in a warm server (:mod:`aiot.core.warm_toolchain`): its forked child is the
    one stopped, the server waits on it, and the limit still ends both."""
    script = tmp_path / "sleeper.py"
    script.write_text("import time\ntime.sleep(3600)\n")
    monkeypatch.setenv(stage_limit.ENV, "3")
    monkeypatch.setenv(warm_toolchain.ENV, "1")
    # A toolchain whose interpreter is aiot's own, warmed with a light module.
    monkeypatch.setattr(toolchains, "require_python", lambda name: Path(sys.executable))
    monkeypatch.setattr(toolchains.TOOLCHAINS, "get",
                        lambda name: SimpleNamespace(warm=warm_toolchain.Warmth(("json",))))
    found: list[int] = []

    def stop_it() -> None:
        pid = _descendant(os.getpid(), "sleeper.py", timeout=30)
        os.kill(pid, signal.SIGSTOP)
        found.append(pid)

    stopper = threading.Thread(target=stop_it, daemon=True)
    stopper.start()
    started = time.monotonic()
    with stage_limit.stage("tiny_cnn to lce", "export"), \
            pytest.raises(stage_limit.StageTimeout) as failed:
        toolchains.run_script("lce", script, [])
    stopper.join(5)
    assert found, "the warm server's child never ran"
    assert failed.value.message == (
        "conversion of tiny_cnn to lce: stage 'export' ran past its 3 s limit "
        f"(AIOT_CONVERT_TIMEOUT_S); the 'lce' toolchain process (sleeper.py) {found[0]} (stopped "
        "by a signal: it was not running) was killed")
    assert time.monotonic() - started < 3 + 4
    assert proc_gone(found[0])


@pytest.mark.usefixtures("fresh_conversions")
@pytest.mark.parametrize("target", [
    pytest.param("factory", id="a user's factory child"),
    pytest.param("lce", id="an LCE toolchain child", marks=needs_lce),
])
@pytest.mark.fault("Ctrl-C during aiot convert")
def test_ctrl_c_during_a_conversion_says_what_is_true(fault, tmp_path, target):
    if target == "factory":
        factory = tmp_path / "hangs.py"
        factory.write_text(_HANGING)
        model, fmt, marker = f"{factory}:make", "onnx", "factory_process"
    else:
        model, fmt, marker = "tiny_bnn", "lce", "build.py"
    proc = _convert(model, fmt, AIOT_WARM_TOOLCHAINS="0")
    child = _descendant(proc.pid, marker, alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 130, err
    said = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert said == [f"interrupted: the conversion of {model} to {fmt} stopped; nothing was "
                    "written (no artifact, no record)"], err
    assert "marked failed" not in err and "records were kept" not in err, err
    assert "Traceback" not in err, err
    assert proc_gone(child), f"the child {child} outlived aiot"
    assert _artifacts() == [] and count_records() == 0


# -- the conversion cache -----------------------------------------------------------------------


def _own_cache(monkeypatch, folder: Path) -> Path:
    monkeypatch.setenv("AIOT_CACHE_DIR", str(folder))
    monkeypatch.delenv("AIOT_CONVERSION_CACHE", raising=False)
    return folder / "conversions"


@pytest.mark.fault("read-only conversion cache")
def test_a_read_only_cache_only_costs_a_conversion(cli, fault, small_disk, monkeypatch, tmp_path):  # noqa: F811
    disk = small_disk("32m", "cache")
    root = _own_cache(monkeypatch, disk.path)
    # Toolchains under the cache, as by default: a read-only cache has no folder for them.
    monkeypatch.delenv("AIOT_TOOLCHAINS_DIR", raising=False)
    made = json.loads(cli("--results-dir", str(tmp_path / "a"), "convert", "tiny_cnn", "-f",
                          "onnx", "--json").stdout)
    assert not made["cached"] and len(list(root.iterdir())) == 1
    shutil.rmtree(disk.path / "toolchains", ignore_errors=True)  # none installed there
    disk.read_only()
    # A run: the entry made before is still copied from the read-only cache.
    ran = cli("--results-dir", str(tmp_path / "b"), "run", "-m", "tiny_cnn", "-f", "onnx",
              "-d", "local", *FAST, "--json")
    (record,) = json.loads(ran.stdout)
    assert record["status"] == "ok", record
    assert record["provenance"]["artifact"]["from_cache"]["key"] == next(root.iterdir()).name
    # A conversion the cache does not hold: converted, not kept, and said at most once.
    other = cli("--results-dir", str(tmp_path / "c"), "convert", "tiny_cnn", "-f", "onnx",
                "--opt", "opset=18", "--json")
    assert not json.loads(other.stdout)["cached"]
    for result in (ran, other):
        assert "error" not in result.stderr and "Traceback" not in result.output, result.stderr
        assert sum("cache" in line for line in result.stderr.splitlines()) <= 1, result.stderr
    assert len(list(root.iterdir())) == 1


def _forge(entry: Path, artifact: bytes) -> None:
    """What another account with write access can do: put its own artifact in the entry with
    a sidecar that matches it (the sidecar alone cannot tell)."""
    kept = entry / "tiny_cnn.onnx"
    kept.write_bytes(artifact)
    side = sidecar_path(kept)
    facts = json.loads(side.read_text())
    facts["artifact"].update(sha256=hashlib.sha256(artifact).hexdigest(), size_bytes=len(artifact),
                             total_bytes=len(artifact))
    side.write_text(json.dumps(facts))


@pytest.mark.parametrize("how", ["group-writable entry", "world-writable file",
                                 "another account's entry"])
@pytest.mark.fault("cache entry that other accounts can write")
def test_an_entry_other_accounts_can_write_is_never_used(fault, tmp_path, monkeypatch, caplog, how):
    root = _own_cache(monkeypatch, tmp_path / "cache")
    first = api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    other = api.convert_model("tiny_cnn", "onnx", tmp_path / "x", options={"opset": "18"})
    (entry,) = [e for e in root.iterdir() if (e / "tiny_cnn.onnx").exists()]
    assert entry.stat().st_mode & 0o777 == 0o700
    assert {f.stat().st_mode & 0o777 for f in entry.iterdir()} == {0o600}
    _forge(entry, other.artifact.read_bytes())
    if how == "group-writable entry":
        entry.chmod(0o770)
        why = "is writable by its group"
    elif how == "world-writable file":
        (entry / "tiny_cnn.onnx").chmod(0o666)
        why = "holds tiny_cnn.onnx, which is writable by every account"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another account needs root")
        for path in (entry, *entry.iterdir()):
            os.chown(path, 65534, 65534)
        why = "belongs to uid 65534, not to this account (uid 0)"
    with caplog.at_level(logging.WARNING, logger="aiot.converters.conversion_cache"):
        second = api.convert_model("tiny_cnn", "onnx", tmp_path / "b")
    assert not second.cached and second.sha256 == first.sha256 != other.sha256
    assert [r.getMessage() for r in caplog.records] == [
        f"conversion cache: entry {entry} {why}, so it is not used; converting again"]
    # The entry was made again, this account's own: the next folder gets it.
    third = api.convert_model("tiny_cnn", "onnx", tmp_path / "c")
    assert third.cached and third.sha256 == first.sha256


@pytest.mark.fault("conversion cache folder that every account can write")
def test_a_cache_folder_others_can_write_is_not_used_at_all(fault, tmp_path, monkeypatch, caplog):
    root = _own_cache(monkeypatch, tmp_path / "cache")
    api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    root.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="aiot.converters.conversion_cache"):
        assert not api.convert_model("tiny_cnn", "onnx", tmp_path / "b").cached
        assert not api.convert_model("tiny_cnn", "onnx", tmp_path / "c").cached
    said = [r.getMessage() for r in caplog.records]
    assert len(said) <= 1 and all("is writable by every account, so it is not used" in s
                                  for s in said), said
    assert len(list(root.iterdir())) == 1  # nothing kept there either


@pytest.mark.fault("artifact copied from the conversion cache")
def test_a_copied_artifact_names_the_conversion_it_came_from(cli, fault, tmp_path, monkeypatch):
    root = _own_cache(monkeypatch, tmp_path / "cache")
    cli("--results-dir", str(tmp_path / "a"), "convert", "tiny_cnn", "-f", "onnx")
    (entry,) = root.iterdir()
    made = json.loads((entry / "tiny_cnn.onnx.aiot.json").read_text())["created_at"]
    ran = json.loads(cli("--results-dir", str(tmp_path / "b"), "run", "-m", "tiny_cnn", "-f",
                         "onnx", "-d", "local", *FAST, "--json").stdout)
    origin = ran[0]["provenance"]["artifact"]["from_cache"]
    assert origin["key"] == entry.name and origin["converted_at"] == made and origin["copied_at"]
    copy = json.loads((tmp_path / "b" / "artifacts" / "tiny_cnn.onnx.aiot.json").read_text())
    assert copy["from_cache"] == origin  # the folder's own copy says it too
    shown = json.loads(cli("--results-dir", str(tmp_path / "b"), "results", "show",
                           ran[0]["id"], "--json").stdout)
    assert shown["provenance"]["artifact"]["from_cache"] == origin
    text = cli("--results-dir", str(tmp_path / "b"), "results", "show", ran[0]["id"]).stdout
    assert f"copied from the conversion cache (entry {entry.name[:12]}" in text


# -- words that send users the wrong way ---------------------------------------------------------


def _old_store(folder: Path) -> None:
    """A store of schema v1 with one record, as an older aiot left it."""
    from aiot.host.store.schema import MIGRATIONS

    folder.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(folder / "aiot.sqlite", isolation_level=None)
    conn.execute("BEGIN")
    MIGRATIONS[0](conn)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO runs (id, kind, status, created_at, spec_json, provenance_json) "
                 "VALUES ('abcd1234', 'latency', 'ok', '2026-01-01T00:00:00Z', ?, '{}')",
                 (json.dumps({"model": "m"}),))
    conn.execute("COMMIT")
    conn.close()


@pytest.mark.fault("store of an older schema read by a command that only reads")
def test_the_migration_hint_names_a_command_that_migrates(cli, fault):
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    _old_store(results)
    listed = cli("results", "list", code=1)
    one_line_error(listed, "has schema v1", "must be migrated")
    (hint,) = [line for line in listed.stderr.splitlines() if line.startswith("hint:")]
    assert "--check" not in hint and "recover" not in hint, hint
    recovered = cli("results", "recover", code=2)
    one_line_error(recovered, "is not damaged: nothing to recover")
    assert "schema v1" in recovered.stderr and "aiot results prune" in recovered.stderr
    command = hint.split("migrates it: ", 1)[1].split(" (", 1)[0]
    assert command == "aiot results prune --older-than 36500d --dry-run", hint
    cli(*command.split()[1:])  # the command the hint names, as a user would type it
    assert count_records() == 1
    assert "abcd1234" in cli("results", "list").stdout


@pytest.mark.fault("stored record whose JSON does not parse")
def test_results_check_finds_records_whose_json_does_not_parse(cli, fault):
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    with open_store(results) as store:
        ids = []
        for n in range(3):
            record = store.begin("latency", {"model": f"m{n}"}, {})
            store.finish(record.id, "ok", result={"stats_ms": {"median": 1.0}})
            ids.append(record.id)
    with sqlite3.connect(results / "aiot.sqlite") as conn:  # edited by something else
        conn.execute("UPDATE runs SET spec_json = '{\"model\": ' WHERE id = ?", (ids[0],))
        conn.execute("UPDATE runs SET result_json = '{\"stats_ms\"' WHERE id = ?", (ids[2],))
    checked = cli("results", "check", code=1)
    one_line_error(checked, "2 of 3 record(s) hold JSON that does not parse",
                   f"{ids[0][:8]} (spec)", f"{ids[2][:8]} (result)", "aiot results recover")
    assert len(_errors(checked.stderr)) == 1
    before = count_records()
    cli("results", "recover")  # every other record, the damaged store kept beside it
    cli("results", "check")
    assert [r["id"] for r in json.loads(cli("results", "list", "--json").stdout)] == [ids[1]]
    assert list(results.glob("aiot.sqlite.damaged-*"))
    fault.records_lost(before - 2, count_records())


@pytest.mark.fault("results list over a record whose JSON does not parse")
def test_results_list_names_a_record_whose_json_does_not_parse(cli, fault):
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    with open_store(results) as store:
        record = store.begin("latency", {"model": "m"}, {})
    with sqlite3.connect(results / "aiot.sqlite") as conn:
        conn.execute("UPDATE runs SET spec_json = '{' WHERE id = ?", (record.id,))
    listed = cli("results", "list", code=1)
    one_line_error(listed, record.id[:8], "aiot results check")


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize(("option", "value"), [
    ("--cooldown-max-s", "inf"), ("--cooldown-max-s", "nan"), ("--cooldown-max-s", "-1"),
    ("--min-s", "inf"), ("--max-s", "nan"), ("--warmup-min-s", "-1"), ("--timeout", "inf"),
])
@pytest.mark.fault("timing option of infinite, undefined or negative seconds")
def test_timing_options_refuse_non_finite_and_negative_seconds(cli, fault, command, option, value):
    result = cli(command, "-m", "tiny_cnn", "-f", "onnx", "-d", "local", option, value, code=2)
    one_line_error(result, f"{option} must be a finite number of seconds ≥ 0, got {float(value)}")
    assert count_records() == 0


@pytest.mark.parametrize(("args", "env", "says"), [
    (("--timeout-s", "inf"), None, "--timeout-s=inf is not a number of seconds above 0"),
    (("--timeout-s", "0"), None, "--timeout-s=0 is not a number of seconds above 0"),
    ((), "soon", "AIOT_CONVERT_TIMEOUT_S=soon is not a number of seconds above 0"),
])
@pytest.mark.fault("conversion stage limit that is no number of seconds")
def test_a_stage_limit_that_is_no_number_of_seconds_is_refused(cli, fault, monkeypatch, args,
                                                               env, says):
    if env is not None:
        monkeypatch.setenv(stage_limit.ENV, env)
    one_line_error(cli("convert", "tiny_cnn", "-f", "onnx", *args, code=2), says, "900")
    assert _artifacts() == []
