"""External measurements for the scores: CSV files from other tools or from papers.

Two layouts, one row per measurement, a header naming the columns in any order (case and
surrounding spaces ignored; extra columns are ignored, so notes can stay in the file):

* VIPS / VOPS: ``device,implementation,model,accuracy_pct,time_ms`` and optionally
  ``flops_m`` (millions of multiply-accumulates). Accuracy in percent, time the average
  per image in milliseconds, as AIoTBench's Table VI prints them. Without ``flops_m`` (or
  with it empty on a row) the zoo's AIoTBench reference FLOPs of the model are used; model
  names match zoo names and aliases case-insensitively, and AIoTBench's codes
  ``re, in, de, sq, mo, mn`` are accepted. A row whose ``accuracy_pct`` and ``time_ms`` are
  both ``/`` (Table VI's "not supported") or both empty is a test the device did not run.
* OM_infer: ``algorithm,device,model,threads,fp32_ms,bin_ms,fp32_bytes,bin_bytes`` and
  optionally ``format`` (the binarized runtime, e.g. ``lce``). ``threads`` may be empty
  where unknown; sizes may be in any unit, the same for both columns (only the ratio counts).

Every mistake is a :class:`~aiot.core.errors.UsageError` naming the file and line (the
header is line 1).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.scores.om_infer import Pair
from aiot.host.scores.vips import MODEL_CODES, DeviceTest, NotRun, aiotbench_model

VIPS_COLUMNS = ("device", "implementation", "model", "accuracy_pct", "time_ms")
OM_INFER_COLUMNS = ("algorithm", "device", "model", "threads", "fp32_ms", "bin_ms", "fp32_bytes",
                    "bin_bytes")

#: What a binarized CSV row's format and its baseline are called when the file does not say.
CSV_FORMAT, CSV_BASELINE = "external", "fp32"

_NOT_RUN = ("/", "")


@dataclass(frozen=True)
class VipsInput:
    """The tests of a VIPS/VOPS file and the tests it marks as not run."""

    tests: list[DeviceTest]
    not_run: list[NotRun]


class _Row:
    """One data row: its values by column and where it is, for errors that name it."""

    def __init__(self, where: str, line: int, values: dict[str, str]) -> None:
        self.where, self.line, self.values = where, line, values

    def error(self, what: str, hint: str | None = None) -> UsageError:
        return UsageError(f"{self.where} line {self.line}: {what}", hint)

    def text(self, column: str) -> str:
        value = self.values.get(column) or ""
        if not value:
            raise self.error(f"{column} is empty")
        return value

    def number(self, column: str, positive: bool = True) -> float:
        value = self.text(column)
        try:
            number = float(value)
        except ValueError:
            raise self.error(f"{column} '{value}' is not a number") from None
        if not math.isfinite(number) or (positive and number <= 0) or number < 0:
            raise self.error(f"{column} must be a {'positive' if positive else 'non-negative'} "
                             f"number, got '{value}'")
        return number


def _rows(path: Path, required: tuple[str, ...], layout: str) -> Iterator[_Row]:
    """The data rows of ``path``, checked to have every ``required`` column and no extra field."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")  # a BOM from spreadsheet exports
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = [name.strip().lower() for name in next(reader, [])]
        missing = [c for c in required if c not in header]
        if missing:
            raise UsageError(f"{path.name} line 1: missing column(s) {', '.join(missing)}",
                             f"a {layout} file's header names: {', '.join(required)}")
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue  # blank lines
            row = _Row(path.name, reader.line_num, {})
            if len(fields) != len(header):
                raise row.error(f"{len(fields)} fields, the header has {len(header)}")
            row.values = {name: value.strip() for name, value in zip(header, fields, strict=True)}
            yield row


Reference = Callable[[str], tuple[str, float | None]]


