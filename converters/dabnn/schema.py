"""daBNN's model file, written and read by hand with the ``flatbuffers`` runtime package.

The format is the FlatBuffers schema ``common/dab.fbs`` of JDAI-CV/dabnn (namespace
``flatbnn``, root table ``Model``, no file identifier). No flatc-generated code is used:
each table is described below by its fields in declaration order, because a field's slot id
*is* its position in the schema (its vtable entry sits at byte ``4 + 2 * id``). Changing an
order here would write files daBNN misreads.

================  ==============================================================================
table             slots (id name:type)
================  ==============================================================================
Model             0 layers:[Layer]  1 initializers:[Tensor]  2 inputs:[Input]  3 version:uint32
Tensor            0 data_type:DataType(byte)  1 bin_data:[uint64]  2 float32_data:[float32]
                  3 shape:[uint32]  4 name:string  5 align_hwc_to_128:bool
Input             0 shape:[uint32]  1 name:string
Layer             0 type:LayerType(byte)  1 fp_conv2d_param  2 bin_conv2d_param  3 avepool_param
                  4 maxpool_param  5 relu_param  6 softmax_param  7 fc_param  8 add_param
                  9 concat_param  10 affine_param  11 binarize_param  12 split_param
                  13 shuffle_param  14 name:string  15 prelu_param
FpConv2D,         0 input  1 weight  2 bias  3 pads:[int] (top, right, bottom, left)
BinConv2D         4 strides:[int] (h, w)  5 dilations:[int] (h, w)  6 output
AvePool, MaxPool  0 input  1 kernel_shape:[int] (h, w)  2 pads:[int]  3 strides:[int]  4 output
Relu, Softmax,    0 input  1 output
Binarize, Shuffle
FC                0 input  1 weight  2 bias  3 output
Add               0 input1  1 input2  2 output
Concat            0 inputs:[string]  1 axis:int  2 output
Affine            0 input  1 a  2 b  3 output
Split             0 input  1 outputs:[string]
PRelu             0 input  1 slope  2 output
================  ==============================================================================

Enums: ``DataType`` Float32=0, Bit=1; ``LayerType`` in :data:`LAYER_TYPES` order (FpConv2D=0 …
PRelu=13). Scalars equal to their default are left out, as flatc's C++ builders do.

Bit tensors (:func:`pack_bits`) follow onnx2bnn's ``bitpack``: per output channel, the
weights in (kh, kw, c) order, bit ``i`` of word ``j`` is element ``64 j + i`` and is 1 for a
value > 0 (+1) and 0 otherwise (-1); with ``align_hwc_to_128`` (set when C != 64) each
channel's bits are zero-padded to a multiple of 128, because daBNN's 128-bit GEMM kernels
read two words at a time.

The reader checks every offset against the buffer before following it, so a truncated or
corrupt file raises :class:`ArtifactError` instead of an ``IndexError`` or garbage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from aiot.core.errors import ArtifactError

LAYER_TYPES = ("FpConv2D", "AvePool", "MaxPool", "Relu", "Softmax", "FC", "Add", "Concat",
               "BinConv2D", "Affine", "Binarize", "Split", "Shuffle", "PRelu")
DATA_TYPES = ("Float32", "Bit")
_REGENERATE = "re-convert it: aiot convert MODEL --format dabnn --fresh"

_IO = (("input", "str"), ("output", "str"))
_CONV = (("input", "str"), ("weight", "str"), ("bias", "str"), ("pads", "ints"),
         ("strides", "ints"), ("dilations", "ints"), ("output", "str"))
_POOL = (("input", "str"), ("kernel_shape", "ints"), ("pads", "ints"), ("strides", "ints"),
         ("output", "str"))

#: layer type -> (slot of its parameter table in Layer, that table's fields in slot order)
PARAMS: dict[str, tuple[int, tuple[tuple[str, str], ...]]] = {
    "FpConv2D": (1, _CONV),
    "BinConv2D": (2, _CONV),
    "AvePool": (3, _POOL),
    "MaxPool": (4, _POOL),
    "Relu": (5, _IO),
    "Softmax": (6, _IO),
    "FC": (7, (("input", "str"), ("weight", "str"), ("bias", "str"), ("output", "str"))),
    "Add": (8, (("input1", "str"), ("input2", "str"), ("output", "str"))),
    "Concat": (9, (("inputs", "strs"), ("axis", "int"), ("output", "str"))),
    "Affine": (10, (("input", "str"), ("a", "str"), ("b", "str"), ("output", "str"))),
    "Binarize": (11, _IO),
    "Split": (12, (("input", "str"), ("outputs", "strs"))),
    "Shuffle": (13, _IO),
    "PRelu": (15, (("input", "str"), ("slope", "str"), ("output", "str"))),
}
LAYER_NAME_SLOT, LAYER_SLOTS = 14, 16
MODEL_SLOTS, TENSOR_SLOTS, INPUT_SLOTS = 4, 6, 2


@dataclass
class Tensor:
    """An initializer: float weights, or bit-packed binary weights (``bin_data``)."""

    name: str
    shape: tuple[int, ...]
    data_type: str = "Float32"
    float32_data: object | None = None  # float32 ndarray
    bin_data: object | None = None  # uint64 ndarray
    align_hwc_to_128: bool = False


@dataclass
class Input:
    """The network input: its name and NHWC shape (batch 1)."""

    name: str
    shape: tuple[int, ...]


@dataclass
class Layer:
    """One layer: its type and the fields of its parameter table that are set."""

    type: str
    params: dict = field(default_factory=dict)  # field name -> str | int | list[int] | list[str]
    name: str | None = None


@dataclass
class Model:
    """A whole ``.dab`` file."""

    layers: list[Layer]
    initializers: list[Tensor]
    inputs: list[Input]
    version: int


# --- bit packing ---------------------------------------------------------------------------


def words_per_row(bits: int, align_hwc_to_128: bool) -> int:
    """uint64 words one output channel of ``bits`` weights takes (128-aligned or exact)."""
    return 2 * math.ceil(bits / 128) if align_hwc_to_128 else math.ceil(bits / 64)


def pack_bits(values, align_hwc_to_128: bool):
    """Pack ``(O, ...)`` values per output channel: 1 for > 0, 0 otherwise, LSB first.

    Returns:
        A flat little-endian uint64 array of ``O * words_per_row(...)`` words.
    """
    import numpy as np

    rows = np.asarray(values).reshape(len(values), -1) > 0
    width = 64 * words_per_row(rows.shape[1], align_hwc_to_128)
    padded = np.zeros((rows.shape[0], width), dtype=bool)
    padded[:, : rows.shape[1]] = rows
    return np.packbits(padded, axis=1, bitorder="little").view("<u8").reshape(-1)


def unpack_bits(words, shape, align_hwc_to_128: bool):
    """The ``(O, 64 * words_per_row)`` 0/1 matrix of a bit tensor of (OHWC) ``shape``.

    Padding bits are kept: daBNN's popcount runs over them too.

    Raises:
        ArtifactError: the word count does not fit the shape and alignment.
    """
    import numpy as np

    rows, bits = int(shape[0]), math.prod(int(d) for d in shape[1:])
    per_row = words_per_row(bits, align_hwc_to_128)
    words = np.asarray(words, dtype="<u8")
    if words.size != rows * per_row:
        raise ArtifactError(f"bit tensor of shape {tuple(shape)} has {words.size} words, "
                            f"expected {rows * per_row} (align_hwc_to_128={align_hwc_to_128})",
                            _REGENERATE)
    as_bytes = np.ascontiguousarray(words).view(np.uint8).reshape(rows, per_row * 8)
    return np.unpackbits(as_bytes, axis=1, bitorder="little")


# --- writing -------------------------------------------------------------------------------


def build_model(model: Model) -> bytes:
    """The ``.dab`` bytes of ``model``."""
    import flatbuffers

    builder = flatbuffers.Builder(1 << 16)
    tensors = [_build_tensor(builder, tensor) for tensor in model.initializers]
    inputs = [_build_input(builder, item) for item in model.inputs]
    layers = [_build_layer(builder, layer) for layer in model.layers]
    vectors = [_offset_vector(builder, items) for items in (layers, tensors, inputs)]
    builder.StartObject(MODEL_SLOTS)
    for slot, offset in enumerate(vectors):
        builder.PrependUOffsetTRelativeSlot(slot, offset, 0)
    builder.PrependUint32Slot(3, model.version, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def _offset_vector(builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _numbers(builder, values, dtype: str) -> int:
    import numpy as np

    flat = np.ascontiguousarray(np.asarray(values).reshape(-1), dtype=dtype)
    return builder.CreateNumpyVector(flat)


def _build_tensor(builder, tensor: Tensor) -> int:
    bits = _numbers(builder, tensor.bin_data, "<u8") if tensor.bin_data is not None else None
    floats = (_numbers(builder, tensor.float32_data, "<f4")
              if tensor.float32_data is not None else None)
    shape = _numbers(builder, tensor.shape, "<u4")
    name = builder.CreateString(tensor.name)
    builder.StartObject(TENSOR_SLOTS)
    builder.PrependInt8Slot(0, DATA_TYPES.index(tensor.data_type), 0)
    if bits is not None:
        builder.PrependUOffsetTRelativeSlot(1, bits, 0)
    if floats is not None:
        builder.PrependUOffsetTRelativeSlot(2, floats, 0)
    builder.PrependUOffsetTRelativeSlot(3, shape, 0)
    builder.PrependUOffsetTRelativeSlot(4, name, 0)
    builder.PrependBoolSlot(5, bool(tensor.align_hwc_to_128), False)
    return builder.EndObject()


def _build_input(builder, item: Input) -> int:
    shape = _numbers(builder, item.shape, "<u4")
    name = builder.CreateString(item.name)
    builder.StartObject(INPUT_SLOTS)
    builder.PrependUOffsetTRelativeSlot(0, shape, 0)
    builder.PrependUOffsetTRelativeSlot(1, name, 0)
    return builder.EndObject()


def _build_params(builder, layer: Layer) -> int:
    """The parameter table of ``layer``; children are written before the table, as required."""
    _slot, fields = PARAMS[layer.type]
    unknown = set(layer.params) - {name for name, _ in fields}
    if unknown:
        raise ValueError(f"{layer.type} has no field {', '.join(sorted(unknown))}")
    children = {}
    for name, kind in fields:
        value = layer.params.get(name)
        if value is None or kind == "int":
            continue
        if kind == "str":
            children[name] = builder.CreateString(value)
        elif kind == "ints":
            children[name] = _numbers(builder, list(value), "<i4")
        else:  # strs
            children[name] = _offset_vector(builder, [builder.CreateString(s) for s in value])
    builder.StartObject(len(fields))
    for slot, (name, kind) in enumerate(fields):
        if kind == "int" and layer.params.get(name) is not None:
            builder.PrependInt32Slot(slot, int(layer.params[name]), 0)
        elif name in children:
            builder.PrependUOffsetTRelativeSlot(slot, children[name], 0)
    return builder.EndObject()


def _build_layer(builder, layer: Layer) -> int:
    params = _build_params(builder, layer)
    name = builder.CreateString(layer.name) if layer.name is not None else None
    builder.StartObject(LAYER_SLOTS)
    builder.PrependInt8Slot(0, LAYER_TYPES.index(layer.type), 0)
    builder.PrependUOffsetTRelativeSlot(PARAMS[layer.type][0], params, 0)
    if name is not None:
        builder.PrependUOffsetTRelativeSlot(LAYER_NAME_SLOT, name, 0)
    return builder.EndObject()


# --- reading -------------------------------------------------------------------------------


class _Table:
    """A ``flatbuffers.table.Table`` whose reads are bounds-checked first (a small verifier)."""

    def __init__(self, buf: bytes, pos: int, what: str, label: str) -> None:
        from flatbuffers import number_types as N
        from flatbuffers.table import Table

        self.buf, self.what, self.label, self.N = buf, what, label, N
        self._need(pos, 4, "its table")
        self.table = Table(buf, pos)
        vtable = pos - self.table.Get(N.SOffsetTFlags, pos)
        self._need(vtable, 4, "its vtable")
        vtable_len = self.table.Get(N.VOffsetTFlags, vtable)
        self.size = self.table.Get(N.VOffsetTFlags, vtable + 2)
        if vtable_len < 4 or vtable_len % 2:
            raise self.fail(f"has a malformed vtable (length {vtable_len})")
        self._need(vtable, vtable_len, "its vtable")
        self._need(pos, self.size, "its fields")

    def fail(self, message: str) -> ArtifactError:
        """The error for a defect of this table."""
        return ArtifactError(f"dabnn model {self.label}: {self.what} {message}", _REGENERATE)

    def _need(self, pos: int, size: int, part: str) -> None:
        if pos < 0 or pos + size > len(self.buf):
            raise self.fail(f"points outside the file at {part} (offset {pos}, file "
                            f"{len(self.buf)} bytes): truncated or corrupt")

    def _field(self, slot: int, size: int) -> int | None:
        """Absolute position of field ``slot``, or None when it is not set."""
        off = self.table.Offset(4 + 2 * slot)
        if off == 0:
            return None
        if off + size > self.size:
            raise self.fail(f"field {slot} lies outside the table")
        return self.table.Pos + off

    def _indirect(self, slot: int, part: str) -> int | None:
        pos = self._field(slot, 4)
        if pos is None:
            return None
        target = self.table.Indirect(pos)
        self._need(target, 4, part)
        return target

    def scalar(self, slot: int, flags, default):
        """A scalar field, or its default when unset."""
        pos = self._field(slot, flags.bytewidth)
        return default if pos is None else self.table.Get(flags, pos)

    def string(self, slot: int, part: str) -> str | None:
        """A string field, or None when unset."""
        start = self._indirect(slot, part)
        if start is None:
            return None
        length = self.table.Get(self.N.UOffsetTFlags, start)
        self._need(start + 4, length, part)
        try:
            return self.buf[start + 4: start + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"has a {part} that is not UTF-8") from None

    def vector(self, slot: int, dtype: str, part: str):
        """A numeric vector field as a read-only NumPy view, or None when unset."""
        import numpy as np

        start = self._indirect(slot, part)
        if start is None:
            return None
        count = self.table.Get(self.N.UOffsetTFlags, start)
        item = np.dtype(dtype).itemsize
        self._need(start + 4, count * item, part)
        return np.frombuffer(self.buf, dtype=dtype, count=count, offset=start + 4)

    def _offsets(self, slot: int, part: str) -> list[int]:
        start = self._indirect(slot, part)
        if start is None:
            return []
        count = self.table.Get(self.N.UOffsetTFlags, start)
        self._need(start + 4, 4 * count, part)
        return [self.table.Indirect(start + 4 + 4 * i) for i in range(count)]

    def tables(self, slot: int, what: str) -> list[_Table]:
        """A vector-of-tables field (empty when unset)."""
        return [_Table(self.buf, pos, f"{what} {i}", self.label)
                for i, pos in enumerate(self._offsets(slot, what))]

    def table_at(self, slot: int, what: str) -> _Table | None:
        """A table field, or None when unset."""
        pos = self._indirect(slot, what)
        return None if pos is None else _Table(self.buf, pos, what, self.label)

    def strings(self, slot: int, part: str) -> list[str]:
        """A vector-of-strings field (empty when unset)."""
        out = []
        for pos in self._offsets(slot, part):
            self._need(pos, 4, part)
            length = self.table.Get(self.N.UOffsetTFlags, pos)
            self._need(pos + 4, length, part)
            try:
                out.append(self.buf[pos + 4: pos + 4 + length].decode("utf-8"))
            except UnicodeDecodeError:
                raise self.fail(f"has a {part} entry that is not UTF-8") from None
        return out


def parse_model(data: bytes, label: str = "<bytes>") -> Model:
    """The :class:`Model` in ``data``; ``label`` names the file in error messages.

    Raises:
        ArtifactError: the bytes are not a well-formed daBNN model.
    """
    from flatbuffers import number_types as N

    data = bytes(data)
    if len(data) < 8:
        raise ArtifactError(f"dabnn model {label} is {len(data)} bytes, too short to be a "
                            f"model", _REGENERATE)
    root = _Table(data, int.from_bytes(data[:4], "little"), "root table", label)
    return Model(layers=[_parse_layer(t) for t in root.tables(0, "layer")],
                 initializers=[_parse_tensor(t) for t in root.tables(1, "initializer")],
                 inputs=[_parse_input(t) for t in root.tables(2, "input")],
                 version=root.scalar(3, N.Uint32Flags, 0))


def _enum(table: _Table, names: tuple[str, ...], what: str) -> str:
    from flatbuffers import number_types as N

    value = table.scalar(0, N.Int8Flags, 0)
    if not 0 <= value < len(names):
        raise table.fail(f"has unknown {what} {value}")
    return names[value]


def _parse_tensor(table: _Table) -> Tensor:
    from flatbuffers import number_types as N

    name = table.string(4, "name")
    if name is None:
        raise table.fail("has no name")
    shape = table.vector(3, "<u4", "shape")
    return Tensor(name=name, shape=tuple(int(d) for d in (shape if shape is not None else [])),
                  data_type=_enum(table, DATA_TYPES, "data type"),
                  float32_data=table.vector(2, "<f4", "float32_data"),
                  bin_data=table.vector(1, "<u8", "bin_data"),
                  align_hwc_to_128=bool(table.scalar(5, N.BoolFlags, False)))


def _parse_input(table: _Table) -> Input:
    shape = table.vector(0, "<u4", "shape")
    return Input(name=table.string(1, "name") or "",
                 shape=tuple(int(d) for d in (shape if shape is not None else [])))


def _parse_layer(table: _Table) -> Layer:
    from flatbuffers import number_types as N

    kind = _enum(table, LAYER_TYPES, "layer type")
    slot, fields = PARAMS[kind]
    param = table.table_at(slot, f"{table.what} ({kind}) parameters")
    if param is None:  # daBNN asserts param != nullptr
        raise table.fail(f"({kind}) has no {kind} parameters")
    params: dict = {}
    for index, (name, kind_of) in enumerate(fields):
        if kind_of == "str":
            value = param.string(index, name)
        elif kind_of == "ints":
            vec = param.vector(index, "<i4", name)
            value = None if vec is None else [int(v) for v in vec]
        elif kind_of == "strs":
            value = param.strings(index, name) if param.table.Offset(4 + 2 * index) else None
        else:
            value = param.scalar(index, N.Int32Flags, None)
        if value is not None:
            params[name] = value
    return Layer(type=kind, params=params, name=table.string(LAYER_NAME_SLOT, "name"))
