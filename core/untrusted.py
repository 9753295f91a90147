"""Text that came from a device, made harmless wherever aiot shows or writes it.

A device's model name, SoC, build properties, thermal zone names and error messages are
whatever the device says: a hostile or broken one can put terminal escape sequences, HTML
or spreadsheet formulas in them. Each writer neutralises them at its own edge (terminal,
Markdown/HTML, CSV); the store keeps them as they came.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (0x9B is a one-byte CSI on many terminals) and the Unicode
# bidirectional controls — embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069),
# the left-to-right/right-to-left and Arabic letter marks (U+200E, U+200F, U+061C) — which
# reorder what a reader sees ("Trojan Source": "gnp.exe" shown for "exe.png").
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

#: What a spreadsheet reads as the start of a formula (OWASP's list for CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _shown(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "") -> str:
    """``text`` with each control character written out as an escape (``\\x1b``) rather than
    acted on; characters in ``keep`` (e.g. ``"\\n"``) pass unchanged."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _shown(m), text)


def csv_cell(value):
    """A CSV cell that no spreadsheet evaluates: numbers stay numbers; a string starting like
    a formula gets a leading apostrophe (shown as text, the apostrophe hidden), and control
    characters other than tab and newline are written out."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_STARTS):
        value = "'" + value
    return visible(value, keep="\t\n")
