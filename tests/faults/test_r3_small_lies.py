"""Round 3, small lies (issue 35): what a careless lab or a hostile device makes aiot say.

- ``--token`` (and ``$AIOT_LAB_TOKEN_FILE``) naming no token file — ``/dev/zero``, a FIFO no
  one writes to, a 2 GiB sparse file, a folder: each refused in one line, in seconds, with
  little memory (a real ``aiot`` process, its peak memory read from the kernel by ``wait4``).
- A lab head on a port that something already listens on (a real socket; a real Ray head):
  one line naming the port, not Ray's "Last connection error: None".
- Terminal escapes (ESC/CSI/OSC, C1 ``\\x9b``, BEL, DEL) in the inventory's labels and in the
  serial a phone gives the adb server (a real adb server protocol on loopback):
  ``devices list`` writes them out instead of sending them to the terminal.
- A device whose probe answers with raw escape bytes in its CPU and SoC names: the CSV export
  (and ``results show``) carry none, formulas stay neutralised, and the store keeps the bytes
  as the device said them.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.faults.conftest import answer_probe_with, count_records

ESC, BEL, CSI, DEL = "\x1b", "\x07", "\x9b", "\x7f"

#: The lab's cases need Ray (aiot[lab]); skipped before they start, so no case reads as broken.
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the lab needs aiot[lab] (Ray)")

#: Environment variables that would hand a lab command another token than the one tested.
_TOKEN_VARS = ("AIOT_LAB_TOKEN_FILE", "AIOT_LAB", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")


@dataclasses.dataclass
class Ran:
    """A finished ``aiot`` process: exit code, output, wall seconds and peak memory."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_mib: float

    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


#: ``python -m aiot ARGS`` that writes its own peak RSS (VmHWM, which an exec resets, unlike
#: ru_maxrss) to $AIOT_TEST_PEAK_FILE as it exits.
_PEAK_LAUNCHER = """
import atexit, os, runpy, sys
def _peak():
    with open('/proc/self/status') as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:'))
    with open(os.environ['AIOT_TEST_PEAK_FILE'], 'w') as out:
        out.write(str(kib))
atexit.register(_peak)
sys.argv = ['aiot', *sys.argv[1:]]
runpy.run_module('aiot', run_name='__main__', alter_sys=True)
"""


def run_aiot(*args: str, timeout: float = 60, memory_gib: float | None = None, **env: str) -> Ran:
    """``python -m aiot ARGS`` as a real process with this test's environment (plus ``env``),
    killed after ``timeout`` seconds (a hang reads as exit -9, never a hung suite); with
    ``memory_gib``, its address space is capped there (a runaway read fails, not the machine)."""
    import resource

    base = {k: v for k, v in os.environ.items() if k not in _TOKEN_VARS}

    def cap() -> None:
        if memory_gib is not None:
            limit = int(memory_gib * 1024 ** 3)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _PEAK_LAUNCHER, *args],
                                env={**base, **env, "AIOT_TEST_PEAK_FILE": str(peak_file)},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, preexec_fn=cap)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS, in KiB
        finally:
            killer.cancel()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        # ru_maxrss would count the forked copy of this (by then large) test process too.
        peak_kib = int(peak_file.read_text()) if peak_file.exists() else usage.ru_maxrss
        return Ran(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                   seconds, peak_kib / 1024)


def raw_controls(text: str) -> list[str]:
    """The control characters of ``text`` that a terminal acts on (newlines aside)."""
    return [c for c in text if ord(c) < 32 and c != "\n" or 0x7F <= ord(c) <= 0x9F]


def _lab_state() -> Path:
    return Path(os.environ["AIOT_STATE_DIR"]) / "lab"


def _closed_port() -> int:
    from aiot.host.emulator.ssh import free_port

    return free_port()


