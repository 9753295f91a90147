"""File helpers shared across aiot: hashing and atomic writes (temp file + rename)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def atomic_path(final: Path):
    """Yield a temp path beside ``final``; it replaces ``final`` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part" + final.suffix, dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, final)
    finally:
        tmp_path.unlink(missing_ok=True)


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
