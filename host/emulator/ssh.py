"""An emulated SSH device: a private OpenSSH ``sshd`` on a free loopback port.

Keys are generated fresh per emulator (ed25519 host and client keys); the host key goes into
the emulator's own known_hosts, so the device is trusted because we made it, not because
checking was switched off. The device filesystem is a folder under the emulator's state.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.host.devices.entry import DeviceEntry

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Block until 127.0.0.1:port accepts connections, or raise AiotError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AiotError(f"emulator server exited with code {proc.returncode} before listening",
                            "see its log in the emulator folder")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise AiotError(f"emulator did not listen on port {port} within {timeout:g} s")


def _write_keypair(private: Path) -> str:
    """Write an OpenSSH ed25519 private key (0600) and return the public key line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption()))
    private.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    Path(f"{private}.pub").write_text(public + "\n")
    return public


def _sshd_config(folder: Path, port: int) -> Path:
    config = folder / "sshd_config"
    # The device's own home: bash sources ~/.bashrc for every command sshd runs, and this
    # machine's user's (pyenv, conda, nvm hooks) costs ~0.2 s of CPU per command and can
    # hang it for a minute (a rehash lock left by a killed shell). A board has neither.
    home = folder / "home"
    home.mkdir(exist_ok=True)
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1",
        f'HostKey "{folder / "host_key"}"',  # quoted: the folder may hold spaces
        f'AuthorizedKeysFile "{folder / "authorized_keys"}"',
        "PidFile none", "UsePAM no", "StrictModes no",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        f'SetEnv "HOME={home}"',
        "Subsystem sftp internal-sftp", "LogLevel INFO", "",
    ]))
    return config


def start_sshd(name: str, folder: Path, python: str | None = None) -> tuple[subprocess.Popen, int, DeviceEntry]:
    """Start sshd for emulator ``name`` in ``folder``; returns (process, port, inventory entry).

    ``python`` is the device's agent Python; by default this machine's (same architecture).
    """
    if not Path(SSHD).exists():
        raise AiotError("OpenSSH server is not installed", "run: apt-get install openssh-server")
    host_public = _write_keypair(folder / "host_key")
    client_public = _write_keypair(folder / "client_key")
    (folder / "authorized_keys").write_text(client_public + "\n")
    port = free_port()
    config = _sshd_config(folder, port)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation dir
    check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise AiotError(f"sshd refused the emulator config: {check.stderr.strip()}")
    log = open(folder / "sshd.log", "ab")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(port, 10, proc)
    root = folder / "fs"
    (root / "aiot").mkdir(parents=True, exist_ok=True)
    hostname = f"[127.0.0.1]:{port}"
    (folder / "known_hosts").write_text(f"{hostname} {host_public}\n")
    entry = DeviceEntry(
        name=name, transport="ssh", host="127.0.0.1", port=port, user=getpass.getuser(),
        key=str(folder / "client_key"), known_hosts=str(folder / "known_hosts"),
        workdir=str(root / "aiot"),
        # The emulated device runs on this machine, so its agent uses this Python and runtimes.
        python=python or sys.executable,
        labels={"emulated": "ssh", "board": "aiot emulator (sshd on loopback)"},
    )
    return proc, port, entry


#: Where a stopped emulator's folder goes to be deleted, beside the emulators' folders.
TRASH = ".trash"

_DELETE = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"


def remove_folder(folder: Path) -> None:
    """Take ``folder`` away at once and delete its files in the background.

    A phone set up with its runtimes holds thousands of files (``--with torch``: ~15,000):
    deleting them one by one took ``emulator stop`` over a minute on a busy disk. The folder is
    renamed into :data:`TRASH` (instant, the same file system) and a detached process deletes
    it; the trash of an earlier stop that did not finish goes with it.
    """
    folder = Path(folder)
    if not folder.exists():
        return
    trash = folder.parent / TRASH
    target = trash / f"{folder.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        trash.mkdir(exist_ok=True)
        folder.rename(target)
    except OSError:  # a file system that will not rename it: delete it here
        shutil.rmtree(folder, ignore_errors=True)
        return
    subprocess.Popen([sys.executable, "-c", _DELETE, str(trash)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


__all__ = ["free_port", "remove_folder", "start_sshd", "wait_for_port"]
