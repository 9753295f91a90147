"""What a report page is made of: sections, each with its figures (plot keys) and tables of raw
values; the writers (:mod:`aiot.host.report.html`) format each column by its ``kind``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """A table column; ``kind`` tells writers how to format it (text, int, ms, bytes, pct,
    ratio, score, time)."""

    key: str
    title: str
    kind: str = "text"


@dataclass(frozen=True)
class Table:
    """Rows of raw values; ``key`` names the CSV file and the HTML anchor. A row whose
    ``validity`` is INVALID is flagged by every writer.

    A CSV file has the same columns whatever its rows hold (a script reading it must not break
    the day a second device appears): a file's columns are a module constant (listed by
    :data:`aiot.host.report.html.CSV_COLUMNS`), a column with one value in every row stays,
    and one no row has a value for stays empty. Only the
    page folds: ``fold`` names the columns it leaves out where every row has the same value
    there (its intro says it, :meth:`shown`). Where the page's columns are made of the rows
    (a column per thread count, per metric), ``file`` is the CSV's own table: the same rows,
    one per value, under fixed columns (:meth:`csv`).
    """

    key: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict, ...]
    fold: tuple[str, ...] = ()
    file: Table | None = None

    def shown(self) -> tuple[Column, ...]:
        """The page's columns: ``columns`` less each ``fold`` one whose value is the same in
        every row."""
        folded = {k for k in self.fold if len({_hashable(r.get(k)) for r in self.rows}) <= 1}
        return tuple(c for c in self.columns if c.key not in folded)

    def csv(self) -> Table:
        """The table a CSV file writes: ``file`` where the page pivots, else this one."""
        return self.file or self


def _hashable(value):
    return repr(value) if isinstance(value, (dict, list)) else value


def keys(columns: tuple[Column, ...]) -> tuple[str, ...]:
    """A CSV file's header: its columns' keys, in order."""
    return tuple(c.key for c in columns)


@dataclass(frozen=True)
class Section:
    """A part of the page: its figures (plot keys), tables, or a note saying why it is empty."""

    key: str
    title: str
    intro: str
    figures: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    note: str | None = None
