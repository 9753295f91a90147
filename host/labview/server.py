"""The lab view's web application: Starlette routes served by uvicorn, live fragments pushed
as server-sent events.

**Who may look.** Every request but the login page and the static script/style needs the
view's token: as ``Authorization: Bearer TOKEN`` (scripts), or as the HttpOnly, SameSite=Strict
cookie that ``POST /login`` sets (a browser). The token never travels in a URL a server logs:
the printed login link carries it in the fragment (``/login#TOKEN``), which browsers do not
send; the page's script posts it at once and the cookie takes over. The cookie holds an HMAC
of the token, not the token. Pages send a Content-Security-Policy without inline scripts, so
markup a device smuggled past the escaping still could not run.

**What it may change.** Nothing but reservations (``POST /reserve``, ``POST /release``),
made as the OS user who started the view. A browser's form also carries the view's form
token (an HMAC of the token, in the page, never in the cookie): a page of another site can
make the browser send the cookie, but cannot read the form token (SameSite=Strict is the first
guard, this one does not depend on the browser honouring it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
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

from aiot.core.errors import AiotError, UsageError
from aiot.host.devices import reservations
from aiot.host.lab.node import trial_bind
from aiot.host.store.compare import LEGEND
from aiot.host.labview import analysis, pages, sources
from aiot.host.labview.live import LiveTelemetry
from aiot.host.labview.sources import join_lab

__all__ = ["COOKIE", "ViewConfig", "check_listen", "create_app", "join_lab", "new_token", "serve"]

COOKIE = "aiot_lab_view"
_OPEN = {"/login", "/app.js", "/app.css"}
_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
#: A report page is ``aiot report``'s static page: its inline CSS, its PNGs, nothing else.
_REPORT_HEADERS = {**_HEADERS, "Content-Security-Policy": "default-src 'none'; img-src 'self'; "
                   "style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"}
#: Where the authentication middleware notes how a request was let in (a form's token is
#: checked for the cookie only: a script's Authorization header cannot be forged by a page).
_AUTH = "aiot.auth"


@dataclass
class ViewConfig:
    """What one view serves: the store's folder, its token, how often live pages poll."""

    results_dir: Path
    token: str
    every_s: float = 3.0
    user: str = ""

    def session_value(self) -> str:
        """The cookie's value: an HMAC of the token (the cookie never holds the token)."""
        return hmac.new(self.token.encode(), b"aiot lab view session", hashlib.sha256).hexdigest()

    def form_value(self) -> str:
        """The token a page's forms carry (an HMAC of the token, other than the cookie's)."""
        return hmac.new(self.token.encode(), b"aiot lab view form", hashlib.sha256).hexdigest()


def new_token() -> str:
    """A random token for a view with no lab token."""
    return secrets.token_urlsafe(32)


