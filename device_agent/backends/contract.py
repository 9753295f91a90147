"""The contract every runtime backend meets: a :class:`Backend` module whose ``open`` gives a
``SessionBase`` session (``base.py``); with a per-operator profiler, a :class:`ProfiledBackend`.

A backend is a module (PEP 544: a module may implement a protocol), imported only when it is
used, so a device needs just the runtime it runs; ``version`` and ``open`` import that runtime,
nothing at module level does. These protocols are for readers, type checkers and
``tests/unit/test_agent_backends.py``, which checks every registered backend against them; the
agent itself never imports this module (nor ``typing``) at run time: ``NO_PROFILER is None``
says a backend is a :class:`ProfiledBackend`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .base import SessionBase


@runtime_checkable
class ProfiledSession(Protocol):
    """A session opened by ``open_profiled``: the runs between the two calls are profiled."""

    def profile_start(self) -> None: ...

    def profile_stop(self) -> list[dict]:
        """One row per call of an operator in the profiled runs: ``{"name", "type", "us"}``
        (its time in microseconds; see ``profiling.py``)."""
        ...


@runtime_checkable
class Backend(Protocol):
    """What every backend module defines.

    ``NAME`` is its key in ``backends.MODULES``; ``EXTENSIONS`` the artifact suffixes it
    runs; ``TOOLCHAIN`` the host-side environment that has its runtime (None: aiot's own, see
    ``aiot.core.toolchains``); ``NO_PROFILER`` why it has no per-operator profiler (None when
    it is a :class:`ProfiledBackend`: ``profile`` answers with it, ``available: false``).
    """

    NAME: str
    EXTENSIONS: tuple[str, ...]
    TOOLCHAIN: str | None
    NO_PROFILER: str | None

    def version(self) -> str | None:
        """The runtime's version if it imports here (the proof that it loads), else None."""
        ...

    def installed_version(self) -> str | None:
        """The runtime's installed version from package metadata, nothing imported (importing
        torch takes seconds on a phone): what ``hello`` reports."""
        ...

    def open(self, path: str, threads: int, input_shapes: dict | None = None) -> SessionBase:
        """Load the artifact at ``path`` for ``threads`` CPU threads; ``input_shapes``
        (``{input name: dims}``) fixes dynamic dims.

        Raises:
            SpecError: ``input_shapes`` names no input or does not fit the model.
        """
        ...


@runtime_checkable
class ProfiledBackend(Backend, Protocol):
    """A backend whose runtime has a per-operator profiler (``profile``, see ``profiling.py``)."""

    PROFILER: str  #: the profiler's name, as the ``profile`` answer states it

    def open_profiled(self, path: str, threads: int,
                      input_shapes: dict | None = None) -> ProfiledSession:
        """As ``open``, with the runtime's profiler ready (some switch it on at load time)."""
        ...
