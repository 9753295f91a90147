"""The CLI edge: Rich consoles, JSON output and progress. Library code never imports this."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from aiot.core import environment
from aiot.core.notices import WARNING
from aiot.core.paths import results_dir
from aiot.core.units import size_text
from aiot.core.untrusted import visible


# Data goes to stdout, messages and progress to stderr, so `--json | jq` always works.
# Piped into a file or a CI log, tables get room instead of the 80 columns Rich assumes.
def _piped_width(stream) -> int | None:
    return None if stream.isatty() or os.environ.get("COLUMNS") else 160


# No emoji codes: a name from a user's file or a device (":fire:") is shown as it is, and a
# table's every cell is not searched for them (a quarter of a 50-row run table's drawing).
out = Console(highlight=False, soft_wrap=True, emoji=False, width=_piped_width(sys.stdout))
err = Console(stderr=True, highlight=False, emoji=False, width=_piped_width(sys.stderr))


@dataclass
class AppState:
    """Options of the root callback, shared with every command through ``ctx.obj``."""

    results_dir_override: str | None = None
    verbose: bool = False

    def results_dir(self) -> Path:
        return results_dir(self.results_dir_override)


def state(ctx) -> AppState:
    """The AppState of the current invocation (a default one when called directly)."""
    root = ctx.find_root()
    if not isinstance(root.obj, AppState):
        root.obj = AppState()
    return root.obj


def print_json(data) -> None:
    """Machine output on stdout: plain JSON, never Rich markup."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def message(text: str) -> None:
    """A human message on stderr."""
    err.print(text)


def notice(text: str) -> None:
    """A notice of library code (:mod:`aiot.core.notices`) on stderr, a warning's prefix in yellow."""
    if text.startswith(WARNING):
        message(f"[yellow]{WARNING.strip()}[/] {safe(text[len(WARNING):])}")
    else:
        message(safe(text))


def safe(text) -> str:
    """Outside text (a device's facts, its error messages) for a Rich console: control
    characters written out, so no escape sequence reaches the terminal, and Rich markup
    escaped, so ``[bold]`` is shown as it is."""
    from rich.markup import escape

    return escape(visible(str(text)))


def name_column(header: str, names, cap: int = 16):
    """A table column of names (ids, devices, models) that Rich never cuts with an ellipsis: as
    wide as its longest name up to ``cap`` characters, folded onto a second line beyond that.
    The part that tells two rows apart is often a name's end (``mynet.py:make_a``/``:make_b``)."""
    from rich.table import Column

    widest = max((len(str(name)) for name in names), default=1)
    return Column(header, overflow="fold", min_width=min(widest, cap))


def fmt_ms(value: float | None) -> str:
    """Milliseconds with about four significant digits (sub-millisecond models are common)."""
    if value is None:
        return "—"
    return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


fmt_bytes = size_text  # one size unit everywhere (aiot.core.units)


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.2f}%"


def progress_enabled() -> bool:
    """Progress bars only where a person watches: a terminal, and not under CI capture."""
    return err.is_terminal and not environment.get("AIOT_NO_PROGRESS")


@contextmanager
def spinner(text: str):
    """A status spinner on stderr for a step that can take more than a second.

    Yields an object whose ``update(text)`` changes the shown text (a plain line when
    progress display is off).
    """
    if progress_enabled():
        with err.status(text) as status:
            yield status
    else:
        message(text)
        yield _PlainStatus()


class _PlainStatus:
    """``update`` prints the new step as a line (no live display: piped output, CI)."""

    def update(self, text: str) -> None:
        message(text)
