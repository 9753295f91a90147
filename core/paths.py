"""Where aiot keeps results (the store, artifacts) and caches (weights, shards).

Results are something a user looks at and keeps, so in a source checkout they land next to
the code (``<checkout>/results``); an installed aiot uses the platform's user data folder.
Caches can always be rebuilt and go to the user cache folder.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import UsageError

log = logging.getLogger(__name__)

#: ``name = "aiot"`` in the ``[project]`` table of a pyproject.toml.
_PROJECT_NAME = re.compile(r'^\s*name\s*=\s*["\']aiot["\']\s*$', re.MULTILINE)


@functools.cache
def source_root() -> Path | None:
    """The aiot source checkout this module runs from, or None for an installed aiot.

    Walks up from this file (``core/paths.py`` in a checkout, whose parent is the checkout)
    looking for a ``pyproject.toml`` that declares ``name = "aiot"``; any other project's
    pyproject.toml on the way (e.g. the user's own project around a venv) is skipped.
    """
    for parent in Path(__file__).resolve().parents:
        pyproject = parent / "pyproject.toml"
        try:
            if pyproject.is_file() and _PROJECT_NAME.search(pyproject.read_text(encoding="utf-8")):
                return parent
        except (OSError, UnicodeDecodeError):
            continue
    return None


def home() -> Path:
    """The user's home folder: ``$HOME`` when it is an absolute path, else the account's home
    from the password database. An empty or relative ``HOME`` (``env HOME= aiot``, a service
    unit) would otherwise put aiot's folders under ``/`` or the current folder, where the
    toolchains installed under the real home are not found.

    Raises:
        UsageError: neither names a usable folder.
    """
    env = os.environ.get("HOME", "")
    if os.path.isabs(env) and env != "/":
        return Path(env)
    try:
        import pwd

        account = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):  # no such account, or not a POSIX system
        account = ""
    if os.path.isabs(account) and account != "/":
        if env != account:
            log.debug("HOME is %r: using the account's home %s", env, account)
        return Path(account)
    if os.path.isabs(env):
        return Path(env)
    if sys.platform == "win32":
        return Path.home()
    raise UsageError(f"HOME is {'empty' if not env else repr(env)} and the account has no home "
                     "folder", "set HOME to your home folder, or AIOT_CACHE_DIR and "
                     "AIOT_RESULTS_DIR to writable folders")


def xdg_dir(variable: str, default: str) -> Path:
    """``$variable`` when it is an absolute path (the XDG spec ignores relative ones), else
    :func:`home` / ``default``."""
    env = os.environ.get(variable, "")
    return Path(env) if os.path.isabs(env) else home() / default


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/aiot`` (default ``~/.config/aiot``): the inventory, known hosts."""
    return xdg_dir("XDG_CONFIG_HOME", ".config") / "aiot"


def state_dir() -> Path:
    """aiot's state (emulators, campaign locks, a lab node's token): ``$AIOT_STATE_DIR``, else
    ``$XDG_STATE_HOME/aiot`` (default ``~/.local/state/aiot``)."""
    base = environment.get("AIOT_STATE_DIR")
    if base:
        return Path(base)
    return xdg_dir("XDG_STATE_HOME", ".local/state") / "aiot"


def _user_data_dir() -> Path:
    """The platform's per-user data folder (XDG on Linux)."""
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return home() / "Library" / "Application Support"
    return xdg_dir("XDG_DATA_HOME", ".local/share")


def _user_cache_dir() -> Path:
    """The platform's per-user cache folder (XDG on Linux)."""
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return home() / "Library" / "Caches"
    return xdg_dir("XDG_CACHE_HOME", ".cache")


def _ensure_dir(path: Path, what: str, hint: str) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {what} folder '{path}': {exc.strerror or exc}", hint) from None
    return path


def results_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding the result store and artifacts, created on demand.

    Precedence: ``override`` (the ``--results-dir`` option) > env ``AIOT_RESULTS_DIR`` >
    ``<checkout>/results`` when running from a source checkout > the user data folder
    (``~/.local/share/aiot/results`` on Linux).

    Args:
        override: an explicit folder; wins over everything else.

    Returns:
        The absolute folder path (it exists).

    Raises:
        UsageError: the folder cannot be created.
    """
    env = environment.get("AIOT_RESULTS_DIR")
    if override:
        path = Path(override)
    elif env:
        path = Path(env)
    elif (root := source_root()) is not None:
        path = root / "results"
    else:
        path = _user_data_dir() / "aiot" / "results"
    path = path.expanduser().absolute()
    hint = "pass --results-dir or set AIOT_RESULTS_DIR to a writable folder"
    return _ensure_dir(path, "results", hint)


def cache_dir() -> Path:
    """The cache folder (trained weights in ``weights/``, dataset shards, …), created on demand.

    Precedence: env ``AIOT_CACHE_DIR`` > the user cache folder (``~/.cache/aiot`` on Linux,
    ``$XDG_CACHE_HOME/aiot`` when that is set).

    Raises:
        UsageError: the folder cannot be created.
    """
    env = environment.get("AIOT_CACHE_DIR")
    path = Path(env) if env else _user_cache_dir() / "aiot"
    path = path.expanduser().absolute()
    return _ensure_dir(path, "cache", "set AIOT_CACHE_DIR to a writable folder")


def weights_dir() -> Path:
    """Where :func:`aiot.host.training.trainer.train` saves weights, and where runs look for the
    newest training of a model (:mod:`aiot.host.engine.weights`): env ``AIOT_WEIGHTS_DIR``, else
    ``cache_dir() / "weights"``."""
    env = environment.get("AIOT_WEIGHTS_DIR")
    if env:
        path = Path(env).expanduser().absolute()
        return _ensure_dir(path, "weights cache", "set AIOT_WEIGHTS_DIR to a writable folder")
    hint = "set AIOT_CACHE_DIR to a writable folder"
    return _ensure_dir(cache_dir() / "weights", "weights cache", hint)
