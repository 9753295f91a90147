"""Device-provided file names never write outside the destination folder."""

import os

import pytest

from aiot.host.devices import pull
from aiot.host.devices.pull import UnsafeName, pull_outputs, safe_destination
from aiot.host.transports.local import LocalTransport


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "/etc/passwd", "..\\x", "a\nb", "a\0b", "\x1b[2J"])
def test_unsafe_names_are_refused(tmp_path, name):
    with pytest.raises(UnsafeName):
        safe_destination(tmp_path, name)


@pytest.mark.parametrize("name", ["profile.json", "a b.csv", "it's $(x);.log", "..hidden", "ünï.txt"])
def test_plain_names_land_inside(tmp_path, name):
    assert safe_destination(tmp_path, name) == tmp_path.resolve() / name


def test_a_symlink_in_the_destination_cannot_redirect_a_pull(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside / "victim", dest / "trace.json")
    with pytest.raises(UnsafeName, match="outside"):
        safe_destination(dest, "trace.json")


def test_pull_refuses_a_lying_device_and_keeps_the_good_files(tmp_path, monkeypatch):
    transport = LocalTransport()
    outputs = pull.outputs_dir(transport)
    os.makedirs(outputs)
    with open(os.path.join(outputs, "good.csv"), "w") as fh:
        fh.write("a,b\n")
    monkeypatch.setattr(pull, "list_outputs", lambda t: ["../../evil", "good.csv"])
    dest = tmp_path / "pulled"
    results = pull_outputs(transport, dest)
    assert [(r.name, r.refused is None) for r in results] == [("../../evil", False), ("good.csv", True)]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and "pulled" in p.parts) == ["good.csv"]
    assert not (tmp_path / "evil").exists()
