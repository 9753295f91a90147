"""What every native-tool adapter shares: the option checks and the argv prefix.

An adapter turns one measurement request into the argv of a user-supplied benchmark binary
(``command``) and the binary's printed output back into a result record shaped like the device
agent's (``parse``). Quoting is not done here: transports quote argv lists in one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import UsageError

_MASK_OK = re.compile(r"^(0x)?[0-9a-fA-F]+$")
DTYPES = ("float32", "uint8", "int64")


@dataclass(frozen=True)
class InputSpec:
    """One model input, for tools that build their own input tensor from a shape.

    Args:
        shape: dimensions, e.g. ``(1, 3, 224, 224)``.
        dtype: ``float32``, ``uint8`` or ``int64``.
        name: the input's name, for tools that feed inputs by name (Caffe2's ``data``).
    """

    shape: tuple[int, ...]
    dtype: str = "float32"
    name: str = "data"

    def dims(self) -> str:
        """The shape as ``1,3,224,224``."""
        return ",".join(str(int(d)) for d in self.shape)


class NativeAdapter:
    """Base of the adapters; subclasses set the class attributes and the two methods.

    Attributes:
        tool: the binary's usual file name (the registry key).
        formats: artifact formats the binary runs (aiot format names).
        delegates: accepted ``delegate`` values; ``None`` (the tool's default) is always
            accepted.
        supports_threads: whether the binary has a thread-count flag.
        folds_warmup: the binary has no warm-up flag, so ``command`` adds the warm-up to the
            timed count and ``parse(..., warmup_iterations=warmup)`` splits it off again.
        profile_flags: flags for a per-operator profile, read by ``parse_profile``.
    """

    tool: str = ""
    formats: frozenset[str] = frozenset()
    delegates: frozenset[str] = frozenset()
    supports_threads: bool = True
    folds_warmup: bool = False
    #: Flags that make the tool print per-operator times (empty: aiot reads none from it).
    profile_flags: tuple[str, ...] = ()
    #: Where the binary comes from, for a hint that names the tool (aiot ships none of them;
    #: docs/guide/native-tools.md says more). Empty: the tool's own project builds it.
    source: str = ""

    @property
    def backend(self) -> str:
        """The ``backend`` field of records from this tool."""
        return f"native:{self.tool}"

    def command(self, binary: str, artifact: str, *, threads: int | None, warmup: int,
                runs: int, delegate: str | None = None, affinity: str | None = None,
                extra: Sequence[str] = (), inputs: Sequence[InputSpec] = (),
                companions: Mapping[str, str] | None = None) -> list[str]:
        """The argv that benchmarks ``artifact`` with ``binary`` (both paths on the device).

        Args:
            threads: thread count, or None for the tool's default.
            warmup: warm-up iterations before the timed ones.
            runs: timed iterations (a minimum for tools that also run for a minimum time).
            delegate: accelerator/delegate name from ``delegates``, or None.
            affinity: a hex CPU mask; the command is prefixed with ``taskset <mask>``.
            extra: further arguments passed to the binary as they are.
            inputs: input shapes, for tools that build inputs from a shape.
            companions: other files of a multi-file artifact by role (``init_net``).

        Raises:
            UsageError: an option this tool does not support, before anything runs.
        """
        self.check(threads=threads, warmup=warmup, runs=runs, delegate=delegate)
        args = self.arguments(binary, artifact, threads=threads, warmup=warmup, runs=runs,
                              delegate=delegate, extra=list(extra), inputs=list(inputs),
                              companions=dict(companions or {}))
        return taskset_prefix(affinity) + args

    def arguments(self, binary: str, artifact: str, *, threads: int | None, warmup: int,
                  runs: int, delegate: str | None, extra: list[str], inputs: list[InputSpec],
                  companions: dict[str, str]) -> list[str]:
        """The tool's own argv, options already checked; subclasses implement it."""
        raise NotImplementedError

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        """A result record from the tool's output (stdout and stderr together).

        Args:
            warmup_iterations: leading per-iteration timings that were warm-up (only for tools
                without a warm-up flag, whose command folded warm-up into the timed count).

        Raises:
            NativeOutputError: no timing could be read; the output tail is on the error.
        """
        raise NotImplementedError

    def parse_profile(self, text: str) -> dict | None:
        """The per-operator profile the tool printed with ``profile_flags`` (the device
        agent's ``profile`` shape), or None when there is none in ``text``."""
        return None

    def placement(self, record: dict, artifact: Path, delegate: str | None) -> dict | None:
        """The run's placement for the ``delegate`` it asked for (None: the tool's default),
        from what ``parse`` read and the ``artifact`` (the host's copy of the file it ran);
        None where the tool says nothing of it."""
        return record.get("placement")

    def check(self, *, threads: int | None, warmup: int, runs: int,
              delegate: str | None) -> None:
        """Raise UsageError for values this tool cannot honour."""
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise UsageError(f"{self.tool}: threads must be a positive integer, got {threads!r}")
        if threads is not None and not self.supports_threads:
            raise UsageError(f"{self.tool} has no thread-count flag",
                             "leave threads unset (the tool picks its own thread pool)")
        if not isinstance(warmup, int) or warmup < 0:
            raise UsageError(f"{self.tool}: warmup must be an integer ≥ 0, got {warmup!r}")
        if not isinstance(runs, int) or runs < 1:
            raise UsageError(f"{self.tool}: runs must be an integer ≥ 1, got {runs!r}")
        if delegate is not None and delegate not in self.delegates:
            known = ", ".join(sorted(self.delegates)) or "none"
            raise UsageError(f"{self.tool} does not support delegate '{delegate}'",
                             f"supported: {known}")


def taskset_prefix(affinity: str | None) -> list[str]:
    """``["taskset", mask]`` for a hex CPU mask (Linux and Android's toybox), else ``[]``."""
    if affinity is None:
        return []
    mask = str(affinity).strip()
    if not _MASK_OK.match(mask) or int(mask, 16) == 0:
        raise UsageError(f"invalid CPU affinity mask {affinity!r}",
                         "give a non-zero hex mask such as f0 (CPUs 4-7)")
    return ["taskset", mask]


def require_inputs(tool: str, inputs: Sequence[InputSpec], extra: Sequence[str],
                   escapes: Sequence[str]) -> None:
    """UsageError unless input shapes are given or ``extra`` carries one of ``escapes``."""
    if inputs or any(arg.split("=", 1)[0] in escapes for arg in extra):
        return
    raise UsageError(f"{tool} needs the model's input shape",
                     f"pass inputs=[InputSpec(shape=...)] or one of {', '.join(escapes)}")


def check_dtype(tool: str, spec: InputSpec, names: Mapping[str, str]) -> str:
    """The tool's spelling of ``spec.dtype``; UsageError if the tool cannot feed it."""
    if spec.dtype not in names:
        raise UsageError(f"{tool} cannot feed {spec.dtype} inputs",
                         f"supported: {', '.join(sorted(names))}")
    return names[spec.dtype]
