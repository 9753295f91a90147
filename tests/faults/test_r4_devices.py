"""Round 4, devices: a damaged reservations file, a holder taken from ``$LOGNAME``, and files
from a device (``aiot pull``) with a name too long, a bidirectional override in a name, and more
bytes than a pull may bring. Each holds with one line naming what and why; a device whose
reservation cannot be read is never free; a pull refuses one file and keeps the others.

Pulls go through this host (``local``) and a real sshd on loopback (the emulated SSH board).
"""

from __future__ import annotations

import json
import os
import posixpath
import pwd
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest

from aiot.host.devices import inventory, reservations
from aiot.host.devices.pull import DEFAULT_MAX_BYTES, NAME_MAX_BYTES, outputs_dir
from aiot.host.devices.resolve import open_transport
from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

SWEEP = ("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", *FAST)
ME = pwd.getpwuid(os.geteuid()).pw_name


@pytest.fixture
def no_conversion(monkeypatch):
    """Fail the test if anything starts converting (a refusal must come first)."""
    from aiot.converters import api
    from aiot.host.engine import executor

    def convert_model(*args, **kwargs):
        raise AssertionError("a conversion started before the reservation was checked")

    monkeypatch.setattr(api, "convert_model", convert_model)
    monkeypatch.setattr(executor, "convert_model", convert_model)


def _damaged(path: Path, fault, cli) -> None:
    """What must hold for a damaged reservations file ``path``: every device held by
    "unknown", a sweep refused in one line naming the file, reserve and release refused
    without writing over it; moved away, every device is free again."""
    text = path.read_bytes()
    held = reservations.load()
    assert held.get("local").user == reservations.UNKNOWN_HOLDER
    assert held.get("any-phone").user == reservations.UNKNOWN_HOLDER  # a name it may hold
    with pytest.raises(reservations.DamagedReservations):
        reservations.check_free(["local"])
    before = count_records()
    result = cli(*SWEEP, code=1)
    one_line_error(result, "local counts as reserved", str(path), "is damaged",
                   "move it away to free every device", code=1)
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr  # error + hint (+ a note)
    fault.records_lost(before, count_records())
    assert count_records() == before
    one_line_error(cli("devices", "reserve", "local", code=1), str(path), "is damaged", code=1)
    one_line_error(cli("devices", "release", "local", "--force", code=1), str(path), code=1)
    assert path.read_bytes() == text  # nothing wrote over it
    path.rename(path.with_name(path.name + ".damaged"))  # as the hint says
    reservations.check_free(["local"])
    assert not reservations.load()


@pytest.mark.fault('reservations file {"reservations": 5}')
def test_a_reservations_file_of_the_wrong_shape_holds_every_device(cli, fault, no_conversion):
    path = reservations.reservations_path()
    path.write_text('{"reservations": 5}')
    _damaged(path, fault, cli)


@pytest.mark.fault("truncated reservations file")
def test_a_truncated_reservations_file_frees_no_device(cli, fault, no_conversion):
    reservations.reserve("pixel", timedelta(hours=1), note="thermal study", user="alice")
    path = reservations.reservations_path()
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # another program's write, cut short
    _damaged(path, fault, cli)


@pytest.mark.fault("damaged reservations file on the lab view's devices page")
def test_the_lab_views_devices_page_shows_a_damaged_reservations_file(tmp_path):
    from tests.integration.test_lab_view_browser import running_view

    path = reservations.reservations_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"reservations": 5}')
    with running_view(tmp_path) as (url, token):
        def get(route: str, data: bytes | None = None):
            request = urllib.request.Request(url + route, data=data, headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        status, page = get("/")
        assert status == 200, page
        assert "unknown (damaged reservations file) until its file is repaired" in page
        assert str(path) in page and "free</td>" not in page
        status, page = get("/release", b"device=local")  # a script's form: the bearer is its proof
        assert status == 409 and "is damaged" in page and "move it away" in page, (status, page)
    assert path.read_text() == '{"reservations": 5}'


@pytest.mark.fault("$LOGNAME=someone-else takes another user's reservation")
def test_logname_does_not_change_who_holds_a_device(cli, fault, monkeypatch, no_conversion):
    reservations.reserve("local", timedelta(hours=1), note="night run", user="alice")
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "alice")
    assert reservations.current_user() == ME != "alice"
    one_line_error(cli(*SWEEP, code=1), "local is reserved by alice@", "night run", code=1)
    one_line_error(cli("devices", "release", "local", code=1), "reserved by alice, not by you", code=1)
    assert reservations.load()["local"].user == "alice"
    # and what a reservation made under a false $LOGNAME names is the account that made it
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "someone-else")
    cli("devices", "reserve", "spare", "--for", "30m")
    assert reservations.load()["spare"].user == ME


# -- files from devices ------------------------------------------------------------------------


@pytest.fixture(params=["local", "ssh", "adb"])
def device(request, cli):
    """A device with an empty outputs folder: this host, the emulated SSH board (a real sshd),
    or an emulated ADB device (through the real adb server)."""
    if request.param == "local":
        name = "local"
    elif request.param == "ssh":
        board = request.getfixturevalue("board")
        devices = inventory.load()
        devices[board.name] = board
        inventory.save(devices)
        name = board.name
    else:
        name = "pull-adb"
        cli.json("emulator", "start", "adb", "--name", name)
    transport = open_transport(name)
    folder = outputs_dir(transport)
    assert transport.shell(["sh", "-c", 'rm -rf "$1" && mkdir -p "$1"', "sh", folder]).ok
    try:
        yield name, transport, folder
    finally:
        transport.close()
        if request.param == "adb":
            cli("emulator", "stop", name)


