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
read-only disk only means converting again (a read-only cache is still read: its entries are
copied, nothing new is kept, said in one log line). ``AIOT_CONVERSION_CACHE=off`` turns it off.

Trust: the cache trusts what this account wrote, as it trusts the results folder and aiot's
own code, and nothing else. A sidecar cannot vouch for its artifact against whoever can write
both (an entry replaced together with a matching sidecar verifies), so whoever can write an
entry decides what is measured under a model's name. Hence an entry is used only when the
cache folder (followed through a link), the entry's folder and each of its files belong to
this account (its effective uid) and are writable by no group and no other account, and the
entry's files are plain files (no links). Otherwise it is never used: a cache folder others
can write is not used at all (nothing read or kept there; one warning), an entry others can
write is removed and converted again (one warning). aiot makes the folder 0700 and its
entries' files 0600 whatever the umask. A copy names the conversion it came from: its sidecar
in the results folder holds ``from_cache`` (the entry's key, when the entry's conversion was
made, when it was copied), and so does the provenance of every run that measures it
(``provenance.artifact.from_cache``).

Source memos (``cache_dir()/conversion-sources``): checking that a folder's artifact still fits
its model needs the model's state hash, so the model is built (torch imported, seconds of CPU
for a sweep whose artifacts all exist). A memo keyed by the request as the caller states it
(a zoo model, its format and options, the folder, the weights file's size and modification
time, and aiot's model and converter code) keeps the artifact's name and the source hash its
conversion found; :func:`aiot.converters.api.convert_model` then checks the artifact against
its sidecar with that hash, building nothing. Memos are trusted as the entries are.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

import aiot
import aiot.converters
import aiot.models
from aiot.converters.naming import artifact_files
from aiot.converters.sidecar import SUFFIX, sidecar_path, write_sidecar_facts
from aiot.core import environment
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
    return environment.get(SWITCH, "on").strip().lower() not in {"off", "0", "no", "false"}


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
    why = _distrusted(entry, (*artifact_files(converter, kept), sidecar_path(kept)))
    if why is not None:  # another account could have written it: never measured
        log.warning("conversion cache: entry %s %s, so it is not used; converting again",
                    entry, why)
        shutil.rmtree(entry, ignore_errors=True)  # the new conversion takes its place
        return None
    sidecar = verify(kept)
    if sidecar is None:
        log.info("conversion cache: entry %s does not verify; converting again", entry.name)
        shutil.rmtree(entry, ignore_errors=True)  # the new conversion takes its place
        return None
    copied = [artifact.parent / path.name for path in artifact_files(converter, kept)]
    try:
        # the sidecar last: a folder's artifact counts only once its sidecar is beside it
        sidecar_path(artifact).unlink(missing_ok=True)
        for path in artifact_files(converter, kept):
            with atomic_path(artifact.parent / path.name) as tmp:
                shutil.copyfile(path, tmp)
        facts = {k: v for k, v in sidecar.items() if k != "schema"}
        facts["from_cache"] = {"key": key, "converted_at": sidecar.get("created_at"),
                               "copied_at": datetime.now(UTC).isoformat(timespec="seconds")}
        _, sidecar = write_sidecar_facts(artifact, facts)
    except BaseException as exc:  # a full disk, Ctrl-C: no copy without its sidecar is left
        for path in copied:
            path.unlink(missing_ok=True)
        sidecar_path(artifact).unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        log.info("conversion cache: could not copy %s (%s); converting instead", entry.name, exc)
        return None
    with contextlib.suppress(OSError):  # recently used: trimmed last (not on a read-only disk)
        os.utime(entry)
    log.info("conversion cache: %s reused from entry %s", artifact.name, entry.name[:12])
    return sidecar


def keep(converter, key: str, artifact: Path) -> None:
    """Add a freshly converted and checked ``artifact`` (its files and sidecar) as ``key``.
    A stop (Ctrl-C) here names the artifact, whole in its folder (``exc.converted``)."""
    try:
        root = _root()
        if root is None:
            return
        try:
            with staged_folder(root / key, prefix=f".{key[:12]}.", mode=0o700) as staging:
                for path in (*artifact_files(converter, artifact), sidecar_path(artifact)):
                    shutil.copyfile(path, staging / path.name)
                    (staging / path.name).chmod(0o600)  # this account's only, whatever the umask
        except OSError as exc:  # a full or read-only disk: only a cache missed
            log.info("conversion cache: could not keep %s (%s)", artifact.name, exc)
            return
        _trim(root, MAX_BYTES)
    except KeyboardInterrupt as exc:
        exc.converted = artifact
        raise


#: The folder (beside the entries') of the source memos: ``<key>.json`` each.
_SOURCES = "conversion-sources"


def source_key(identity: dict) -> str:
    """The hex key of a conversion's request as the caller states it, before any model is built:
    ``identity`` holds the reference, format, resolved options, results folder and the stamps
    of the weights file; aiot's version, its converter and model code and torch's version (which
    shape a seeded initialisation) are added here."""
    whole = {**identity, "aiot": aiot.__version__, "code": _code_identity(),
             "torch": _installed_version("torch")}
    return hashlib.sha256(json.dumps(whole, sort_keys=True, default=str).encode()).hexdigest()


def recalled(key: str) -> dict | None:
    """What :func:`remember` kept for ``key`` (the artifact's name, the source's state hash and
    input facts), or None: a request seen before can be checked against its artifact's sidecar
    without building the model (no torch: a sweep whose artifacts all exist starts at once).
    Trusted as the cache's entries are: this account's own file in this account's folder."""
    root = _root(_SOURCES)
    path = root / f"{key}.json" if root is not None else None
    if path is None or not path.is_file() or _untrusted(path):
        return None
    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fields = ("artifact", "source_hash")
    if not isinstance(memo, dict) or not all(isinstance(memo.get(f), str) for f in fields) \
            or Path(memo["artifact"]).name != memo["artifact"]:
        return None  # a name, never a path: the artifact is looked for in the caller's folder
    return memo


def remember(key: str, artifact: Path, source_hash: str, inputs: list | None) -> None:
    """Keep what a conversion of request ``key`` made (see :func:`recalled`); a full or read-only
    disk only means the model is built the next time."""
    folder = _root(_SOURCES)
    if folder is None:
        return
    try:
        with atomic_path(folder / f"{key}.json") as tmp:  # 0600: this account's only
            tmp.write_text(json.dumps({"artifact": artifact.name, "source_hash": source_hash,
                                       "inputs": inputs}), encoding="utf-8")
    except (OSError, AiotError) as exc:
        log.info("conversion cache: could not remember %s (%s)", artifact.name, exc)


def _installed_version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def sidecar_paths() -> list[Path]:
    """The sidecars of the cache's entries (what is converted on this machine), for estimates."""
    root = _root()
    return [] if root is None else sorted(root.glob(f"[!.]*/*{SUFFIX}"))


def _root(folder: str = _FOLDER) -> Path | None:
    """The cache folder (or the source memos' ``folder``), or None: off, unavailable (said at
    info level) or writable by other accounts (a warning, once per folder)."""
    if not enabled():
        return None
    try:
        root = cache_dir() / folder
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, AiotError) as exc:
        log.info("conversion cache unavailable: %s", exc)
        return None
    why = _untrusted(root, follow=True)
    if why is not None:
        _warn_once(str(root), f"conversion cache {root} {why}, so it is not used (every "
                   f"conversion is made afresh); make it this account's own: chmod go-w {root}")
        return None
    return root


