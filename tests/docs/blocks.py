"""The code blocks of the README and the docs, and the ``aiot …`` command lines in them.

A command line is a line of a fenced block (a shell, YAML or plain block: not Python, TOML,
JSON or a ``text`` block of output) whose first word is ``aiot`` (or a path ending in
``/aiot``), after a prompt (``$``), a YAML list's dash or ``VAR=value`` assignments. Lines
ending in a backslash continue on the next; ``#`` starts a comment; ``&&``, ``||``, ``;`` and
``|`` separate commands; a redirection (``> file``) ends one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Blocks that hold no command lines: code, configuration, and program output.
NOT_SHELL = {"python", "py", "toml", "json", "text", "ini", "html", "xml"}
SEPARATORS = {"&&", "||", ";", "|"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]  # after ``aiot``
    where: str
    line: str

    def __str__(self) -> str:
        return f"{self.where}: {self.line}"


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, in order."""
    found, lines = [], path.read_text(encoding="utf-8").splitlines()
    fence = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence is None:
            match = re.match(r"(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, lang, start, body = match.group(1), match.group(2).lower(), number, []
        elif stripped.startswith(fence):
            found.append(Block(path, start, lang, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    return found


def _logical_lines(text: str):
    """``(first line number offset, line)`` with backslash continuations joined."""
    pending, start = "", 0
    for offset, line in enumerate(text.splitlines()):
        if not pending:
            start = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _segments(tokens: list[str]):
    segment: list[str] = []
    for token in tokens:
        if token in SEPARATORS:
            yield segment
            segment = []
        else:
            segment.append(token)
    yield segment


def _command(segment: list[str]) -> tuple[str, ...] | None:
    words = list(segment)
    while words and (words[0] in ("$", "-", "nohup", "time") or re.match(r"[A-Z_][A-Z0-9_]*=", words[0])):
        words.pop(0)
    if not words or not (words[0] == "aiot" or words[0].endswith("/aiot")):
        return None
    argv = []
    for word in words[1:]:
        if re.match(r"\d?[<>]", word) and not re.fullmatch(r"<[\w.-]+>", word):
            break  # a redirection (not a <placeholder>): the rest is a file name
        argv.append(word)
    return tuple(argv)


def block_commands(block: Block) -> list[Command]:
    """The ``aiot …`` command lines of one block (none in a block that is not a shell's)."""
    if block.lang in NOT_SHELL:
        return []
    found = []
    for offset, line in _logical_lines(block.text):
        text = line.strip()
        if text.startswith("run:"):  # a CI job's step
            text = text[len("run:"):]
        try:
            tokens = shlex.split(text, comments=True)
        except ValueError:  # an unclosed quote: not a shell line
            continue
        for segment in _segments(tokens):
            argv = _command(segment)
            if argv is not None:
                where = f"{block.path.relative_to(ROOT)}:{block.line + 1 + offset}"
                found.append(Command(argv, where, text))
    return found


def commands(files: list[Path] | None = None) -> list[Command]:
    """Every ``aiot …`` command line in a shell block of ``files`` (default: README and docs)."""
    return [c for path in files or doc_files() for b in blocks(path) for c in block_commands(b)]
