"""ExecuTorch backend: ``executorch.runtime`` with the XNNPACK backend compiled in.

On aiot's host the runtime lives in the ``executorch`` toolchain environment
(``TOOLCHAIN``; it needs NumPy 2 and torch). Threads: ExecuTorch sizes one process-wide
XNNPACK threadpool, reset here to the run's thread count before loading.
"""

from __future__ import annotations

from ..signature import check_arrays, entry, positional
from .base import SessionBase, installed_from

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("executorch",)

NAME = "executorch"
EXTENSIONS = (".pte",)
TOOLCHAIN = "executorch"  # host-side environment that has this runtime
NO_PROFILER = None  # a ProfiledBackend: see PROFILER


def version() -> str | None:
    """The installed executorch version if its runtime imports here, else None."""
    try:
        from importlib.metadata import version as dist_version

        import executorch.runtime  # noqa: F401 - import proves the runtime loads
    except Exception:
        return None
    try:
        return dist_version("executorch")
    except Exception:
        return "unknown"


def installed_version() -> str | None:
    """The runtime's installed version, from package metadata (nothing imported)."""
    return installed_from(DISTRIBUTIONS)


# c10::ScalarType codes (what ``TensorInfo.dtype()`` gives) -> NumPy dtype names
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                 6: "float32", 7: "float64", 11: "bool"}


def _entries(metadata, kind: str) -> list[dict]:
    """Signature entries of a method's inputs or outputs: ExecuTorch keeps no names, so they
    are positional (``input_0``, ...); every dim is fixed (a program's sizes are its
    memory-planned upper bounds, not marked dynamic)."""
    count = metadata.num_inputs() if kind == "input" else metadata.num_outputs()
    meta = metadata.input_tensor_meta if kind == "input" else metadata.output_tensor_meta
    found = []
    for i in range(count):
        info = meta(i)
        code = int(info.dtype())
        if code not in _SCALAR_TYPES:
            raise ValueError(f"{kind} {i} holds ExecuTorch scalar type {code}, which NumPy "
                             "cannot hold")
        found.append(entry(positional(kind, i), [int(d) for d in info.sizes()],
                           _SCALAR_TYPES[code]))
    return found


class Session(SessionBase):
    """The ``forward`` method of one loaded program."""
    api = "executorch_runtime"

    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(threads)  # the only knob ExecuTorch exposes
        self._method = Runtime.get().load_program(path).load_method("forward")
        meta = self._method.metadata
        self._declare(_entries(meta, "input"), _entries(meta, "output"), input_shapes)
        self._x = None
        self._out = None

    def set_inputs(self, arrays) -> None:
        import torch

        check_arrays(self.inputs, arrays)
        # A copy: torch shares the array's memory, which the caller may reuse.
        self._x = [torch.from_numpy(a.copy()) for a in arrays]

    def invoke(self) -> None:
        self._out = self._method.execute(self._x)

    def outputs_all(self) -> list:
        import numpy as np

        return [o.detach().numpy() if hasattr(o, "detach") else np.asarray(o)
                for o in self._out]


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load ``path``'s ``forward`` method with an XNNPACK threadpool of ``threads``."""
    return Session(path, threads, input_shapes)


PROFILER = "ExecuTorch ETDump, read by executorch.devtools' Inspector"
#: Events of an ETDump's "Execute" block that are not operators: the delegate call around
#: XNNPACK's ops and the whole method.
_NOT_OPS = ("DELEGATE_CALL", "Method::execute")


class ProfiledSession(Session):
    """``forward`` loaded through the pybindings with ETDump on: every operator (each op of
    the XNNPACK delegate, each portable kernel) is timed per execution."""
    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        self._module = portable_lib._load_for_executorch(path, enable_etdump=True,
                                                         debug_buffer_size=0)
        meta = self._module.method_meta("forward")
        self._declare(_entries(meta, "input"), _entries(meta, "output"), input_shapes)
        self._x = None
        self._out = None
        self._runs = 0
        self._skip = 0

    def invoke(self) -> None:
        self._out = self._module.forward(self._x)
        self._runs += 1

    def profile_start(self) -> None:
        """ETDump records every execution: the ones before this are dropped when read."""
        self._skip = self._runs

    def profile_stop(self) -> list[dict]:
        """One row per operator execution since :meth:`profile_start` (µs)."""
        import os
        import tempfile

        from executorch.devtools import Inspector

        with tempfile.TemporaryDirectory(prefix="aiot-etdump-") as folder:
            dump = os.path.join(folder, "profile.etdp")
            self._module.write_etdump_result_to_file(dump)
            inspector = Inspector(etdump_path=dump)
        rows = []
        for block in inspector.event_blocks:
            if block.name != "Execute":
                continue
            for event in block.events:
                if event.name in _NOT_OPS or event.perf_data is None:
                    continue
                kind = event.name.rsplit(" #", 1)[0]  # "Convolution (NHWC, F32) IGEMM #2"
                rows += [{"name": event.name, "type": kind, "us": ms * 1000.0}
                         for ms in event.perf_data.raw[self._skip:]]
        return rows


def open_profiled(path: str, threads: int, input_shapes: dict | None = None) -> ProfiledSession:
    """As :func:`open`, with ETDump event tracing on (see ``profiling.py``)."""
    return ProfiledSession(path, threads, input_shapes)
