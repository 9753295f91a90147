"""``aiot lab view``'s application in Starlette's TestClient: every request needs the token,
every device- or file-supplied string is text, the results page is bounded, reservations
are made and refused, and running sweeps show their progress."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from aiot.host.devices import reservations  # noqa: E402
from aiot.host.labview.server import ViewConfig, cookie_name, create_app  # noqa: E402
from aiot.host.store import open_store  # noqa: E402
from aiot.host.store.locks import campaign_locks  # noqa: E402
from tests.helpers import single_error  # noqa: E402

TOKEN = "s3cret-token-for-tests"
COOKIE = cookie_name(8470)
#: Where the view under test listens (its Host check): what a browser there sends.
BASE = "http://127.0.0.1:8470"
HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def results_dir() -> Path:
    return Path(os.environ["AIOT_RESULTS_DIR"])


def client(logged_in: bool = True, name: str = "tess") -> TestClient:
    c = TestClient(create_app(ViewConfig(results_dir(), TOKEN, every_s=0.05)), base_url=BASE)
    if logged_in:
        assert c.post("/login", data={"token": TOKEN, "name": name}, follow_redirects=False).status_code == 303
    return c


def add_record(store, device="local", model="tiny_cnn", status="ok", sweep="s1", info=None, reason=None):
    provenance = {"device": info or {"soc": "BCM2711", "processors": 4}}
    r = store.begin("latency", {"device": device, "model": model}, provenance, sweep_id=sweep, device=device,
                    model=model, format="onnx", threads=1)
    if status != "pending":
        store.finish(r.id, status, reason=reason, median_ms=1.5 if status == "ok" else None)
    return r.id


@pytest.mark.parametrize("path", ["/", "/campaigns", "/results", "/record/abcd1234", "/events/devices"])
def test_every_page_refuses_a_request_without_the_token(path):
    c = client(logged_in=False)
    answer = c.get(path)
    assert answer.status_code == 401 and "log in" in answer.text.lower()
    assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/reserve", data={"device": "local"}).status_code == 401
    assert not reservations.load()


def test_login_sets_an_httponly_strict_cookie_that_is_not_the_token():
    c = client(logged_in=False)
    assert c.post("/login", data={"token": "nope", "name": "tess"}).status_code == 403
    assert c.post("/login", data={"token": TOKEN}).status_code == 400  # no name
    answer = c.post("/login", data={"token": TOKEN, "name": "tess"}, follow_redirects=False)
    cookie = answer.headers["set-cookie"]
    assert answer.status_code == 303 and "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie and c.cookies.get(COOKIE)
    page = c.get("/")
    assert page.status_code == 200 and "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    # scripts: the same token as a header, no cookie
    bare = client(logged_in=False)
    assert bare.get("/results", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_a_session_is_random_per_login_ends_on_logout_and_is_this_views_only():
    c = client(name="tess")
    first = c.cookies[COOKIE]
    assert len(first) >= 43 and "Path=/" in c.post("/login", data={"token": TOKEN, "name": "tess"},
                                                   follow_redirects=False).headers["set-cookie"]
    second = c.cookies[COOKIE]
    assert second != first  # a new login, a new id; the old one ended
    replay = client(logged_in=False)
    replay.cookies.set(COOKIE, first)
    assert replay.get("/").status_code == 401 and "Your session has ended" in replay.get("/").text
    # the old cookie: an HMAC of the token, under the old name and the new
    import hashlib
    import hmac

    old = hmac.new(TOKEN.encode(), b"aiot lab view session", hashlib.sha256).hexdigest()
    for name in ("aiot_lab_view", COOKIE):
        stale = client(logged_in=False)
        stale.cookies.set(name, old)
        assert stale.get("/").status_code == 401
    # another view (another server, same token and port): its sessions are its own
    other = client(logged_in=False)
    other.cookies.set(COOKIE, second)
    assert other.get("/").status_code == 401
    # logout needs the page's form token, then ends the session
    assert c.post("/logout", data={}).status_code == 403 and c.get("/").status_code == 200
    answer = c.post("/logout", data={"csrf": form_token(c)}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login?ended=one"
    c.cookies.set(COOKIE, second)
    assert c.get("/").status_code == 401


def test_log_out_everyone_ends_every_session_of_the_view():
    app = create_app(ViewConfig(results_dir(), TOKEN, every_s=0.05))
    people = [TestClient(app, base_url=BASE) for _ in range(3)]
    for name, c in zip(("ann", "bob", "cy"), people, strict=True):
        assert c.post("/login", data={"token": TOKEN, "name": name}, follow_redirects=False).status_code == 303
        assert f"signed in as {name}" in c.get("/").text
    people[0].post("/logout", data={"csrf": form_token(people[0]), "all": "1"})
    assert [c.get("/").status_code for c in people] == [401, 401, 401]
    assert "Every session of this lab view has ended" in people[0].get("/login?ended=all").text


def test_sessions_end_when_idle_and_when_old():
    from aiot.host.labview.sessions import Sessions

    now = [1000.0]
    sessions = Sessions(idle_s=60, absolute_s=300, clock=lambda: now[0])
    idle, busy = sessions.start("ann"), sessions.start("bob")
    for _ in range(4):  # bob is busy, ann idles
        now[0] += 50
        assert sessions.find(busy.id) is busy
    assert sessions.find(idle.id) is None
    assert sessions.find(busy.id, touch=False) is busy  # a live page's feed: no touch
    now[0] += 59
    assert sessions.find(busy.id) is busy
    now[0] += 50  # 309 s after its login, however busy
    assert sessions.find(busy.id) is None and len(sessions) == 0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="is not a number of seconds above 0"):
            Sessions(idle_s=bad)


@pytest.mark.parametrize("name, ok", [("Ada Lovelace", True), ("o'brien-smith", True), ("Zoë", True),
                                      ("", False), ("  ", False), ("\u202eevil", False), ("a<b>", False),
                                      ("x" * 41, False), ("_x", False), ("ann\x1b[2J", False)])
def test_a_login_name_is_a_name(name, ok):
    from aiot.host.labview.sessions import check_name

    assert (check_name(name) is not None) is ok


def test_the_host_header_must_name_the_view():
    from aiot.host.labview.guard import Hosts

    loopback = Hosts("127.0.0.1", 8470, ("localhost:9000",))
    for host in ("127.0.0.1:8470", "localhost:8470", "[::1]:8470", "LocalHost:8470", "localhost:9000"):
        assert loopback.allows(host), host
    for host in ("evil.example:8470", "127.0.0.1:8471", "127.0.0.1", "", "localhost.evil:8470", "[::1]",
                 "a@127.0.0.1:8470", "127.0.0.1:8470/x", "localhost:9001", "[::1:8470"):
        assert not loopback.allows(host), host
    lan = Hosts("192.168.1.5", 8470)
    assert lan.allows("192.168.1.5:8470") and not lan.allows("localhost:8470")
    everywhere = Hosts("0.0.0.0", 8470)
    assert everywhere.allows("10.0.0.7:8470") and everywhere.allows("[fe80::1]:8470")
    assert not everywhere.allows("lab.example:8470")
    c = client()
    refused = TestClient(c.app, base_url="http://evil.example:8470").get("/", cookies=dict(c.cookies))
    assert refused.status_code == 421 and refused.text.count("\n") == 1
    assert "this is the lab view at 127.0.0.1:8470, not evil.example:8470" in refused.text


def test_a_body_over_the_limit_is_refused_with_413():
    c = client(logged_in=False)
    answer = c.post("/login", content=b"token=" + b"a" * 20000,
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 413 and "over the lab view's limit of 16384 bytes" in answer.text

    def chunks():  # no Content-Length: refused once past the limit
        for _ in range(100):
            yield b"a" * 1024

    answer = c.post("/login", content=chunks(), headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 413 and "(chunked)" in answer.text
    answer = c.get("/login", headers={"X-Big": "a" * 20000})
    assert answer.status_code == 431 and "over the lab view's limit of 16384 bytes" in answer.text


def test_a_damaged_store_is_a_503_page_on_every_page_that_reads_it():
    with open_store(results_dir()) as store:
        rid = add_record(store, sweep="night1")
    conn = sqlite3.connect(results_dir() / "aiot.sqlite")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(results_dir() / "aiot.sqlite", "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff" * 4000)
    c = client()
    for path in ("/", "/campaigns", "/results", f"/record/{rid}", "/compare?a=night1&b=night1", "/report/night1/"):
        answer = c.get(path)
        assert answer.status_code == 503, (path, answer.status_code)
        assert "<h1>cannot open result store" in answer.text or "<h1>result store" in answer.text, path
        assert "signed in as tess" in answer.text, path


def test_hostile_device_and_file_strings_render_as_text():
    with open_store(results_dir()) as store:
        rid = add_record(store, model=HOSTILE, status="failed", reason=HOSTILE,
                         info={"soc": HOSTILE, "model": HOSTILE, "processors": HOSTILE})
    reservations.reserve("local", timedelta(hours=1), note=HOSTILE, user="alice")
    c = client()
    for path in ("/", "/campaigns", "/results", f"/record/{rid}", f"/results?model={HOSTILE}"):
        page = c.get(path).text
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path


def test_results_are_filtered_and_paged():
    with open_store(results_dir()) as store:
        for i in range(120):
            add_record(store, device="local" if i % 2 else "pi4", model=f"m{i:03d}", sweep="big")
    c = client()
    first = c.get("/results").text
    assert first.count("/record/") == 50 and "m119" in first and 'class="older"' in first
    last = c.get("/results?page=2").text
    assert last.count("/record/") == 20 and "m000" in last and 'class="older"' not in last
    pi4 = c.get("/results?device=pi4&page=1").text
    assert pi4.count("/record/") == 10 and "<td>local</td>" not in pi4
    assert c.get("/results?since=yesterday").status_code == 400


@pytest.mark.slow
def test_a_results_page_answers_within_300_ms_at_100k_records():
    with open_store(results_dir()) as store:
        add_record(store)
    conn = sqlite3.connect(results_dir() / "aiot.sqlite")
    rows = [(f"{i:032x}", f"sweep{i // 1000}", "latency", "ok" if i % 7 else "failed",
             f"2026-01-01T00:{i // 6000 % 60:02d}:{i // 100 % 60:02d}+00:00", f"dev{i % 20}", f"m{i % 50}",
             "onnx", 1, "{}", json.dumps({"device": {"soc": "x"}})) for i in range(100_000)]
    conn.executemany("INSERT INTO runs (id, sweep_id, kind, status, created_at, device, model, format, threads, "
                     "spec_json, provenance_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.commit()
    conn.close()
    c = client()
    c.get("/results")  # the first open after a foreign write checks the store once
    for query in ("", "?page=40", "?device=dev3&model=m3", "?sweep_id=sweep42&status=failed",
                  "?since=2026-01-01T00:10&until=2026-01-01T00:20"):
        start = time.perf_counter()
        answer = c.get(f"/results{query}")
        took = time.perf_counter() - start
        assert answer.status_code == 200 and "/record/" in answer.text, query
        assert took <= 0.3, f"/results{query} took {took * 1000:.0f} ms"
    assert "100001" in c.get("/results").text


def form_token(c: TestClient) -> str:
    """The form token the devices page's forms carry."""
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', c.get("/").text)
    assert found, "the devices page has no form token"
    return found.group(1)


