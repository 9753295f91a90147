"""The lab view's web application: Starlette routes served by uvicorn, live fragments pushed
as server-sent events.

**Who may look.** Before anything else (:mod:`.guard`) a request must name this view in its
``Host`` header (DNS rebinding), and its body must be small and sent promptly. Then every
request but the login page and the static script/style needs the view's token: as
``Authorization: Bearer TOKEN`` (scripts), or as a session of this server (a browser):
``POST /login`` with the token and the person's name starts one (:mod:`.sessions`: a random
id in an HttpOnly, SameSite=Strict cookie named for the view's port, ended by idleness, age,
``POST /logout`` or a restart). The token never travels in a URL a server logs: the printed
login link carries it in the fragment (``/login#TOKEN``), which browsers do not send. Pages
send a Content-Security-Policy without inline scripts, so markup a device smuggled past the
escaping still could not run.

**What it may change.** Nothing but reservations (``POST /reserve``, ``POST /release``),
held by the signed-in person's name (a script's: the OS user who started the view). A
browser's form also carries its session's form token (in the page, never in the cookie): a
page of another site can make the browser send the cookie, but cannot read the form token
(SameSite=Strict is the first guard, this one does not depend on the browser honouring it).

**A store that cannot be read** is a 503 page with the store's one-line error and its hint,
on every page that reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from aiot.core.errors import AiotError, StoreError, UsageError
from aiot.host.devices import reservations
from aiot.host.lab.node import trial_bind
from aiot.host.store.compare import LEGEND
from aiot.host.labview import analysis, guard, pages, sources
from aiot.host.labview.live import LiveTelemetry
from aiot.host.labview.sessions import (ABSOLUTE_S, IDLE_S, Session, Sessions, check_name, check_seconds, cookie_name,
                                        say_seconds)
from aiot.host.labview.sources import join_lab

__all__ = ["ViewConfig", "check_listen", "check_seconds", "cookie_name", "create_app", "join_lab", "new_token",
           "serve"]

_OPEN = {"/login", "/app.js", "/app.css"}
_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
#: A report page is ``aiot report``'s static page: its inline CSS, its PNGs, nothing else.
_REPORT_HEADERS = {**_HEADERS, "Content-Security-Policy": "default-src 'none'; img-src 'self'; "
                   "style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"}
#: Where the authentication middleware notes how a request was let in (a form's token is
#: checked for a session only: a script's Authorization header cannot be forged by a page),
#: and the request's session (None for a script's).
_AUTH, _SESSION = "aiot.auth", "aiot.session"


@dataclass
class ViewConfig:
    """What one view serves: the store's folder, its token, how often live pages poll; where
    it listens (its Host check and its cookie's name), how long sessions last and how long
    a client may take to send a request."""

    results_dir: Path
    token: str
    every_s: float = 3.0
    user: str = ""
    bind: str = "127.0.0.1"
    port: int = 8470
    idle_s: float = IDLE_S
    absolute_s: float = ABSOLUTE_S
    client_timeout_s: float = guard.CLIENT_TIMEOUT_S
    #: More ``HOST[:PORT]`` names it answers to (a tunnel's other local port).
    allow_hosts: tuple[str, ...] = ()

    def sessions_line(self) -> str:
        """How sessions end, as ``aiot lab view`` says it when it starts."""
        return (f"a login lasts {say_seconds(self.idle_s)} idle, {say_seconds(self.absolute_s)} at most; "
                "\"log out\" on a page ends it, \"log out everyone\" every login (so does a restart)")


def new_token() -> str:
    """A random token for a view with no lab token."""
    return secrets.token_urlsafe(32)


@dataclass
class _View:
    """What the view's handlers share, kept on the Starlette app (``app.state.view``): its
    config, the live telemetry and the device watch over it, the reports it serves, its
    sessions, how it renders pages and how it signs people in."""

    config: ViewConfig
    live: LiveTelemetry
    watch: sources.DeviceWatch
    reports: analysis.SweepReports
    sessions: Sessions
    page: _Pages
    signing: _SignIn

    def fragment(self, topic: str, csrf: str) -> str:
        """A live page's rows (``devices`` or ``campaigns``), as its feed sends them."""
        if topic == "devices":
            return pages.render("device_rows", rows=self.watch.rows(self.config.results_dir), csrf=csrf)
        return pages.render("campaign_rows", **sources.campaigns(self.config.results_dir))

    def holder(self, request: Request) -> str:
        """Who a reservation made by this request is held by: the signed-in person, or (a
        script's bearer token) the OS user who started the view."""
        session = request.scope.get(_SESSION)
        return session.name if session is not None else self.config.user


def _view(request: Request) -> _View:
    return request.app.state.view


def create_app(config: ViewConfig) -> guard.Guard:
    """The view's ASGI application for ``config``: its routes (:data:`ROUTES`) behind the
    token check and :mod:`.guard`."""
    config.user = config.user or reservations.current_user()
    live = LiveTelemetry()
    sessions = Sessions(config.idle_s, config.absolute_s)
    page = _Pages(config)
    view = _View(config, live, sources.DeviceWatch(live), analysis.SweepReports(), sessions, page,
                 _SignIn(config, sessions, page))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        view.reports.close()
        view.live.close()

    app = Starlette(routes=ROUTES, lifespan=lifespan,
                    exception_handlers={StoreError: _unreadable_store})
    app.state.view = view
    hosts = guard.Hosts(config.bind, config.port, config.allow_hosts)
    return guard.Guard(_Authenticated(app, config, sessions), hosts, config.client_timeout_s)


async def _devices(request: Request) -> Response:
    view = _view(request)
    html = await run_in_threadpool(view.fragment, "devices", view.page.csrf(request))
    return view.page(request, "devices", live="devices", title="devices", fragment=Markup(html))


async def _campaigns(request: Request) -> Response:
    view = _view(request)
    html = await run_in_threadpool(view.fragment, "campaigns", "")
    return view.page(request, "campaigns", live="campaigns", title="campaigns", fragment=Markup(html))


def _results(request: Request) -> Response:
    view = _view(request)
    params = dict(request.query_params)
    try:
        found = sources.results(view.config.results_dir, params, _int(params.get("page")))
    except AiotError as exc:
        return view.page.failed(request, exc, 400)

    def query(number: int) -> str:
        return urlencode({**found.filters, "page": number})

    return view.page(request, "results", title="results", page=found, names=sources.RESULT_FILTERS,
                     query=query)


def _record(request: Request) -> Response:
    view = _view(request)
    try:
        found = sources.record(view.config.results_dir, request.path_params["record_id"])
    except AiotError as exc:
        return view.page.failed(request, exc, 404)
    columns, detail = pages.record_fields(found)
    return view.page(request, "record", title="record", r=found, fields=columns, detail=detail)


def _comparison(request: Request) -> Response:
    view = _view(request)
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    if not a and not b:
        return view.page(request, "compare", title="compare", a="", b="", compared=None)
    try:
        compared = analysis.compare_sets(view.config.results_dir, a, b)
    except AiotError as exc:
        return view.page.failed(request, exc, 400)
    return view.page(request, "compare", title="compare", a=a, b=b, compared=compared,
                     check=analysis.DEFAULT_CHECK, legend=LEGEND)


async def _report(request: Request) -> Response:
    view = _view(request)
    try:
        _sweep, folder = await run_in_threadpool(view.reports.folder, view.config.results_dir,
                                                 request.path_params["sweep"])
    except AiotError as exc:
        return view.page.failed(request, exc, 404)
    path = view.reports.file(folder, request.path_params.get("file", "index.html"))
    if path is None:
        return Response("no such file in this report", 404, headers=_HEADERS)
    kind = "text/html; charset=utf-8" if path.suffix == ".html" else "image/png"
    return Response(path.read_bytes(), media_type=kind, headers=_REPORT_HEADERS)


async def _events(request: Request) -> Response:
    """A live page's feed: its rows each time they change, until the client leaves or its
    session ends (then ``ended``: the page reloads, to the login page)."""
    view = _view(request)
    topic = request.path_params["topic"]
    if topic not in ("devices", "campaigns"):
        return Response("no such feed", 404)
    session, csrf = request.scope.get(_SESSION), view.page.csrf(request)

    async def stream():
        last = None
        while not await request.is_disconnected():
            if session is not None and view.sessions.find(session.id, touch=False) is None:
                yield "event: ended\ndata: \n\n"
                return
            try:
                html = await run_in_threadpool(view.fragment, topic, csrf)
            except AiotError as exc:
                html = pages.render("error", what=exc.message, hint=exc.hint or "")
            if html != last:
                last = html
                yield f"event: {topic}\ndata: {json.dumps(html)}\n\n"
            else:
                yield ": idle\n\n"
            await asyncio.sleep(view.config.every_s)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={**_HEADERS, "X-Accel-Buffering": "no"})


