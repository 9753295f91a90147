"""File helpers shared across aiot: hashing, atomic writes (temp file + rename) and the
checks a user-named output file passes before anything is written to it."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

from aiot.core.diskfull import DISK_ERRNOS, DiskError, as_disk_error, free_bytes
from aiot.core.errors import UsageError

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def atomic_path(final: Path, mode: int | None = None):
    """Yield a temp path beside ``final``; it replaces ``final`` only if the block succeeds.

    A full disk or read-only mount raises :class:`~aiot.core.diskfull.DiskError` naming the
    folder; the temp file is gone on every exit path.

    Args:
        mode: the new file's permission bits (default: the temp file's 0600).
    """
    tmp_path = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part" + final.suffix,
                                   dir=final.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        if mode is not None:
            os.chmod(tmp_path, mode)
        yield tmp_path
        os.replace(tmp_path, final)
    except Exception as exc:  # a full disk or read-only mount: named, with the folder
        disk = None if isinstance(exc, DiskError) else as_disk_error(
            exc, f"cannot write {final.name}", final.parent)
        if disk is None and tmp_path is not None and (free_bytes(final.parent) or 1 << 30) < 1 << 16:
            # A writer that names no errno (ONNX Runtime's "Failed to save") on a disk that
            # its half-written file has filled: that is what stopped it.
            disk = DiskError(errno.ENOSPC, f"cannot write {final.name}", final.parent)
        if disk is None:
            raise
        raise disk from None
    finally:
        if tmp_path is not None:
            tmp_path.unlink(missing_ok=True)


@contextmanager
def staged_folder(final: Path, prefix: str = ".staging-", mode: int | None = None):
    """Yield a new temp folder beside ``final`` to fill; when the block succeeds it becomes
    ``final`` by one rename, so readers see the whole folder or none. Where another writer's
    ``final`` is there already, theirs is as good as ours: ours is dropped. The temp folder
    is gone on every exit path.

    Args:
        mode: the folder's permission bits (default: the temp folder's 0700).

    Raises:
        OSError: the folder cannot be made or renamed (a full or read-only disk).
    """
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=final.parent))
    try:
        if mode is not None:
            work.chmod(mode)
        yield work
        try:
            work.rename(final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)  # after the rename there is nothing left


def write_atomic(final: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` and move the result to ``final`` only when it returns."""
    with atomic_path(final) as tmp:
        write(tmp)


def write_text_atomic(final: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``final`` so readers see the old file or the whole new one."""
    write_atomic(final, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes_atomic(final: Path, data: bytes) -> None:
    """Write ``data`` to ``final`` so readers see the old file or the whole new one."""
    write_atomic(final, lambda tmp: tmp.write_bytes(data))


_SPECIAL = ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
            (stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISSOCK, "socket"))


def check_output_file(path: Path, protected: Iterable[Path] = (), option: str = "--out") -> None:
    """Refuse an output file an export must not replace, before anything is written.

    Refused with a one-line :class:`UsageError`: an empty path or a folder, a symbolic link
    (its target is not replaced by a regular file behind the user's back), a device, FIFO or
    socket (``/dev/null`` would become a regular file), and the ``protected`` files (the
    result store and its -wal/-shm/-journal companions), also through another name for them.
    An existing regular file is fine: it is replaced atomically.
    """
    if not str(path) or path.name in ("", ".", ".."):
        raise UsageError(f"{option} '{path}' names no file (it is empty or a folder)",
                         f"give a file, e.g. {option} results.csv")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"cannot use {option} {path}: {exc.strerror or exc}") from None
    if info is not None:
        _refuse_kind(path, info, option)
    target = path.parent.resolve() / path.name
    for guarded in protected:
        same = target == guarded.parent.resolve() / guarded.name
        if not same and info is not None and guarded.exists():
            same = os.path.samefile(path, guarded)  # a hard link to it
        if same:
            raise UsageError(f"{option} {path} is aiot's result store ({guarded.name}); writing "
                             "there would destroy its records", f"give another file, e.g. {option} results.csv")


def _refuse_kind(path: Path, info: os.stat_result, option: str) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"{option} {path} is a symbolic link; aiot does not write through links",
                         "give the file it points to, or another file name")
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{option} {path} is a folder, not a file",
                         f"give a file name in it, e.g. {option} {path / 'results.csv'}")
    for test, kind in _SPECIAL:
        if test(info.st_mode):
            raise UsageError(f"{option} {path} is a {kind}, not a regular file",
                             "leave out --out to print to stdout and redirect that instead")


def new_file_mode(final: Path) -> int:
    """Keep an existing file's permissions; a new one gets what the umask allows."""
    try:
        return stat.S_IMODE(os.stat(final).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_output_atomic(final: Path, text: str | Iterable[str], option: str = "--out") -> None:
    """Write ``text`` to a user-named file (checked with :func:`check_output_file` first):
    synced to disk and renamed into place, so ``final`` is the old file or the whole new one.
    ``text`` may come in chunks (a streamed export), written as they come.

    Raises:
        UsageError: the file cannot be written (a missing permission, a parent that is a file).
    """
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.writelines([text] if isinstance(text, str) else text)
            fh.flush()
            os.fsync(fh.fileno())

    try:
        with atomic_path(final, mode=new_file_mode(final)) as tmp:
            write(tmp)
    except DiskError as exc:
        raise UsageError(f"cannot write {option} {final}: {DISK_ERRNOS[exc.errno]}", exc.hint) from None
    except OSError as exc:
        raise UsageError(f"cannot write {option} {final}: {exc.strerror or exc}",
                         "check the folder exists and is writable") from None


def load_states(paths: Iterable[Path], make: Callable[..., object]) -> list:
    """``make(**json)`` for each state file in ``paths``; a file being written, gone or from
    another version is passed over (state files describe processes that may have died)."""
    import json

    found = []
    for path in paths:
        try:
            found.append(make(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return found
