"""Larq Compute Engine backend: LCE's own TFLite interpreter with its binary kernels.

The interpreter is loaded straight from its shared library, bypassing the
``larq_compute_engine`` package ``__init__`` (which imports TensorFlow for the converter),
so a device needs only the LCE wheel and NumPy < 2 — LCE's interpreter receives 0-byte
inputs under NumPy 2. On aiot's host that is the ``lce`` toolchain environment
(``TOOLCHAIN``); LCE publishes no aarch64 wheel, so ARM devices time LCE artifacts with
``lce_benchmark_model`` instead.

LCE's ``predict`` sets the input, invokes and copies the output in one call, so the timed
region includes those two copies (microseconds for a classifier's tensors).
"""

from __future__ import annotations

from . import SessionBase

NAME = "lce"
EXTENSIONS = (".tflite",)
TOOLCHAIN = "lce"  # host-side environment that has this runtime


def _wrapper_module():
    import importlib.util
    import os

    spec = importlib.util.find_spec("larq_compute_engine")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("larq_compute_engine is not installed")
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "tflite", "python")
    library = next((f for f in os.listdir(folder) if f.startswith("interpreter_wrapper_lite")), None)
    if library is None:
        raise ImportError(f"no interpreter_wrapper_lite library in {folder}")
    loader = importlib.util.spec_from_file_location("interpreter_wrapper_lite", os.path.join(folder, library))
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def installed_version() -> str | None:
    """larq-compute-engine's installed version, None under NumPy 2 (unusable), from metadata."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        if int(dist_version("numpy").split(".")[0]) >= 2:
            return None
        return dist_version("larq-compute-engine")
    except PackageNotFoundError:
        return None


def version() -> str | None:
    """The installed larq-compute-engine version if its interpreter loads here, else None."""
    try:
        import numpy

        if int(numpy.__version__.split(".")[0]) >= 2:
            return None  # loads, but silently computes on empty inputs: not usable
        _wrapper_module()
        from importlib.metadata import version as dist_version

        return dist_version("larq-compute-engine")
    except Exception:
        return None


class Session(SessionBase):
    """One LCE interpreter; ``use_xnnpack`` for the float layers, as LCE's benchmarks do."""

    api = "lce_interpreter"

    def __init__(self, path: str, threads: int) -> None:
        import numpy as np

        with open_file(path) as fh:
            flatbuffer = fh.read()
        # Positional: (model, num_threads, use_reference_bconv, use_indirect_bgemm, use_xnnpack)
        self._interp = _wrapper_module().LiteInterpreter(flatbuffer, threads, False, False, True)
        self.input_shape = tuple(int(d) for d in self._interp.input_shapes[0])
        self.input_dtype = np.dtype("float32")
        self._x = None
        self._out = None

    def set_input(self, x) -> None:
        import numpy as np

        self._x = [np.ascontiguousarray(x, dtype=np.float32)]

    def invoke(self) -> None:
        self._out = self._interp.predict(self._x)

    def output(self):
        return self._out[0]



def open_file(path: str):
    import builtins  # this module's own ``open`` is the backend entry point

    return builtins.open(path, "rb")


def open(path: str, threads: int) -> Session:  # noqa: A001 - the backend protocol's name
    """Load ``path`` into LCE's interpreter with ``threads`` threads."""
    return Session(path, threads)
