"""One unit for sizes everywhere aiot prints them: binary prefixes (KiB, MiB, GiB), as the
run tables, ``results show``, the report and ``convert`` all say."""

from __future__ import annotations


def size_text(size: float | None) -> str:
    """``1536`` → ``1.5 KiB``; ``—`` for an unknown size."""
    if size is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


MIB = 1024 * 1024
