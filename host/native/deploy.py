"""Put a user-supplied benchmark binary on a device once per content.

Layout under the device workdir::

    bin/<sha256[:16]>/<binary name>      the binary, executable
    bin/<sha256[:16]>/<lib>.so           shared libraries it needs, if any
    bin/<sha256[:16]>/.complete          written last

The hash covers the binary and its libraries, so a rebuilt binary or library lands in a new
folder and stale copies are never run. The ``.complete`` marker goes last, as for the agent: a
push or ``chmod`` interrupted half-way is redone next time instead of leaving a file that
exists but cannot execute.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import DeviceCommandError, UsageError
from aiot.host.devices.deploy import push
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
MARKER = ".complete"


@dataclass(frozen=True)
class DeployedBinary:
    """A binary on the device: its path, its folder, and whether this call had to send it."""

    remote: str
    folder: str
    digest: str
    sent: bool
    has_libs: bool = False

    def env(self) -> dict[str, str]:
        """Environment for running it: its folder on ``LD_LIBRARY_PATH`` when it brought
        shared libraries (the device's own libraries stay reachable through the linker's
        default paths)."""
        return {"LD_LIBRARY_PATH": self.folder} if self.has_libs else {}


def content_digest(binary: Path, libs: Sequence[Path] = ()) -> str:
    """sha256 over the binary and each library's name and bytes."""
    digest = hashlib.sha256()
    for path in (binary, *libs):
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def ensure_binary(transport: Transport, binary: Path, libs: Sequence[Path] = ()) -> DeployedBinary:
    """Push ``binary`` (and ``libs``) to ``bin/<hash>/`` unless already there; make it executable.

    Raises:
        UsageError: the local binary or a library does not exist.
        TransportError: a push failed.
        DeviceCommandError: ``chmod`` failed on the device.
    """
    binary, libs = Path(binary).expanduser(), [Path(p).expanduser() for p in libs]
    for path in (binary, *libs):
        if not path.is_file():
            raise UsageError(f"native binary file {path} does not exist")
    digest = content_digest(binary, libs)
    folder = posixpath.join(transport.workdir(), "bin", digest[:16])
    remote = posixpath.join(folder, binary.name)
    if transport.exists(posixpath.join(folder, MARKER)):
        log.debug("%s already on %s", binary.name, transport.name)
        return DeployedBinary(remote, folder, digest, sent=False, has_libs=bool(libs))
    for path in (binary, *libs):
        target = posixpath.join(folder, path.name)
        existing = transport.stat(target)
        if existing is None or existing.size != path.stat().st_size:
            push(transport, path, target)
    result = transport.shell(["chmod", "755", remote])  # argv: the transport quotes it
    if not result.ok:
        raise DeviceCommandError(transport.name, result)
    _mark_complete(transport, folder, digest)
    return DeployedBinary(remote, folder, digest, sent=True, has_libs=bool(libs))


def _mark_complete(transport: Transport, folder: str, digest: str) -> None:
    with tempfile.TemporaryDirectory(prefix="aiot-bin-") as tmp:
        marker = Path(tmp) / MARKER
        marker.write_text(digest)
        push(transport, marker, posixpath.join(folder, MARKER))
