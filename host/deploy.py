"""Put files on a device: content-addressed, so unchanged files are not sent again.

Layout under the device workdir::

    agent/<hash>/device_agent/*.py       the agent, one folder per agent version
    blobs/<sha256[:16]>/<file name>      artifacts, data shards, run specs
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from aiot.host.errors import TransportError
from aiot.host.fileio import sha256_file
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pushed:
    """A file on the device: where, its hash, and whether this call had to send it."""

    remote: str
    sha256: str
    size: int
    sent: bool


def push_file(transport: Transport, local: Path, sha256: str | None = None) -> Pushed:
    """Push ``local`` to ``blobs/<hash>/<name>`` unless the device already has it."""
    local = Path(local)
    digest = sha256 or sha256_file(local)
    size = local.stat().st_size
    remote = posixpath.join(transport.workdir(), "blobs", digest[:16], local.name)
    existing = transport.stat(remote)
    if existing is not None and existing.size == size:
        log.debug("%s already on %s", local.name, transport.name)
        return Pushed(remote, digest, size, sent=False)
    push(transport, local, remote)
    return Pushed(remote, digest, size, sent=True)


def push(transport: Transport, local: Path, remote: str) -> None:
    """``transport.push``, with a failure blamed on a read-only or full workdir when it is one."""
    try:
        transport.push(local, remote)
    except TransportError as exc:
        from aiot.host.doctor import explain_push_failure

        raise explain_push_failure(transport, exc) from None


def _agent_files() -> list[tuple[str, bytes]]:
    """(relative path, content) of every agent source file, from the installed package."""
    root = resources.files("aiot.device_agent")
    files: list[tuple[str, bytes]] = []

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir() and child.name != "__pycache__":
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".py"):
                files.append((prefix + child.name, child.read_bytes()))

    walk(root, "")
    return files


def agent_hash() -> str:
    """Hash of the agent's sources; a new agent version lands in a new folder."""
    digest = hashlib.sha256()
    for rel, data in _agent_files():
        digest.update(rel.encode() + b"\0" + data)
    return digest.hexdigest()[:16]


def deploy_agent(transport: Transport, staging: Path) -> str:
    """Make sure the agent is on the device; return the folder to run ``-m device_agent`` in.

    Args:
        staging: a local scratch folder for the files being pushed.
    """
    version = agent_hash()
    root = posixpath.join(transport.workdir(), "agent", version)
    marker = posixpath.join(root, "device_agent", ".complete")
    if transport.exists(marker):
        return root
    for rel, data in _agent_files():
        local = staging / "device_agent" / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        push(transport, local, posixpath.join(root, "device_agent", rel))
    # The marker goes last: a push interrupted half-way is redone next time.
    done = staging / ".complete"
    done.write_text(version)
    push(transport, done, marker)
    return root
