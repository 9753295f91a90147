"""The one place where command arguments are quoted for a POSIX shell on the device.

Every transport receives argv lists and turns them into a single command string here, so a
device name, model name or path with spaces, quotes, ``;`` or ``$()`` can never inject a
command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

_ENV_NAME_OK = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def quote(arg: str) -> str:
    """``arg`` quoted for a POSIX shell (``sh``, ``mksh`` on Android, ``bash``)."""
    return shlex.quote(str(arg))


def build_command(
    argv: Sequence[str], cwd: str | None = None, env: Mapping[str, str] | None = None,
    replace_shell: bool = False,
) -> str:
    """A shell command line that runs ``argv`` in ``cwd`` with extra ``env`` variables.

    With ``replace_shell`` the program replaces the shell (``exec``), so the shell's PID
    (``$$``) is the program's: a transport can then kill exactly it on a timeout.

    Raises:
        ValueError: an empty argv or an environment variable name that is not an identifier.
    """
    if not argv:
        raise ValueError("empty command")
    parts: list[str] = []
    if cwd:
        parts.append(f"cd {quote(cwd)} &&")
    if env:
        for name, value in env.items():
            if not name or not set(name) <= _ENV_NAME_OK or name[0].isdigit():
                raise ValueError(f"invalid environment variable name {name!r}")
            parts.append(f"{name}={quote(value)}")
    if replace_shell:
        parts.append("exec")
    parts.append(" ".join(quote(a) for a in argv))
    return " ".join(parts)
