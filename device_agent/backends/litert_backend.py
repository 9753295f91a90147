"""LiteRT (TFLite) backend via ``ai_edge_litert`` on the CPU (XNNPACK).

Uses LiteRT's current ``CompiledModel`` API — the one LiteRT's own
``benchmark_litert_model`` times — and falls back to the classic ``Interpreter`` where a
device only has an older wheel, or where the model has an input or output of a type
``CompiledModel``'s buffers cannot hold (int64, int16, ...). The session records which API ran.

Inputs and outputs are read from the flatbuffer (:mod:`.tflite_io`); ``set_inputs`` and
``outputs_all`` deal in each tensor's own type (a uint8 input takes uint8 values), while the
single-input path (``set_input``, ``output``, ``run``) keeps float in, float out for an
integer-quantized model (:class:`_IoQuantization`). A dynamic dim is resized (LiteRT's
``resize`` then re-allocation) at load for an ``input_shapes`` override, and again when
``set_inputs`` is given another size for it.

Placement (:meth:`_Session.placement`): which nodes XNNPACK, the delegate LiteRT applies on
the CPU, took and which stayed outside, from an ``Interpreter``'s node list after
``allocate_tensors`` (:func:`plan_placement`); a ``CompiledModel`` adds its own
``is_fully_accelerated`` verdict.
"""

from __future__ import annotations

from collections import Counter

from ..signature import check_arrays
from .base import SessionBase, installed_from, placement_entry
from .tflite_io import operator_codes, read_io

#: Package names the runtime ships as (see ``installed_version``).
DISTRIBUTIONS = ("ai-edge-litert",)

NAME = "litert"
EXTENSIONS = (".tflite",)
TOOLCHAIN = None  # the runtime is in aiot's own environment
#: ``profile``'s answer: why there is no per-operator time here (see ``profiling.py``).
NO_PROFILER = ("ai-edge-litert's Python Interpreter and CompiledModel expose no per-operator "
               "profiler; for TFLite's op profiling time the model with --native benchmark_model")

#: Element types ``CompiledModel``'s tensor buffers hold; a model with another one at its
#: inputs or outputs runs on the ``Interpreter``.
_BUFFER_DTYPES = ("float32", "float16", "int32", "int8", "uint8", "bool")


def version() -> str | None:
    """The installed ai-edge-litert version, or None."""
    try:
        from importlib.metadata import version as dist_version

        import ai_edge_litert.interpreter  # noqa: F401 - import proves the runtime loads
    except Exception:
        return None
    try:
        return dist_version("ai-edge-litert")
    except Exception:
        return "unknown"


def installed_version() -> str | None:
    """The runtime's installed version, from package metadata (nothing imported)."""
    return installed_from(DISTRIBUTIONS)


class _IoQuantization:
    """Float in, float out for integer-quantized models (e.g. full INT8 post-training).

    Such a model's input and output tensors are int8 with a scale and zero point; callers
    of the single-input path (accuracy, parity, ``serve``) deal in float32, so the input is
    quantized before ``invoke`` and the output dequantized after — outside the timed region,
    as TFLite's ``benchmark_model`` feeds an already quantized tensor. ``set_inputs`` and
    ``outputs_all`` do neither: they take and give the tensors' own values.
    """
    def __init__(self, inputs: list[dict], outputs: list[dict]) -> None:
        self.input = _params(inputs[0]) if inputs else None
        self.output = _params(outputs[0]) if outputs else None

    def quantize(self, x):
        if self.input is None:
            return x
        import numpy as np

        scale, zero, dtype = self.input
        info = np.iinfo(dtype)
        return np.clip(np.round(x / scale) + zero, info.min, info.max).astype(dtype)

    def dequantize(self, y):
        if self.output is None:
            return y
        import numpy as np

        scale, zero, _dtype = self.output
        return ((y.astype(np.float32) - zero) * scale).astype(np.float32)


def _params(spec: dict):
    """``(scale, zero_point, dtype)`` of an integer-quantized signature entry, else None."""
    quant = spec["quantization"]
    if quant is None or spec["dtype"] not in ("int8", "uint8", "int16"):
        return None
    return quant["scale"], quant["zero_point"], spec["dtype"]


