"""``aiot lab view`` in a real headless Chromium driven by Selenium: the view started as a user
starts it, the login link's token exchanged for a cookie, hostile strings shown as text, and a
sweep started from the CLI appearing on the campaigns page and progressing without a reload.

Needs Debian's ``chromium`` and ``chromium-driver`` and the view extra (selenium); without them
the test skips, except under ``make test`` (AIOT_REQUIRE_TOOLCHAINS=1), where it fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
TIMEOUT_S = 120
#: The sweeps' timing flags: each run times for a second at least, so that the pages (pushed
#: every 0.5 s) see a sweep running and between its runs however fast this machine is.
SECOND_PER_RUN = ("--min-runs", "30", "--min-s", "1", "--warmup-runs", "1", "--warmup-min-s", "0",
                  "--cooldown-max-s", "0")
#: A live fragment is swapped whole when the server pushes one: read it in one script call
#: (an element found earlier may be gone by the next call).
TEXT = "var e = document.querySelector(arguments[0]); return e ? e.innerText : null;"


def need(what: str, found: bool, install: str) -> None:
    """Skip (or fail under AIOT_REQUIRE_TOOLCHAINS=1) when ``what`` is missing."""
    if not found:
        if os.environ.get("AIOT_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{what} is missing: {install} (scripts/bootstrap.sh does)")
        pytest.skip(f"{what} is missing ({install})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, what: str, timeout: float = TIMEOUT_S, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def browser(tmp_path):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need("selenium", False, "pip install 'aiot[view]'")
    exe = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
    need("Chromium", exe is not None, "apt-get install chromium")
    driver_exe = shutil.which("chromedriver")
    need("chromedriver", driver_exe is not None, "apt-get install chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = exe
    for flag in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    driver = webdriver.Chrome(options=options, service=Service(driver_exe, log_output=str(tmp_path / "driver.log")))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def running_view(tmp_path: Path, *args: str, env: dict | None = None, with_proc: bool = False):
    """``aiot lab view`` (with ``args``) on a free port with a known token file, as a user
    starts it; yields (url, token), and its process too ``with_proc``. Views started in one
    test each have their own token file and log (``token``, ``token-2``, ...)."""
    pytest.importorskip("starlette")
    token = "view-token-" + os.urandom(8).hex()
    started = len(list(tmp_path.glob("token*")))
    suffix = f"-{started + 1}" if started else ""
    token_file = tmp_path / f"token{suffix}"
    token_file.write_text(token + "\n")
    port = free_port()
    log_path = tmp_path / f"view{suffix}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "aiot", "lab", "view", "--port", str(port), "--token",
                             str(token_file), "--every", "0.5", *args], stdout=log, stderr=subprocess.STDOUT,
                            env=env)
    url = f"http://127.0.0.1:{port}"

    def answers():
        try:
            urllib.request.urlopen(f"{url}/app.js", timeout=2).close()
            return True
        except OSError:
            assert proc.poll() is None, log_path.read_text()
            return False

    try:
        wait_until(answers, "the view to listen", timeout=90)
        yield (url, token, proc) if with_proc else (url, token)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def view(tmp_path):
    with running_view(tmp_path) as found:
        yield found


def log_in(browser, url: str, token: str, name: str | None = None) -> None:
    """Open the login link as the view printed it: the token in the fragment fills the form,
    the person gives their name (default: this OS account's, so that the page's reservations
    and the CLI's are the same holder's) and sends it, and the devices page opens."""
    from selenium.webdriver.common.by import By

    from aiot.host.devices import reservations

    browser.get(f"{url}/login#{token}")
    wait_until(lambda: token not in browser.current_url, "the token out of the address bar")
    field = wait_until(lambda: browser.find_elements(By.NAME, "name"), "the login form")[0]
    field.send_keys(name or reservations.current_user())
    field.submit()
    wait_until(lambda: browser.current_url.rstrip("/") == url and "Devices" in browser.page_source,
               "the devices page after login")
    assert f"signed in as {name or reservations.current_user()}" in browser.page_source


def test_a_cli_sweep_appears_and_progresses_live_in_the_browser(view, browser, tmp_path):
    from aiot.host.devices import reservations
    from aiot.host.store import open_store

    url, token = view
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:  # a hostile earlier failure
        r = store.begin("latency", {}, {"device": {"soc": HOSTILE, "model": HOSTILE}}, sweep_id="earlier",
                        device="local", model=HOSTILE, format="onnx", threads=1)
        store.finish(r.id, "failed", reason=HOSTILE)
    reservations.reserve("local", timedelta(hours=1), note=HOSTILE)  # ours: our sweep may run

    with pytest.raises(urllib.error.HTTPError) as refused:  # no token: refused
        urllib.request.urlopen(f"{url}/", timeout=10)
    assert refused.value.code == 401

    log_in(browser, url, token)
    row = browser.execute_script(TEXT, 'tr[data-device="local"]')
    assert "<script>alert(1)</script>" in row  # shown as text, not run
    assert browser.execute_script("return document.querySelectorAll('main script, main img').length") == 0

    browser.get(f"{url}/campaigns")
    browser.execute_script("window.aiotNoReload = 1")
    assert "No sweep is running" in browser.execute_script(TEXT, "#live")
    sweep = subprocess.Popen([sys.executable, "-m", "aiot", "sweep", "-m", "tiny_cnn", "-f", "onnx",
                              "--threads", "1,2,3,4", *SECOND_PER_RUN],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sweep.log", "wb"))
    try:
        def progress():
            return browser.execute_script(TEXT, "section.sweep.running .progress")

        def a_run_done():
            shown = progress()
            if not shown and sweep.poll() is not None:  # say why rather than wait in vain
                raise AssertionError(f"the sweep ended (exit {sweep.returncode}) before the page "
                                     f"showed a finished run: {(tmp_path / 'sweep.log').read_text()}")
            return shown and int(shown.split("/")[0]) >= 1 and shown

        first = wait_until(progress, "the sweep on the campaigns page")
        assert first.endswith("/4 done"), first
        done = wait_until(a_run_done, "a run to finish")
        assert int(done.split("/")[0]) >= 1
        assert sweep.wait(timeout=TIMEOUT_S) == 0, (tmp_path / "sweep.log").read_text()
    finally:
        if sweep.poll() is None:
            sweep.kill()
    wait_until(lambda: "No sweep is running" in browser.execute_script(TEXT, "#live"), "the sweep to end")
    recent = browser.execute_script(TEXT, "#live").split("Recent sweeps")[1]
    assert "local" in recent and "earlier" in recent
    assert browser.execute_script("return window.aiotNoReload") == 1  # all of it without a reload

    # the newest sweep's report opens from its link, every plot drawn; then its comparison
    link = browser.execute_script("return document.querySelector('#live tr[data-sweep] a[href^=\"/report/\"]').href")
    browser.get(link)
    wait_until(lambda: "aiot report" in browser.title, "the sweep's report")
    drawn = browser.execute_script("return Array.from(document.images).map(i => i.complete && i.naturalWidth)")
    assert drawn and all(drawn), drawn
    browser.get(f"{url}/campaigns")
    browser.execute_script("document.querySelector('#live a[href^=\"/compare\"]').click()")
    wait_until(lambda: "Compare two result sets" in browser.page_source and " vs A earlier" in
               browser.execute_script(TEXT, "main"), "the comparison with the sweep before")
    # the page's own form (it carries the form token) releases our reservation
    browser.get(url)
    browser.execute_script("document.querySelector('tr[data-device=\"local\"] .reservation button').click()")
    wait_until(lambda: not reservations.load(), "the reservation released from the page")


def test_a_device_stopped_mid_sweep_turns_offline_on_the_page(view, browser, cli, tmp_path):
    from aiot.host.emulator.state import load_all

    url, token = view
    cli("emulator", "start", "ssh", "--name", "dev-a")
    sweep = None
    try:
        log_in(browser, url, token)
        browser.execute_script("window.aiotNoReload = 1")

        def state():
            return browser.execute_script(TEXT, 'tr[data-device="dev-a"] .state') or ""

        wait_until(lambda: state().startswith("online"), "dev-a online")
        sweep = subprocess.Popen([sys.executable, "-m", "aiot", "sweep", "-d", "dev-a", "-m", "tiny_cnn", "-f",
                                  "onnx", "--threads", "1,2,3,4", *SECOND_PER_RUN],
                                 stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sweep.log", "wb"))
        busy = wait_until(lambda: "busy" in state() and state(), "dev-a busy with the sweep")
        assert "with sweep" in busy and "@" in busy
        # the board dies (its server and agent killed); it stays in the inventory, as a crashed one does
        (emulator,) = [e for e in load_all() if e.name == "dev-a"]
        emulator.terminate()
        offline = wait_until(lambda: state().startswith("offline") and state(), "dev-a offline")
        assert "since" in offline
        sweep.wait(timeout=TIMEOUT_S)
    finally:
        if sweep is not None and sweep.poll() is None:
            sweep.kill()
        subprocess.run([sys.executable, "-m", "aiot", "emulator", "stop", "dev-a"], capture_output=True,
                       timeout=120)  # already stopped unless the test failed before
    assert browser.execute_script("return window.aiotNoReload") == 1

