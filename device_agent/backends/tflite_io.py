"""The inputs and outputs a ``.tflite`` file declares, read from its flatbuffer directly.

Shared by the LiteRT and LCE backends. LCE's interpreter reports neither tensor names nor
dynamic dims (``shape_signature``), and a device running LCE has no TFLite schema module, so
the few tables needed are read here with :mod:`struct` (the FlatBuffers layout: a table
starts with the offset back to its vtable, whose entries are the fields' offsets).

Names follow LiteRT's ``CompiledModel``: the first signature's names and order when the file
has signature defs (tensor names there are ``serving_default_x:0``), else the subgraph's
input and output tensors by tensor name.
"""

from __future__ import annotations

import struct

from ..signature import entry, quantization

# schema.fbs TensorType -> NumPy dtype name
TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string",
                6: "bool", 7: "int16", 8: "complex64", 9: "int8", 10: "float64",
                11: "complex128", 12: "uint64", 15: "uint32", 16: "uint16"}
_INTEGER = {"int8", "uint8", "int16", "int32", "int64"}

# Field numbers of the schema.fbs tables read here.
_MODEL_OPERATOR_CODES, _MODEL_SUBGRAPHS, _MODEL_SIGNATURE_DEFS = 1, 2, 7
_CODE_DEPRECATED, _CODE_CUSTOM, _CODE_BUILTIN = 0, 1, 3
_CUSTOM = 32  # BuiltinOperator.CUSTOM
_GRAPH_TENSORS, _GRAPH_INPUTS, _GRAPH_OUTPUTS, _GRAPH_OPERATORS = 0, 1, 2, 3
_OP_OPCODE_INDEX = 0
_TENSOR_SHAPE, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_QUANT, _TENSOR_SHAPE_SIG = 0, 1, 3, 4, 7
_QUANT_SCALE, _QUANT_ZERO = 2, 3
_SIG_INPUTS, _SIG_OUTPUTS, _SIG_SUBGRAPH = 0, 1, 4
_MAP_NAME, _MAP_TENSOR = 0, 1


