"""LiteRT (TFLite) backend via ``ai_edge_litert``; XNNPACK is applied by default for float models."""

from __future__ import annotations

NAME = "litert"
EXTENSIONS = (".tflite",)


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


class Session:
    """One interpreter with tensors allocated; input is set once and ``invoke`` runs it."""

    def __init__(self, path: str, threads: int) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._interp = Interpreter(model_path=path, num_threads=threads)
        self._interp.allocate_tensors()
        inp = self._interp.get_input_details()[0]
        self._input_index = inp["index"]
        self.input_shape = tuple(int(d) for d in inp["shape"])
        self.input_dtype = inp["dtype"]
        self._output_index = self._interp.get_output_details()[0]["index"]

    def set_input(self, x) -> None:
        self._interp.set_tensor(self._input_index, x)

    def invoke(self) -> None:
        self._interp.invoke()

    def output(self):
        return self._interp.get_tensor(self._output_index)

    def run(self, x):
        self.set_input(x)
        self.invoke()
        return self.output()


def open(path: str, threads: int) -> Session:  # noqa: A001 - the backend protocol's name
    """Load ``path`` with ``threads`` interpreter threads."""
    return Session(path, threads)
