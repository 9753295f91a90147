"""What keeps a lab's Ray cluster to the hosts meant to be in it: a shared secret, and sockets
on the address the user chose.

**The secret.** Every Ray process of the lab runs with Ray's token authentication
(``RAY_AUTH_MODE=token``): a node or driver without the token is refused by the GCS and the
raylets. ``aiot lab start --head`` writes the token into aiot's own state
(``<state>/lab/auth_token``, mode 0600) — never Ray's shared default ``~/.ray/auth_token`` —
and points Ray at it with ``RAY_AUTH_TOKEN_PATH`` (Ray reads ``RAY_AUTH_TOKEN`` first, so
aiot removes that from the nodes' environment). Other hosts get a copy of that file
(``lab join --token FILE`` keeps it in their state); ``AIOT_LAB_TOKEN_FILE`` names one for a
single command. A token file is a small regular file: anything else (a FIFO, ``/dev/zero``,
a folder, a file over 4 KiB) is refused by name before a byte of it is read (:func:`read_token`).

**The address.** Ray 2.x has no option to bind its GCS, raylet and workers' gRPC servers to an
address: they listen on every interface, and ``ray start --node-ip-address 127.0.0.1`` is
turned into the machine's external address. So each node runs under a small ``bind()`` shim
(``LD_PRELOAD``, built once with the host's C compiler) that moves every wildcard bind of
Ray's processes to the chosen address, and aiot's processes keep a loopback address as
given (:func:`keep_loopback`). ``--bind 0.0.0.0`` means every interface, as the user asked:
no shim then, the token still required.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AiotError, UsageError
from aiot.core.paths import cache_dir, state_dir
from aiot.core.units import size_text

TOKEN_ENV = "AIOT_LAB_TOKEN_FILE"
TOKEN_NAME = "auth_token"
#: A token file's most bytes: aiot's token is 64 hex characters and a newline, so anything
#: bigger (a log, an image, /dev/zero) is not a token and is never read whole.
TOKEN_MAX_BYTES = 4096
#: What a token file is, for the hints of every refusal.
_TOKEN_HINT = ("a lab token is a small text file: copy lab/auth_token from the head's aiot state to "
               "this host and pass --token FILE")
#: Environment variables of Ray that would pick another token or another mode than aiot's.
_RAY_AUTH_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")

_SHIM_SOURCE = r"""
/* aiot's bind() shim for Ray's processes: a bind to the wildcard address (0.0.0.0 or ::)
 * goes to AIOT_LAB_BIND instead (an IPv4 address reaches a dual-stack socket as ::ffff:a.b.c.d).
 * Every other bind is left as it is. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    const char *want = getenv("AIOT_LAB_BIND");
    struct in_addr v4;
    struct in6_addr v6;
    int is_v4 = want && inet_pton(AF_INET, want, &v4) == 1;
    int is_v6 = want && !is_v4 && inet_pton(AF_INET6, want, &v6) == 1;
    if (addr && (is_v4 || is_v6)) {
        if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
            struct sockaddr_in a;
            memcpy(&a, addr, sizeof a);
            if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
                if (!is_v4) { errno = EADDRNOTAVAIL; return -1; }
                a.sin_addr = v4;
                return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
            }
        } else if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 a;
            memcpy(&a, addr, sizeof a);
            if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
                if (is_v4) {
                    memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
                    a.sin6_addr.s6_addr[10] = 0xff;
                    a.sin6_addr.s6_addr[11] = 0xff;
                    memcpy(&a.sin6_addr.s6_addr[12], &v4, 4);
                } else {
                    a.sin6_addr = v6;
                }
                return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
            }
        }
    }
    return real_bind(fd, addr, len);
}
"""


def lab_state_dir() -> Path:
    """``<state>/lab``, readable by this account only (it holds the token)."""
    folder = state_dir() / "lab"
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        folder.chmod(0o700)
    return folder


def token_path() -> Path:
    """Where this host keeps the lab's token."""
    return lab_state_dir() / TOKEN_NAME


def create_token() -> Path:
    """The head's token: kept if this host has one already (joined hosts' copies stay valid),
    else a new random one, written 0600."""
    path = token_path()
    if read_token(path):
        _check_private(path)
        return path
    _write_private(path, secrets.token_hex(32))
    return path


def keep_token(given: Path | None) -> Path:
    """Once the lab accepted the ``given`` token file, keep a private copy in this host's
    state (later commands find it there); returns the token file to use from now on."""
    return import_token(Path(given).expanduser()) if given is not None else find_token()


def import_token(source: Path) -> Path:
    """Keep a copy of the token file ``source`` (from the head) in this host's state."""
    token = read_token(source)
    if not token:
        raise UsageError(f"lab token file {source} is missing or empty",
                         "copy it from the head host: <its aiot state>/lab/auth_token")
    _write_private(token_path(), token)
    return token_path()


def find_token(given: Path | None = None) -> Path:
    """The token file a node or driver uses: ``given`` (see :func:`keep_token`), else
    ``$AIOT_LAB_TOKEN_FILE``, else this host's state.

    Raises:
        UsageError: there is none (or ``given`` is empty, or no token file: see
            :func:`read_token`), saying how to bring it from the head.
    """
    if given is not None:
        given = Path(given).expanduser()
        if not read_token(given):
            raise UsageError(f"lab token file {given} is missing or empty",
                             "copy it from the head host: lab/auth_token in its aiot state")
        return given
    env = environment.get(TOKEN_ENV, "").strip()
    if env:
        path = Path(env).expanduser()
        if not read_token(path, f"{TOKEN_ENV}={env}"):
            raise UsageError(f"{TOKEN_ENV}={env} is missing or empty", "point it at a copy of the head's token")
        return path
    path = token_path()
    if not read_token(path):
        raise UsageError("this host has no lab token: the lab refuses hosts without it",
                         f"copy the head's token file (lab/{TOKEN_NAME} in its aiot state) to this host "
                         f"and pass --token FILE, or set {TOKEN_ENV}=FILE")
    return path


def auth_env(token: Path) -> dict[str, str]:
    """The variables that put a Ray process into token mode with ``token`` (and no other)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(Path(token).absolute())}


def node_env(base: dict[str, str], token: Path, bind: str) -> dict[str, str]:
    """The environment of a node's ``ray start``: token mode with aiot's token; the bind
    shim with the chosen address unless it is the wildcard."""
    env = {k: v for k, v in base.items() if k not in _RAY_AUTH_VARS}
    env.update(auth_env(token))
    if not is_wildcard(bind):
        shim = bind_shim()
        env["AIOT_LAB_BIND"] = bind
        env["LD_PRELOAD"] = " ".join(p for p in (str(shim), base.get("LD_PRELOAD", "")) if p)
    return env


def use_token_here(token: Path) -> None:
    """Put this (driver) process into token mode with ``token`` before Ray connects."""
    for name in _RAY_AUTH_VARS:
        os.environ.pop(name, None)
    os.environ.update(auth_env(token))
    with contextlib.suppress(Exception):  # Ray not imported yet: it reads the variables on import
        import sys

        raylet = sys.modules.get("ray._raylet")
        if raylet is not None:
            raylet.Config.initialize("")
            raylet.AuthenticationTokenLoader.instance().reset_cache()


def check_bind(bind: str) -> str:
    """``bind`` as an IP address this host has (or the wildcard).

    Raises:
        UsageError: not an IP address.
    """
    try:
        return str(ipaddress.ip_address(bind.strip("[]")))
    except ValueError:
        raise UsageError(f"--bind {bind} is not an IP address",
                         "give this host's address on the lab network, e.g. --bind 10.0.0.5") from None


def is_wildcard(bind: str) -> bool:
    return ipaddress.ip_address(bind.strip("[]")).is_unspecified


def keep_loopback() -> None:
    """Make this process's Ray keep a loopback address as given.

    Ray replaces ``127.0.0.1``/``localhost`` by the machine's external address wherever it
    resolves one (a node's ``--node-ip-address``, a driver's ``ray.init(address=...)``): the
    node would then advertise, and the driver dial, an address its sockets are not on.
    """
    from ray._private import services

    services.resolve_ip_for_localhost = _as_given


def _as_given(host: str) -> str:
    if not host:
        raise ValueError(f"Malformed host: {host}")
    return host


def bind_shim() -> Path:
    """The compiled shim (built once per source and compiler into aiot's cache).

    Raises:
        AiotError: no C compiler here, or it failed; the hint names ``--bind 0.0.0.0``.
    """
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    digest = hashlib.sha256((_SHIM_SOURCE + (compiler or "")).encode()).hexdigest()[:16]
    target = cache_dir() / "lab" / f"bindshim-{digest}.so"
    if target.is_file():
        return target
    if compiler is None:
        raise AiotError("cannot keep Ray's sockets on the chosen address: no C compiler (cc) here to "
                        "build aiot's bind shim",
                        "install one (e.g. apt install gcc), or run the node with --bind 0.0.0.0 to "
                        "let Ray listen on every interface (the token still guards it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = target.with_suffix(".c")
    source.write_text(_SHIM_SOURCE)
    partial = target.with_name(target.name + ".part")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(source), "-ldl"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AiotError(f"building aiot's bind shim for Ray failed: {last[:200]}",
                        "check the C compiler, or run the node with --bind 0.0.0.0")
    partial.replace(target)
    return target


def read_token(path: Path, named: str | None = None) -> str:
    """The token in ``path``, stripped; ``""`` when the file does not exist or is empty.

    Only a small regular file is read, and never more than :data:`TOKEN_MAX_BYTES` + 1 bytes
    of it: a FIFO, a device (``/dev/zero``), a folder or a huge file is refused at once, with
    no open that blocks and no read that fills memory. ``named`` is how errors name the
    file (default ``lab token file PATH``).

    Raises:
        UsageError: the file is no token file (not a regular file, too big, unreadable, not text).
    """
    named = named or f"lab token file {path}"
    try:
        kind = _file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise UsageError(f"{named} cannot be read ({exc.strerror})", _TOKEN_HINT) from None
    if kind is None:  # opened without blocking, and checked again: it may have been swapped
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise UsageError(f"{named} cannot be read ({exc.strerror})", _TOKEN_HINT) from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            kind = _file_kind(info.st_mode)
            data = fh.read(TOKEN_MAX_BYTES + 1) if kind is None and info.st_size <= TOKEN_MAX_BYTES else b""
            size = max(info.st_size, len(data))
    if kind is not None:
        raise UsageError(f"{named} is {kind}, not a token file", _TOKEN_HINT)
    if size > TOKEN_MAX_BYTES:
        raise UsageError(f"{named} holds {size_text(size)}, more than a token file's "
                         f"{size_text(TOKEN_MAX_BYTES)}", _TOKEN_HINT)
    try:
        return data.decode().strip()
    except UnicodeDecodeError:
        raise UsageError(f"{named} is not text, so no token file", _TOKEN_HINT) from None


def _file_kind(mode: int) -> str | None:
    """What a file that is not a regular one is (``a FIFO``), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def _write_private(path: Path, token: str) -> None:
    """Write ``token`` readable by this account only, atomically (never world-readable,
    not even for an instant: the temporary file is created 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    partial.replace(path)


def _check_private(path: Path) -> None:
    """Tighten a token file others may read (an older copy, a umask): it is a secret."""
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


__all__ = ["TOKEN_ENV", "TOKEN_MAX_BYTES", "auth_env", "bind_shim", "check_bind", "create_token", "find_token",
           "import_token", "is_wildcard", "keep_token", "keep_loopback", "lab_state_dir", "node_env", "read_token",
           "token_path", "use_token_here"]
