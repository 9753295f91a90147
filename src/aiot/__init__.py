"""aiot: measure how neural networks really run on phones and ARM boards.

From Python (the ``api`` extra for the DataFrame)::

    import aiot
    store = aiot.open_store()          # the result store the CLI uses
    df = store.runs(sweep="SWEEP_ID")  # a sweep's runs as a pandas DataFrame

:func:`open_store`, :func:`convert`, :func:`run` and :func:`sweep` (:mod:`aiot.api`) are
loaded when first used, so ``import aiot`` and ``aiot --help`` import none of the engine.
Sub-packages: ``aiot.host`` (CLI, engine, devices, store), ``aiot.converters`` (artifact
formats), ``aiot.models`` (model zoo), ``aiot.device_agent`` (runs on the device).
"""

__version__ = "0.1.0"

#: The names ``aiot`` gives from :mod:`aiot.api`, imported on first use (``__getattr__``).
API = ("Store", "Sweep", "convert", "open_store", "run", "sweep")
__all__ = ["__version__", *API]


def __getattr__(name: str):
    if name in API:
        import importlib

        value = getattr(importlib.import_module("aiot.api"), name)
        globals()[name] = value  # the next lookup is an ordinary attribute
        return value
    raise AttributeError(f"module 'aiot' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