def test_a_reservation_made_in_the_page_is_shown_and_refuses_other_users(monkeypatch):
    c = client(name="Ada Lovelace")
    answer = c.post("/reserve", data={"device": "local", "for": "2h", "note": "thermal study",
                                      "csrf": form_token(c)}, follow_redirects=False)
    assert answer.status_code == 303
    held = reservations.load()["local"]
    assert held.user == "Ada Lovelace"  # the signed-in person, not the account that runs the view
    page = c.get("/").text
    until = held.until.replace("T", " ").removesuffix("+00:00")
    assert "thermal study" in page and f"{held.user} until {until}" in page and "signed in as Ada Lovelace" in page
    other = client(name="bob")  # another person cannot release it from the page
    assert other.post("/release", data={"device": "local", "csrf": form_token(other)}).status_code == 409
    monkeypatch.setattr(reservations, "current_user", lambda: "mallory")
    with pytest.raises(reservations.Reserved, match=f"local is reserved by {held.user}@.* until"):
        reservations.check_free(["local"])
    assert c.post("/reserve", data={"device": "../etc", "for": "1h", "csrf": form_token(c)}).status_code != 303


def test_a_form_another_page_made_the_browser_send_is_refused():
    """The cookie alone (what a forged cross-site form sends) changes nothing; the page's own
    form token, or a script's bearer header, does."""
    c = client()
    for token in (None, "", "0" * 64):
        data = {"device": "local", "for": "1h", **({} if token is None else {"csrf": token})}
        answer = c.post("/reserve", data=data, follow_redirects=False)
        assert answer.status_code == 403 and "not sent by a page of this lab view" in answer.text
    assert not reservations.load()
    reservations.reserve("local", timedelta(hours=1), note="mine")  # the view's own account's
    assert c.post("/release", data={"device": "local"}).status_code == 403 and reservations.load()
    script = client(logged_in=False)
    answer = script.post("/release", data={"device": "local"}, headers={"Authorization": f"Bearer {TOKEN}"},
                         follow_redirects=False)
    assert answer.status_code == 303 and not reservations.load()
    assert form_token(c) != c.cookies[COOKIE] and TOKEN not in c.get("/").text


