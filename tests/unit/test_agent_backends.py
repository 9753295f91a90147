"""Every registered backend implements the agent's ``Backend`` protocol (``backends/contract.py``).

Checked from the modules alone: importing a backend module imports no runtime, so this runs
wherever the agent does, with or without the runtimes installed."""

import importlib
import inspect
import os
import subprocess
import sys

import pytest

from aiot.device_agent import backends
from aiot.device_agent.backends.base import SessionBase
from aiot.device_agent.backends.contract import Backend, ProfiledBackend, ProfiledSession

RUNTIMES = ("onnxruntime", "ai_edge_litert", "torch", "executorch", "larq_compute_engine")


def _module(name: str):
    return importlib.import_module(backends.MODULES[name], backends.__name__)


def _protocol_parameters(protocol, method: str) -> list[inspect.Parameter]:
    return list(inspect.signature(getattr(protocol, method)).parameters.values())[1:]  # no self


def _conforms(function, protocol, method: str) -> None:
    """``function`` takes the protocol method's parameters (names, order, defaults); any more
    it takes have defaults."""
    want = _protocol_parameters(protocol, method)
    have = list(inspect.signature(function).parameters.values())
    assert [(p.name, p.default) for p in have[: len(want)]] == [(p.name, p.default) for p in want]
    assert all(p.default is not inspect.Parameter.empty for p in have[len(want):])


def _session_classes(module) -> list[type]:
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, SessionBase) and cls.__module__ == module.__name__
            and not inspect.isabstract(cls)]


@pytest.mark.parametrize("name", sorted(backends.MODULES))
def test_every_backend_implements_the_protocol(name):
    module = _module(name)
    assert isinstance(module, Backend)
    assert module.NAME == name
    assert isinstance(module.EXTENSIONS, tuple) and module.EXTENSIONS
    assert all(isinstance(e, str) and e.startswith(".") for e in module.EXTENSIONS)
    assert module.TOOLCHAIN is None or isinstance(module.TOOLCHAIN, str)
    assert module.installed_version() is None or isinstance(module.installed_version(), str)
    for method in ("version", "installed_version", "open"):
        _conforms(getattr(module, method), Backend, method)
    assert _session_classes(module), f"{name} has no concrete SessionBase subclass"


@pytest.mark.parametrize("name", sorted(backends.MODULES))
def test_a_backend_has_a_profiler_or_says_why_not(name):
    module = _module(name)
    if isinstance(module, ProfiledBackend):
        assert module.NO_PROFILER is None and isinstance(module.PROFILER, str) and module.PROFILER
        _conforms(module.open_profiled, ProfiledBackend, "open_profiled")
        profiled = [cls for cls in _session_classes(module)
                    if all(callable(getattr(cls, m, None)) for m in ("profile_start", "profile_stop"))]
        assert profiled, f"{name}: no session class has profile_start and profile_stop"
        assert all(issubclass(cls, ProfiledSession) for cls in profiled)
    else:
        assert not hasattr(module, "open_profiled") and not hasattr(module, "PROFILER")
        assert isinstance(module.NO_PROFILER, str) and module.NO_PROFILER


def test_backend_modules_import_no_runtime():
    """A fresh interpreter imports every backend module and no runtime (nor NumPy): only
    ``version``, ``open`` and the sessions do, so a device needs just the runtime it runs."""
    code = ("import importlib, sys; from aiot.device_agent import backends; "
            "[importlib.import_module(m, backends.__name__) for m in backends.MODULES.values()]; "
            f"print(sorted(r for r in {RUNTIMES + ('numpy',)!r} if r in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "[]"


def test_a_session_without_the_abstract_members_cannot_be_made():
    class Half(SessionBase):
        def invoke(self) -> None:
            pass

    with pytest.raises(TypeError, match="abstract"):
        Half()