@pytest.fixture
def head_port():
    """A port something listens on (as a head would): the token is what is tested, not the
    dial. Connections are accepted by the kernel and left unanswered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


# -- 1. a token file that is no token file -------------------------------------------------------

#: A refusal takes a second or two and ~100 MiB; reading /dev/zero took 8.7 GiB in 60 s before.
BOUNDED = {"timeout": 20, "memory_gib": 3}


def _refused_token(ran: Ran, named: str, why: str) -> None:
    """One line naming the file and why, with the hint saying what a token file is; fast and
    small: nothing was read whole, nothing kept."""
    assert ran.code == 2, (ran.code, ran.seconds, ran.stderr[-2000:])
    [line] = ran.errors()
    assert named in line and why in line, line
    assert "a lab token is a small text file" in ran.stderr and "Traceback" not in ran.stderr
    assert ran.seconds < 20, ran.seconds
    assert ran.peak_mib < 300, ran.peak_mib  # a 2 GiB token read whole would need 2 GiB and more
    assert not (_lab_state() / "auth_token").exists()  # nothing was kept as this host's token


@needs_ray
@pytest.mark.fault("a lab token file that is no token file")
def test_dev_zero_as_token_is_refused_at_once(fault, head_port):
    ran = run_aiot("lab", "join", f"127.0.0.1:{head_port}", "--token", "/dev/zero", **BOUNDED)
    _refused_token(ran, "lab token file /dev/zero", "is a character device, not a token file")


@needs_ray
@pytest.mark.fault("a lab token file that is no token file")
def test_a_fifo_nobody_writes_to_as_token_is_refused_at_once(fault, tmp_path, head_port):
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    ran = run_aiot("lab", "status", "--address", f"127.0.0.1:{head_port}", "--token", str(fifo), **BOUNDED)
    _refused_token(ran, f"lab token file {fifo}", "is a FIFO (named pipe), not a token file")


@needs_ray
@pytest.mark.fault("a lab token file that is no token file")
def test_a_huge_sparse_file_as_token_is_refused_without_reading_it(fault, tmp_path, head_port):
    huge = tmp_path / "lab-token"
    with huge.open("wb") as fh:  # 2 GiB that take no disk: a token file must not be read whole
        fh.truncate(2 * 1024 ** 3)
    ran = run_aiot("lab", "join", f"127.0.0.1:{head_port}", "--token", str(huge), **BOUNDED)
    _refused_token(ran, f"lab token file {huge}", "holds 2.0 GiB, more than a token file's 4.0 KiB")


@needs_ray
@pytest.mark.fault("a lab token file that is no token file")
def test_a_folder_in_aiot_lab_token_file_is_refused_by_name(fault, tmp_path, head_port):
    ran = run_aiot("lab", "status", "--address", f"127.0.0.1:{head_port}",
                   AIOT_LAB_TOKEN_FILE=str(tmp_path), **BOUNDED)
    _refused_token(ran, f"AIOT_LAB_TOKEN_FILE={tmp_path}", "is a folder, not a token file")


@pytest.mark.fault("a lab token file that is no token file")
def test_a_small_token_file_is_still_read(tmp_path, fault):
    from aiot.host.lab.security import read_token

    token = tmp_path / "lab-token"
    token.write_text("ab" * 32 + "\n")  # what a head writes
    assert read_token(token) == "ab" * 32
    assert read_token(tmp_path / "absent") == ""  # missing: "missing or empty", as before


# -- 2. a lab head on a busy port ----------------------------------------------------------------

def _busy_port_refused(ran: Ran, port: int) -> None:
    assert ran.code == 2, (ran.code, ran.stderr[-2000:])
    [line] = ran.errors()
    assert f"port {port} on 127.0.0.1 is already in use" in line, line
    assert "Last connection error" not in ran.stderr and "Traceback" not in ran.stderr
    assert "--port" in ran.stderr and "aiot lab stop" in ran.stderr  # what to do instead


@needs_ray
@pytest.mark.fault("a lab head on a port already in use")
def test_a_head_on_a_port_another_program_listens_on_names_the_port(fault):
    with socket.socket() as other:  # another program, as a user would meet it
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        ran = run_aiot("lab", "start", "--head", "--port", str(port), timeout=120)
        _busy_port_refused(ran, port)
        assert ran.seconds < 20, ran.seconds  # Ray's own failure took ~45 s
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the other program still has its port
    assert not list(_lab_state().glob("node-*.json"))  # no node recorded as started


@needs_ray
@pytest.mark.slow
@pytest.mark.fault("a lab head on a port already in use")
def test_a_second_lab_head_on_the_first_ones_port_names_the_port(fault, tmp_path):
    port = _closed_port()
    first = {"AIOT_STATE_DIR": str(tmp_path / "first-state"), "HOME": str(tmp_path / "first-home")}
    started = run_aiot("lab", "start", "--head", "--port", str(port), timeout=180, **first)
    assert started.code == 0, started.stderr[-2000:]
    try:  # another account's (here: another state's) head on the same port
        ran = run_aiot("lab", "start", "--head", "--port", str(port), timeout=180)
        _busy_port_refused(ran, port)
        assert not list(_lab_state().glob("node-*.json"))
    finally:
        run_aiot("lab", "stop", timeout=120, **first)


# -- 3. escapes in the inventory and in what phones call themselves ------------------------------

#: Labels a hand-edited or generated inventory can hold (TOML escapes: the file stays text).
HOSTILE_LABELS = {"soc": r"BCM\u001b[31mRED\u001b[0m", "title": r"\u001b]0;owned\u0007pi",
                  "link": r"\u001b]8;;http://evil.example\u0007click\u001b]8;;\u0007",
                  "c1": r"\u009b2Jwiped", "bell": r"ding\u0007\u007f"}
#: What a phone can call itself: adb lists whatever serial the device reports.
HOSTILE_SERIAL = f"{ESC}[2J{CSI}31mphone{BEL}"


@pytest.fixture
def hostile_adb_server(monkeypatch):
    """An adb server on loopback (adb's host protocol: 4 hex digits of length, then the
    request; ``OKAY`` and a length-prefixed answer) whose one phone has an escape-laden serial."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    request = conn.recv(4096)
                except OSError:
                    continue
                if b"host:devices" in request:
                    body = f"{HOSTILE_SERIAL}\tdevice\n".encode()
                    conn.sendall(b"OKAY" + f"{len(body):04x}".encode() + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(listener.getsockname()[1]))
    yield
    stop.set()
    thread.join(5)
    listener.close()