def test_two_sweeps_compared_on_the_page_as_results_compare_judges_them():
    with open_store(results_dir()) as store:
        for sweep, ms in (("night1", 10.0), ("night2", 13.0)):
            for model in ("tiny_cnn", HOSTILE):
                r = store.begin("latency", {"model": model}, {"device": {"soc": "BCM2711"}}, sweep_id=sweep,
                                device="local", model=model, format="onnx", threads=1)
                store.finish(r.id, "ok", median_ms=ms, result={"stats_ms": {"median": ms}})
    c = client()
    page = c.get("/compare?a=night1&b=night2")
    assert page.status_code == 200
    assert "gate median:5%: <b>2 run(s) fail</b>" in page.text and page.text.count("<td>+30.0%</td>") == 2
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert "only in A" in c.get("/compare?a=night1&b=" + ",".join(
        r.id for r in open_store(results_dir(), readonly=True).query(sweep_id="night2", model="tiny_cnn"))).text
    # a set is a sweep or record ids, never a file of the server's
    refused = c.get("/compare?a=/etc/passwd&b=night2")
    assert refused.status_code == 400 and "root:" not in refused.text and "is not a file, a sweep id" in refused.text
    assert c.get("/compare").status_code == 200


def test_a_sweeps_report_is_served_with_its_plots_and_nothing_else():
    with open_store(results_dir()) as store:
        for threads, ms in ((1, 10.0), (2, 6.0)):
            r = store.begin("latency", {"model": "tiny_cnn"}, {"device": {"soc": "BCM2711"}}, sweep_id="night1",
                            device="local", model="tiny_cnn", format="onnx", threads=threads)
            store.finish(r.id, "ok", median_ms=ms, result={"stats_ms": {"median": ms}})
    c = client()
    assert c.get("/report/night", follow_redirects=False).status_code in (307, 308)  # to /report/night/
    page = c.get("/report/nigh/")  # a unique prefix names the sweep
    assert page.status_code == 200 and "aiot report" in page.text and "tiny_cnn" in page.text
    assert "script-src" not in page.headers["content-security-policy"]
    images = re.findall(r'<img src="([a-z0-9_]+\.png)"', page.text)
    assert images and all(c.get(f"/report/night1/{name}").content.startswith(b"\x89PNG") for name in images)
    for bad in ("..%2F..%2Fetc%2Fpasswd", "index.htm", "x.png"):
        assert c.get(f"/report/night1/{bad}").status_code == 404
    assert c.get("/report/nosuch/").status_code == 404
    assert client(logged_in=False).get("/report/night1/").status_code == 401


