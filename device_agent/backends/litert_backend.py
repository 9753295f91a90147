"""LiteRT (TFLite) backend via ``ai_edge_litert`` on the CPU (XNNPACK).

Uses LiteRT's current ``CompiledModel`` API — the one LiteRT's own
``benchmark_litert_model`` times — and falls back to the classic ``Interpreter`` where a
device only has an older wheel. The session records which API ran.
"""

from __future__ import annotations

from . import SessionBase

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("ai-edge-litert",)

NAME = "litert"
EXTENSIONS = (".tflite",)

_DTYPES = {"float32": "float32", "float16": "float16", "int8": "int8", "uint8": "uint8",
           "int32": "int32", "int64": "int64"}


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


class _IoQuantization:
    """Float in, float out for integer-quantized models (e.g. full INT8 post-training).

    Such a model's input and output tensors are int8 with a scale and zero point; callers
    (timing, accuracy, parity) always deal in float32, so the input is quantized before
    ``invoke`` and the output dequantized after — outside the timed region, as TFLite's
    ``benchmark_model`` feeds an already quantized tensor.
    """

    def __init__(self, model) -> None:
        self.input, self.output = _io_params(model)

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


class CompiledModelSession(SessionBase):
    """A ``CompiledModel`` with its input/output buffers for the first signature."""

    api = "compiled_model"

    def __init__(self, path: str, threads: int, io: _IoQuantization) -> None:
        import numpy as np
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.environment import Environment, EnvironmentOptions
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import CpuOptions, Options

        env = Environment.create(options=EnvironmentOptions())
        options = Options(hardware_accelerators=HardwareAccelerator(HardwareAccelerator.CPU),
                          cpu_options=CpuOptions(num_threads=threads))
        self._model = CompiledModel.from_file(path, environment=env, options=options)
        self._env = env  # keep the environment alive as long as the model
        self._sig = next(iter(self._model.get_signature_list()), "serving_default")
        inputs = self._model.get_input_tensor_details(self._sig)
        outputs = self._model.get_output_tensor_details(self._sig)
        in_name, in_detail = next(iter(inputs.items()))
        out_name, out_detail = next(iter(outputs.items()))
        self._io = io
        self.input_shape = tuple(int(d) for d in in_detail["shape"])
        self.input_dtype = (np.dtype("float32") if self._io.input else
                            np.dtype(_DTYPES.get(in_detail["dtype"], "float32")))
        self._out_shape = tuple(int(d) for d in out_detail["shape"])
        self._out_dtype = np.dtype(_DTYPES.get(out_detail["dtype"], "float32"))
        self._in = {n: self._model.create_input_buffer_by_name(self._sig, n) for n in inputs}
        self._out = {n: self._model.create_output_buffer_by_name(self._sig, n) for n in outputs}
        self._in_buf, self._out_buf = self._in[in_name], self._out[out_name]

    def set_input(self, x) -> None:
        self._in_buf.write(self._io.quantize(x))

    def invoke(self) -> None:
        self._model.run_by_name(self._sig, self._in, self._out)

    def output(self):
        count = 1
        for d in self._out_shape:
            count *= d
        return self._io.dequantize(self._out_buf.read(count, self._out_dtype).reshape(self._out_shape))



class InterpreterSession(SessionBase):
    """The classic ``Interpreter`` with tensors allocated."""

    api = "interpreter"

    def __init__(self, path: str, threads: int, io: _IoQuantization) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._interp = Interpreter(model_path=path, num_threads=threads)
        self._interp.allocate_tensors()
        inp = self._interp.get_input_details()[0]
        self._input_index = inp["index"]
        self._io = io
        self.input_shape = tuple(int(d) for d in inp["shape"])
        self.input_dtype = "float32" if self._io.input else inp["dtype"]
        self._output_index = self._interp.get_output_details()[0]["index"]

    def set_input(self, x) -> None:
        self._interp.set_tensor(self._input_index, self._io.quantize(x))

    def invoke(self) -> None:
        self._interp.invoke()

    def output(self):
        return self._io.dequantize(self._interp.get_tensor(self._output_index))



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
    import builtins  # this module's own ``open`` is the backend entry point

    from ai_edge_litert import schema_py_generated as schema

    with builtins.open(path, "rb") as fh:
        data = fh.read()
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


def open(path: str, threads: int, api: str | None = None):  # noqa: A001 - the backend protocol's name
    """Load ``path`` with ``threads`` CPU threads (``api``: force "compiled_model" or "interpreter")."""
    io = _IoQuantization(check_flatbuffer(path))  # one read of the file serves both
    api = api or ("compiled_model" if _has_compiled_model() else "interpreter")
    if api == "compiled_model":
        return CompiledModelSession(path, threads, io)
    return InterpreterSession(path, threads, io)
