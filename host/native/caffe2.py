"""Caffe2's legacy ``speed_benchmark`` (``binaries/speed_benchmark.cc``, pre-2.4 PyTorch trees).

The net's ``TEST_Benchmark`` prints ``Starting benchmark.``, ``Running warmup runs.``,
``Main runs.`` and ``Main run finished. Milliseconds per iter: X. Iters per second: Y`` —
through glog (``I1107 14:02:11.512384  9342 net_simple.cc:172] ...``) in the 2017–2018
``facebookarchive/caffe2`` tree and through ``std::cout`` in later PyTorch trees. Nets that are
not ``simple`` (``dag``, ``async_scheduling``) benchmark in ``NetBase::TEST_Benchmark``, which
spells it ``Main runs finished.`` (recorded: ``[I net.cc:217] Main runs finished. ...``). With
``--run_individual=true`` a simple net adds ``Operator #i (name, Type) X ms/iter`` lines and,
in PyTorch trees, a ``Time per operator type:`` table (``29.7378 ms.    60.5145%. Conv``).
Only the mean per iteration is printed: no per-iteration times, no load time, no version.

A Caffe2 model is two files: the predict net is the artifact, the init net (weights) comes as
``companions["init_net"]`` or, if not given, the sibling ``<stem>.init_net.pb``.
"""

from __future__ import annotations

import re

from aiot.host.native.base import NativeAdapter, check_dtype, require_inputs
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.record import NUMBER, make_record, search

_DTYPES = {"float32": "float", "uint8": "uint8_t"}
_MAIN = (rf"Main runs? finished\. Milliseconds per iter: ({NUMBER})\."
         rf" Iters per second: ({NUMBER})")
_OPERATOR = re.compile(rf"Operator #(\d+) \((.*), (\w+)\) ({NUMBER}) ms/iter")
_TYPE_TABLE = "Time per operator type:"
_TYPE_ROW = re.compile(rf"\s*({NUMBER}) ms\.\s+({NUMBER})%\. (\w+)\s*$")
PREDICT_SUFFIX, INIT_SUFFIX = ".predict_net.pb", ".init_net.pb"


def init_net_for(predict_net: str) -> str:
    """``m.caffe2.predict_net.pb`` → ``m.caffe2.init_net.pb`` (same folder)."""
    if predict_net.endswith(PREDICT_SUFFIX):
        return predict_net.removesuffix(PREDICT_SUFFIX) + INIT_SUFFIX
    return predict_net.removesuffix(".pb") + INIT_SUFFIX


class SpeedBenchmarkAdapter(NativeAdapter):
    """``speed_benchmark --init_net --net --input --input_dims --input_type --warmup --iter``."""

    tool = "speed_benchmark"
    formats = frozenset({"caffe2"})
    supports_threads = False

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        require_inputs(self.tool, inputs, extra, ("--input",))
        argv = [binary, f"--init_net={companions.get('init_net') or init_net_for(artifact)}",
                f"--net={artifact}"]
        if inputs:
            argv += [f"--input={','.join(spec.name for spec in inputs)}",
                     f"--input_dims={';'.join(spec.dims() for spec in inputs)}",
                     f"--input_type={';'.join(check_dtype(self.tool, s, _DTYPES) for s in inputs)}"]
        return argv + [f"--warmup={warmup}", f"--iter={runs}"] + extra

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        main = search(_MAIN, text)
        if not main:
            raise NativeOutputError(self.tool, "no 'Main run finished. Milliseconds per iter' "
                                    "line", text)
        operators = [{"index": int(m.group(1)), "name": m.group(2), "type": m.group(3),
                      "ms_per_iter": float(m.group(4))} for m in _OPERATOR.finditer(text)]
        return make_record(self.backend, stats_ms={"mean": float(main.group(1))}, native={
            "raw_summary": main.group(0),
            "iters_per_second": float(main.group(2)),
            "operators": operators or None,
            "operator_types": _operator_types(text),
        })


def _operator_types(text: str) -> list[dict] | None:
    """The ``Time per operator type:`` table as ``[{type, ms_per_iter, percent}]``, or None.

    Rows are read up to the table's ``... ms in Total`` line; the FLOP and memory tables that
    follow it are estimates of the op schemas, not measurements, and are not read."""
    start = text.rfind(_TYPE_TABLE)
    if start < 0:
        return None
    rows = []
    for line in text[start:].splitlines()[1:]:
        row = _TYPE_ROW.match(line)
        if row is None:  # "49.1416 ms in Total", or the end of the table
            break
        rows.append({"type": row.group(3), "ms_per_iter": float(row.group(1)),
                     "percent": float(row.group(2))})
    return rows or None
