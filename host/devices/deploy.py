"""Put files on a device: content-addressed, so unchanged files are not sent again.

Layout under the device workdir::

    agent/<hash>/device_agent/*.py       the agent, one folder per agent version
    blobs/<sha256[:16]>/<file name>      artifacts, data shards, run specs
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar

from aiot.core.diskfull import disk_errno
from aiot.core.errors import (
    AgentError,
    AiotError,
    DeviceCommandError,
    DeviceStorageError,
    TransportError,
)
from aiot.core.fileio import sha256_file
from aiot.host.devices.checks import explain_push_failure, parse_df
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)


T = TypeVar("T")

#: Seconds a device may take to hash one blob (a few hundred MB on a slow board's SD card).
HASH_TIMEOUT_S = 300.0
# Where a device has no sha256sum (macOS has shasum; a stripped BusyBox has neither), the
# agent's Python hashes the file: stdlib only, as the agent itself.
_PY_SHA256 = ("import hashlib,sys\nh=hashlib.sha256()\nwith open(sys.argv[1],'rb') as f:\n"
              " for b in iter(lambda: f.read(1<<20), b''): h.update(b)\nprint(h.hexdigest())")


@dataclass(frozen=True)
class Pushed:
    """A file on the device: where, its hash, whether this call had to send it, and the local
    file it came from (to send again when the device's copy turns out damaged)."""

    remote: str
    sha256: str
    size: int
    sent: bool
    local: Path | None = None


def push_file(transport: Transport, local: Path, sha256: str | None = None) -> Pushed:
    """Push ``local`` to ``blobs/<hash>/<name>`` unless the device already has it.

    "Already has it" is judged by path and size only (hashing every blob on every run costs
    a read of it on the device): a copy damaged in place is caught when it fails to load, by
    :func:`run_with_intact_blobs`.
    """
    local = Path(local)
    digest = sha256 or sha256_file(local)
    size = local.stat().st_size
    remote = posixpath.join(transport.workdir(), "blobs", digest[:16], local.name)
    existing = transport.stat(remote)
    if existing is not None and existing.size == size:
        log.debug("%s already on %s", local.name, transport.name)
        return Pushed(remote, digest, size, sent=False, local=local)
    push(transport, local, remote)
    return Pushed(remote, digest, size, sent=True, local=local)


def push_beside(transport: Transport, main: Pushed, local: Path, relative: str) -> Pushed:
    """Push ``local`` to ``relative`` (a POSIX path) beside the already pushed ``main``: a
    model's data file where the model's runtime looks for it. Skipped when the device has a
    file of that size there (the folder is named by the hash of the model and all its files).
    """
    remote = posixpath.join(posixpath.dirname(main.remote), relative)
    local = Path(local)
    size = local.stat().st_size
    existing = transport.stat(remote)
    if existing is not None and existing.size == size:
        return Pushed(remote, sha256_file(local), size, sent=False, local=local)
    if posixpath.dirname(relative):
        transport.shell(["mkdir", "-p", posixpath.dirname(remote)], timeout=30)
    push(transport, local, remote)
    return Pushed(remote, sha256_file(local), size, sent=True, local=local)


def free_bytes(transport: Transport, folder: str | None = None) -> int | None:
    """Free bytes in ``folder`` (default: the workdir, made first) on the device, or None
    when ``df`` cannot tell."""
    folder = folder or transport.workdir()
    transport.shell(["mkdir", "-p", folder], timeout=30)
    df = transport.shell(["df", "-Pk", folder], timeout=30)
    free_kib = parse_df(df.stdout) if df.ok else None
    return None if free_kib is None else free_kib * 1024


def require_space(transport: Transport, need: int, what: str) -> None:
    """Refuse, before anything is sent, to put ``need`` bytes (``what``) on a device whose
    workdir has less free (with 10 % to spare); a device whose ``df`` says nothing passes.

    Raises:
        DeviceStorageError: not enough space (the device is left as it was).
    """
    free = free_bytes(transport)
    if free is None or free >= need * 1.1:
        return
    raise DeviceStorageError(
        f"'{transport.name}' has {free / 1e6:,.0f} MB free in {transport.workdir()}; {what} "
        f"need{'s' if not what.endswith('s') else ''} {need * 1.1 / 1e6:,.0f} MB (ENOSPC): "
        "nothing was sent", "free some space on the device, or give it another workdir "
        f"(aiot devices add {transport.name} --workdir DIR --replace)")


def unpack_failure(transport: Transport, result) -> AiotError:
    """A failed unpack on the device: a full disk named as such (the unpack removed what it
    had unpacked), else the command's own error."""
    output = f"{result.stderr}\n{result.stdout}"
    if disk_errno(Exception(output)) is None:
        return DeviceCommandError(transport.name, result)
    return DeviceStorageError(f"unpacking on '{transport.name}' failed: no space left on the "
                              f"device (ENOSPC) in {transport.workdir()}; what was unpacked "
                              "was removed", "free some space on the device, then run "
                              f"aiot devices setup {transport.name} again")


def device_sha256(transport: Transport, remote: str) -> str | None:
    """The sha256 of ``remote`` as the device computes it (``sha256sum``, else the agent's
    Python); None where the device can do neither."""
    commands = (lambda: ["sha256sum", remote], lambda: [transport.python(), "-c", _PY_SHA256, remote])
    for command in commands:
        try:
            result = transport.shell(command(), timeout=HASH_TIMEOUT_S)
        except AiotError as exc:  # unreachable now, or no Python: the caller decides
            log.debug("%s: hashing %s failed: %s", transport.name, remote, exc.one_line())
            continue
        words = result.stdout.split()
        if result.ok and words and len(words[0]) == 64:
            return words[0].lower()
    return None


def repair_blobs(transport: Transport, blobs: Sequence[Pushed]) -> list[dict]:
    """Push again each blob whose copy on the device no longer hashes to what was sent.

    Returns one ``{"file", "remote", "found_sha256"}`` per blob pushed again (empty when every
    copy is intact, or when the device cannot hash: then nothing is known to be wrong).
    """
    repaired = []
    for blob in blobs:
        if blob.local is None:
            continue
        found = device_sha256(transport, blob.remote)
        if found is None:
            log.warning("%s: cannot hash %s on the device (no sha256sum, no Python); "
                        "not checked", transport.name, blob.remote)
            continue
        if found == blob.sha256:
            continue
        log.warning("%s: %s on the device is damaged (sha256 %s…, expected %s…); pushing it "
                    "again", transport.name, blob.remote, found[:12], blob.sha256[:12])
        push(transport, blob.local, blob.remote)
        repaired.append({"file": blob.local.name, "remote": blob.remote, "found_sha256": found})
    return repaired


def run_with_intact_blobs(transport: Transport, blobs: Sequence[Pushed],
                          attempt: Callable[[], T]) -> tuple[T, list[dict]]:
    """``attempt()``; when the agent fails on the device (a model that does not load, data
    that does not parse), the blobs it read are hashed on the device, any damaged one is
    pushed again and ``attempt`` retried once.

    Returns:
        what ``attempt`` returned, and the blobs pushed again (:func:`repair_blobs`), for
        the record's provenance.

    Raises:
        the first failure when every blob was intact, else what the retry raised.
    """
    try:
        return attempt(), []
    except AgentError as exc:
        if getattr(exc, "agent_type", None) is None:  # not the agent's own failure: no blob read
            raise
        repaired = repair_blobs(transport, blobs)
        if not repaired:
            raise
    log.warning("%s: retrying after pushing %s again", transport.name,
                ", ".join(r["file"] for r in repaired))
    return attempt(), repaired


def push(transport: Transport, local: Path, remote: str) -> None:
    """``transport.push``, with a failure blamed on a read-only or full workdir when it is one."""
    try:
        transport.push(local, remote)
    except TransportError as exc:
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
