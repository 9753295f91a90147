"""Is there a lab head at this address that lets this host in? Asked with deadlines, before
Ray is: Ray's own connect retries for minutes when nothing or something else answers (its C++
calls ignore Ctrl-C meanwhile and log each try on stderr), and learns that its token is wrong
only when its retries run out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiot.core.errors import TransportError, UsageError, first_line
from aiot.host.lab import security

log = logging.getLogger(__name__)

#: Seconds the head's port has to accept a TCP connection.
PROBE_S = 5.0
#: Seconds (and Ray's tries, one a second) to get into the head's GCS.
CONNECT_S = 6.0


def check_head(address: str, token: Path | None = None, driver: bool = False) -> Path:
    """One line, within seconds, unless a Ray head at ``address`` accepts this host's token
    (``token``, else the one :func:`aiot.host.lab.security.find_token` finds); returns it.

    Puts this process into Ray's token mode with that token; a ``driver`` (a process that
    goes on to ``ray.init``) also gets Ray's connect retries and C++ log level cut to what
    aiot reports itself.

    Raises:
        TransportError: nothing listens, the peer is silent or not a Ray head, or it refused
            the token.
        UsageError: this host has no token.
    """
    host, port = split_address(address)
    probe(host, port)
    found = security.find_token(token)
    security.use_token_here(found)
    if driver:
        # Read once, when Ray is imported (below).
        os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", str(int(CONNECT_S)))
    os.environ.setdefault("RAY_py_gcs_connect_timeout_s", str(int(CONNECT_S)))
    security.keep_loopback()
    preflight(address)
    return found


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of a lab address ``HOST:PORT`` (``[v6]:PORT`` for IPv6).

    Raises:
        UsageError: no port, or not a number.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"lab address '{address}' is not HOST:PORT",
                         "give it as HOST:PORT, e.g. 192.168.1.10:6380")
    return host.strip("[]"), int(port)


def probe(host: str, port: int, timeout: float = PROBE_S) -> None:
    """A TCP connection to the head's port, or one line on why there is none.

    Raises:
        TransportError: refused, unreachable or no answer within ``timeout`` seconds.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except TimeoutError:
        why = f"no answer within {timeout:.0f} s"
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    raise TransportError(f"no lab head at {host}:{port} ({why.lower()})",
                         "start it there with: aiot lab start --head, or check the address "
                         "(aiot lab status --address HOST:PORT)")


def preflight(address: str, timeout: float = CONNECT_S) -> None:
    """Open a GCS client to ``address`` with this process's token and a deadline, before Ray
    connects: Ray's own connect retries for minutes, ignoring Ctrl-C, when the peer is silent
    or not a Ray head, and only times out when the token is wrong.

    The client is made in a thread the main thread waits for: the wait has a deadline and
    Ctrl-C ends it (Ray's C++ call does not return to Python until its own timeout).

    Raises:
        TransportError: the token was refused, or no Ray head answered in ``timeout`` seconds.
    """
    from ray._raylet import GcsClient

    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            GcsClient(address=address)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the waiting thread
            outcome.append(exc)

    with stderr_captured() as said:
        worker = threading.Thread(target=attempt, name="aiot-lab-preflight", daemon=True)
        worker.start()
        # Short waits: a signal that lands on one of Ray's threads is handled by the main
        # thread only when it runs Python again.
        deadline = time.monotonic() + timeout
        while worker.is_alive() and time.monotonic() < deadline:
            worker.join(0.1)
    failure = outcome[0] if outcome else TimeoutError(f"no answer within {timeout:.0f} s")
    if failure is None:
        return
    text = f"{failure} {said[0]}"
    if "InvalidAuthToken" in text or "Unauthenticated" in text:
        raise token_refused(address)
    if isinstance(failure, TimeoutError) or "Timed out" in text:
        why = f"no answer within {timeout:.0f} s"
    else:
        why = first_line(str(failure), 200)
    raise TransportError(f"the lab at {address} did not answer as a Ray head ({why})",
                         "check the address: the head prints it (aiot lab start --head)")


def token_refused(address: str) -> TransportError:
    return TransportError(f"the lab at {address} refused this host's token",
                          "copy the head's token file here again: aiot lab join … --token FILE "
                          f"(or {security.TOKEN_ENV}=FILE)")


@contextlib.contextmanager
def stderr_captured():
    """Ray's C++ lines on fd 2 during the block, kept from the terminal; ``said[0]`` holds them."""
    said = [""]
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said[0] = sink.read().decode(errors="replace")
            for line in said[0].splitlines():
                log.debug("ray: %s", line)


__all__ = ["CONNECT_S", "PROBE_S", "check_head", "preflight", "probe", "split_address", "stderr_captured",
           "token_refused"]