async def _reserve(request: Request) -> Response:
    view = _view(request)
    form = await _form(request)
    if (refused := view.page.forged(request, form)) is not None:
        return refused
    try:
        duration = reservations.parse_duration(form.get("for", "2h"))
        await run_in_threadpool(functools.partial(reservations.reserve, _device(form), duration,
                                                  form.get("note", ""), holder=view.holder(request)))
    except AiotError as exc:
        return view.page.failed(request, exc, 409)
    return RedirectResponse("/", 303, headers=_HEADERS)


async def _release(request: Request) -> Response:
    view = _view(request)
    form = await _form(request)
    if (refused := view.page.forged(request, form)) is not None:
        return refused
    try:
        await run_in_threadpool(functools.partial(reservations.release, _device(form),
                                                  holder=view.holder(request)))
    except AiotError as exc:
        return view.page.failed(request, exc, 409)
    return RedirectResponse("/", 303, headers=_HEADERS)


async def _login(request: Request) -> Response:
    return await _view(request).signing.login(request)


async def _logout(request: Request) -> Response:
    return await _view(request).signing.logout(request)


def _script(request: Request) -> Response:
    return Response(pages.SCRIPT, media_type="text/javascript", headers=_HEADERS)


def _style(request: Request) -> Response:
    return Response(pages.STYLE, media_type="text/css", headers=_HEADERS)


async def _unreadable_store(request: Request, exc: StoreError) -> Response:
    return _view(request).page.failed(request, exc, 503)


class _Pages:
    """The view's pages for a request: who is signed in (the nav's "signed in as NAME" and
    its log-out form), the session's form token, errors as pages."""

    def __init__(self, config: ViewConfig) -> None:
        self.config = config

    def __call__(self, request: Request, name: str, status: int = 200, **values) -> HTMLResponse:
        session = request.scope.get(_SESSION)
        who = (f"signed in as {session.name}" if session is not None else
               f"token of {self.config.user}" if request.scope.get(_AUTH) == "bearer" else "")
        return HTMLResponse(pages.render(name, user=who, csrf=self.csrf(request), **values), status,
                            headers=_HEADERS)

    @staticmethod
    def csrf(request: Request) -> str:
        """The form token of the request's session ("" for a script's: it needs none)."""
        session = request.scope.get(_SESSION)
        return session.csrf if session is not None else ""

    def failed(self, request: Request, exc: AiotError, status: int) -> HTMLResponse:
        """``exc`` as a page: ``status``, or 503 when it is the store that cannot be read."""
        return self(request, "error", 503 if isinstance(exc, StoreError) else status, what=exc.message,
                    hint=exc.hint or "")

    def forged(self, request: Request, form: dict[str, str]) -> Response | None:
        """A 403 page for a browser's form without its session's form token, else None."""
        if request.scope.get(_AUTH) == "bearer" or hmac.compare_digest(
                form.get("csrf", "").encode(), self.csrf(request).encode() or b"\0"):
            return None
        return self(request, "error", 403, what="this form was not sent by a page of this lab view",
                    hint="reload the lab view's page and send the form from it")


class _SignIn:
    """``/login`` (the token and a person's name start a session) and ``/logout`` (ends it,
    or with ``all`` every session of the view)."""

    def __init__(self, config: ViewConfig, sessions: Sessions, page: _Pages) -> None:
        self.config, self.sessions, self.page = config, sessions, page
        self.cookie = cookie_name(config.port)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            why = {"one": "You are logged out.", "all": "Every session of this lab view has ended."}.get(
                request.query_params.get("ended", ""), "Give the lab view's token (printed when it started) "
                "and your name: the reservations you make carry it.")
            return self.page(request, "login", title="log in", why=why)
        form = await _form(request)
        if not hmac.compare_digest(form.get("token", "").strip().encode(), self.config.token.encode()):
            return self.page(request, "login", 403, title="log in", why="That token is not this view's.")
        name = check_name(form.get("name", ""))
        if name is None:
            return self.page(request, "login", 400, title="log in",
                             why="Give your name (letters, digits, spaces and . - ' up to 40): the "
                                 "reservations you make carry it.")
        self.sessions.end(request.cookies.get(self.cookie, ""))
        session = self.sessions.start(name)
        response = RedirectResponse("/", 303, headers=_HEADERS)
        # no Max-Age: the browser forgets it when it closes; the server ends it before that
        response.set_cookie(self.cookie, session.id, path="/", httponly=True, samesite="strict")
        return response

    async def logout(self, request: Request) -> Response:
        form = await _form(request)
        if (refused := self.page.forged(request, form)) is not None:
            return refused
        if form.get("all"):
            self.sessions.end_all()
        elif (session := request.scope.get(_SESSION)) is not None:
            self.sessions.end(session.id)
        response = RedirectResponse(f"/login?ended={'all' if form.get('all') else 'one'}", 303, headers=_HEADERS)
        response.delete_cookie(self.cookie, path="/", httponly=True, samesite="strict")
        return response


