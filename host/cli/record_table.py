"""Stored records as a typed table: a pandas DataFrame (the Python API) or a Parquet file
(``aiot results export --format parquet``).

Both have the CSV export's columns in its order (:data:`aiot.host.cli.record_view.CSV_COLUMNS`,
one row per record from :func:`~aiot.host.cli.record_view.export_row`), each with one type
(:data:`COLUMN_TYPES`), so a notebook, a Parquet reader and a spreadsheet see the same table.
The statistics and provenance stay JSON text, as in the CSV: a column of one type whatever a
record holds. Values are the store's, not CSV text: no cell is neutralised for a spreadsheet.

pandas and pyarrow are the ``api`` extra, imported only here, when a table is made.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from aiot.core.errors import MissingDependency
from aiot.core.fileio import atomic_path, new_file_mode
from aiot.host.cli.record_view import CSV_COLUMNS, export_row

_INT = ("threads", "size_bytes", "n", "cores")
_FLOAT = ("median_ms", "p90_ms", "load_ms", "accuracy", "mean_ms", "min_ms", "max_ms", "std_ms",
          "robust_cv")
_BOOL = ("emulated",)
#: Each export column's type: ``int``, ``float``, ``bool`` or ``str`` (every other column).
COLUMN_TYPES: dict[str, str] = {
    name: "int" if name in _INT else "float" if name in _FLOAT else "bool" if name in _BOOL
    else "str" for name in CSV_COLUMNS}
#: Rows written to a Parquet file at a time (a whole store is never in memory).
BATCH = 2000


def _typed(value, kind: str):
    """``value`` as a ``kind`` column holds it, None where it is not one (a damaged record's
    odd field reads as missing, as in every view)."""
    if value is None:
        return None
    if kind == "str":
        return value if isinstance(value, str) else str(value)
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind == "int":
        return value if isinstance(value, int) else None
    return float(value) if math.isfinite(value) else None


def typed_rows(records: Iterable) -> Iterator[dict]:
    """One dict per record, every export column of its type (or None)."""
    for record in records:
        row = export_row(record)
        yield {name: _typed(row.get(name), kind) for name, kind in COLUMN_TYPES.items()}


def _need(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(module, "api", hint="run: pip install 'aiot[api]' "
                                "(pandas and pyarrow)") from None


def dataframe(records: Iterable):
    """The records as a pandas DataFrame with :data:`COLUMN_TYPES`' dtypes (nullable)."""
    pandas = _need("pandas")
    dtypes = {"int": "Int64", "float": "Float64", "bool": "boolean", "str": "string"}
    frame = pandas.DataFrame.from_records(list(typed_rows(records)), columns=list(COLUMN_TYPES))
    return frame.astype({name: dtypes[kind] for name, kind in COLUMN_TYPES.items()})


def arrow_schema():
    """The Parquet file's schema: one field per export column, nullable."""
    pyarrow = _need("pyarrow")
    types = {"int": pyarrow.int64(), "float": pyarrow.float64(), "bool": pyarrow.bool_(),
             "str": pyarrow.string()}
    return pyarrow.schema([(name, types[kind]) for name, kind in COLUMN_TYPES.items()])


def write_parquet(records: Iterable, final: Path) -> int:
    """Write the records to ``final`` as Parquet, :data:`BATCH` rows at a time, atomically
    (``final`` is the old file or the whole new one); the number of records written."""
    _need("pyarrow")
    import pyarrow
    import pyarrow.parquet

    schema, count, batch = arrow_schema(), 0, []
    with atomic_path(final, mode=new_file_mode(final)) as tmp:
        with pyarrow.parquet.ParquetWriter(tmp, schema) as writer:
            for row in typed_rows(records):
                batch.append(row)
                if len(batch) == BATCH:
                    writer.write_table(pyarrow.Table.from_pylist(batch, schema=schema))
                    count, batch = count + len(batch), []
            if batch or not count:  # an empty export still has the columns
                writer.write_table(pyarrow.Table.from_pylist(batch, schema=schema))
                count += len(batch)
    return count
