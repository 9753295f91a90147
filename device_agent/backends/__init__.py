"""Runtime backends the agent can drive, imported lazily by name.

Each backend module implements the :class:`~.contract.Backend` protocol (``NAME``,
``EXTENSIONS``, ``TOOLCHAIN``, ``NO_PROFILER``, ``version()``, ``installed_version()``,
``open()``; with a profiler a :class:`~.contract.ProfiledBackend`), and its sessions are
:class:`~.base.SessionBase` subclasses. Only the backend that is used gets
imported, so a device needs just the runtime it runs.
"""

from __future__ import annotations

import importlib

from ..signature import SpecError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the device
if TYPE_CHECKING:
    from ..spec import RunSpec  # reads this package's registry
    from .contract import Backend

# backend name -> module (relative to this package)
MODULES = {
    "onnxruntime": ".onnxruntime_backend",
    "litert": ".litert_backend",
    "pytorch_mobile": ".pytorch_mobile_backend",
    "lce": ".lce_backend",
    "executorch": ".executorch_backend",
    "null": ".null_backend",  # TEST backend: sleeps per inference, to benchmark aiot itself
}


class BackendUnavailable(RuntimeError):
    """The runtime a backend drives cannot be imported on this machine."""


class ArtifactLoadError(RuntimeError):
    """The runtime refused the artifact (missing, truncated, corrupt or unsupported)."""


def load(name: str) -> Backend:
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
    return importlib.import_module(MODULES[name], __name__).installed_version()


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