class _Authenticated:
    """ASGI middleware: a request without the token (header) or a live session of this view
    (cookie) gets 401 and the login page."""

    def __init__(self, app, config: ViewConfig, sessions: Sessions) -> None:
        self.app, self.config, self.sessions = app, config, sessions
        self.cookie = cookie_name(config.port)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        how, session = self._allowed(request)
        if how:
            scope[_AUTH], scope[_SESSION] = how, session
            await self.app(scope, receive, send)
            return
        why = ("Your session has ended (it was idle, old, or logged out): log in again."
               if request.cookies.get(self.cookie) else "This lab view needs its token: log in.")
        html = pages.render("login", title="log in", why=why)
        await HTMLResponse(html, 401, headers=_HEADERS)(scope, receive, send)

    def _allowed(self, request: Request) -> tuple[str | None, Session | None]:
        """How the request proved it may look ("bearer": the token; "session": a live
        session, which this request keeps alive unless it is a live page's feed), or None."""
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            ok = hmac.compare_digest(bearer[7:].strip().encode(), self.config.token.encode())
            return ("bearer" if ok else None), None
        session = self.sessions.find(request.cookies.get(self.cookie, ""),
                                     touch=not request.url.path.startswith("/events/"))
        return ("session" if session is not None else None), session


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form's fields (first value each), read without python-multipart (the
    body is at most :data:`guard.MAX_BODY`, read whole by the guard)."""
    body = (await request.body())[:guard.MAX_BODY].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _device(form: dict[str, str]) -> str:
    return reservations.check_device(form.get("device", "").strip())


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


#: Every route of the view: path, handler, methods (GET where none is named).
ROUTES = [
    Route("/", _devices), Route("/campaigns", _campaigns), Route("/results", _results),
    Route("/record/{record_id}", _record), Route("/events/{topic}", _events),
    Route("/compare", _comparison), Route("/report/{sweep}/", _report),
    Route("/report/{sweep}/{file}", _report),
    Route("/login", _login, methods=["GET", "POST"]), Route("/logout", _logout, methods=["POST"]),
    Route("/reserve", _reserve, methods=["POST"]), Route("/release", _release, methods=["POST"]),
    Route("/app.js", _script), Route("/app.css", _style),
]


def check_listen(bind: str, port: int) -> None:
    """Nothing if the view can listen on ``bind:port`` (a trial bind, released at once).

    Raises:
        UsageError: the port is taken, not this host's address, or privileged.
    """
    exc = trial_bind(bind, port)
    if exc is not None:
        raise UsageError(f"the lab view cannot listen on {bind} port {port} ({exc.strerror})",
                         "give another --port (above 1023), or --bind one of this host's "
                         "addresses") from None


def serve(config: ViewConfig) -> None:
    """Serve the view on ``config.bind:config.port`` until interrupted (uvicorn; its access
    log shows paths, never a token), with :mod:`.guard`'s limits on what a client may send.

    Raises:
        UsageError: it cannot listen there (:func:`check_listen`).
    """
    import uvicorn

    check_listen(config.bind, config.port)
    # A live page's stream never ends by itself: on Ctrl-C/SIGTERM give open streams 2 s.
    uvicorn.run(create_app(config), host=config.bind, port=config.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=2, http=guard.timed_protocol(config.client_timeout_s),
                timeout_keep_alive=guard.KEEP_ALIVE_S, h11_max_incomplete_event_size=guard.MAX_HEADERS,
                proxy_headers=False)
