"""The error a native benchmark binary's unreadable output becomes."""

from __future__ import annotations

from aiot.core.errors import AiotError

TAIL_CHARS = 4000  # enough for the last screen of a tool's log, small enough for a result record


class NativeOutputError(AiotError):
    """A native tool ran, but its output holds no timing this adapter can read.

    Never replaced by a zero or a guess: the caller records the run as failed. The end of the
    unparsed output is kept on the error, because the reason is usually in the last lines
    (an unknown flag, a missing delegate, a crash message, a new output format).

    Args:
        tool: the binary's name, e.g. ``benchmark_model``.
        reason: what was missing, in one line.
        text: the whole output; only its last ``TAIL_CHARS`` characters are kept.
    """

    def __init__(self, tool: str, reason: str, text: str) -> None:
        super().__init__(
            f"cannot read {tool} output: {reason}",
            "the output's last lines are kept on the error; check the binary's version and flags",
        )
        self.tool = tool
        self.reason = reason
        self.text = text[-TAIL_CHARS:]
        self.truncated = len(text) > TAIL_CHARS