def _io_params(model):
    """``(scale, zero_point, numpy dtype)`` of the first input and output, None if float.

    ``model`` is the parsed flatbuffer (:func:`check_flatbuffer`), or a path to read it from.
    """
    from ai_edge_litert import schema_py_generated as schema

    if isinstance(model, str):
        model = check_flatbuffer(model)
    graph = model.Subgraphs(0)
    integer = {schema.TensorType.INT8: "int8", schema.TensorType.UINT8: "uint8",
               schema.TensorType.INT16: "int16"}

    def params(index: int):
        tensor = graph.Tensors(index)
        quant = tensor.Quantization()
        if tensor.Type() not in integer or quant is None or quant.ScaleLength() == 0:
            return None
        return float(quant.Scale(0)), int(quant.ZeroPoint(0)), integer[tensor.Type()]

    return params(graph.Inputs(0)), params(graph.Outputs(0))


class _Session(SessionBase):
    """What both APIs share: the signature, resizing rules and the single-input path."""
    def _setup(self, io: tuple, input_shapes: dict | None) -> list[list[int]]:
        import numpy as np

        inputs, outputs, self._in_pos, self._out_pos = io
        shapes = self._declare(inputs, outputs, input_shapes)
        self._io = _IoQuantization(inputs, outputs)
        if self._io.input:
            self.input_dtype = np.dtype("float32")
        self._dynamic = [any(d < 0 for d in spec["shape"]) for spec in inputs]
        return shapes

    def _resizes(self, shapes) -> dict[int, list[int]]:
        """``{input: new shape}`` for the dynamic inputs whose size ``shapes`` changes."""
        return {i: list(shape) for i, shape in enumerate(shapes)
                if self._dynamic[i] and all(d >= 0 for d in shape)
                and list(shape) != self._allocated[i]}

    def _note(self, changes: dict[int, list[int]]) -> None:
        """Record resized inputs in ``shapes`` (the others keep theirs, open dims included)."""
        if changes:
            self._set_shapes([changes.get(i, shape) for i, shape in enumerate(self.shapes)])

    def set_input(self, x) -> None:
        self.set_inputs([self._io.quantize(x)])

    def output(self):
        return self._io.dequantize(self.outputs_all()[0])

    def _plan_source(self):
        """The allocated interpreter whose node list tells the placement, and what it is."""
        from ai_edge_litert.interpreter import Interpreter

        # A second interpreter of the same file: XNNPACK partitions it as it does the timed
        # one (LiteRT's default delegate on the CPU); allocate_tensors applies the delegate.
        interp = Interpreter(model_path=self._path, num_threads=1)
        interp.allocate_tensors()
        return interp, "execution plan of LiteRT's Interpreter"

    def placement(self) -> dict:
        """Which nodes of the primary subgraph XNNPACK took (:func:`plan_placement`)."""
        interp, source = self._plan_source()
        wrapper = interp._interpreter  # the node accessors: NumNodes, NodeName, NodeInputs...
        names = [wrapper.NodeName(k) for k in range(wrapper.NumNodes())]
        found = plan_placement(len(operator_codes(_read(self._path))), names,
                               [list(wrapper.NodeInputs(k)) for k in range(len(names))],
                               [list(wrapper.NodeOutputs(k)) for k in range(len(names))])
        return placement_entry("xnnpack", source, **found)


