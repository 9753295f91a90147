"""BiBench's hardware-inference procedure (Appendix B.1, Tables 17–20) as one campaign.

BiBench times ResNet18, ResNet34 and VGG-Small in FP32 (TFLite), binarized with BNN and with
ReActNet in Larq Compute Engine, and ResNet18/34 in daBNN (its FP32 form and its BNN, one
thread: daBNN is single-threaded), at 1, 2, 4 and 8 threads (16 on Apple silicon), and
reports each device's latencies; OM_infer combines the BNNs' speed-ups over FP32 with their
compression. Here:

==========  =========================================================================
column      how aiot runs it
==========  =========================================================================
FP32        ``.tflite`` through the agent's LiteRT (XNNPACK), or ``benchmark_model`` /
            ``lce_benchmark_model`` (which runs plain TFLite too)
Larq BNN    ``--binarize bnn`` as an LCE ``.tflite``: the agent's LCE runtime (hosts with
            the ``lce`` toolchain) or ``lce_benchmark_model`` (ARM devices; LCE has no
            aarch64 wheel)
ReAct       the same with ``--binarize reactnet``
daBNN FP32  ``--opt precision=fp32`` ``.dab`` in daBNN's ``benchmark_single_model``, 1 thread
daBNN BNN   ``--binarize bnn`` ``.dab`` in ``benchmark_single_model``, 1 thread (the ResNets'
            deployed form drops the clamps a float layer reads; see the sidecar)
==========  =========================================================================

Every cell of the grid is a run or a skipped record with its reason (no runtime, no binary
configured, unreachable device), so the table always has the paper's shape; cells the paper
leaves empty (daBNN above 1 thread, VGG-Small on daBNN) are "–". Speed-ups and OM_infer are
computed from the stored records (:mod:`aiot.host.scores.om_infer`): Larq's BNNs against
the FP32 TFLite run of the same device, model and threads, daBNN's BNN against daBNN's FP32.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiot.converters import get_converter
from aiot.host.engine.bibench_paper import paper_hardware, paper_ms, source
from aiot.host.engine.runs import MeasureParams, RunRequest
from aiot.host.engine.validity import emulated
from aiot.host.scores.om_infer import match_runs, om_infer
from aiot.host.store import identity

#: The grid's networks per size, in the paper's row order (VGG-Small is CIFAR-size in both).
SIZES = {"imagenet": ("resnet18", "resnet34", "vgg_small"),
         "cifar": ("resnet18_cifar", "resnet34_cifar", "vgg_small")}
ARCH = {"resnet18": "ResNet18", "resnet18_cifar": "ResNet18", "resnet34": "ResNet34",
        "resnet34_cifar": "ResNet34", "vgg_small": "VGG-Small"}
THREADS = (1, 2, 4, 8)
MANY_THREADS = 16  # the paper's Apple rows: run where the device has that many cores
NOT_ON_DABNN = "BiBench deploys only ResNet18/34 on daBNN"
SINGLE_THREAD = "daBNN is single-threaded"


@dataclass(frozen=True)
class Column:
    """One latency column of Tables 17–20 and how aiot measures it."""

    key: str
    title: str
    format: str
    binarize: str | None = None
    options: tuple[tuple[str, str], ...] | None = None
    natives: tuple[str, ...] = ()  # native tools that run it where no agent runtime does
    agent: bool = True  # whether the device agent can run it (daBNN: native only)
    single_thread: bool = False
    baseline: str | None = None  # the column its speed-up is over

    @property
    def library(self) -> str:
        return "daBNN" if self.format == "dabnn" else "Larq"


COLUMNS = (
    # LCE's benchmark runs plain TFLite too (the paper's FP32 column sits under "Larq")
    Column("fp32", "FP32", "tflite", natives=("benchmark_model", "lce_benchmark_model")),
    Column("bnn", "Larq BNN", "lce", "bnn", natives=("lce_benchmark_model",), baseline="fp32"),
    Column("react", "ReAct", "lce", "reactnet", natives=("lce_benchmark_model",), baseline="fp32"),
    Column("dabnn_fp32", "daBNN FP32", "dabnn", None, (("precision", "fp32"),),
           natives=("benchmark_single_model",), agent=False, single_thread=True),
    Column("dabnn_bnn", "daBNN BNN", "dabnn", "bnn", natives=("benchmark_single_model",),
           agent=False, single_thread=True, baseline="dabnn_fp32"),
)
_BY_KEY = {c.key: c for c in COLUMNS}


def thread_counts(threads: list[int] | None, info: dict) -> list[int]:
    """``threads`` as given, else 1, 2, 4, 8 and 16 where the device has 16 cores."""
    if threads:
        return list(threads)
    many = (info.get("cores") or 0) >= MANY_THREADS
    return [*THREADS, *([MANY_THREADS] if many else [])]


def absent_reason(column: Column, model: str, threads: int) -> str | None:
    """Why the paper's grid has no number here (its "–"), or None."""
    if column.format == "dabnn" and ARCH[model] == "VGG-Small":
        return NOT_ON_DABNN
    if column.single_thread and threads != 1:
        return SINGLE_THREAD
    return None


