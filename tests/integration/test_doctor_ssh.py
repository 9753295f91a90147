"""The doctor over SSH against the emulated SSH device (a real OpenSSH sshd on loopback)."""

from dataclasses import replace

from aiot.host.devices import doctor, inventory
from aiot.host.devices.doctor import diagnose
from aiot.host.emulator.ssh import free_port
from aiot.host.transports.ssh import SshTransport

EMULATED_NAME = "emu-doctor"  # the name the fixes below must mention


def run(entry) -> dict:
    transport = SshTransport(entry)
    try:
        return {c.name: c for c in diagnose(transport)}
    finally:
        transport.close()


def test_healthy_board(sshd):
    found = run(sshd)
    assert all(c.ok for c in found.values()), found
    assert list(found) == ["reachable", "workdir", "free space", "python", "numpy", "onnxruntime",
                           "ai_edge_litert"]


def test_workdir_under_a_file_points_at_the_inventory(sshd, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    workdir = run(replace(sshd, workdir=str(blocker / "aiot")))["workdir"]
    assert not workdir.ok and "cannot create" in workdir.detail
    assert "[devices.emu-doctor]" in workdir.fix and str(inventory.inventory_path()) in workdir.fix


def test_missing_runtime_fix_is_devices_setup(sshd, monkeypatch):
    monkeypatch.setattr(doctor, "RUNTIMES", {"aiot_no_such_runtime": "no-such-runtime"})
    missing = run(sshd)["aiot_no_such_runtime"]
    assert not missing.ok and missing.fix == "aiot devices setup emu-doctor"


def test_missing_python_fix_names_the_inventory_setting(sshd):
    python = run(replace(sshd, python="/nonexistent/python3"))["python"]
    assert not python.ok and 'set python = "PATH"' in python.fix


def test_unreachable_board_is_one_failed_check(sshd):
    (check,) = run(replace(sshd, port=free_port())).values()
    assert check.name == "reachable" and not check.ok and "cannot reach" in check.detail and check.fix


def test_unknown_host_key_says_trust(sshd, tmp_path):
    (check,) = run(replace(sshd, known_hosts=str(tmp_path / "empty_known_hosts"))).values()
    assert not check.ok and "aiot devices trust" in check.fix


def test_cli_doctor_on_an_inventoried_board(cli, sshd):
    inventory.add(sshd)
    report = cli.json("devices", "doctor", "emu-doctor")
    assert report["ok"] and report["name"] == "emu-doctor"
    inventory.add(replace(sshd, python="/nonexistent/python3"), replace=True)
    assert "fail" in cli("devices", "doctor", "emu-doctor", code=1).stdout
