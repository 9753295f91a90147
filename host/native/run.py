"""Run a native benchmark binary on a device and turn its output into a result record."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from aiot.core.errors import DeviceCommandError, UsageError
from aiot.host.native.base import InputSpec, NativeAdapter
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NativeSpec:
    """What to measure, in the adapters' terms (see ``NativeAdapter.command``).

    Args:
        threads: thread count, or None for the tool's default.
        warmup: warm-up iterations.
        runs: timed iterations.
        delegate: delegate/accelerator name, or None.
        affinity: hex CPU mask for ``taskset`` (Linux and Android devices).
        extra: extra arguments for the binary.
        inputs: input shapes, for tools that need them.
        companions: further files of a multi-file artifact by role (remote paths).
    """

    threads: int | None = None
    warmup: int = 1
    runs: int = 50
    delegate: str | None = None
    affinity: str | None = None
    extra: tuple[str, ...] = ()
    inputs: tuple[InputSpec, ...] = ()
    companions: Mapping[str, str] = field(default_factory=dict)

    def command_options(self) -> dict:
        """The keyword arguments of ``NativeAdapter.command``."""
        return {"threads": self.threads, "warmup": self.warmup, "runs": self.runs,
                "delegate": self.delegate, "affinity": self.affinity, "extra": self.extra,
                "inputs": self.inputs, "companions": self.companions}


def run_native(transport: Transport, adapter: NativeAdapter, binary: str, artifact: str,
               spec: NativeSpec, *, timeout: float | None = None,
               env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict:
    """Benchmark ``artifact`` with the native ``binary`` (both device paths) and parse it.

    The command runs through ``transport.shell`` as an argv list (quoted by the transport); a
    timeout kills it there and raises TransportError, like an agent run.

    Returns:
        A record shaped like the device agent's ``result`` (see ``aiot.host.native.record``),
        with the argv, exit code and wall time under ``native``.

    Raises:
        UsageError: an option the tool cannot honour (nothing ran).
        DeviceCommandError: the binary exited non-zero.
        NativeOutputError: it exited 0 but printed no readable timing.
        TransportError: the device is unreachable or the command timed out.
    """
    argv, result, text = _execute(transport, adapter, binary, artifact, spec, timeout, env, cwd)
    folded = spec.warmup if adapter.folds_warmup else 0
    record = adapter.parse(text, warmup_iterations=folded)
    return _complete(record, adapter, spec, argv, result)


def profile_native(transport: Transport, adapter: NativeAdapter, binary: str, artifact: str,
                   spec: NativeSpec, *, timeout: float | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict:
    """A second, separate run of the tool with its op profiling on (profiling slows every
    operator, so the timed run stays without it): the profile, in the device agent's
    ``profile`` shape, or ``available: false`` with the reason.

    Raises: as :func:`run_native`.
    """
    if not adapter.profile_flags:
        return {"available": False, "reason": f"aiot reads no per-operator times from {adapter.tool}"}
    profiled = replace(spec, extra=(*spec.extra, *adapter.profile_flags))
    argv, _, text = _execute(transport, adapter, binary, artifact, profiled, timeout, env, cwd)
    found = adapter.parse_profile(text)
    if found is None:
        return {"available": False, "command": argv,
                "reason": f"{adapter.tool} printed no op profile with {' '.join(adapter.profile_flags)}"}
    return {**found, "command": argv}


def _execute(transport, adapter, binary, artifact, spec, timeout, env, cwd):
    """``(argv, result, text)`` of one run of the tool; text is stdout and stderr together."""
    argv = adapter.command(binary, artifact, **spec.command_options())
    if spec.affinity and transport.kind == "local" and not sys.platform.startswith("linux"):
        raise UsageError("CPU affinity needs taskset, which exists on Linux and Android only")
    log.debug("running %s on %s: %s", adapter.tool, transport.name, argv)
    result = transport.shell(argv, cwd=cwd, env=env, timeout=timeout)
    if not result.ok:
        raise DeviceCommandError(transport.name, result)
    # Most tools log to stderr (TFLITE_LOG, ET_LOG, glog) and print results to stdout; the
    # parsers do not depend on the order between the two streams.
    text = result.stdout + ("\n" if result.stdout and result.stderr else "") + result.stderr
    return argv, result, text


def _complete(record: dict, adapter: NativeAdapter, spec: NativeSpec, argv: list[str],
              result) -> dict:
    """Fill what the request decided and the tool did not print."""
    if record.get("threads") is None and adapter.supports_threads and spec.threads is not None:
        record["threads"] = spec.threads  # the command set it with the tool's own flag
    if spec.inputs:
        record["input_shape"] = list(spec.inputs[0].shape)
    record["native"].update(command=argv, exit_code=result.exit_code,
                            wall_s=result.seconds, delegate=spec.delegate,
                            affinity=spec.affinity)
    return record
