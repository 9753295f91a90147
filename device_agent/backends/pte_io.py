"""The inputs and outputs an ExecuTorch ``.pte`` declares, read from its flatbuffer directly.

What the runtime's ``MethodMeta`` reports for a method, without the runtime: on aiot's host
ExecuTorch lives in a toolchain interpreter whose start (torch, the bindings) costs seconds,
for a few tables of the file (ExecuTorch's ``schema/program.fbs``: a ``Program`` holds
``ExecutionPlan`` s, each with its ``values`` — ``EValue`` unions — and the indices of its
inputs and outputs among them). Reads are bounds-checked (:class:`.tflite_io.FlatBuffer`):
a damaged file is a ValueError, never a read past its end.
"""

from __future__ import annotations

import struct

from ..signature import entry, positional
from .tflite_io import FlatBuffer

#: ``ScalarType`` codes (c10's, in ``scalar_type.fbs``) -> NumPy dtype names.
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 11: "bool"}

# Field numbers of the program.fbs tables read here (a union takes two: its type, its value).
_PROGRAM_PLANS = 1
_PLAN_NAME, _PLAN_VALUES, _PLAN_INPUTS, _PLAN_OUTPUTS = 0, 2, 3, 4
_PLAN_CHAINS, _PLAN_OPERATORS, _PLAN_DELEGATES = 5, 6, 7
_CHAIN_INSTRUCTIONS = 2
_INSTRUCTION_TYPE, _INSTRUCTION_ARGS = 0, 1
_KERNEL_CALL, _DELEGATE_CALL = 1, 2  # InstructionArguments: NONE, KernelCall, DelegateCall, ...
_CALL_INDEX = 0  # KernelCall.op_index, DelegateCall.delegate_index
_OPERATOR_NAME, _OPERATOR_OVERLOAD = 0, 1
_DELEGATE_ID = 0
_EVALUE_TYPE, _EVALUE_VAL = 0, 1
_KERNEL_TYPE_TENSOR = 5  # KernelTypes: NONE, Null, Int, Bool, Double, Tensor, ...
_TENSOR_SCALAR_TYPE, _TENSOR_SIZES = 0, 2
#: The extended header's end: magic ``eh00`` at 8, its length at 12, ``program_size`` (a
#: little-endian uint64) at 16.
_HEADER_END = 24


def dtype_name(code: int, kind: str, index: int) -> str:
    """The NumPy dtype of ``ScalarType`` ``code``.

    Raises:
        ValueError: a type NumPy cannot hold (a quantized or 8-bit float type).
    """
    if code not in SCALAR_TYPES:
        raise ValueError(f"{kind} {index} holds ExecuTorch scalar type {code}, which NumPy "
                         "cannot hold")
    return SCALAR_TYPES[code]


def program_bytes(fh) -> bytes:
    """The flatbuffer part of an open ``.pte`` (binary ``fh``): the ``program_size`` bytes its
    extended header (``eh00`` at byte 8) declares, as the runtime loads them, not the
    segments of weights and delegate blobs after them (gigabytes for a large model); the
    whole file when it has no such header."""
    head = fh.read(_HEADER_END)
    size = fh.seek(0, 2)  # the file's end: no declared size reads past it
    if len(head) == _HEADER_END and head[8:12] == b"eh00":
        size = min(struct.unpack_from("<Q", head, 16)[0], size)
    fh.seek(len(head))
    return head + fh.read(max(size - len(head), 0))


def read_io(data: bytes, method: str = "forward") -> tuple[list[dict], list[dict]]:
    """``(inputs, outputs)`` of ``method`` in a ``.pte``'s bytes, as signature entries named
    as the backend names them (``input_0``, ...; ExecuTorch keeps no names).

    Raises:
        ValueError: not an ExecuTorch program, no such method, a non-tensor input or output,
            or tables that run past the file's end.
    """
    if len(data) < 8 or data[4:8] != b"ET12":
        raise ValueError("not an ExecuTorch program (no ET12 identifier)")
    try:
        return _read(FlatBuffer(data), method)
    except (IndexError, struct.error) as exc:  # an offset of a damaged file
        raise ValueError(f"truncated or corrupt flatbuffer ({exc})") from None