@pytest.mark.fault("terminal escapes in inventory labels and phone serials → devices list")
@pytest.mark.skipif(importlib.util.find_spec("adbutils") is None, reason="adb support (adbutils) is not installed")
def test_devices_list_writes_out_escapes_from_the_inventory_and_adb(fault, hostile_adb_server):
    inventory = Path(os.environ["AIOT_INVENTORY"])
    labels = "\n".join(f'{key} = "{value}"' for key, value in HOSTILE_LABELS.items())
    inventory.write_text(f'[devices.board]\ntransport = "ssh"\nhost = "127.0.0.1"\nport = {_closed_port()}\n'
                         f'user = "pi\\u001b[8m"\nworkdir = "/home/pi/aiot\\u009b1m"\n'
                         f"[devices.board.labels]\n{labels}\n")
    before = inventory.read_bytes()
    ran = run_aiot("devices", "list", COLUMNS="400")
    assert ran.code == 0, ran.stderr[-2000:]
    shown = ran.stdout
    assert not raw_controls(shown), [c for c in raw_controls(shown)]
    # Each one written out where it was, the rest of the text as it came.
    for text in ("soc=BCM\\x1b[31mRED\\x1b[0m", "title=\\x1b]0;owned\\x07pi",
                 "link=\\x1b]8;;http://evil.example\\x07click\\x1b]8;;\\x07", "c1=\\x9b2Jwiped",
                 "bell=ding\\x07\\x7f", "pi\\x1b[8m@127.0.0.1", "/home/pi/aiot\\x9b1m",
                 "\\x1b[2J\\x9b31mphone\\x07"):
        assert text in shown, (text, shown)
    # The machine output and the inventory keep the bytes as they are (JSON escapes them itself).
    rows = {r["name"]: r for r in json.loads(run_aiot("devices", "list", "--json").stdout)}
    assert rows["board"]["labels"]["soc"] == f"BCM{ESC}[31mRED{ESC}[0m"
    assert HOSTILE_SERIAL in rows
    assert inventory.read_bytes() == before
    fault.records_lost(0, count_records())