def test_a_sweep_on_a_device_another_user_reserved_is_refused_in_one_line(cli):
    reservations.reserve("local", timedelta(hours=2), note="night run", user="alice")
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", code=1)
    line = single_error(result, "local is reserved by alice@", "night run")
    assert "until" in line and "hint: wait until then, ask alice to run aiot devices release local" in result.stderr
    # the holder's own sweeps are not refused, and a release frees it for everyone
    cli("devices", "release", "local", code=1)  # not yours
    cli("devices", "release", "local", "--force")
    assert not reservations.load()


def test_devices_reserve_and_release_from_the_cli(cli):
    cli("devices", "reserve", "local", "--for", "30m", "--note", "calibration")
    (held,) = reservations.load().values()
    assert held.note == "calibration" and held.user == reservations.current_user()
    assert "was not reserved" not in cli("devices", "release", "local").stderr
    assert "was not reserved" in cli("devices", "release", "local").stderr
    assert "is not a duration" in cli("devices", "reserve", "local", "--for", "soon", code=2).stderr


def test_a_running_sweep_shows_its_progress_and_failures():
    with open_store(results_dir()) as store:
        add_record(store, sweep="live1")
        add_record(store, sweep="live1", status="failed", reason="agent crashed: <oom>")
        add_record(store, sweep="live1", status="pending", model="now_running")
        add_record(store, sweep="old", status="ok")
    c = client()
    with campaign_locks("live1", ["local"], {"user": "bob", "host": "rack1", "runs": 4,
                                             "started": "2026-01-01T00:00:00+00:00"}):
        page = c.get("/campaigns").text
        devices = c.get("/").text
    running = page.split("Recent sweeps")[0]
    assert "live1" in running and "1/4 done" in running and "bob@rack1" in running
    assert "agent crashed: &lt;oom&gt;" in running and "now_running" in running
    assert "old" in page.split("Recent sweeps")[1]
    assert "busy" in devices and "with sweep live1 of bob@rack1" in devices
    after = c.get("/campaigns").text
    assert "No sweep is running" in after and "live1" in after.split("Recent sweeps")[1]


