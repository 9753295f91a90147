"""What the lab view refuses before any route (or its token check) runs.

- **A Host it is not** (421): a page of another site whose name an attacker points at
  ``127.0.0.1`` (DNS rebinding) would otherwise be same-origin with the view. The view answers
  as its bound address and port, as ``localhost``/``127.0.0.1``/``[::1]`` when it binds
  loopback, as any IP address when it binds every address, and as the names ``--allow-host``
  adds (a tunnel's other port); a name never resolves to it by accident.
- **Headers over** :data:`MAX_HEADERS` (431); **a body over** :data:`MAX_BODY` (413),
  refused by its ``Content-Length`` before a byte is read, and a chunked one as soon as it
  passes the limit: no request costs the host more memory than that (authenticated forms are
  a few hundred bytes).
- **A client that sends slowly**: a body not whole within the client timeout (408), and, in
  :func:`timed_protocol`, a connection whose request headers are not whole within it (closed;
  uvicorn's own keep-alive timeout only counts between requests).
"""

from __future__ import annotations

import asyncio
import ipaddress

#: The largest request body the view reads (its forms: a token, a name, a device, a note).
MAX_BODY = 16 * 1024
#: Seconds a client has to send a request's headers, and its body.
CLIENT_TIMEOUT_S = 10.0
#: A request's headers at most (431 past it; h11 is given the same limit for headers still
#: arriving), and seconds an idle kept-alive connection stays open between requests.
MAX_HEADERS, KEEP_ALIVE_S = 16 * 1024, 5
#: Seconds a refused body is still read (and dropped) so that the client, still sending,
#: reads the refusal rather than a reset connection; at most :data:`LINGER_BYTES` of it.
LINGER_S, LINGER_BYTES = 2.0, 64 * 1024 * 1024
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_CLOSE = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
          (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]


class Hosts:
    """The ``Host`` header values the view on ``bind:port`` answers to."""

    def __init__(self, bind: str, port: int, extra: tuple[str, ...] = ()) -> None:
        self.port = port
        address = ipaddress.ip_address(bind)
        self.any_address = address.is_unspecified
        self.names = {str(address)} | (set(_LOOPBACK) if address.is_loopback or self.any_address else set())
        self.extra = {split_host(name, port) for name in extra}
        shown = f"[{bind}]" if ":" in bind else bind
        self.shown = f"{shown}:{port}"

    def allows(self, header: str) -> bool:
        """Whether a request naming ``header`` as its Host is meant for this view."""
        try:
            name, port = split_host(header, 80)
        except ValueError:
            return False
        if (name, port) in self.extra:
            return True
        if port != self.port:
            return False
        if name in self.names:
            return True
        if self.any_address:  # an address literal: no name that DNS could point elsewhere
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return False
            return True
        return False


def split_host(text: str, default_port: int) -> tuple[str, int]:
    """``"[::1]:8470"`` as ``("::1", 8470)``, ``"Example.org"`` as ``("example.org", default_port)``.

    Raises:
        ValueError: not a host and optional port.
    """
    text = text.strip().lower()
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("" if not rest else None)
    else:
        name, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not name or port is None or (port and not port.isdigit()) or any(c in name for c in "/@ \\"):
        raise ValueError(f"{text!r} is not a host")
    return name, int(port) if port else default_port


class Guard:
    """ASGI middleware (outermost): the Host check, the body limit and the body timeout; the
    application below gets the body whole, as one message."""

    def __init__(self, app, hosts: Hosts, timeout_s: float = CLIENT_TIMEOUT_S, max_body: int = MAX_BODY) -> None:
        self.app, self.hosts, self.timeout_s, self.max_body = app, hosts, timeout_s, max_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.hosts.allows(host):
            await _answer(send, 421, f"this is the lab view at {self.hosts.shown}, not {host or 'no host'}: "
                                     f"open http://{self.hosts.shown}/ (a tunnel's other name or port: "
                                     "aiot lab view --allow-host NAME:PORT)")
            return
        size = sum(len(k) + len(v) + 4 for k, v in scope.get("headers", []))
        if size > MAX_HEADERS:  # (h11 refuses more only while they arrive in pieces)
            await _answer(send, 431, f"the request's headers ({size} bytes) are over the lab view's limit "
                                     f"of {MAX_HEADERS} bytes")
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_body):
            status = 413 if declared.strip().isdigit() else 400
            await self._refuse(receive, send, status, declared.decode("latin-1"))
            return
        try:
            body = await self._body(receive)
        except _TooLarge as refused:
            await self._refuse(receive, send, 413, "chunked", ended=refused.ended)
            return
        except TimeoutError:
            await _answer(send, 408, f"the request's body was not sent within {self.timeout_s:g} s")
            return
        except _Gone:
            return
        await self.app(scope, _replay(body, receive), send)

    async def _body(self, receive) -> bytes:
        """The request's body, read with a cap and a deadline.

        Raises:
            _TooLarge: it passed :attr:`max_body`.
            TimeoutError: it was not whole within :attr:`timeout_s`.
            _Gone: the client left.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        chunks, size = [], 0
        while True:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _TooLarge(ended=not message.get("more_body", False))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse(self, receive, send, status: int, size: str, ended: bool = False) -> None:
        """Answer ``status`` for a body over the limit, then read and drop what the client is
        still sending for a moment (bounded; nothing when the body has ``ended``) so that it
        reads the answer, then close."""
        body = f"{size} bytes" if size.isdigit() else "chunked"
        what = ("the request's Content-Length is not a number" if status == 400 else
                f"the request's body ({body}) is over the lab view's limit of {self.max_body} bytes")
        await _answer(send, status, what, more=True)
        loop = asyncio.get_running_loop()
        deadline, dropped = loop.time() + LINGER_S, 0
        try:
            while not ended and dropped < LINGER_BYTES:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                dropped += len(message.get("body", b""))
                if message["type"] == "http.disconnect" or not message.get("more_body", False):
                    break
        except TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _TooLarge(Exception):
    def __init__(self, ended: bool) -> None:
        super().__init__()
        self.ended = ended  # the client sent all of it already


class _Gone(Exception):
    pass


def _replay(body: bytes, receive):
    """A receive that gives ``body`` whole first, then what the client sends (its disconnect)."""
    given = False

    async def replayed():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send, status: int, line: str, more: bool = False) -> None:
    """A one-line plain-text answer that closes the connection (``more``: its end not yet sent)."""
    body = (line + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [*_CLOSE, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": more})


def timed_protocol(timeout_s: float = CLIENT_TIMEOUT_S) -> type:
    """uvicorn's h11 protocol that closes a connection whose request headers are not whole
    within ``timeout_s`` of its opening or of its last answer (a slowloris client holds a
    connection, and the memory of its half-sent headers, no longer than that)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _headers_due = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
            self._headers_due = self.loop.call_later(timeout_s, self._headers_late)

        def _headers_late(self) -> None:
            # Still waiting for a request's headers (IDLE: none yet, or some of them)?
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol
