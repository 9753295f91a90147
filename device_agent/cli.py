"""The agent's command line: ``python -m device_agent hello | session | COMMAND SPEC.json``."""

from __future__ import annotations

import json
import sys

from .agent import COMMANDS, execute
from .session import session
from .wire import emit, hello

USAGE = ("usage: python -m device_agent hello | session | "
         "{run,predict,memory,inspect,profile,serve} SPEC.json")


def main(argv: list[str] | None = None) -> int:
    """``python -m device_agent hello | session | {run,predict,memory,inspect,profile,serve}
    SPEC.json``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hello"]:
        emit("hello", **hello())
        return 0
    if argv == ["session"]:
        return session()
    if len(argv) != 2 or (argv[0] not in COMMANDS and argv[0] != "serve"):
        emit("error", type="usage", message=USAGE)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        emit("error", type=type(exc).__name__, message=str(exc))
        return 3
    return execute(argv[0], raw)
