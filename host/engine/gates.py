"""The refusals a run can meet before it converts, each written once.

Preflight (:mod:`aiot.host.engine.preflight`) asks them of a whole sweep before anything
converts; the executor asks the same ones of a single request built without preflight (by
API, by a bench script), so a refused run reads the same words whichever path it took.
"""

from __future__ import annotations

from pathlib import Path

from aiot.converters import get_converter
from aiot.converters.base import user_converters
from aiot.core.errors import UsageError
from aiot.host.devices import reservations
from aiot.host.devices.wheels import runtime_fix
from aiot.host.native import adapters_for_format, get_adapter, resolve_binary


def check_reserved(devices) -> None:
    """A device another user reserved (``aiot devices reserve``) is theirs until the end of it."""
    reservations.check_free(devices)


def check_native_via(native: str | None, vias) -> None:
    """Native tools run from the device's shell: ``--via app`` starts the agent instead."""
    if native and "app" in vias:
        raise UsageError("--via app starts the device agent; native tools run from the shell",
                         "drop --native, or use --via shell")


def check_delegate(native: str | None, delegate: str | None) -> None:
    """A delegate (NNAPI, GPU) is a native tool's: the agent's Python runtimes have none."""
    if delegate and native is None:
        raise UsageError(f"--delegate {delegate} needs --native (NNAPI and GPU delegates "
                         "are not in the Python runtimes)", "e.g. --native benchmark_model")


def check_runnable(fmt: str, native: str | None) -> None:
    """An emit-only format (no runtime the agent drives) needs a native tool to be timed."""
    if not native and get_converter(fmt).backend is None:
        raise UsageError(f"format '{fmt}' is emit-only: no runtime aiot's agent drives "
                         "can time it", "time it with the format's native benchmark binary "
                         "(--native), or choose another --format")


def check_native_formats(native: str, formats, delegate: str | None = None):
    """The native tool runs every format and knows the delegate; returns its adapter."""
    adapter = get_adapter(native)
    wrong = [f for f in formats if f not in adapter.formats]
    if wrong:
        raise UsageError(f"{adapter.tool} does not run {', '.join(wrong)} artifacts",
                         f"it runs: {', '.join(adapter.formats)}")
    if delegate and delegate not in adapter.delegates:
        raise UsageError(f"{adapter.tool} has no delegate '{delegate}'",
                         f"its delegates: {', '.join(adapter.delegates) or 'none'}")
    return adapter


def native_binary(tool: str, device: str, binary: Path | None) -> Path:
    """The native tool's file for ``device`` (given, or its inventory entry), which exists."""
    found = resolve_binary(tool, device, binary)
    if not found.is_file():
        raise UsageError(f"{tool} binary {found} for '{device}' does not exist",
                         "check --binary or the device's [binaries] entry in the inventory")
    return found


def device_runner(fmt: str, device: str, runtimes: dict, binaries) -> str | None:
    """Who times ``fmt`` on ``device``: None for its agent (its ``runtimes``, the agent's
    hello, has the format's backend), else a native tool ``binaries`` (its inventory entry)
    configures for the format. Refuses, naming what the device runs and the fix, when neither
    can, before anything converts."""
    backend = get_converter(fmt).backend
    if backend is None or runtimes.get(backend):
        return None
    adapters = adapters_for_format(fmt)
    tools = [a.tool for a in adapters]
    configured = [tool for tool in tools if tool in binaries]
    if configured:
        return configured[0]
    runs = [c.name for c in user_converters() if c.backend and runtimes.get(c.backend)]
    raise UsageError(f"{device} cannot time {fmt} artifacts: its agent has no {backend} runtime "
                     f"(it runs {', '.join(runs) or 'none yet'})",
                     runtime_fix(device, backend, tools, adapters[0].source if adapters else ""))