def _put(transport, folder: str, name: str, data: bytes) -> None:
    """A file the device wrote in its outputs folder (through its own shell)."""
    size = len(data)
    assert transport.shell(["sh", "-c", 'head -c "$1" /dev/zero > "$2"', "sh", str(size),
                            posixpath.join(folder, name)]).ok


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.fault("250-character device file name in aiot pull")
def test_a_250_character_name_is_refused_and_the_others_are_pulled(cli, fault, device, tmp_path):
    name, transport, folder = device
    long_name = "p" * 246 + ".log"
    for file_name in ("a.csv", long_name, "z.json"):
        _put(transport, folder, file_name, b"x" * 10)
    dest = tmp_path / "out"
    result = cli("pull", "--device", name, "--out", str(dest), code=1)
    refused = [line for line in result.stdout.splitlines() if line.startswith("✗")]
    assert len(refused) == 1 and "250 bytes long" in refused[0] and f"over the {NAME_MAX_BYTES}" in refused[0]
    assert "Traceback" not in result.output
    assert _files(dest) == ["a.csv", "z.json"]  # the others, and no part file
    pulled = json.loads(cli("pull", "--device", name, "--out", str(dest), "--json", code=1).stdout)
    assert [(p["name"], p["refused"] is None) for p in pulled] == [("a.csv", True), (long_name, False), ("z.json", True)]


@pytest.mark.fault("U+202E and other bidirectional controls in a device file name")
def test_bidirectional_and_control_characters_in_names_are_escaped_where_shown(cli, fault, device, tmp_path):
    name, transport, folder = device
    hostile = {"evil\u202egnp.exe": "\\u202e", "a\u2066b\u2069.txt": "\\u2066", "mark\u200f.log": "\\u200f",
               "arabic\u061c.log": "\\u061c", "c1\u009b31m.log": "\\x9b", "lr\u200e.log": "\\u200e"}
    for file_name in hostile:
        _put(transport, folder, file_name, b"x")
    dest = tmp_path / "out"
    result = cli("pull", "--device", name, "--out", str(dest))
    for raw, shown in hostile.items():
        assert shown in result.stdout, result.stdout
    assert not any(c in result.output for c in "\u202e\u2066\u2069\u200f\u200e\u061c\u009b"), ascii(result.output)
    assert sorted(_files(dest)) == sorted(hostile)  # the files themselves keep their names


@pytest.mark.fault("a pull larger than its size limit")
def test_a_pull_over_its_limit_refuses_in_one_line_and_leaves_no_part(cli, fault, device, tmp_path, monkeypatch):
    name, transport, folder = device
    _put(transport, folder, "a-small.bin", b"x" * 1000)
    _put(transport, folder, "b-big.bin", b"x" * 5000)
    _put(transport, folder, "c-small.bin", b"x" * 1000)
    dest = tmp_path / "out"
    result = cli("pull", "--device", name, "--out", str(dest), "--max-bytes", "3000", code=1)
    refused = [line for line in result.stdout.splitlines() if line.startswith("✗")]
    assert len(refused) == 1, result.stdout
    assert "'b-big.bin'" in refused[0] and "5,000 bytes" in refused[0] and "3,000 bytes" in refused[0]
    assert "--max-bytes or AIOT_PULL_MAX_BYTES" in refused[0]
    assert _files(dest) == ["a-small.bin", "c-small.bin"]  # what fits is pulled; no part file
    # the limit is all files together: the second small one no longer fits in 1,500 bytes
    monkeypatch.setenv("AIOT_PULL_MAX_BYTES", "1500")
    again = tmp_path / "again"
    result = cli("pull", "--device", name, "--out", str(again), code=1)
    assert "'c-small.bin'" in result.stdout and "500 bytes) left of this pull's limit" in result.stdout
    assert _files(again) == ["a-small.bin"]
    one_line_error(cli("pull", "--device", name, "--max-bytes", "lots", code=2), "--max-bytes", code=2)
    assert f"{DEFAULT_MAX_BYTES // (1 << 30)}.0 GiB" in cli("pull", "--help").stdout


@pytest.mark.fault("a device file that grows past the pull's limit while it comes")
def test_a_file_that_grows_while_it_comes_is_stopped_and_nothing_of_it_kept(cli, fault, device, tmp_path,
                                                                            monkeypatch):
    """A device that says a file is small and then sends more: the transfer stops at the limit."""
    name, transport, folder = device
    _put(transport, folder, "a.bin", b"x" * 100)
    _put(transport, folder, "grows.bin", b"x" * 3 * 1024 * 1024)
    kind = type(transport)
    real_stat = kind.stat

    def lying_stat(self, remote):
        found = real_stat(self, remote)
        return found and type(found)(found.path, 10, found.mtime, found.is_dir)

    monkeypatch.setattr(kind, "stat", lying_stat)
    dest = tmp_path / "out"
    result = cli("pull", "--device", name, "--out", str(dest), "--max-bytes", "1M", code=1)
    refused = [line for line in result.stdout.splitlines() if line.startswith("✗")]
    assert len(refused) == 1 and "'grows.bin'" in refused[0] and "nothing of it kept" in refused[0], result.stdout
    assert _files(dest) == ["a.bin"]  # no part file of it
