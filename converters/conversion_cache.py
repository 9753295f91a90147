"""The machine's conversion cache: an artifact converted once is reused by every results folder.

A results folder keeps its own artifacts (``<results>/artifacts``) and reuses them while the
model and options are unchanged (:func:`aiot.converters.api.convert_model`). A second folder (a
new campaign, another lab notebook, the next CI job on the same runner) would export and check
parity all over again: for a TFLite export through ``torch.export`` that is seconds of CPU per
artifact. This cache keeps one verified copy per conversion under ``cache_dir()/conversions``
and copies it into the folder that asks.

An entry is keyed by everything that shapes the artifact and its parity report: the format and
its resolved options, the source model's state hash and facts, its input, the parity sample
counts, the toolchain's versions, aiot's version and its converter code (so an edited
converter never reuses what the old one wrote). An entry is written whole or not at all (a temp
folder renamed into place) and verified (sizes and sha256 against its sidecar) before it is
copied; one that fails is deleted and converted again. The cache is a convenience: a full or
read-only disk only means converting again. ``AIOT_CONVERSION_CACHE=off`` turns it off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import aiot
import aiot.converters
import aiot.models
from aiot.converters.naming import artifact_files
from aiot.converters.sidecar import SUFFIX, sidecar_path
from aiot.core.errors import AiotError
from aiot.core.fileio import atomic_path, staged_folder
from aiot.core.paths import cache_dir

log = logging.getLogger(__name__)

#: The environment variable that turns the cache off (``off``, ``0``, ``no``).
SWITCH = "AIOT_CONVERSION_CACHE"
#: The size the cache is trimmed to after each entry is added (least recently used first).
MAX_BYTES = 4 << 30
_FOLDER = "conversions"


def enabled() -> bool:
    """Whether conversions are kept and reused across results folders."""
    return os.environ.get(SWITCH, "on").strip().lower() not in {"off", "0", "no", "false"}


def conversion_key(converter, artifact_name: str, options: dict, source_hash: str,
                   source_facts: dict, source_input: dict, parity: tuple) -> str:
    """The hex key of a conversion: equal keys make the same artifact and parity report."""
    identity = {
        "format": converter.name, "artifact": artifact_name, "options": options,
        "source_state": source_hash, "source": source_facts, "input": source_input,
        "parity": list(parity), "toolchain": converter.toolchain_versions(),
        "aiot": aiot.__version__, "code": _code_identity(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def fetch(converter, key: str, artifact: Path, verify) -> dict | None:
    """Copy the entry ``key`` to ``artifact`` (and its other files and sidecar); its sidecar,
    or None when there is no usable entry. ``verify(entry_artifact)`` returns the entry's
    sidecar if it is intact and fits, else None (:func:`aiot.converters.api._reusable`)."""
    root = _root()
    kept = root / key / artifact.name if root is not None else None
    if kept is None or not kept.is_file():
        return None
    entry = kept.parent
    sidecar = verify(kept)
    if sidecar is None:
        log.info("conversion cache: entry %s does not verify; converting again", entry.name)
        shutil.rmtree(entry, ignore_errors=True)  # the new conversion takes its place
        return None
    try:
        # the sidecar last: a folder's artifact counts only once its sidecar is beside it
        sidecar_path(artifact).unlink(missing_ok=True)
        for path in (*artifact_files(converter, kept), sidecar_path(kept)):
            with atomic_path(artifact.parent / path.name) as tmp:
                shutil.copyfile(path, tmp)
        os.utime(entry)  # recently used: trimmed last
    except OSError as exc:
        log.info("conversion cache: could not copy %s (%s); converting instead", entry.name, exc)
        sidecar_path(artifact).unlink(missing_ok=True)
        return None
    log.info("conversion cache: %s reused from entry %s", artifact.name, entry.name[:12])
    return sidecar


def keep(converter, key: str, artifact: Path) -> None:
    """Add a freshly converted and checked ``artifact`` (its files and sidecar) as ``key``."""
    root = _root()
    if root is None:
        return
    try:
        with staged_folder(root / key, prefix=f".{key[:12]}.") as staging:
            for path in (*artifact_files(converter, artifact), sidecar_path(artifact)):
                shutil.copyfile(path, staging / path.name)
    except OSError as exc:  # a full or read-only disk: only a cache missed
        log.info("conversion cache: could not keep %s (%s)", artifact.name, exc)
    _trim(root, MAX_BYTES)


def sidecar_paths() -> list[Path]:
    """The sidecars of the cache's entries (what is converted on this machine), for estimates."""
    root = _root()
    return [] if root is None else sorted(root.glob(f"[!.]*/*{SUFFIX}"))


def _root() -> Path | None:
    if not enabled():
        return None
    try:
        root = cache_dir() / _FOLDER
        root.mkdir(parents=True, exist_ok=True)
        return root
    except (OSError, AiotError) as exc:
        log.info("conversion cache unavailable: %s", exc)
        return None


def _trim(root: Path, limit: int) -> None:
    """Delete the least recently used entries until the cache holds at most ``limit`` bytes."""
    entries = []
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        try:
            size = sum(f.stat().st_size for f in entry.iterdir())
            entries.append((entry.stat().st_mtime, size, entry))
        except OSError:  # removed meanwhile by another process
            continue
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries):
        if total <= limit:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= size


@functools.cache
def _code_identity() -> str:
    """A hash of aiot's converter and model sources: a development checkout's edits count."""
    digest = hashlib.sha256()
    for package in (aiot.converters, aiot.models):
        base = Path(package.__file__).resolve().parent
        for path in sorted(base.rglob("*.py")):
            digest.update(str(path.relative_to(base)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