class CompiledModelSession(_Session):
    """A ``CompiledModel`` with input/output buffers for its first signature."""
    api = "compiled_model"

    def __init__(self, path: str, threads: int, io: tuple, input_shapes=None) -> None:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.environment import Environment, EnvironmentOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import CpuOptions, Options

        env = Environment.create(options=EnvironmentOptions())
        options = Options(hardware_accelerators=HardwareAccelerator(HardwareAccelerator.CPU),
                          cpu_options=CpuOptions(num_threads=threads))
        self._model = CompiledModel.from_file(path, environment=env, options=options)
        self._env = env  # keep the environment alive as long as the model
        self._path = path
        self._sig = next(iter(self._model.get_signature_list()), "serving_default")
        shapes = self._setup(io, input_shapes)
        details = self._model.get_input_tensor_details(self._sig)
        out_details = self._model.get_output_tensor_details(self._sig)
        missing = ([spec["name"] for spec in self.inputs if spec["name"] not in details]
                   + [spec["name"] for spec in self.outputs if spec["name"] not in out_details])
        if missing:
            raise ValueError(f"CompiledModel's signature {self._sig!r} lacks {missing}")
        self._allocated = [list(details[spec["name"]]["shape"]) for spec in self.inputs]
        self._resize(self._resizes(shapes))

    def _resize(self, changes: dict[int, list[int]]) -> None:
        """Resize inputs, then (always, at load too) make the buffers for the current sizes."""
        for i, shape in changes.items():
            self._model.resize_input_tensor_by_name(self._sig, self.inputs[i]["name"], shape)
            self._allocated[i] = shape
        outs = self._model.get_output_tensor_details(self._sig)
        self._out_shapes = [tuple(int(d) for d in outs[spec["name"]]["shape"])
                            for spec in self.outputs]
        self._in = {spec["name"]: self._model.create_input_buffer_by_name(self._sig, spec["name"])
                    for spec in self.inputs}
        self._out = {spec["name"]: self._model.create_output_buffer_by_name(self._sig,
                                                                             spec["name"])
                     for spec in self.outputs}
        self._in_bufs = [self._in[spec["name"]] for spec in self.inputs]
        self._out_bufs = [self._out[spec["name"]] for spec in self.outputs]
        self._note(changes)

    def set_inputs(self, arrays) -> None:
        check_arrays(self.inputs, arrays)
        changes = self._resizes([a.shape for a in arrays])
        if changes:
            self._resize(changes)
        for buf, array in zip(self._in_bufs, arrays):
            buf.write(array)

    def invoke(self) -> None:
        self._model.run_by_name(self._sig, self._in, self._out)

    def placement(self) -> dict:
        """The execution plan's account, checked against the timed model's own verdict
        (``is_fully_accelerated``): where either says an operator ran outside, it did."""
        found = super().placement()
        accelerated = bool(self._model.is_fully_accelerated())
        found["source"] += f"; CompiledModel.is_fully_accelerated: {accelerated}"
        if found.get("complete") and not accelerated:  # which operators, the plan cannot say
            for key in ("delegated_nodes", "outside_nodes", "outside"):
                found.pop(key, None)
            found["complete"] = False
            found["note"] = ("the CompiledModel says XNNPACK did not take every operator, "
                             "which the Interpreter's execution plan does not show")
        return found

    def outputs_all(self) -> list:
        import math

        return [buf.read(math.prod(shape), spec["dtype"]).reshape(shape)
                for buf, shape, spec in zip(self._out_bufs, self._out_shapes, self.outputs)]


class InterpreterSession(_Session):
    """The classic ``Interpreter`` with tensors allocated."""
    api = "interpreter"

    def __init__(self, path: str, threads: int, io: tuple, input_shapes=None) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._interp = Interpreter(model_path=path, num_threads=threads)
        self._interp.allocate_tensors()
        self._path = path
        shapes = self._setup(io, input_shapes)
        ins, outs = self._interp.get_input_details(), self._interp.get_output_details()
        self._in_index = [ins[pos]["index"] for pos in self._in_pos]
        self._out_index = [outs[pos]["index"] for pos in self._out_pos]
        self._allocated = [[int(d) for d in ins[pos]["shape"]] for pos in self._in_pos]
        self._resize(self._resizes(shapes))

    def _resize(self, changes: dict[int, list[int]]) -> None:
        if not changes:
            return
        for i, shape in changes.items():
            self._interp.resize_tensor_input(self._in_index[i], shape)
            self._allocated[i] = shape
        self._interp.allocate_tensors()
        self._note(changes)

    def set_inputs(self, arrays) -> None:
        check_arrays(self.inputs, arrays)
        self._resize(self._resizes([a.shape for a in arrays]))
        for index, array in zip(self._in_index, arrays):
            self._interp.set_tensor(index, array)

    def invoke(self) -> None:
        self._interp.invoke()

    def outputs_all(self) -> list:
        return [self._interp.get_tensor(index) for index in self._out_index]

    def _plan_source(self):
        return self._interp, "execution plan of the timed Interpreter"