def test_the_live_feed_pushes_fragments_as_server_sent_events():
    c = client()
    with c.stream("GET", "/events/campaigns") as feed:
        assert feed.headers["content-type"].startswith("text/event-stream")
        lines = feed.iter_lines()
        assert next(lines) == "event: campaigns"
        data = next(lines)
        assert data.startswith("data: ") and "No sweep is running" in json.loads(data[6:])
    assert c.get("/events/secrets").status_code == 404


def test_a_lab_device_whose_node_vanished_stays_listed_offline(monkeypatch):
    from aiot.host.labview import sources

    listed = [[{"name": "dev-b", "transport": "ray", "node": "beta", "state": "busy", "last_error": None}], []]
    monkeypatch.setattr(sources, "lab_rows", lambda: listed.pop(0))
    with open_store(results_dir()) as store:  # a sweep this driver ran on the node's device
        add_record(store, device="dev-b", info={"soc": "Dimensity 9200", "cores": 8})
    watch = sources.DeviceWatch()
    first = {r["name"]: r for r in watch.rows(results_dir())}
    assert (first["dev-b"]["soc"], first["dev-b"]["cores"]) == ("Dimensity 9200", 8)
    second = {r["name"]: r for r in watch.rows(results_dir())}
    assert first["dev-b"]["state"] == "busy" and first["local"]["state"] == "online"
    assert second["dev-b"]["state"] == "offline" and second["dev-b"]["node"] == "beta"
    assert second["dev-b"]["last_error"] == "its lab node is gone"


