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


@pytest.mark.parametrize("char", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
                                  "\u2069", "\u200e", "\u200f", "\u061c", "\x00", "\x1b", "\x7f", "\x85", "\x9b"])
def test_safe_writes_out_bidirectional_and_control_characters(char):
    from aiot.host.cli._output import safe

    shown = safe(f"a{char}b")
    assert char not in shown and shown == f"a\\{'x' if ord(char) < 0x100 else 'u'}{ord(char):0{2 if ord(char) < 0x100 else 4}x}b"
    assert safe("ünï [bold]") == "ünï \\[bold]"  # letters stay, markup is shown as it is


@pytest.mark.parametrize(("text", "size"), [(None, pull.DEFAULT_MAX_BYTES), ("4096", 4096), ("500M", 500 << 20),
                                            ("2G", 2 << 30), ("2GiB", 2 << 30), (" 1 kb ", 1024)])
def test_a_pulls_limit_reads_bytes_or_binary_units(text, size):
    assert pull.parse_max_bytes(text) == size


@pytest.mark.parametrize("text", ["0", "-5", "lots", "1.5G", "inf"])
def test_a_pulls_limit_that_is_no_size_is_refused(text):
    from aiot.core.errors import UsageError

    with pytest.raises(UsageError, match="--max-bytes"):
        pull.parse_max_bytes(text)


def test_a_file_over_the_limit_is_refused_and_what_was_pulled_stays(tmp_path):
    transport = LocalTransport()
    outputs = pull.outputs_dir(transport)
    os.makedirs(outputs)
    for name, size in (("a", 600), ("b", 600), ("c", 300)):
        with open(os.path.join(outputs, name), "wb") as fh:
            fh.write(b"x" * size)
    results = pull_outputs(transport, tmp_path / "pulled", max_bytes=1000)
    assert [(r.name, r.size, r.refused is None) for r in results] == [("a", 600, True), ("b", 0, False),
                                                                       ("c", 300, True)]
    assert "left of this pull's limit" in results[1].refused
    assert sorted(p.name for p in (tmp_path / "pulled").iterdir()) == ["a", "c"]
