"""Round 4, the lab view as an attacker and a careless lab meet it: every case against the real
view (``aiot lab view`` as a user starts it: uvicorn on a real port), the cookie case in a real
headless Chromium with a real second HTTP server on another port.

- Its session cookie goes to every port of ``127.0.0.1`` (browsers do send it there): what a
  page on another port receives is a random id of this server's, which works only while its
  session lives, ends on logout or idleness, and never on another view; the old cookie (an HMAC
  of the token) no longer opens anything.
- A ``Host`` that is not the view's (DNS rebinding) is refused before anything else.
- A 400 MB body is refused before it is read (the server's memory measured), a client that
  sends its headers or its body a byte a second is dropped within the timeout.
- A damaged store under the view is a 503 page with the store's one-line error, on every page.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import http.server
import os
import select
import socket
import threading
import time
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.integration.test_lab_view_browser import browser, log_in, running_view, wait_until  # noqa: F401

MB = 1 << 20
#: The idle time of the cookie case's view: long enough for a page to load on a loaded box,
#: short enough to wait out.
IDLE_S = 6.0


def _port(url: str) -> int:
    return urlsplit(url).port


def _request(url: str, path: str, *, host: str | None = None, cookie: str | None = None,
             token: str | None = None, method: str = "GET", body: bytes | None = None) -> tuple[int, str]:
    """One request to the view at ``url`` with exactly these headers: (status, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{_port(url)}")
        if cookie:
            conn.putheader("Cookie", cookie)
        if token:
            conn.putheader("Authorization", f"Bearer {token}")
        if body is not None:
            conn.putheader("Content-Type", "application/x-www-form-urlencoded")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, answer.read().decode("utf-8", "replace")
    finally:
        conn.close()


@contextlib.contextmanager
def other_port():
    """A plain HTTP server on another port of 127.0.0.1 (another user's notebook, a dev
    server): it records the Cookie header of every request it gets; yields (url, seen)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Cookie") or "")
            body = b"<!doctype html><title>another port</title><p>nothing here"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _cookies(header: str) -> dict[str, str]:
    jar = SimpleCookie()
    jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


def _view_cookie(browser, other: str, seen: list[str], port: int) -> str:
    """Follow a link to the other port's page; the value of the view's cookie (named for
    ``port``) that the browser sent there."""
    browser.get(f"{other}/notebook")
    wait_until(lambda: "another port" in browser.title, "the other port's page")
    sent = _cookies(seen[-1])
    name = f"aiot_lab_view_{port}"
    assert name in sent, f"the browser sent {sorted(sent)} to another port"  # browsers do
    return sent[name]


@pytest.mark.fault("the view's cookie, sent to another local port, is replayed")
def test_a_cookie_another_port_received_opens_nothing_once_its_session_ends(browser, tmp_path, fault):
    with contextlib.ExitStack() as stack:
        url, token = stack.enter_context(running_view(tmp_path, "--session-idle-s", str(IDLE_S)))
        port = _port(url)
        name = f"aiot_lab_view_{port}"
        other, seen = stack.enter_context(other_port())

        # What the old view set: an HMAC of the token, the same for ever; now it opens nothing.
        old = hmac.new(token.encode(), b"aiot lab view session", hashlib.sha256).hexdigest()
        for cookie in (f"aiot_lab_view={old}", f"{name}={old}"):
            assert _request(url, "/", cookie=cookie)[0] == 401

        log_in(browser, url, token, name="Ada Lovelace")
        first = _view_cookie(browser, other, seen, port)
        assert token not in seen[-1] and old not in seen[-1]
        # While its session lives, a copy reads as the person (the window a copy has) ...
        status, page = _request(url, "/", cookie=f"{name}={first}")
        assert status == 200 and "signed in as Ada Lovelace" in page
        # ... then a second view starts on another port (while the first's session idles) ...
        started = time.monotonic()
        url_b, token_b = stack.enter_context(running_view(tmp_path))
        time.sleep(max(0.0, IDLE_S + 0.5 - (time.monotonic() - started)))
        # ... and the idle session has ended: the copy opens nothing, nor does the browser
        status, page = _request(url, "/", cookie=f"{name}={first}")
        assert status == 401 and "Your session has ended" in page
        browser.get(url)
        wait_until(lambda: "Log in" in browser.page_source, "the login page after the idle time")

        # Logged out, a fresh session's copy opens nothing either.
        log_in(browser, url, token, name="Ada Lovelace")
        second = _view_cookie(browser, other, seen, port)
        assert second != first
        assert _request(url, "/results", cookie=f"{name}={second}")[0] == 200
        browser.get(url)
        browser.execute_script("document.querySelector('form.logout button:not([name])').click()")
        wait_until(lambda: "You are logged out" in browser.page_source, "the login page after log out")
        status, page = _request(url, "/results", cookie=f"{name}={second}")
        assert status == 401 and "Your session has ended" in page

        # The second view's session, under either view's cookie name, opens nothing on the first.
        port_b = _port(url_b)
        log_in(browser, url_b, token_b, name="Grace")
        other_view = _view_cookie(browser, other, seen, port_b)
        assert _request(url_b, "/", cookie=f"aiot_lab_view_{port_b}={other_view}")[0] == 200
        for cookie in (f"{name}={other_view}", f"aiot_lab_view_{port_b}={other_view}"):
            assert _request(url, "/", cookie=cookie)[0] == 401
        # and "log out everyone" on the second ends that one too
        browser.get(url_b)
        browser.execute_script("document.querySelector('form.logout button[name=all]').click()")
        wait_until(lambda: "Every session of this lab view has ended" in browser.page_source, "log out everyone")
        assert _request(url_b, "/", cookie=f"aiot_lab_view_{port_b}={other_view}")[0] == 401


@pytest.mark.fault("the view's login names the person, and their reservations carry it")
def test_a_reservation_made_in_the_browser_is_held_by_the_signed_in_person(browser, tmp_path, fault):
    from aiot.host.devices import reservations

    with running_view(tmp_path) as (url, token):
        log_in(browser, url, token, name="Ada Lovelace")
        assert "signed in as Ada Lovelace" in browser.execute_script("return document.querySelector('nav').innerText")
        browser.execute_script("""var f = document.querySelector('form.reserve');
            f.device.value = 'local'; f.note.value = 'thermal study'; f.submit();""")
        wait_until(lambda: reservations.load().get("local"), "the reservation made in the page")
        assert reservations.load()["local"].user == "Ada Lovelace" != reservations.current_user()
        wait_until(lambda: "Ada Lovelace until" in (browser.execute_script(
            "var e = document.querySelector('tr[data-device=\"local\"] .reservation'); return e ? e.innerText : ''")
            or ""), "the page showing who holds it")
        # a name that is markup or a terminal's control is refused at login
        status, page = _request(url, "/login", method="POST",
                                body=f"token={token}&name=%E2%80%AEevil".encode())
        assert status == 400 and "Give your name" in page


@pytest.mark.fault("a Host header that is not the view's (DNS rebinding)")
def test_a_request_naming_another_host_is_refused(tmp_path, fault):
    with running_view(tmp_path) as (url, token):
        port = _port(url)
        for host in (f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", "evil.example", f"127.0.0.1:{port + 1}",
                     f"localhost.evil.example:{port}", f"user@127.0.0.1:{port}"):
            for path in ("/", "/login", "/app.js"):
                status, text = _request(url, path, host=host, token=token)
                assert status == 421, (host, path, status)
                assert text.count("\n") == 1 and f"this is the lab view at 127.0.0.1:{port}" in text
        status, text = _request(url, "/login", method="POST", host=f"evil.example:{port}",
                                body=f"token={token}&name=eve".encode())
        assert status == 421 and "set-cookie" not in text.lower()
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert _request(url, "/results", host=host, token=token)[0] == 200, host


def _memory(pid: int) -> dict[str, int]:
    """The process's resident set now and at its peak (kB, from /proc/PID/status)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "VmHWM")}


def _reset_peak(pid: int) -> bool:
    """Reset the process's peak resident set (Linux ≥ 4.0, our own child); whether it could."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _post_streamed(port: int, total: int, declared: bool) -> tuple[str, int]:
    """POST /login with a body of ``total`` bytes, sent as a generator makes it (1 MiB chunks,
    chunked unless ``declared``: then with its Content-Length) and kept sending after the
    answer, as a client that ignores it would; the answer's status line, and bytes sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    head += f"Content-Length: {total}\r\n\r\n" if declared else "Transfer-Encoding: chunked\r\n\r\n"
    sock.sendall(head.encode())

    def body():
        block = b"token=" + b"a" * (MB - 6)
        for _ in range(total // MB):
            yield block if declared else b"%x\r\n%s\r\n" % (len(block), block)
        if not declared:
            yield b"0\r\n\r\n"

    sock.setblocking(False)
    answer, sent = b"", 0
    try:
        for chunk in body():
            view = memoryview(chunk)
            while view:
                readable, writable, _ = select.select([sock], [sock], [], 10)
                if readable and b"\r\n" not in answer:
                    answer += sock.recv(65536) or b"\r\n"  # closed without a word: say nothing
                if writable:
                    n = sock.send(view)
                    sent, view = sent + n, view[n:]
                if not readable and not writable:
                    raise TimeoutError("the view neither read nor answered for 10 s")
    except (BrokenPipeError, ConnectionResetError):
        pass  # it closed the connection after its answer: what a refusal does
    finally:
        sock.close()
    return answer.split(b"\r\n", 1)[0].decode(), sent


@pytest.mark.fault("a 400 MB POST /login takes the host's memory")
def test_a_400_mb_body_is_refused_before_it_is_read(tmp_path, fault):
    with running_view(tmp_path, with_proc=True) as (url, token, proc):
        port = _port(url)
        assert _request(url, "/login")[0] == 200
        for declared in (False, True):
            peak_known = _reset_peak(proc.pid)
            before = _memory(proc.pid)
            status, sent = _post_streamed(port, 400 * MB, declared)
            after = _memory(proc.pid)
            grew = (after["VmHWM"] if peak_known else after["VmRSS"]) - before["VmRSS"]
            print(f"{'declared' if declared else 'chunked'} 400 MB POST: {sent / MB:.0f} MB sent, "
                  f"RSS {before['VmRSS'] // 1024} -> {after['VmRSS'] // 1024} MB, peak {after['VmHWM'] // 1024} MB")
            assert status == "HTTP/1.1 413 Request Entity Too Large", status
            assert grew < 50 * 1024, f"the view grew {grew // 1024} MB on a 400 MB body"
        # and it still serves
        assert _request(url, "/results", token=token)[0] == 200


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Send the socket's request a byte a second; seconds until the view closed it (None:
    still open after ``seconds``)."""
    start = time.monotonic()
    sock.settimeout(1.0)
    while time.monotonic() - start < seconds:
        try:
            if sock.recv(1024) == b"":
                return time.monotonic() - start
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - start
        try:
            sock.send(b"x")
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - start
    return None


@pytest.mark.fault("a client sends its headers, or its body, a byte a second")
def test_a_slow_client_is_dropped_within_the_timeout(tmp_path, fault):
    timeout = 2.0
    with running_view(tmp_path, "--client-timeout-s", str(timeout)) as (url, token):
        port = _port(url)
        slow_headers = socket.create_connection(("127.0.0.1", port))
        slow_headers.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
        took = _closed_within(slow_headers, timeout + 3)
        slow_headers.close()
        assert took is not None and took <= timeout + 1.5, f"headers a byte a second held it {took} s"

        slow_body = socket.create_connection(("127.0.0.1", port))
        slow_body.sendall(f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 1000\r\n"
                          "Content-Type: application/x-www-form-urlencoded\r\n\r\ntoken=".encode())
        start, answer = time.monotonic(), b""
        slow_body.settimeout(1.0)
        while time.monotonic() - start < timeout + 3 and not answer:
            with contextlib.suppress(TimeoutError):
                answer = slow_body.recv(4096)
            with contextlib.suppress(OSError):
                slow_body.send(b"a")
        took = time.monotonic() - start
        with contextlib.suppress(OSError):  # the rest of the answer, up to the close
            while more := slow_body.recv(4096):
                answer += more
        slow_body.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert took <= timeout + 1.5 and b"was not sent within 2 s" in answer
        assert _request(url, "/results", token=token)[0] == 200  # the others are served


def _damage_schema(path: Path) -> None:
    """Overwrite the store's first page after SQLite's header (its schema), as a stray write would."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff" * 4000)


