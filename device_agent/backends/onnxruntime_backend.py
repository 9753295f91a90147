"""ONNX Runtime backend (``.onnx`` and ``.ort``), CPU execution provider."""

from __future__ import annotations

from . import SessionBase

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino")

NAME = "onnxruntime"
EXTENSIONS = (".onnx", ".ort")


def version() -> str | None:
    """The installed onnxruntime version, or None."""
    try:
        import onnxruntime
    except Exception:
        return None
    return onnxruntime.__version__


class Session(SessionBase):
    """One loaded model; input is set once and ``invoke`` runs it."""

    def __init__(self, path: str, threads: int) -> None:
        import numpy as np
        import onnxruntime as ort

        options = ort.SessionOptions()
        # intra-op threads are what "threads" means for a single CNN inference; inter-op
        # parallelism would only add threads that the sweep does not account for.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        meta = self._sess.get_inputs()[0]
        self._input_name = meta.name
        self.input_shape = tuple(d if isinstance(d, int) else 1 for d in meta.shape)
        self.input_dtype = np.float32
        self._feed = None
        self._out = None

    def set_input(self, x) -> None:
        self._feed = {self._input_name: x}

    def invoke(self) -> None:
        self._out = self._sess.run(None, self._feed)[0]

    def output(self):
        return self._out



def open(path: str, threads: int) -> Session:  # noqa: A001 - the backend protocol's name
    """Load ``path`` for inference with ``threads`` intra-op threads."""
    return Session(path, threads)