class FlatBuffer:
    """Bounds-checked FlatBuffers reads over a file's bytes (also ``pte_io``'s): an offset
    past the end raises ValueError, so a damaged count or offset cannot read out of bounds."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def _unpack(self, fmt: str, pos: int):
        if pos < 0 or pos + struct.calcsize(fmt) > len(self.data):
            raise ValueError("offset past the end of the file")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def field(self, table: int, number: int) -> int | None:
        """Absolute position of field ``number`` of the table at ``table``; None if absent."""
        vtable = table - self._unpack("<i", table)
        slot = 4 + 2 * number
        if slot >= self._unpack("<H", vtable):
            return None
        offset = self._unpack("<H", vtable + slot)
        return table + offset if offset else None

    def deref(self, pos: int) -> int:
        return pos + self._unpack("<I", pos)

    def scalar(self, table: int, number: int, fmt: str, default=0):
        pos = self.field(table, number)
        return default if pos is None else self._unpack(fmt, pos)

    def vector(self, table: int, number: int, fmt: str) -> list:
        """A vector of scalars (``fmt`` one struct code); [] when the field is absent."""
        pos = self.field(table, number)
        if pos is None:
            return []
        start = self.deref(pos)
        size = struct.calcsize(fmt)
        return [self._unpack(fmt, start + 4 + i * size) for i in range(self._unpack("<I", start))]

    def tables(self, table: int, number: int) -> list[int]:
        """The positions of a vector of tables; [] when the field is absent."""
        pos = self.field(table, number)
        if pos is None:
            return []
        start = self.deref(pos)
        return [self.deref(start + 4 + 4 * i) for i in range(self._unpack("<I", start))]

    def string(self, table: int, number: int) -> str:
        pos = self.field(table, number)
        if pos is None:
            return ""
        start = self.deref(pos)
        size = self._unpack("<I", start)
        if start + 4 + size > len(self.data):
            raise ValueError("string past the end of the file")
        return self.data[start + 4 : start + 4 + size].decode("utf-8", "replace")


def _tensor_entry(buf: FlatBuffer, tensor: int, name: str) -> dict:
    shape = buf.vector(tensor, _TENSOR_SHAPE_SIG, "<i") or buf.vector(tensor, _TENSOR_SHAPE, "<i")
    dtype = TENSOR_TYPES.get(buf.scalar(tensor, _TENSOR_TYPE, "<b"), "string")
    quant = None
    params = buf.field(tensor, _TENSOR_QUANT)
    if dtype in _INTEGER and params is not None:
        params = buf.deref(params)
        scales = buf.vector(params, _QUANT_SCALE, "<f")
        zeros = buf.vector(params, _QUANT_ZERO, "<q")
        if scales:  # per-channel I/O tensors do not occur in practice: the first channel's
            quant = quantization(scales[0], zeros[0] if zeros else 0)
    return entry(name, shape, dtype, quant)


def read_io(data: bytes) -> tuple[list[dict], list[dict], list[int], list[int]]:
    """``(inputs, outputs, input_positions, output_positions)`` of a TFLite flatbuffer.

    ``inputs``/``outputs`` are signature entries (see :mod:`..signature`) in the public
    order (see the module docstring); ``*_positions`` give each one's place among the
    subgraph's inputs or outputs, the order an interpreter's own lists follow.

    Raises:
        ValueError: not a TFLite flatbuffer, or one whose tables run past its end.
    """
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError("not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        return _read(FlatBuffer(data))
    except (IndexError, struct.error) as exc:  # an offset of a damaged file
        raise ValueError(f"truncated or corrupt flatbuffer ({exc})") from None


def _read(buf: FlatBuffer) -> tuple[list[dict], list[dict], list[int], list[int]]:
    model = buf.deref(0)
    graphs = buf.tables(model, _MODEL_SUBGRAPHS)
    signatures = buf.tables(model, _MODEL_SIGNATURE_DEFS)
    index = buf.scalar(signatures[0], _SIG_SUBGRAPH, "<I") if signatures else 0
    if index >= len(graphs):
        raise ValueError("the model has no subgraph to run")
    graph = graphs[index]
    tensors = buf.tables(graph, _GRAPH_TENSORS)
    listed = {"inputs": buf.vector(graph, _GRAPH_INPUTS, "<i"),
              "outputs": buf.vector(graph, _GRAPH_OUTPUTS, "<i")}
    found = {}
    for kind, sig_field in (("inputs", _SIG_INPUTS), ("outputs", _SIG_OUTPUTS)):
        if signatures:
            pairs = [(buf.string(m, _MAP_NAME), buf.scalar(m, _MAP_TENSOR, "<I"))
                     for m in buf.tables(signatures[0], sig_field)]
        else:
            pairs = [(buf.string(tensors[t], _TENSOR_NAME), t) for t in listed[kind]]
        if any(t >= len(tensors) or t not in listed[kind] for _, t in pairs):
            raise ValueError(f"a signature's {kind} are not the subgraph's")
        found[kind] = ([_tensor_entry(buf, tensors[t], name) for name, t in pairs],
                       [listed[kind].index(t) for _, t in pairs])
    return found["inputs"][0], found["outputs"][0], found["inputs"][1], found["outputs"][1]


def custom_ops(data: bytes) -> list[str]:
    """The names of the custom operators a TFLite flatbuffer uses (its ``operator_codes``
    with a ``custom_code``), in file order, each once.

    Raises:
        ValueError: not a TFLite flatbuffer, or one whose tables run past its end.
    """
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError("not a TFLite flatbuffer (no TFL3 identifier)")
    buf = FlatBuffer(data)
    try:
        names = []
        for code in buf.tables(buf.deref(0), _MODEL_OPERATOR_CODES):
            custom = _CUSTOM in (buf.scalar(code, _CODE_BUILTIN, "<i"),
                                 buf.scalar(code, _CODE_DEPRECATED, "<b"))
            name = buf.string(code, _CODE_CUSTOM)
            if custom and name and name not in names:
                names.append(name)
        return names
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated or corrupt flatbuffer ({exc})") from None


def operator_codes(data: bytes, subgraph: int = 0) -> list[str | int]:
    """Each operator of subgraph ``subgraph`` in the file's order (the order an interpreter
    numbers its nodes): a custom operator's name (``LceBconv2d``), else its builtin code.

    Raises:
        ValueError: not a TFLite flatbuffer, no such subgraph, or tables past the end.
    """
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError("not a TFLite flatbuffer (no TFL3 identifier)")
    buf = FlatBuffer(data)
    try:
        model = buf.deref(0)
        codes = []
        for code in buf.tables(model, _MODEL_OPERATOR_CODES):
            builtin = max(buf.scalar(code, _CODE_BUILTIN, "<i"),
                          buf.scalar(code, _CODE_DEPRECATED, "<b"))
            codes.append((buf.string(code, _CODE_CUSTOM) or "?") if builtin == _CUSTOM else builtin)
        graphs = buf.tables(model, _MODEL_SUBGRAPHS)
        if subgraph >= len(graphs):
            raise ValueError(f"the model has no subgraph {subgraph}")
        found = []
        for op in buf.tables(graphs[subgraph], _GRAPH_OPERATORS):
            index = buf.scalar(op, _OP_OPCODE_INDEX, "<I")
            if index >= len(codes):
                raise ValueError(f"an operator names operator code {index} of {len(codes)}")
            found.append(codes[index])
        return found
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated or corrupt flatbuffer ({exc})") from None