def runner(column: Column, info: dict, binaries: dict) -> tuple[str | None, str | None]:
    """``(native tool or None for the agent, skip reason or None)`` for ``column`` on a
    device with probe/agent facts ``info`` and inventory ``binaries``."""
    converter = get_converter(column.format)
    available = converter.availability()
    if not available.ok:
        return None, f"{converter.name} converter unavailable on this host: {available.reason}"
    if "unreachable" in info:
        return None, f"device unreachable: {info['unreachable']}"
    runtimes = (info.get("agent") or {}).get("runtimes") or {}
    if column.agent and runtimes.get(converter.backend):
        return None, None
    configured = [tool for tool in column.natives if tool in binaries]
    if configured:
        return configured[0], None
    device, tool = info.get("name", "the device"), column.natives[0]
    add = f"add [devices.{device}.binaries] {tool} = \"/path\" to the inventory"
    if not column.agent:
        return tool, f"no {tool} binary configured for {device}: {add}"
    return None, (f"no {column.title} runtime ({converter.backend}) on {device} and no "
                  f"{' or '.join(column.natives)} binary configured: see aiot devices setup "
                  f"{device}, or {add}")


@dataclass(frozen=True)
class Cell:
    """One planned cell of the grid: its run, or why the paper's grid has none."""

    device: str
    threads: int
    model: str
    column: str
    request: RunRequest | None = None
    absent: str | None = None


def plan(devices: list[str], size: str, threads: list[int] | None, params: MeasureParams,
         infos: dict[str, dict], binaries: dict[str, dict]) -> tuple[list[Cell], dict]:
    """Every cell of the grid, and ``{request: skip reason}`` for runs a device cannot do."""
    cells, skips = [], {}
    for device in devices:
        info = {"name": device, **infos.get(device, {})}
        for count in thread_counts(threads, info):
            for model in SIZES[size]:
                for column in COLUMNS:
                    why = absent_reason(column, model, count)
                    if why:
                        cells.append(Cell(device, count, model, column.key, absent=why))
                        continue
                    native, skip = runner(column, info, binaries.get(device, {}))
                    request = RunRequest(device, model, column.format, count, params=params,
                                         native=native, binarize=column.binarize,
                                         options=column.options)
                    cells.append(Cell(device, count, model, column.key, request=request))
                    if skip:
                        skips[request] = skip
    return cells, skips