def test_free_devices_telemetry_is_read_live_and_busy_ones_are_left_alone():
    from aiot.core.errors import TransportError
    from aiot.host.labview.live import LiveTelemetry

    asked, answers = [], iter([{"battery_pct": 81, "read_at": 1.0},
                               TransportError("phone went away", "reconnect it")])

    def read(device):
        asked.append(device)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    live = LiveTelemetry(every_s=0.0, read=read)
    assert live.reading("busy-phone", "busy") is None and live.reading("gone", "offline") is None
    assert live.reading("pixel", "online") is None  # the first reading is under way
    deadline = time.monotonic() + 5
    while live.reading("pixel", "online") is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert live.reading("pixel", "online")["battery_pct"] == 81
    while "error" not in live.reading("pixel", "online") and time.monotonic() < deadline:
        time.sleep(0.02)
    kept = live.reading("pixel", "online")
    assert kept["battery_pct"] == 81 and kept["error"] == "phone went away"  # the last reading stays
    assert "busy-phone" not in asked and "gone" not in asked
    live.close()


def test_the_devices_page_shows_this_hosts_telemetry_read_live():
    c = client()
    deadline = time.monotonic() + 20
    page = c.get("/").text
    while "read live" not in page and time.monotonic() < deadline:
        time.sleep(0.2)
        page = c.get("/").text
    row = page[page.index('data-device="local"'):]
    assert "read live 20" in row[:row.index("</tr>")]


def test_lab_view_refuses_times_that_are_not_seconds_and_hosts_that_are_not_hosts(cli):
    for option, value, says in (("--session-idle-s", "inf", "--session-idle-s inf is not a number of seconds"),
                                ("--session-max-s", "0", "--session-max-s 0.0 is not a number of seconds"),
                                ("--client-timeout-s", "nan", "--client-timeout-s nan is not a number of seconds"),
                                ("--allow-host", "lab host:x", "--allow-host 'lab host:x' is not HOST or HOST:PORT")):
        result = cli("lab", "view", "--port", "1", option, value, code=2)
        assert says in result.stderr and "Traceback" not in result.output, result.stderr


def test_a_live_page_is_told_when_its_session_ends():
    app = create_app(ViewConfig(results_dir(), TOKEN, every_s=0.05))
    watcher, other = TestClient(app, base_url=BASE), TestClient(app, base_url=BASE)
    for name, c in (("ann", watcher), ("bob", other)):
        assert c.post("/login", data={"token": TOKEN, "name": name}, follow_redirects=False).status_code == 303
    with watcher.stream("GET", "/events/campaigns") as feed:
        lines = feed.iter_lines()
        assert next(lines) == "event: campaigns"
        other.post("/logout", data={"csrf": form_token(other), "all": "1"})
        seen = []
        for line in lines:  # what was pushed before the logout, an idle beat or two, then the end
            seen.append(line)
            if line == "event: ended" or len(seen) > 50:
                break
        assert seen[-1] == "event: ended", seen


def test_a_page_writes_out_bidirectional_and_control_marks_of_a_devices_text():
    """A device's text (a name, a reason) with U+202E reads as it is on every page, not
    reversed; the page's own markup is kept."""
    import markupsafe

    from aiot.host.labview.pages import _ENV

    page = _ENV.from_string("<td>{{ text }}</td>{{ markup }}").render(
        text="evil\u202egnp.exe\x1b[2J<b>", markup=markupsafe.Markup("<i>kept</i>"))
    assert page == "<td>evil\\u202egnp.exe\\x1b[2J&lt;b&gt;</td><i>kept</i>"
