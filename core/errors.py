"""The one error family of aiot.

Every expected failure (bad input, missing extra, unreachable device, failed parity check)
is an :class:`AiotError`. The CLI turns it into one line on stderr plus a hint; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AiotError(Exception):
    """Root of all expected aiot failures.

    Args:
        message: what went wrong and why, in one line.
        hint: what the user can do about it (optional, one line).
    """

    #: The CLI's exit status: 1 for a failure, 2 for input the user must fix (as Click's usage
    #: errors), so scripts can tell "fix the command" from "the run went wrong".
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and hint joined for a terminal."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UnknownName(AiotError):
    """A model, format, device or dataset name that is not registered.

    Args:
        known: the names listed when none is close.
        also: further names that may be suggested but are too many to list (a zoo model's
            binarized and quantized names: ``resnet18_bnn``, ``resnet18_lsq8``).
    """

    exit_code = 2

    def __init__(self, kind: str, name: str, known: Iterable[str], also: Iterable[str] = ()) -> None:
        known = sorted(known)
        close = _close_names(name, known, also)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
        super().__init__(f"unknown {kind} '{name}'", hint)
        self.kind, self.name, self.close = kind, name, close


def _close_names(name: str, known: list[str], also: Iterable[str]) -> list[str]:
    """Up to three names close to ``name``: of ``known``, and of ``also`` those closer than
    every known one (``resnt18`` is resnet18, not resnet18_bnn; ``resnet18_bnnn`` is
    resnet18_bnn)."""
    def ratio(candidate: str) -> float:
        return difflib.SequenceMatcher(None, name, candidate).ratio()

    best = max(map(ratio, known), default=0.0)
    return difflib.get_close_matches(name, [*known, *(a for a in also if ratio(a) > best)],
                                     n=3, cutoff=0.5)


class MissingDependency(AiotError):
    """An optional toolchain is not installed."""

    def __init__(self, what: str, extra: str, detail: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(
            f"{what} is not installed" + (f" ({detail})" if detail else ""),
            hint or f"run: pip install 'aiot[{extra}]'",
        )
        self.extra = extra


class UsageError(AiotError):
    """Options that do not make sense together, or a value out of range."""

    exit_code = 2


class ConversionError(AiotError):
    """A converter failed; ``stage`` says where (export, verify, parity)."""

    def __init__(self, fmt: str, stage: str, message: str, hint: str | None = None) -> None:
        super().__init__(f"{fmt} conversion failed at {stage}: {message}", hint)
        self.format, self.stage, self.detail = fmt, stage, message


class AccuracyMismatch(ConversionError):
    """The artifact's outputs differ from PyTorch's beyond tolerance."""

    def __init__(self, fmt: str, report: dict) -> None:
        nonfinite = self._nonfinite(report)
        super().__init__(fmt, "parity", nonfinite or self._describe(report),
                         "the model itself gives NaN/Inf on these inputs (a division by zero, "
                         "a log or sqrt of a negative, an overflow): fix the model, its weights "
                         "or its inputs; the runtime's numbers cannot be judged there"
                         if nonfinite else self._hint(report))
        self.report = report

    @staticmethod
    def _hint(report: dict) -> str:
        if report.get("min_top1") is not None and report.get("signs") is None:
            # An int8 or binarized artifact rounds values a float model keeps: a model whose
            # top two classes are that close (a weakly trained one, everywhere) flips there.
            return ("an under-trained model's close top-2 scores flip under the runtime's "
                    "rounding: train it further (aiot train MODEL); if a trained model fails, "
                    "report it with the sidecar")
        return "the exported graph does not match the PyTorch model; report it with the sidecar"

    @staticmethod
    def _nonfinite(report: dict) -> str | None:
        """The parity line of outputs that hold NaN/Inf where the two disagree, or None."""
        found = [r.get("nonfinite") for r in (report, report.get("dataset") or {})]
        found = [f for f in found if f and f["disagree"]]
        if not found:
            return None
        f = found[0]
        return (f"outputs are NaN/Inf: PyTorch gives {f['reference']} NaN/Inf value(s), the "
                f"artifact {f['artifact']}, at {f['disagree']} place(s) one of them differently")

    @staticmethod
    def _describe(report: dict) -> str:
        signs = report.get("signs")
        if signs is not None:  # a binarized artifact: judged by its binary layers' signs
            layer = signs.get("first_disagreeing_layer")
            if layer is not None:
                layers = signs["binary_layers"]
                index = next(i for i, x in enumerate(layers) if x["layer"] == layer)
                found = layers[index]
                if found.get("ties", 0) >= 20 and found["tie_agreement"] < 0.99:
                    return (f"layer {layer} binarizes PyTorch's exact zeros otherwise: "
                            f"{found['tie_agreement']:.1%} of {found['ties']} ties agree")
                before = (f", {layers[index - 1]['sign_agreement']:.1%} at the layer before"
                          if index else " at the first binary layer")
                return (f"layer {layer} binarizes other signs than PyTorch: "
                        f"{found['sign_agreement']:.1%} agree{before}")
            stem = signs.get("stem") or {}
            if not stem.get("ok", True):
                return (f"the float layers before the first binary layer differ: max abs "
                        f"{stem['max_abs']:.3g} (max rel {stem['max_rel']:.3g})")
            return signs.get("reason", "binary layers do not match PyTorch's")
        data = report.get("dataset")
        if report.get("min_top1") is not None:
            where = report if data is None else data
            inputs = f"{data['name']} images" if data else "noise inputs"
            return (f"top-1 agreement {where['top1_agreement']:.1%} < required "
                    f"{report['min_top1']:.0%} ({round(where['top1_agreement'] * where['n'])} "
                    f"of {where['n']} {inputs} agree)")
        atol = report.get("atol")
        limit = f"{atol:.3g}" if atol is not None else f"rel {report.get('rtol')}"
        worst = max(report["max_abs"], (data or {}).get("max_abs", 0.0))
        return f"max abs error {worst:.3g} > tolerance {limit}, top-1 agreement {report['top1_agreement']:.1%}"


class ArtifactError(AiotError):
    """An artifact file is missing, truncated or corrupt."""


class TransportError(AiotError):
    """The device could not be reached or a file transfer failed."""


class DeviceStorageError(TransportError):
    """The device's work dir is full or not writable: the link is fine and retrying cannot
    help, so a campaign records the run failed once instead of retrying it as a lost device."""

    transient = False


class CommandTimeout(TransportError):
    """A command on the device ran past its time limit and was killed (the link is fine)."""


class FileTooLarge(TransportError):
    """A pull brought more than the caller's ``max_bytes`` (the link is fine): stopped there,
    and nothing of the file is kept."""

    def __init__(self, device: str, remote: str, limit: int) -> None:
        super().__init__(f"{device}:{remote} is larger than {limit:,} bytes; not pulled")
        self.remote, self.limit = remote, limit


class DeviceCommandError(AiotError):
    """A command on the device exited non-zero."""

    def __init__(self, device: str, result) -> None:  # result: ShellResult
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        super().__init__(
            f"command on '{device}' exited {result.exit_code}: {tail[0]}",
            "run with --verbose to see the full device output",
        )
        self.result = result


class AgentError(AiotError):
    """The device agent reported an error or spoke an unknown protocol."""


class NoAgentPython(AgentError):
    """The device has no Python where the agent is started: a phone before ``devices setup``."""

    exit_code = 2

    def __init__(self, device: str, python: str) -> None:
        super().__init__(f"'{device}' has no Python for aiot's agent ('{python}' not found)",
                         f"run: aiot devices setup {device}  (a phone gets aiot's own aarch64 runtime)")
        self.device, self.python = device, python


class StoreError(AiotError):
    """The result store is unreadable, or newer than this aiot."""


class DatasetError(AiotError):
    """A dataset is missing or malformed."""


def is_transient(exc: BaseException) -> bool:
    """Whether a failure may go away on retry: the device or the link to it, not the run.

    A command that ran past its time limit (a hung agent) is the run's failure, not the link's.
    """
    flagged = getattr(exc, "transient", None)  # a lab node's verdict on its own failure
    if isinstance(flagged, bool):
        return flagged
    if isinstance(exc, CommandTimeout):
        return False
    return isinstance(exc, (TransportError, ConnectionError, EOFError, TimeoutError))


def first_line(said: BaseException | str | None, limit: int = 300) -> str:
    """The first non-empty line of an exception's message (its type's name when it has none)
    or of a text ("" for none), at most ``limit`` characters: what one-line errors quote of a
    toolchain's, a runtime's or a user's many-line message."""
    text = str(said or "").strip() if not isinstance(said, BaseException) else str(said).strip()
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if not line and isinstance(said, BaseException):
        line = type(said).__name__
    return line[:limit]


#: The longest reason a failed record keeps (a toolchain's message can run to pages).
MAX_REASON_CHARS = 500


def failure_reason(exc: BaseException) -> str:
    """One line for a failed record: the AiotError's message and hint, or the exception's type
    and the first line of its message (a runtime's 40-line error says what it is first), at
    most :data:`MAX_REASON_CHARS`."""
    if isinstance(exc, AiotError):
        text = " ".join(exc.one_line().split())
    else:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if len(text) <= MAX_REASON_CHARS:
        return text
    # A text cut before (a device's 10 MB error, cut where it came in) keeps its last words
    # that say by how much: "… [cut by aiot: 10485760 characters in all]".
    said = text[text.rindex(" … [cut by "):] if text.endswith("]") and " … [cut by " in text else "…"
    return text[:MAX_REASON_CHARS - len(said)] + said
