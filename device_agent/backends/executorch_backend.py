"""ExecuTorch backend: the runtime's C++ bindings (:func:`bindings`), XNNPACK compiled in.

On aiot's host the runtime lives in the ``executorch`` toolchain environment
(``TOOLCHAIN``; it needs NumPy 2 and torch); the host reads a file's inputs and outputs
without it (:func:`declared_signature`). Threads: ExecuTorch sizes one process-wide
XNNPACK threadpool, reset here to the run's thread count before loading.

Placement (:func:`program_placement`): the program's own instructions, read from the file
(:func:`.pte_io.read_calls`): a call of a delegate per partition it lowered, against the
operators left to the program's own (portable or optimized) kernels.
"""

from __future__ import annotations

import builtins

from ..signature import check_arrays, entry, positional
from .base import SessionBase, installed_from, placement_entry
from .pte_io import dtype_name, program_bytes, read_calls, read_io

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("executorch",)

NAME = "executorch"
EXTENSIONS = (".pte",)
TOOLCHAIN = "executorch"  # host-side environment that has this runtime
NO_PROFILER = None  # a ProfiledBackend: see PROFILER


def bindings():
    """ExecuTorch's C++ runtime bindings (``_load_program``, ``Verification``, the threadpool).

    Imported as the extension module itself where it exists (1.x): the public
    ``executorch.runtime`` and ``portable_lib`` import ``executorch.exir`` first, the
    compiler, whose torch.export/inductor imports are some 12 s of every agent start, for
    nothing a loaded program uses. torch comes first: the extension links against it.
    """
    import importlib.util

    if importlib.util.find_spec("executorch") is None:  # cheap: no torch where it is absent
        raise ImportError("executorch is not installed")
    import torch  # noqa: F401 - the bindings resolve libtorch's symbols

    try:
        from executorch.extension.pybindings import _C
    except ImportError:  # an ExecuTorch without the bare extension module
        from executorch.extension.pybindings import portable_lib as _C
    return _C


def version() -> str | None:
    """The installed executorch version if its runtime imports here, else None."""
    try:
        from importlib.metadata import version as dist_version

        bindings()  # the import proves the runtime loads
    except Exception:
        return None
    try:
        return dist_version("executorch")
    except Exception:
        return "unknown"


def installed_version() -> str | None:
    """The runtime's installed version, from package metadata (nothing imported)."""
    return installed_from(DISTRIBUTIONS)


def _entries(metadata, kind: str) -> list[dict]:
    """Signature entries of a method's inputs or outputs: ExecuTorch keeps no names, so they
    are positional (``input_0``, ...); every dim is fixed (a program's sizes are its
    memory-planned upper bounds, not marked dynamic)."""
    count = metadata.num_inputs() if kind == "input" else metadata.num_outputs()
    meta = metadata.input_tensor_meta if kind == "input" else metadata.output_tensor_meta
    found = []
    for i in range(count):
        info = meta(i)
        found.append(entry(positional(kind, i), [int(d) for d in info.sizes()],
                           dtype_name(int(info.dtype()), kind, i)))
    return found


def declared_signature(path: str) -> tuple[list[dict], list[dict]]:
    """``forward``'s inputs and outputs as the file declares them, read without the runtime
    (:mod:`.pte_io`): what a host checks a run against before anything starts.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not a program with a ``forward`` of tensors.
    """
    with builtins.open(path, "rb") as fh:
        return read_io(program_bytes(fh))


class Session(SessionBase):
    """The ``forward`` method of one loaded program."""
    api = "executorch_runtime"

    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        runtime = bindings()
        runtime._unsafe_reset_threadpool(threads)  # the only knob ExecuTorch exposes
        # As executorch.runtime's Runtime.load_program does: the program checked for internal
        # consistency before any method loads.
        program = runtime._load_program(
            path, program_verification=runtime.Verification.InternalConsistency)
        self._path = path
        self._method = program.load_method("forward")
        meta = self._method.method_meta()
        self._declare(_entries(meta, "input"), _entries(meta, "output"), input_shapes)
        self._x = None
        self._out = None

    def set_inputs(self, arrays) -> None:
        import torch

        check_arrays(self.inputs, arrays)
        # A copy: torch shares the array's memory, which the caller may reuse.
        self._x = [torch.from_numpy(a.copy()) for a in arrays]

    def invoke(self) -> None:
        self._out = self._method(self._x)

    def outputs_all(self) -> list:
        import numpy as np

        return [o.detach().numpy() if hasattr(o, "detach") else np.asarray(o)
                for o in self._out]

    def placement(self) -> dict:
        """Delegated partitions against the operators outside them, from the program."""
        with builtins.open(self._path, "rb") as fh:
            return program_placement(*read_calls(program_bytes(fh)))


def program_placement(delegated: dict[str, int], kernels: dict[str, int]) -> dict:
    """A program's placement from its calls (:func:`.pte_io.read_calls`): the delegate
    (``XnnpackBackend`` is "xnnpack") took what its partitions hold, which the program does not
    count (each delegate keeps its own graph); every kernel call is an operator outside it. A
    program without a delegate (``--opt delegate=portable``) runs all on its own kernels."""
    if not delegated:
        count = sum(kernels.values())
        return placement_entry("portable", "program", total=count, delegated=count,
                               note="the program has no delegate: every operator runs on "
                                    "ExecuTorch's own kernels")
    engine = "+".join(sorted(name.removesuffix("Backend").lower() for name in delegated))
    return placement_entry(engine, "program", partitions=sum(delegated.values()),
                           outside=dict(sorted(kernels.items())),
                           by_engine=dict(sorted(delegated.items())))


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
        runtime = bindings()
        runtime._unsafe_reset_threadpool(threads)
        self._path = path
        self._module = runtime._load_for_executorch(path, enable_etdump=True,
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
