"""``aiot pull`` through a real sshd and the real adb server: odd names survive, nothing escapes."""

import json

import pytest

from aiot.host.devices import inventory
from aiot.host.devices.pull import outputs_dir
from aiot.host.devices.resolve import open_transport

NAMES = ["profile.json", "a b.csv", "it's $(touch pwned);.log", "..dots"]
REFUSED = "line\nbreak.txt"  # legal on the device, but control characters never reach the results


@pytest.mark.parametrize("kind", ["ssh", "adb"])
def test_pull_brings_back_every_output_file(cli, kind, tmp_path):
    name = f"pull-{kind}"
    cli.json("emulator", "start", kind, "--name", name)
    try:
        transport = open_transport(name)
        folder = outputs_dir(transport)
        transport.shell(["mkdir", "-p", f"{folder}/subdir"])
        for i, file_name in enumerate([*NAMES, REFUSED]):
            assert transport.shell(["sh", "-c", 'printf "%s" "$1" > "$2"', "sh", f"payload {i}",
                                    f"{folder}/{file_name}"]).ok
        transport.close()
        dest = tmp_path / "out"
        pulled = json.loads(cli("pull", "--device", name, "--out", str(dest), "--json", code=1).stdout)
        refused = {p["name"]: p["refused"] for p in pulled}
        assert sorted(refused) == sorted([*NAMES, REFUSED])  # the subfolder is not a file
        assert "control characters" in refused.pop(REFUSED)
        assert set(refused.values()) == {None}
        for i, file_name in enumerate(NAMES):
            assert (dest / file_name).read_text() == f"payload {i}"
        assert sorted(p.name for p in dest.iterdir()) == sorted(NAMES)  # no part files left
        assert not (tmp_path / "pwned").exists()
        assert not list(tmp_path.parent.glob("pwned"))
        # A second pull replaces the files atomically rather than appending.
        cli("pull", "--device", name, "--out", str(dest), code=1)
        assert (dest / "profile.json").read_text() == "payload 0"
    finally:
        cli("emulator", "stop", name)
        assert name not in inventory.load()


def test_pull_from_a_device_without_outputs_says_so(cli):
    result = cli("pull", "--device", "local")
    assert "nothing to pull" in result.stderr
