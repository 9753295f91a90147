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
    ``validity`` is INVALID is flagged by every writer."""

    key: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict, ...]


@dataclass(frozen=True)
class Section:
    """A part of the page: its figures (plot keys), tables, or a note saying why it is empty."""

    key: str
    title: str
    intro: str
    figures: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    note: str | None = None