def _untrusted(path: Path, follow: bool = False) -> str | None:
    """Why another account may have written ``path`` (``is writable by its group``), or None
    when only this account can. ``follow``: through a link (the cache folder may be one)."""
    if not hasattr(os, "geteuid"):  # no POSIX owners (Windows): the folder's ACLs decide
        return None
    try:
        found = path.stat() if follow else path.lstat()
    except OSError as exc:
        return f"cannot be checked ({exc.strerror or exc})"
    if stat.S_ISLNK(found.st_mode):
        return "is a symbolic link"
    if found.st_uid != os.geteuid():
        return f"belongs to uid {found.st_uid}, not to this account (uid {os.geteuid()})"
    if found.st_mode & stat.S_IWOTH:
        return "is writable by every account"
    if found.st_mode & stat.S_IWGRP:
        return "is writable by its group"
    return None


def _distrusted(entry: Path, files) -> str | None:
    """Why the entry folder or one of its ``files`` may hold another account's writing."""
    why = _untrusted(entry)
    if why is not None:
        return why
    for path in files:
        why = _untrusted(path)
        if why is None and not stat.S_ISREG(path.lstat().st_mode):
            why = "is not a plain file"
        if why is not None:
            return f"holds {path.name}, which {why}"
    return None


_WARNED: set[str] = set()


def _warn_once(key: str, text: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("%s", text)


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