# -- 4. escapes in a device's facts → CSV export and results show --------------------------------

#: The probe's answer of a device whose CPU and SoC names carry escape sequences (and a CPU
#: name that a spreadsheet would also take for a formula).
HOSTILE_PROBE = f"""@@uname
Linux 5.15 aarch64
@@cpuinfo
processor\t: 0
model name\t: +{ESC}[31mCortex{ESC}[0m {CSI}2J A76{DEL}
@@meminfo
MemTotal:        1024000 kB
MemAvailable:     512000 kB
@@os
PRETTY_NAME="Debian{ESC}]0;owned{BEL}"
@@cpufreq
0 2000000 1000000 1500000
@@devicetree
@@compatible
@@thermal
@@power
@@getprop
[ro.soc.model]: [SM{ESC}[5m8550{CSI}0m]
[ro.soc.manufacturer]: [QTI{BEL}]
"""

RUN = ("run", "-m", "tiny_cnn", "-f", "onnx", "--min-runs", "3", "--min-s", "0", "--warmup-min-s", "0")


@pytest.fixture
def escaped_record(cli, monkeypatch):
    """One ok run of the local device whose probe answered :data:`HOSTILE_PROBE` (its shell
    answers the real probe script so), the facts stored as the device said them."""
    answer_probe_with(monkeypatch, HOSTILE_PROBE)
    [record] = cli.json(*RUN)
    assert record["status"] == "ok", record["reason"]
    assert ESC in record["provenance"]["device"]["cpu_model"]
    return record


def _stored_device(record_id: str) -> dict:
    """The record's device facts as the store holds them (plain sqlite3, not aiot's reader)."""
    path = Path(os.environ["AIOT_RESULTS_DIR"]) / "aiot.sqlite"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        [provenance] = conn.execute("SELECT provenance_json FROM runs WHERE id = ?", (record_id,)).fetchone()
    finally:
        conn.close()
    return json.loads(provenance)["device"]


@pytest.mark.fault("raw escape bytes in a device's facts → CSV export")
def test_csv_export_carries_no_escape_bytes_and_the_store_keeps_them(cli, escaped_record, fault, tmp_path):
    before = count_records()
    target = tmp_path / "runs.csv"
    cli("results", "export", "--format", "csv", "--out", str(target))
    data = target.read_bytes()
    text = data.decode()
    assert b"\x1b" not in data and b"\x07" not in data and b"\x7f" not in data and CSI not in text
    assert not raw_controls(text), raw_controls(text)
    [row] = csv.DictReader(io.StringIO(text, newline=""))
    # Written out, still readable, and the formula still neutralised (the apostrophe first).
    assert row["cpu"] == "'+\\x1b[31mCortex\\x1b[0m \\x9b2J A76\\x7f", row["cpu"]
    assert "SM\\x1b[5m8550\\x9b0m" in row["soc"], row["soc"]
    assert float(row["median_ms"]) > 0
    assert cli("results", "export", "--format", "csv").stdout == text  # stdout: the same text
    # The store keeps what the device said, byte for byte.
    stored = _stored_device(escaped_record["id"])
    assert stored["cpu_model"] == f"+{ESC}[31mCortex{ESC}[0m {CSI}2J A76{DEL}"
    assert f"SM{ESC}[5m8550{CSI}0m" in (stored.get("soc") or "")
    fault.records_lost(before, count_records())


@pytest.mark.fault("raw escape bytes in a device's facts → results show")
def test_results_show_and_list_send_no_escape_bytes_to_the_terminal(cli, escaped_record, fault):
    before = count_records()
    shown = cli("results", "show", escaped_record["id"][:8]).stdout
    assert not raw_controls(shown), raw_controls(shown)
    assert "+\\x1b[31mCortex\\x1b[0m \\x9b2J A76\\x7f" in shown, shown
    listed = cli("results", "list").stdout
    assert not raw_controls(listed) and escaped_record["id"][:8] in listed
    fault.records_lost(before, count_records())
