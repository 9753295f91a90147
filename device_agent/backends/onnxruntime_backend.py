"""ONNX Runtime backend (``.onnx`` and ``.ort``), CPU execution provider.

ONNX Runtime takes any size for a dynamic (symbolic) dim on every run, so an input-shape
override needs no resizing here: the arrays fed have that shape.
"""

from __future__ import annotations

from . import SessionBase

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino")

NAME = "onnxruntime"
EXTENSIONS = (".onnx", ".ort")

# ONNX Runtime's type strings -> NumPy dtype names
_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
          "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(int16)": "int16",
          "tensor(uint16)": "uint16", "tensor(int32)": "int32", "tensor(uint32)": "uint32",
          "tensor(int64)": "int64", "tensor(uint64)": "uint64", "tensor(bool)": "bool",
          "tensor(string)": "string"}


def version() -> str | None:
    """The installed onnxruntime version, or None."""
    try:
        import onnxruntime
    except Exception:
        return None
    return onnxruntime.__version__


def _entries(metas) -> list[dict]:
    from ..signature import entry

    return [entry(m.name, m.shape or [], _TYPES.get(m.type, "string")) for m in metas]


class Session(SessionBase):
    """One loaded model; inputs are set once and ``invoke`` runs it."""

    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        # intra-op threads are what "threads" means for a single CNN inference; inter-op
        # parallelism would only add threads that the sweep does not account for.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self._declare(_entries(self._sess.get_inputs()), _entries(self._sess.get_outputs()),
                      input_shapes)
        self._names = [spec["name"] for spec in self.inputs]
        self._feed = None
        self._outs = None

    def set_inputs(self, arrays) -> None:
        from ..signature import check_arrays

        check_arrays(self.inputs, arrays)
        self._feed = dict(zip(self._names, arrays))

    def invoke(self) -> None:
        self._outs = self._sess.run(None, self._feed)

    def outputs_all(self) -> list:
        return list(self._outs)


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load ``path`` for inference with ``threads`` intra-op threads."""
    return Session(path, threads, input_shapes)