def create_app(config: ViewConfig) -> Starlette:
    """The view's Starlette application for ``config``."""
    config.user = config.user or reservations.current_user()
    live = LiveTelemetry()
    watch = sources.DeviceWatch(live)
    reports = analysis.SweepReports()

    def page(name: str, status: int = 200, **values) -> HTMLResponse:
        return HTMLResponse(pages.render(name, user=config.user, csrf=config.form_value(), **values), status,
                            headers=_HEADERS)

    def fragment(topic: str) -> str:
        if topic == "devices":
            return pages.render("device_rows", rows=watch.rows(config.results_dir), csrf=config.form_value())
        return pages.render("campaign_rows", **sources.campaigns(config.results_dir))

    async def devices(request: Request) -> Response:
        html = await run_in_threadpool(fragment, "devices")
        return page("devices", live="devices", title="devices", fragment=Markup(html))

    async def campaigns(request: Request) -> Response:
        html = await run_in_threadpool(fragment, "campaigns")
        return page("campaigns", live="campaigns", title="campaigns", fragment=Markup(html))

    def results(request: Request) -> Response:
        params = dict(request.query_params)
        try:
            found = sources.results(config.results_dir, params, _int(params.get("page")))
        except AiotError as exc:
            return page("error", 400, what=exc.message, hint=exc.hint or "")

        def query(number: int) -> str:
            return urlencode({**found.filters, "page": number})

        return page("results", title="results", page=found, names=sources.RESULT_FILTERS, query=query)

    def record(request: Request) -> Response:
        try:
            found = sources.record(config.results_dir, request.path_params["record_id"])
        except AiotError as exc:
            return page("error", 404, what=exc.message, hint=exc.hint or "")
        columns, detail = pages.record_fields(found)
        return page("record", title="record", r=found, fields=columns, detail=detail)

    def comparison(request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        if not a and not b:
            return page("compare", title="compare", a="", b="", compared=None)
        try:
            compared = analysis.compare_sets(config.results_dir, a, b)
        except AiotError as exc:
            return page("error", 400, what=exc.message, hint=exc.hint or "")
        return page("compare", title="compare", a=a, b=b, compared=compared, check=analysis.DEFAULT_CHECK,
                    legend=LEGEND)

    async def report(request: Request) -> Response:
        try:
            sweep, folder = await run_in_threadpool(reports.folder, config.results_dir, request.path_params["sweep"])
        except AiotError as exc:
            return page("error", 404, what=exc.message, hint=exc.hint or "")
        path = reports.file(folder, request.path_params.get("file", "index.html"))
        if path is None:
            return Response("no such file in this report", 404, headers=_HEADERS)
        kind = "text/html; charset=utf-8" if path.suffix == ".html" else "image/png"
        return Response(path.read_bytes(), media_type=kind, headers=_REPORT_HEADERS)

    async def events(request: Request) -> Response:
        topic = request.path_params["topic"]
        if topic not in ("devices", "campaigns"):
            return Response("no such feed", 404)

        async def stream():
            last = None
            while not await request.is_disconnected():
                try:
                    html = await run_in_threadpool(fragment, topic)
                except AiotError as exc:
                    html = pages.render("error", what=exc.message, hint=exc.hint or "")
                if html != last:
                    last = html
                    yield f"event: {topic}\ndata: {json.dumps(html)}\n\n"
                else:
                    yield ": idle\n\n"
                await asyncio.sleep(config.every_s)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={**_HEADERS, "X-Accel-Buffering": "no"})

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page("login", title="log in", why="Give the lab view's token (printed when it started).")
        form = await _form(request)
        if not hmac.compare_digest(form.get("token", "").strip().encode(), config.token.encode()):
            return page("login", 403, title="log in", why="That token is not this view's.")
        response = RedirectResponse("/", 303, headers=_HEADERS)
        response.set_cookie(COOKIE, config.session_value(), httponly=True, samesite="strict", path="/")
        return response

    def forged(request: Request, form: dict[str, str]) -> Response | None:
        """A 403 page for a browser's form without this view's form token, else None."""
        if request.scope.get(_AUTH) == "bearer" or hmac.compare_digest(
                form.get("csrf", "").encode(), config.form_value().encode()):
            return None
        return page("error", 403, what="this form was not sent by a page of this lab view",
                    hint="reload the lab view's page and send the form from it")

    async def reserve(request: Request) -> Response:
        form = await _form(request)
        if (refused := forged(request, form)) is not None:
            return refused
        try:
            duration = reservations.parse_duration(form.get("for", "2h"))
            await run_in_threadpool(reservations.reserve, _device(form), duration, form.get("note", ""),
                                    config.user)
        except AiotError as exc:
            return page("error", 409, what=exc.message, hint=exc.hint or "")
        return RedirectResponse("/", 303, headers=_HEADERS)

    async def release(request: Request) -> Response:
        form = await _form(request)
        if (refused := forged(request, form)) is not None:
            return refused
        try:
            await run_in_threadpool(reservations.release, _device(form), config.user)
        except AiotError as exc:
            return page("error", 409, what=exc.message, hint=exc.hint or "")
        return RedirectResponse("/", 303, headers=_HEADERS)

    routes = [
        Route("/", devices), Route("/campaigns", campaigns), Route("/results", results),
        Route("/record/{record_id}", record), Route("/events/{topic}", events),
        Route("/compare", comparison), Route("/report/{sweep}/", report), Route("/report/{sweep}/{file}", report),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/reserve", reserve, methods=["POST"]), Route("/release", release, methods=["POST"]),
        Route("/app.js", lambda r: Response(pages.SCRIPT, media_type="text/javascript", headers=_HEADERS)),
        Route("/app.css", lambda r: Response(pages.STYLE, media_type="text/css", headers=_HEADERS)),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        reports.close()
        live.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    return _Authenticated(app, config)


class _Authenticated:
    """ASGI middleware: a request without the token (header or session cookie) gets 401."""

    def __init__(self, app, config: ViewConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN:
            await self.app(scope, receive, send)
            return
        how = self._allowed(Request(scope))
        if how:
            scope[_AUTH] = how
            await self.app(scope, receive, send)
            return
        html = pages.render("login", title="log in", why="This lab view needs its token: log in.")
        await HTMLResponse(html, 401, headers=_HEADERS)(scope, receive, send)

    def _allowed(self, request: Request) -> str | None:
        """How the request proved it holds the token ("bearer" or "cookie"), or None."""
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            ok = hmac.compare_digest(bearer[7:].strip().encode(), self.config.token.encode())
            return "bearer" if ok else None
        cookie = request.cookies.get(COOKIE, "")
        ok = bool(cookie) and hmac.compare_digest(cookie.encode(), self.config.session_value().encode())
        return "cookie" if ok else None


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form's fields (first value each), read without python-multipart."""
    body = (await request.body())[:16384].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _device(form: dict[str, str]) -> str:
    return reservations.check_device(form.get("device", "").strip())


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


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


def serve(config: ViewConfig, bind: str = "127.0.0.1", port: int = 8470) -> None:
    """Serve the view until interrupted (uvicorn; its access log shows paths, never a token).

    Raises:
        UsageError: it cannot listen there (:func:`check_listen`).
    """
    import uvicorn

    check_listen(bind, port)
    # A live page's stream never ends by itself: on Ctrl-C/SIGTERM give open streams 2 s.
    uvicorn.run(create_app(config), host=bind, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=2)
