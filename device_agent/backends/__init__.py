"""Runtime backends the agent can drive, imported lazily by name.

Each backend module defines ``NAME``, ``EXTENSIONS``, ``version() -> str | None`` (imports
the runtime: the proof that it loads) and ``open(path, threads) -> Session`` where a session
has ``input_shape``, ``set_input(x)``, ``invoke()``, ``output()`` and ``run(x)``; and either
``DISTRIBUTIONS`` (the package names its runtime ships as) or ``installed_version()`` for
:func:`installed`, which answers from package metadata without importing anything. Only the
backend that is used gets imported, so a device needs just the runtime it runs.
"""

from __future__ import annotations

import importlib

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
    """What every backend session shares: ``run`` is set input, invoke, read output."""

    def run(self, x):
        self.set_input(x)
        self.invoke()
        return self.output()


class BackendUnavailable(RuntimeError):
    """The runtime a backend drives cannot be imported on this machine."""


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
