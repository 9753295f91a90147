"""Emulated devices shared by the integration tests of one module: a real sshd, a real adbd.

A module names its devices with ``EMULATED_NAME`` (default ``emu-test``).
"""

import pytest

from aiot.host.emulator.ssh import start_sshd


@pytest.fixture(scope="module")
def sshd(request, tmp_path_factory):
    """An emulated SSH device (OpenSSH sshd on loopback) for this module; its inventory entry."""
    proc, _, entry = start_sshd(_name(request), tmp_path_factory.mktemp("emu-ssh"))
    yield entry
    proc.terminate()
    proc.wait(5)


@pytest.fixture(scope="module")
def adbd(request, tmp_path_factory):
    """An emulated ADB device behind the session's private adb server; its inventory entry."""
    from aiot.host.emulator.adb import start_adb_device
    from aiot.host.transports.adb import forget_tcp

    proc, _, entry = start_adb_device(_name(request), tmp_path_factory.mktemp("emu-adb"))
    yield entry
    proc.kill()
    proc.wait(5)
    forget_tcp(entry.serial)


def _name(request) -> str:
    return getattr(request.module, "EMULATED_NAME", "emu-test")
