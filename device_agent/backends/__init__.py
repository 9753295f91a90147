"""Runtime backends the agent can drive, imported lazily by name.

Each backend module defines ``NAME``, ``EXTENSIONS``, ``version() -> str | None`` (imports
the runtime: the proof that it loads) and ``open(path, threads, input_shapes=None) ->
Session`` (``input_shapes``: ``{input name: dims}`` fixing dynamic dims) where a session
(a :class:`SessionBase`) has ``inputs`` and ``outputs`` (signature entries, see
``..signature``), ``shapes``, ``set_inputs(arrays)``, ``invoke()``, ``outputs_all()``, and for
the first input and output ``input_shape``, ``input_dtype``, ``set_input(x)``, ``output()``
and ``run(x)``; and either
``DISTRIBUTIONS`` (the package names its runtime ships as) or ``installed_version()`` for
:func:`installed`, which answers from package metadata without importing anything. Only the
backend that is used gets imported, so a device needs just the runtime it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..signature import SpecError, resolve

if TYPE_CHECKING:  # the spec module reads this package's registry
    from ..spec import RunSpec

# backend name -> module (relative to this package)
MODULES = {
    "onnxruntime": ".onnxruntime_backend",
    "litert": ".litert_backend",
    "pytorch_mobile": ".pytorch_mobile_backend",
    "lce": ".lce_backend",
    "executorch": ".executorch_backend",
    "null": ".null_backend",  # TEST backend: sleeps per inference, to benchmark aiot itself
}


class SessionBase:
    """What every backend session shares.

    A backend describes its model with :meth:`_declare`: ``inputs`` and ``outputs`` (the
    signature as the file declares it, -1 for a dynamic dim), ``shapes`` (the concrete shape
    each input is set to now, -1 where a dynamic dim is still open) and, for the first input,
    ``input_shape`` (open dims as 1, what older agents fed) and ``input_dtype``. It implements
    ``set_inputs(arrays)`` (one array per input, in ``inputs`` order, each in the input's own
    dtype), ``invoke()`` and ``outputs_all()`` (one array per output).

    ``set_input``/``output``/``run`` are the single-input path that accuracy, ``predict``
    and ``serve`` use: the first input and the first output.
    """

    inputs: list[dict]
    outputs: list[dict]
    shapes: list[list[int]]
    input_shape: tuple = ()
    input_dtype = None

    def _declare(self, inputs: list[dict], outputs: list[dict], input_shapes: dict | None):
        """Record the signature and apply ``input_shapes``; returns the resolved ``shapes``.

        Raises:
            SpecError: an override names no input or does not fit its shape.
        """
        import numpy as np

        self.inputs, self.outputs = inputs, outputs
        self._set_shapes(resolve(inputs, input_shapes))
        if inputs and inputs[0]["dtype"] != "string":
            self.input_dtype = np.dtype(inputs[0]["dtype"])
        return self.shapes

    def _set_shapes(self, shapes: list[list[int]]) -> None:
        self.shapes = [list(s) for s in shapes]
        self.input_shape = tuple(d if d >= 0 else 1 for d in shapes[0]) if shapes else ()

    def set_input(self, x) -> None:
        """Set the one input of a single-input model."""
        self.set_inputs([x])

    def output(self):
        """The first output after ``invoke``."""
        return self.outputs_all()[0]

    def run(self, x):
        """Set the input, invoke, return the first output."""
        self.set_input(x)
        self.invoke()
        return self.output()


class BackendUnavailable(RuntimeError):
    """The runtime a backend drives cannot be imported on this machine."""


class ArtifactLoadError(RuntimeError):
    """The runtime refused the artifact (missing, truncated, corrupt or unsupported)."""


def load(name: str):
    """The backend module for ``name``.

    Raises:
        KeyError: unknown backend name.
        BackendUnavailable: its runtime is not importable here.
    """
    module = importlib.import_module(MODULES[name], __name__)
    if module.version() is None:
        raise BackendUnavailable(f"runtime for backend '{name}' is not importable here")
    return module


def open_session(backend, spec: RunSpec, opener=None):
    """The backend's session for the spec's artifact (dynamic dims set by ``input_shapes``),
    opened by ``opener`` (default ``backend.open``; ``open_profiled`` for ``profile``); a
    runtime's refusal is ArtifactLoadError, a spec that does not fit the model SpecError."""
    opener = opener or backend.open
    try:
        if spec.input_shapes:
            return opener(spec.artifact, spec.threads, spec.input_shapes)
        return opener(spec.artifact, spec.threads)
    except SpecError:
        raise
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ArtifactLoadError(f"{backend.NAME} cannot load {spec.artifact}: {detail}") from None


def installed(name: str) -> str | None:
    """The installed version of backend ``name``'s runtime, from package metadata.

    Nothing is imported: importing torch takes seconds on a phone and ~45 s under qemu, for
    every agent ``hello``. A broken install still shows as installed here; the run that uses
    it fails with the runtime's own error (and ``aiot devices doctor`` imports each one).
    """
    module = importlib.import_module(MODULES[name], __name__)
    custom = getattr(module, "installed_version", None)
    if custom is not None:
        return custom()
    # Stdlib, but it pulls the email package: only hello pays for it.
    from importlib.metadata import PackageNotFoundError, version

    for distribution in module.DISTRIBUTIONS:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return None


def versions(verify: bool = False) -> dict:
    """``{backend: runtime version or None}`` for every known backend.

    Args:
        verify: import each runtime (slow) instead of reading package metadata.
    """
    found = {}
    for name, mod in MODULES.items():
        try:
            found[name] = (importlib.import_module(mod, __name__).version() if verify
                           else installed(name))
        except Exception:  # a broken runtime install must not break the agent's hello
            found[name] = None
    return found