def grid(cells: list[Cell], records, infos: dict[str, dict]) -> list[dict]:
    """The table's rows, one per (device, threads, model), in the paper's order.

    Each row has, per column, ``ms`` (or None), ``status`` (``ok``, ``failed``, ``skipped``,
    ``absent``, ``missing``), ``reason``, ``speedup`` over its baseline column (from the
    stored pair: :func:`aiot.host.scores.om_infer.match_runs`), and with a paper match the
    paper's ``paper_ms`` and ``ratio`` = measured / paper.
    """
    newest = {}
    for record in records:  # oldest first: retries and resumed runs replace older ones
        newest[identity.key(record)] = record
    speedups = _speedups(list(newest.values()))
    rows: dict[tuple, dict] = {}
    for cell in cells:
        key = (cell.device, cell.threads, cell.model)
        hardware = paper_hardware(infos.get(cell.device, {}))
        row = rows.setdefault(key, {"device": cell.device, "threads": cell.threads,
                                    "model": cell.model, "arch": ARCH[cell.model],
                                    "paper_hardware": hardware, "cells": {}})
        record = newest.get(identity.key(cell.request)) if cell.request else None
        entry = {"ms": identity.latency_ms(record), "speedup": None, "reason": cell.absent,
                 "status": "absent" if cell.absent else (record.status if record else "missing"),
                 "record_id": record.id if record else None, "size_bytes": None}
        if record is not None:
            entry["reason"] = record.reason
            entry["size_bytes"] = record.size_bytes
            entry["speedup"] = speedups.get(record.id)
        if hardware:
            paper = paper_ms(hardware, cell.threads, ARCH[cell.model], cell.column)
            entry["paper_ms"] = paper
            entry["ratio"] = entry["ms"] / paper if paper and entry["ms"] else None
        row["cells"][cell.column] = entry
    return list(rows.values())


def _speedups(records) -> dict[str, float]:
    """Binarized record id → its speed-up over its baseline column's run (stored pairs)."""
    found = {}
    for baseline in ("tflite", "dabnn"):
        for pair in match_runs(records, baseline=baseline).pairs:
            if _BY_KEY[_column_key(pair.format, pair.algorithm)].baseline == _baseline_key(baseline):
                found[pair.bin_id] = pair.speedup
    return found


def _column_key(fmt: str, algorithm: str | None) -> str:
    return next(c.key for c in COLUMNS if c.format == fmt and c.binarize == algorithm)


def _baseline_key(fmt: str) -> str:
    return "fp32" if fmt == "tflite" else "dabnn_fp32"


def scores(records) -> list[dict]:
    """OM_infer per device and (algorithm, library), from the stored records: Larq's BNNs
    against FP32 TFLite, daBNN's BNN against daBNN's FP32, means over threads and models."""
    out = []
    for device in sorted({r.device for r in records}):
        mine = [r for r in records if r.device == device]
        pairs = [p for baseline in ("tflite", "dabnn")
                 for p in match_runs(mine, baseline=baseline).pairs
                 if _BY_KEY[_column_key(p.format, p.algorithm)].baseline == _baseline_key(baseline)]
        for aggregate in om_infer(pairs):
            out.append({"device": device, **aggregate.to_dict()})
    return out


def column(key: str) -> Column:
    """The column called ``key``."""
    return _BY_KEY[key]


#: BiBench's Table 3 (the paper's OM_infer over its devices), for reference beside ours.
PAPER_TABLE3 = {"bnn": {"speedup": 5.45, "compression": 15.62, "om_infer": 11.70},
                "reactnet": {"speedup": 4.89, "compression": 15.52, "om_infer": 11.51}}


def report(cells: list[Cell], records, infos: dict[str, dict], sweep_id: str) -> dict:
    """Everything the command prints: the grid, OM_infer per device, the paper's source."""
    devices = sorted({c.device for c in cells})
    return {"sweep_id": sweep_id, "rows": grid(cells, records, infos), "om_infer": scores(records),
            "paper": {"source": source(), "table3": PAPER_TABLE3},
            "devices": {d: {"paper_hardware": paper_hardware(infos.get(d, {})),
                            "emulated": emulated(infos.get(d, {})),
                            "unreachable": infos.get(d, {}).get("unreachable")} for d in devices}}