def plan_placement(original: int, names: list[str], inputs: list[list[int]],
                   outputs: list[list[int]]) -> dict:
    """Which of a graph's nodes its delegates replaced, from an allocated interpreter's nodes.

    The interpreter lists the graph's ``original`` nodes first, then one node per delegate
    partition; a replaced node stays in the list (the execution plan skips it). A partition's
    node has the partition's outside inputs and its outputs, so the nodes it replaced are
    those reached from its outputs back through their producers, stopping at its inputs.

    Args:
        original: how many nodes the file's subgraph has (its operators).
        names: every node's operator name (``CONV_2D``; a partition's ``DELEGATE``).
        inputs, outputs: every node's tensor indices (-1: an optional input left out).

    Returns:
        ``total``, ``delegated``, ``partitions`` and ``outside`` (the nodes left to the
        interpreter's own kernels, by operator name), as :func:`placement_entry` takes them.
    """
    producer = {t: k for k in range(original) for t in outputs[k]}
    taken: set[int] = set()
    for node in range(original, len(names)):
        stop = set(inputs[node])
        pending, seen = list(outputs[node]), set()
        while pending:
            tensor = pending.pop()
            if tensor in stop or tensor in seen or tensor < 0:
                continue
            seen.add(tensor)
            k = producer.get(tensor)
            if k is not None and k not in taken:
                taken.add(k)
                pending.extend(inputs[k])
    outside = Counter(names[k] for k in range(original) if k not in taken)
    return {"total": original, "delegated": len(taken), "partitions": len(names) - original,
            "outside": dict(sorted(outside.items()))}


def _has_compiled_model() -> bool:
    try:
        import ai_edge_litert.compiled_model  # noqa: F401
    except Exception:
        return False
    return True


def check_flatbuffer(path: str):
    """The parsed ``.tflite`` (schema ``Model``); a truncated or corrupt one is refused
    before LiteRT reads it.

    LiteRT trusts the file's offsets: a truncated model can make it read past the end and
    crash the whole process (seen with a model cut to a third). Walking every table and
    vector once in Python (bounds-checked) costs milliseconds and turns that into an error.

    Raises:
        ValueError: not a TFLite flatbuffer, or one whose contents run past its end.
    """
    return _check_data(_read(path), path)


def _read(path: str) -> bytes:
    import builtins  # this module's own ``open`` is the backend entry point

    with builtins.open(path, "rb") as fh:
        return fh.read()


def _check_data(data: bytes, path: str):
    """:func:`check_flatbuffer` of a file already read."""
    from ai_edge_litert import schema_py_generated as schema

    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError(f"{path} is not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        model = schema.Model.GetRootAsModel(data, 0)
        for i in range(model.BuffersLength()):
            buffer = model.Buffers(i)
            offset = buffer.Offset() if hasattr(buffer, "Offset") else 0
            if offset > 1:  # large-model layout: data lives after the flatbuffer
                if offset + buffer.Size() > len(data):
                    raise ValueError("buffer past the end")
            elif buffer.DataLength():
                buffer.DataAsNumpy()  # numpy bounds-checks the vector against the file
        for s in range(model.SubgraphsLength()):
            graph = model.Subgraphs(s)
            for t in range(graph.TensorsLength()):
                graph.Tensors(t).ShapeAsNumpy()
            for o in range(graph.OperatorsLength()):
                op = graph.Operators(o)
                op.InputsAsNumpy(), op.OutputsAsNumpy()
    except Exception as exc:  # any out-of-bounds read of a damaged file
        raise ValueError(f"{path} is truncated or corrupt ({type(exc).__name__})") from None
    return model


def open(path: str, threads: int, input_shapes: dict | None = None,  # noqa: A001 - protocol
         api: str | None = None):
    """Load ``path`` with ``threads`` CPU threads, dynamic dims set by ``input_shapes``
    (``api``: force "compiled_model" or "interpreter")."""
    data = _read(path)
    _check_data(data, path)  # bounds-checked before LiteRT trusts the file's offsets
    io = read_io(data)
    if api is None:
        buffers = all(spec["dtype"] in _BUFFER_DTYPES for spec in io[0] + io[1])
        api = "compiled_model" if buffers and _has_compiled_model() else "interpreter"
    if api == "compiled_model":
        return CompiledModelSession(path, threads, io, input_shapes)
    return InterpreterSession(path, threads, io, input_shapes)
