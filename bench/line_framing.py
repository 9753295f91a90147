"""Line framing of device output: seconds of CPU to frame one long line, before and after.

Before (every transport up to issue 35): the partial line was concatenated with each new chunk
and the whole buffer split again, so a line of n chunks cost O(n²) (an 80 MB line ~100 s, a
500 MB line pinned a core until the run's timeout). After: :class:`LineFramer` keeps the
partial line as a list of chunks and searches only each new chunk, O(n), and stops a line
past its limit (64 MiB by default) at once. Both are fed the same 64 KiB chunks, as a
transport reads them; the old way is timed up to 8 MB and its 80 MB time is extrapolated
from its quadratic growth (timing it would take minutes). ``\\r``-only output (a runtime's
progress without a newline) is the same case: one line that never ends.
Usage: ``python bench/line_framing.py`` (runs in under a minute; writes
``bench/out/line_framing.json``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

from aiot.host.transports.stream import LineFramer, LineTooLong  # noqa: E402

MB = 1024 * 1024
CHUNK = 65536
SIZES_MB = (1, 8, 80)
OLD_MAX_MB = 8  # the old way is timed up to here, extrapolated beyond


def old_way(total: int, unit: bytes) -> float:
    """Seconds to frame one line of ``total`` bytes the way the transports did before."""
    chunk = unit * (CHUNK // len(unit))
    partial, lines = b"", []
    start = time.process_time()
    for _ in range(total // len(chunk)):
        partial += chunk
        *done, partial = partial.split(b"\n")
        lines.extend(done)
    partial += b"\n"
    *done, partial = partial.split(b"\n")
    return time.process_time() - start


def new_way(total: int, unit: bytes, limit: int) -> tuple[float, str]:
    """Seconds to frame (or refuse) one line of ``total`` bytes with :class:`LineFramer`."""
    chunk = unit * (CHUNK // len(unit))
    framer = LineFramer("bench", "agent", limit=limit)
    start = time.process_time()
    try:
        for _ in range(total // len(chunk)):
            framer.feed(chunk)
        framer.feed(b"\n")
        outcome = "framed"
    except LineTooLong:
        outcome = f"refused at {limit // MB} MiB"
    return time.process_time() - start, outcome


def main() -> None:
    rows, results = [], []
    unlimited = 1 << 40
    for name, unit in (("newline-free", b"x"), ("\\r progress", b"measuring 42%\r")):
        old = {}
        for mb in SIZES_MB:
            if mb <= OLD_MAX_MB:
                old[mb], estimated = old_way(mb * MB, unit), False
            else:  # quadratic: scale the largest timed size by (mb / timed)²
                old[mb], estimated = old[OLD_MAX_MB] * (mb / OLD_MAX_MB) ** 2, True
            new, _ = new_way(mb * MB, unit, unlimited)
            limited, outcome = new_way(mb * MB, unit, LineFramer("b", "a").limit)
            rows.append([name, f"{mb} MB", f"{old[mb]:.3f}{' (est.)' if estimated else ''}",
                         f"{new:.3f}", f"{limited:.3f}", outcome])
            results.append({"output": name, "line_mb": mb, "old_s": round(old[mb], 4),
                            "old_estimated": estimated, "new_s": round(new, 4),
                            "new_with_limit_s": round(limited, 4), "with_limit": outcome})
    print_table(["output", "line", "before (CPU s)", "after, no limit", "after, 64 MiB limit",
                 "with the limit"], rows)
    path = write_json("line_framing", {"chunk_bytes": CHUNK, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