def read_vips_csv(path: Path, reference: Reference = aiotbench_model) -> VipsInput:
    """Tests (and not-run tests) from a VIPS/VOPS CSV file.

    Args:
        path: the CSV file.
        reference: model name to (zoo name, reference FLOPs in millions or None).

    Raises:
        UsageError: unreadable file, missing column, empty or non-numeric value, accuracy
            outside 0-100, a model with neither ``flops_m`` nor reference FLOPs, or a test
            given twice; the message names the line.
    """
    tests, not_run, seen = [], [], {}
    for row in _rows(path, VIPS_COLUMNS, "VIPS/VOPS"):
        device, impl = row.text("device"), row.text("implementation")
        given = row.text("model")
        model, flops_m = reference(given)
        key = (device, impl, model)
        if key in seen:
            raise row.error(f"{device} {impl}/{model} is already on line {seen[key]}")
        seen[key] = row.line
        source = f"{path.name} line {row.line}"
        accuracy, time = row.values["accuracy_pct"], row.values["time_ms"]
        if accuracy in _NOT_RUN and time in _NOT_RUN and accuracy == time:
            not_run.append(NotRun(device, impl, model, "marked not run in the file", source))
            continue
        accuracy_pct = row.number("accuracy_pct", positive=False)
        if accuracy_pct > 100:
            raise row.error(f"accuracy_pct is a percentage (0-100), got '{accuracy}'")
        time_ms = row.number("time_ms")
        if row.values.get("flops_m"):
            flops_m, flops_source = row.number("flops_m"), "csv"
        elif flops_m is None:
            raise row.error(f"no reference FLOPs for model '{given}'", _flops_hint())
        else:
            flops_source = "reference"
        tests.append(DeviceTest(device=device, implementation=impl, model=model,
                                accuracy=accuracy_pct / 100, time_s=time_ms / 1000,
                                flops_m=flops_m, stat="csv", flops_source=flops_source,
                                source=source))
    if not tests:
        raise UsageError(f"{path.name}: no test with an accuracy and a time")
    return VipsInput(tests, not_run)


def _flops_hint() -> str:
    codes = ", ".join(f"{code} ({name})" for code, name in MODEL_CODES.items())
    return f"give its flops_m (millions of MACs), or use an AIoTBench model: {codes}"


def read_om_infer_csv(path: Path,
                      algorithm_name: Callable[[str], str] = str.lower) -> list[Pair]:
    """FP32/binarized pairs from an OM_infer CSV file, in file order.

    Args:
        path: the CSV file.
        algorithm_name: canonical name of an algorithm as written in the file (the CLI
            passes the BiBench registry's, so ``BNN`` and ``bnn`` are one algorithm).

    Raises:
        UsageError: unreadable file, missing column, empty or non-numeric value, threads
            that are not a positive whole number, or a pair given twice; the message names
            the line.
    """
    pairs, seen = [], {}
    for row in _rows(path, OM_INFER_COLUMNS, "OM_infer"):
        algorithm = algorithm_name(row.text("algorithm"))
        fmt = row.values.get("format") or CSV_FORMAT
        device, model = row.text("device"), row.text("model")
        threads = _threads(row)
        key = (algorithm, fmt, device, model, threads)
        if key in seen:
            raise row.error(f"{algorithm} {model} on {device} at {threads} threads is already on "
                            f"line {seen[key]}")
        seen[key] = row.line
        fp_ms, bin_ms = row.number("fp32_ms"), row.number("bin_ms")
        fp_bytes, bin_bytes = row.number("fp32_bytes"), row.number("bin_bytes")
        source = f"{path.name} line {row.line}"
        pairs.append(Pair(
            device=device, model=model, threads=threads, algorithm=algorithm, format=fmt,
            baseline=CSV_BASELINE, stat="csv", fp_ms=fp_ms, bin_ms=bin_ms,
            fp_bytes=_whole(fp_bytes), bin_bytes=_whole(bin_bytes), speedup=fp_ms / bin_ms,
            compression=fp_bytes / bin_bytes, fp_id=source, bin_id=source,
        ))
    if not pairs:
        raise UsageError(f"{path.name}: no data rows")
    return pairs


def _threads(row: _Row) -> int | None:
    value = row.values["threads"]
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise row.error(f"threads must be a positive whole number, got '{value}'")
    return int(value)


def _whole(value: float) -> int | float:
    """Sizes stay ints where they are (bytes), floats where a paper gives MB."""
    return int(value) if value.is_integer() else value