@pytest.mark.fault("a damaged store under the lab view")
def test_a_damaged_store_under_the_view_is_a_503_page_with_its_one_line(tmp_path, fault):
    markupsafe = pytest.importorskip("markupsafe")
    from aiot.core.errors import StoreError
    from aiot.host.store import open_store

    folder = Path(os.environ["AIOT_RESULTS_DIR"])
    with open_store(folder) as store:
        r = store.begin("latency", {}, {"device": {"soc": "x"}}, sweep_id="night1", device="local",
                        model="tiny_cnn", format="onnx", threads=1)
        store.finish(r.id, "ok", median_ms=1.0)
    _damage_schema(folder / "aiot.sqlite")
    with pytest.raises(StoreError) as raised:
        open_store(folder, readonly=True).close()
    error = raised.value
    with running_view(tmp_path) as (url, token):
        for path in ("/", "/campaigns", "/results", f"/record/{r.id}", "/compare?a=night1&b=night1",
                     "/report/night1/"):
            status, page = _request(url, path, token=token)
            assert status == 503, (path, status, page[:300])
            assert f"<h1>{markupsafe.escape(error.message)}</h1>" in page, (path, page)
            assert error.hint and markupsafe.escape(error.hint) in page
            assert "Traceback" not in page and "Internal Server Error" not in page