def _plan(buf: FlatBuffer, method: str) -> int:
    """The ``ExecutionPlan`` table of ``method``."""
    plans = [plan for plan in buf.tables(buf.deref(0), _PROGRAM_PLANS)
             if buf.string(plan, _PLAN_NAME) == method]
    if not plans:
        raise ValueError(f"the program has no '{method}' method")
    return plans[0]


def read_calls(data: bytes, method: str = "forward") -> tuple[dict[str, int], dict[str, int]]:
    """``(delegate calls, kernel calls)`` of ``method``'s instructions: how many times each
    backend (``XnnpackBackend``) is called, one call per delegated partition, and how many
    times each operator outside them runs on the program's kernels (``aten::add.out``).

    Raises:
        ValueError: as :func:`read_io`, or an instruction naming no operator or delegate.
    """
    if len(data) < 8 or data[4:8] != b"ET12":
        raise ValueError("not an ExecuTorch program (no ET12 identifier)")
    try:
        buf = FlatBuffer(data)
        plan = _plan(buf, method)
        operators = [_operator_name(buf, op) for op in buf.tables(plan, _PLAN_OPERATORS)]
        backends = [buf.string(d, _DELEGATE_ID) for d in buf.tables(plan, _PLAN_DELEGATES)]
        delegated: dict[str, int] = {}
        kernels: dict[str, int] = {}
        for chain in buf.tables(plan, _PLAN_CHAINS):
            for instruction in buf.tables(chain, _CHAIN_INSTRUCTIONS):
                kind = buf.scalar(instruction, _INSTRUCTION_TYPE, "<B")
                where = buf.field(instruction, _INSTRUCTION_ARGS)
                if kind not in (_KERNEL_CALL, _DELEGATE_CALL) or where is None:
                    continue  # moves, jumps and frees run no operator
                index = buf.scalar(buf.deref(where), _CALL_INDEX, "<i")
                names, counts = ((operators, kernels) if kind == _KERNEL_CALL
                                 else (backends, delegated))
                if not 0 <= index < len(names):
                    raise ValueError(f"an instruction names entry {index} of {len(names)}")
                counts[names[index]] = counts.get(names[index], 0) + 1
        return delegated, kernels
    except (IndexError, struct.error) as exc:  # an offset of a damaged file
        raise ValueError(f"truncated or corrupt flatbuffer ({exc})") from None


def _operator_name(buf: FlatBuffer, op: int) -> str:
    name, overload = buf.string(op, _OPERATOR_NAME), buf.string(op, _OPERATOR_OVERLOAD)
    return f"{name}.{overload}" if overload else name


def _read(buf: FlatBuffer, method: str) -> tuple[list[dict], list[dict]]:
    plan = _plan(buf, method)
    values = buf.tables(plan, _PLAN_VALUES)
    found = []
    for kind, field in (("input", _PLAN_INPUTS), ("output", _PLAN_OUTPUTS)):
        entries = []
        for i, index in enumerate(buf.vector(plan, field, "<i")):
            if not 0 <= index < len(values):
                raise ValueError(f"{kind} {i} names value {index} of {len(values)}")
            entries.append(_tensor_entry(buf, values[index], kind, i))
        found.append(entries)
    return found[0], found[1]


def _tensor_entry(buf: FlatBuffer, value: int, kind: str, index: int) -> dict:
    where = buf.field(value, _EVALUE_VAL)
    if buf.scalar(value, _EVALUE_TYPE, "<B") != _KERNEL_TYPE_TENSOR or where is None:
        raise ValueError(f"{kind} {index} is not a tensor")
    tensor = buf.deref(where)
    code = buf.scalar(tensor, _TENSOR_SCALAR_TYPE, "<b")
    return entry(positional(kind, index), buf.vector(tensor, _TENSOR_SIZES, "<i"),
                 dtype_name(code, kind, index))
