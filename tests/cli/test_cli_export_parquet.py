"""`aiot results export --format parquet` and the Python API's DataFrame (issue 52): the CSV
export's columns, in its order, typed; what they hold is what the CSV holds."""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys

import pytest

from aiot.host.cli.record_view import CSV_COLUMNS
from tests.helpers import FAST, single_error

pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pandas")


@pytest.fixture
def two_runs(cli):
    """Two stored runs of aiot's own test format (no conversion: seconds)."""
    return cli.json("sweep", "--model", "tiny_cnn", "--format", "null", "--threads", "1,2", *FAST)


def test_parquet_reads_back_with_the_csvs_columns_and_values(cli, two_runs, tmp_path):
    cli("results", "export", "--format", "parquet", "--out", str(tmp_path / "runs.parquet"))
    table = pyarrow_parquet.read_table(tmp_path / "runs.parquet")
    assert table.column_names == list(CSV_COLUMNS) and table.num_rows == 2
    assert str(table.schema.field("median_ms").type) == "double"
    assert str(table.schema.field("threads").type) == "int64"
    assert str(table.schema.field("emulated").type) == "bool"
    rows = list(csv.DictReader(io.StringIO(cli("results", "export", "--format", "csv").stdout)))
    for row, parquet in zip(rows, table.to_pylist(), strict=True):
        assert parquet["id"] == row["id"] and parquet["threads"] == int(row["threads"])
        assert math.isclose(parquet["median_ms"], float(row["median_ms"]))
        assert parquet["stats_ms"] == row["stats_ms"] and parquet["host"] == row["host"]
        assert parquet["emulated"] is (row["emulated"] == "True")


def test_the_dataframe_is_the_parquet_table(two_runs, tmp_path, cli):
    import aiot

    sweep = two_runs[0]["sweep_id"]
    frame = aiot.open_store().runs(sweep=sweep[:6])  # a prefix that names one sweep
    assert list(frame.columns) == list(CSV_COLUMNS) and len(frame) == 2
    assert str(frame["threads"].dtype) == "Int64" and sorted(frame["threads"].tolist()) == [1, 2]
    cli("results", "export", "--format", "parquet", "--sweep", sweep, "--out", str(tmp_path / "r.parquet"))
    table = pyarrow_parquet.read_table(tmp_path / "r.parquet").to_pandas()
    assert table["id"].tolist() == frame["id"].tolist()
    assert table["median_ms"].tolist() == frame["median_ms"].astype(float).tolist()


def test_parquet_needs_a_file_and_an_unknown_format_is_one_line(cli):
    single_error(cli("results", "export", "--format", "parquet", code=2), "writes a file", "--out")
    single_error(cli("results", "export", "--format", "xlsx", code=2), "csv, json or parquet")


def test_an_empty_store_exports_the_columns(cli, tmp_path):
    cli("results", "export", "--format", "parquet", "--out", str(tmp_path / "none.parquet"))
    table = pyarrow_parquet.read_table(tmp_path / "none.parquet")
    assert table.column_names == list(CSV_COLUMNS) and table.num_rows == 0


def test_import_aiot_imports_nothing_else_until_the_api_is_used():
    code = ("import sys, aiot; before = sorted(m for m in sys.modules if m.startswith('aiot'));"
            "aiot.open_store; after = 'aiot.host.store.store' in sys.modules;"
            "print(before, after, aiot.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["['aiot']", "True"]
