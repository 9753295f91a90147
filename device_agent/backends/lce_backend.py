"""Larq Compute Engine backend: LCE's own TFLite interpreter with its binary kernels.

The interpreter is loaded straight from its shared library, bypassing the
``larq_compute_engine`` package ``__init__`` (which imports TensorFlow for the converter),
so a device needs only the LCE wheel and NumPy < 2 — LCE's interpreter receives 0-byte
inputs under NumPy 2. On aiot's host that is the ``lce`` toolchain environment
(``TOOLCHAIN``); LCE publishes no aarch64 wheel, so ARM devices time LCE artifacts with
``lce_benchmark_model`` instead.

LCE's ``predict`` sets the input, invokes and copies the output in one call, so the timed
region includes those two copies (microseconds for a classifier's tensors).

Placement (:meth:`Session.placement`): LCE's custom operators (``LceBconv2d``, ...) run on
LCE's own kernels, so they count as taken by the engine; which of the other operators XNNPACK
took, LCE's interpreter does not say (its Python wrapper has no node list), so the run's
placement is not judged.
"""

from __future__ import annotations

from ..signature import SpecError, check_arrays
from .base import SessionBase, placement_entry
from .tflite_io import operator_codes, read_io

NAME = "lce"
EXTENSIONS = (".tflite",)
#: ``profile``'s answer: why there is no per-operator time here (see ``profiling.py``).
NO_PROFILER = ("LCE's Python interpreter exposes no per-operator profiler; for op profiling "
               "time the model with --native lce_benchmark_model")
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
    """One LCE interpreter; ``use_xnnpack`` for the float layers, as LCE's benchmarks do.

    The signature is read from the flatbuffer (:mod:`.tflite_io`); LCE's wrapper lists
    inputs and outputs in the subgraph's order, which may differ from the signature's. It
    cannot resize an input, so a dynamic dim runs at the size it was allocated with.
    """

    api = "lce_interpreter"

    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        with open_file(path) as fh:
            flatbuffer = fh.read()
        inputs, outputs, self._in_pos, self._out_pos = read_io(flatbuffer)
        # Positional: (model, num_threads, use_reference_bconv, use_indirect_bgemm, use_xnnpack)
        self._interp = _wrapper_module().LiteInterpreter(flatbuffer, threads, False, False, True)
        self._allocated = [[int(d) for d in self._interp.input_shapes[p]] for p in self._in_pos]
        shapes = self._declare(inputs, outputs, input_shapes)
        for spec, shape, allocated in zip(inputs, shapes, self._allocated):
            if all(d >= 0 for d in shape) and shape != allocated:
                raise SpecError(f"LCE's interpreter cannot resize input '{spec['name']}' to "
                                f"{shape}: it runs at {allocated}")
        self._x = [None] * len(inputs)
        self._out = None
        self._codes = operator_codes(flatbuffer)

    def placement(self) -> dict:
        """LCE's own operators against the rest, which XNNPACK or TFLite's kernels run."""
        own = sum(1 for code in self._codes if isinstance(code, str) and code.startswith("Lce"))
        return placement_entry("lce", "program", total=len(self._codes), complete=None,
                               by_engine={"lce": own}, note=(
                                   f"{own} of {len(self._codes)} operators are LCE's own; "
                                   "which of the others XNNPACK took, LCE's interpreter does "
                                   "not say"))

    def set_inputs(self, arrays) -> None:
        import numpy as np

        check_arrays(self.inputs, arrays)
        for spec, pos, array, allocated in zip(self.inputs, self._in_pos, arrays,
                                               self._allocated):
            if list(array.shape) != allocated:
                raise ValueError(f"LCE's interpreter cannot resize input '{spec['name']}' to "
                                 f"{list(array.shape)}: it runs at {allocated}")
            self._x[pos] = np.require(array, requirements="C")  # a scalar stays 0-d

    def set_input(self, x) -> None:
        import numpy as np

        self.set_inputs([np.ascontiguousarray(x, dtype=self.input_dtype)])

    def invoke(self) -> None:
        self._out = self._interp.predict(self._x)

    def outputs_all(self) -> list:
        return [self._out[pos] for pos in self._out_pos]


def open_file(path: str):
    import builtins  # this module's own ``open`` is the backend entry point

    return builtins.open(path, "rb")


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load ``path`` into LCE's interpreter with ``threads`` threads (``input_shapes`` may
    only name the sizes its inputs were allocated with: LCE cannot resize)."""
    return Session(path, threads, input_shapes)
