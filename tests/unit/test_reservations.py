"""Reservations read strictly: a damaged file holds every device (one line naming it), the
holder is the OS account whatever the environment says, and writes replace the file whole."""

from __future__ import annotations

import json
import os
import pwd
from datetime import UTC, datetime, timedelta

import pytest

from aiot.host.devices import reservations


def test_the_holder_is_the_os_account_not_the_environment(monkeypatch):
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "mallory")
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert reservations.current_user() == me
    assert reservations.reserve("local", timedelta(hours=1)).user == me


def test_a_uid_without_an_account_is_named_by_its_number(monkeypatch):
    import pwd as pwd_module

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd_module, "getpwuid", no_entry)
    assert reservations.current_user() == f"uid{os.geteuid()}"


def test_an_explicit_holder_reserves_and_only_that_holder_releases():
    held = reservations.reserve("local", timedelta(hours=1), "calibration", holder="alice")
    assert held.user == "alice" and reservations.load()["local"].user == "alice"
    with pytest.raises(reservations.Reserved, match="reserved by alice, not by you"):
        reservations.release("local", holder="bob")
    with pytest.raises(reservations.Reserved, match="reserved by alice@"):
        reservations.reserve("local", timedelta(hours=1), holder="bob")
    assert reservations.release("local", holder="alice").user == "alice" and not reservations.load()


@pytest.mark.parametrize(("text", "why"), [
    ("", "not JSON at line 1, column 1"),
    ('{"reservations": [{"device": "local", "us', "not JSON"),
    ('{"reservations": 5}', 'its "reservations" is 5, not a list'),
    ("[]", "it holds [], not a list"),
    ('{"other": []}', 'its "reservations" is null'),
    ('{"reservations": [7]}', "entry 1 is not a reservation: it has no device, user, host, until"),
    ('{"reservations": [{"device": "local", "user": "a", "host": "h"}]}', "it has no until"),
    ('{"reservations": [{"device": "local", "user": "a", "host": "h", "until": "soon"}]}',
     "entry 1's until \"soon\" is not a time"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_damaged_file_holds_every_device_and_says_why(text, why):
    path = reservations.reservations_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(reservations.DamagedReservations) as found:
        reservations.read()
    assert str(path) in found.value.message and why in found.value.message, found.value.message
    assert "move it away to free every device" in found.value.hint
    held = reservations.load()
    assert held and "local" in held and held.get("phone-7").user == reservations.UNKNOWN_HOLDER
    assert held["local"].note == found.value.message and held["local"].active()
    with pytest.raises(reservations.DamagedReservations, match="^local counts as reserved: "):
        reservations.check_free(["local"], user="anyone")
    with pytest.raises(reservations.DamagedReservations):
        reservations.reserve("local", timedelta(hours=1))
    assert path.read_bytes() == (text if isinstance(text, bytes) else text.encode())


def test_an_unreadable_file_holds_every_device(tmp_path, monkeypatch):
    folder = tmp_path / "as-a-folder"
    folder.mkdir()
    monkeypatch.setenv("AIOT_RESERVATIONS", str(folder))
    with pytest.raises(reservations.DamagedReservations, match="cannot be read"):
        reservations.check_free(["local"])


def test_an_absent_file_and_expired_reservations_free_the_device():
    assert reservations.load() == {} and not isinstance(reservations.load(), reservations.Unreadable)
    reservations.check_free(["local"])
    path = reservations.reservations_path()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    path.write_text(json.dumps({"reservations": [{"device": "local", "user": "a", "host": "h", "until": past}]}))
    assert reservations.load() == {}


def test_a_write_replaces_the_file_whole(monkeypatch):
    """Atomic: the new text goes to a temp file beside it, renamed over it."""
    from aiot.core import fileio

    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(fileio.os, "replace", lambda a, b: (renamed.append((str(a), str(b))), real_replace(a, b)))
    reservations.reserve("local", timedelta(hours=1))
    path = reservations.reservations_path()
    assert renamed and renamed[-1][1] == str(path) and renamed[-1][0] != str(path)
    assert [p.name for p in path.parent.iterdir() if ".part" in p.name] == []
