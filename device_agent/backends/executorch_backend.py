"""ExecuTorch backend: ``executorch.runtime`` with the XNNPACK backend compiled in.

On aiot's host the runtime lives in the ``executorch`` toolchain environment
(``TOOLCHAIN``; it needs NumPy 2 and torch). Threads: ExecuTorch sizes one process-wide
XNNPACK threadpool, reset here to the run's thread count before loading.
"""

from __future__ import annotations

from . import SessionBase

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("executorch",)

NAME = "executorch"
EXTENSIONS = (".pte",)
TOOLCHAIN = "executorch"  # host-side environment that has this runtime


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


class Session(SessionBase):
    """The ``forward`` method of one loaded program."""

    api = "executorch_runtime"

    def __init__(self, path: str, threads: int) -> None:
        import numpy as np
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(threads)  # the only knob ExecuTorch exposes
        self._method = Runtime.get().load_program(path).load_method("forward")
        meta = self._method.metadata.input_tensor_meta(0)
        self.input_shape = tuple(int(d) for d in meta.sizes())
        self.input_dtype = np.dtype("float32")
        self._x = None
        self._out = None

    def set_input(self, x) -> None:
        import torch

        self._x = [torch.from_numpy(x.copy())]

    def invoke(self) -> None:
        self._out = self._method.execute(self._x)

    def output(self):
        return self._out[0].detach().numpy()



def open(path: str, threads: int) -> Session:  # noqa: A001 - the backend protocol's name
    """Load ``path``'s ``forward`` method with an XNNPACK threadpool of ``threads``."""
    return Session(path, threads)
