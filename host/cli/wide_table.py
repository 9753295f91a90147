"""A table wider than the terminal, printed as consecutive parts that each fit, every part
repeating the key columns: no header or value is ever cut to fit (Rich would shorten
``gaussian_noise`` to ``gaus…`` in an 18-column table on a 100-column terminal).

Pandas prints a wide frame the same way; the paper's tables keep their shape, only wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Column, Table
from rich.text import Text

#: Characters Rich's default box adds per column (a space each side and one border), and the
#: closing border of the row.
_PER_COLUMN, _CLOSING = 3, 1


def cell_width(header: str, cells: Sequence[str]) -> int:
    """The width a column needs to show its header and every cell whole (markup not counted)."""
    return max([Text.from_markup(line).cell_len for line in header.split("\n")]
               + [Text.from_markup(line).cell_len for cell in cells for line in str(cell).split("\n")])


def column_parts(key_widths: Sequence[int], value_widths: Sequence[int], width: int) -> list[range]:
    """Consecutive ranges of the value columns such that each range, beside the key columns,
    fits ``width``: as few parts as fit, of even sizes where even sizes fit (not a full part
    and a leftover of two columns); a value column too wide for any part gets one of its own."""
    base = sum(w + _PER_COLUMN for w in key_widths) + _CLOSING
    greedy, start, used = [], 0, base
    for index, value_width in enumerate(value_widths):
        need = value_width + _PER_COLUMN
        if index > start and used + need > width:
            greedy.append(range(start, index))
            start, used = index, base
        used += need
    greedy.append(range(start, len(value_widths)))
    count, total = len(greedy), len(value_widths)
    even = [range(total * i // count, total * (i + 1) // count) for i in range(count)]
    fits = all(base + sum(value_widths[j] + _PER_COLUMN for j in part) <= width for part in even)
    return even if fits else greedy


def wide_tables(title: str, keys: Sequence[str], values: Sequence[str], rows: Sequence[Sequence[str]],
                width: int, **style) -> list[Table]:
    """``rows`` (each the key cells then the value cells) as one table, or as parts titled
    ``(part i of n)`` when the whole does not fit ``width``."""
    columns = list(zip(*rows)) if rows else [()] * (len(keys) + len(values))
    widths = [cell_width(h, c) for h, c in zip([*keys, *values], columns)]
    parts = column_parts(widths[:len(keys)], widths[len(keys):], width)
    tables = []
    for number, part in enumerate(parts, 1):
        shown = [*range(len(keys)), *(len(keys) + i for i in part)]
        named = title if len(parts) == 1 else f"{title} (part {number} of {len(parts)})"
        table = Table(*(Column([*keys, *values][i], no_wrap=True) for i in shown), title=named, **style)
        for row in rows:
            table.add_row(*(row[i] for i in shown))
        tables.append(table)
    return tables
