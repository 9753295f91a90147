"""``aiot report`` in a real headless browser: a tiny campaign on the local device, its page
opened in Chromium, loaded without errors, every image rendered, and a screenshot taken.

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe`` (NUL-terminated
JSON on file descriptors 3 and 4) with the standard library only, so the test needs the
Debian ``chromium`` package and nothing from PyPI. Without it the test skips, except under
``make test`` (AIOT_REQUIRE_TOOLCHAINS=1), where bootstrap installed it and it fails.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import fast

FAST = fast(5, warmup_runs=1, cooldown=False)
WIDTH, HEIGHT = 1280, 900
TIMEOUT_S = 60

# The page's state after load, as the browser sees it.
PAGE_STATE = """JSON.stringify({
  images: [...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete,
                                           width: i.naturalWidth, height: i.naturalHeight})),
  invalidRows: document.querySelectorAll('tr.invalid').length,
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  height: document.documentElement.scrollHeight,
})"""

# Where the answer sits: the best-per-format table's top and the rows it shows on the first
# screen (the window is HEIGHT pixels high).
FIRST_SCREEN = """JSON.stringify({
  top: document.querySelector('#summary table').getBoundingClientRect().top,
  rows: [...document.querySelectorAll('#summary tbody tr')].filter(
           r => r.getBoundingClientRect().bottom <= window.innerHeight).length,
  fastest: document.querySelectorAll('#summary tr.fastest').length,
})"""


def need(what: str, found: bool, install: str) -> None:
    """Skip (or fail under AIOT_REQUIRE_TOOLCHAINS=1) when ``what`` is missing."""
    if not found:
        if os.environ.get("AIOT_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{what} is missing: {install} (scripts/bootstrap.sh does)")
        pytest.skip(f"{what} is missing ({install})")


def chromium() -> str:
    path = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
    need("Chromium", path is not None, "apt-get install chromium")
    return path


class DevTools:
    """One headless Chromium and a page in it, driven over the DevTools pipe."""

    def __init__(self, exe: str, profile: Path, log: Path) -> None:
        commands, self._out = os.pipe()  # we write commands, Chromium reads them on fd 3
        self._in, replies = os.pipe()  # Chromium writes replies on fd 4, we read them

        def child_fds():  # the protocol's fixed numbers (dup first: either may already be 3 or 4)
            a, b = os.dup(commands), os.dup(replies)
            os.dup2(a, 3)
            os.dup2(b, 4)

        flags = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-pipe",
                 f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        if os.geteuid() == 0:
            flags.insert(0, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.log = log
        with open(log, "wb") as err:
            # preexec_fn only dups descriptors (no locks taken), so it is safe even with threads.
            self.proc = subprocess.Popen(
                [exe, *flags], stdin=subprocess.DEVNULL, stdout=err, stderr=err, close_fds=False,
                preexec_fn=child_fds)  # noqa: PLW1509
        os.close(commands)
        os.close(replies)
        self._buf, self._next_id, self.events, self.session = b"", 0, [], None

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer; its log:\n{self.log.read_text()[-2000:]}")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise EOFError(f"Chromium exited; its log:\n{self.log.read_text()[-2000:]}")
            self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, **params) -> dict:
        """Send a command (to the page once attached) and return its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def open(self, url: str) -> None:
        """A fresh page at ``url``, returning after its load event."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read(deadline))

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"]["value"]

    def errors(self) -> list[str]:
        """Script exceptions, console errors and failed loads seen so far."""
        found = []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(p["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
                found.append(f"console.error: {p.get('args')}")
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                found.append(f"{p['entry']['text']} {p['entry'].get('url', '')}".strip())
            elif method == "Network.loadingFailed":
                found.append(f"load failed: {p.get('errorText')}")
        return found

    def requested(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, whole: bool = True) -> None:
        """The whole page, or (``whole=False``) the first screen: what a reader sees first."""
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=whole)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.proc.wait(10)
        except Exception:  # noqa: BLE001 - whatever state it is in, it must not outlive the test
            self.proc.kill()
            self.proc.wait(10)
        finally:
            os.close(self._out)
            os.close(self._in)


@pytest.fixture
def browser(tmp_path):
    tools = DevTools(chromium(), tmp_path / "chromium-profile", tmp_path / "chromium.log")
    yield tools
    tools.close()


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_check_catches_a_broken_image(browser, tmp_path):
    """The harness itself: a missing image is an error and has no natural width."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="missing.png"></body></html>')
    browser.open(page.as_uri())
    state = json.loads(browser.evaluate(PAGE_STATE))
    assert state["images"] == [{"src": "missing.png", "complete": True, "width": 0, "height": 0}]
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in browser.errors())


@pytest.mark.slow
def test_report_of_a_local_campaign_renders_in_chromium(cli, browser, tmp_path):
    for module, extra in (("onnxruntime", "onnx"), ("ai_edge_litert", "tflite"),
                          ("litert_torch", "tflite"), ("matplotlib", "report")):
        need(module, _importable(module), f"pip install 'aiot[{extra}]'")
    swept = cli.json("sweep", "--device", "local", "--model", "tiny_cnn", "--format",
                     "onnx,tflite,ptl", "--threads", "1,2", "--dataset", "fashion-mnist",
                     "--limit", "50", "--profile", *FAST)
    # A busy host may fail the sweep's own runs too (CI did): the report counts every one.
    busy = sum(r["validity"] == "INVALID" for r in swept)
    # One run that cannot reach its minimum sample count: INVALID, and flagged on the page.
    (invalid,) = cli.json("run", "--model", "tiny_cnn", "--format", "onnx", "--threads", "1",
                          "--min-runs", "1000000", "--max-s", "0.05", "--min-s", "0",
                          "--warmup-runs", "1", "--warmup-min-s", "0")
    assert invalid["validity"] == "INVALID"
    out = tmp_path / "report"
    written = cli.json("report", "--out", str(out))
    assert written["files"][0] == str(out / "index.html") and written["invalid"] == busy + 1
    expected = {"latency_threads", "accuracy_latency", "load_time"}
    if _importable("aiot.host.scores.vips"):
        expected.add("leaderboard")
    assert expected <= set(written["plots"])

    browser.open((out / "index.html").as_uri())
    state = json.loads(browser.evaluate(PAGE_STATE))
    assert browser.errors() == []
    # Self-contained: the page and its own PNGs are all the browser fetched.
    assert {u for u in browser.requested() if not u.startswith("file://")} <= {"about:blank"}
    assert {Path(u).name for u in browser.requested() if u.startswith("file://")} == {
        "index.html", *(f"{k}.png" for k in written["plots"])}
    assert sorted(i["src"] for i in state["images"]) == sorted(f"{k}.png" for k in written["plots"])
    for image in state["images"]:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
        assert (image["width"], image["height"]) == png_size(out / image["src"])
    assert state["invalidRows"] >= 2 * (busy + 1)  # each INVALID run in the flagged table and in every run
    # The answer first, then the plots; provenance, failures and every run after.
    assert state["sections"][:3] == ["summary", "formats", "latency"]
    assert state["sections"][-3:] == ["provenance", "flags", "runs"]
    assert "operators" in state["sections"]  # the --profile runs' slowest operators

    # The first screen answers "how fast is my model, where": every format's best median.
    first = json.loads(browser.evaluate(FIRST_SCREEN))
    assert first["top"] < HEIGHT / 2 and first["rows"] == 3 and first["fastest"] == 1
    screen = tmp_path / "report-first-screen.png"
    browser.screenshot(screen, whole=False)
    assert png_size(screen) == (WIDTH, HEIGHT)
    shot = tmp_path / "report-screenshot.png"
    browser.screenshot(shot)
    width, height = png_size(shot)
    assert width == WIDTH and abs(height - state["height"]) <= 2  # the whole page, not the window
    keep = os.environ.get("AIOT_REPORT_SCREENSHOT")  # a copy of it, for a look at it
    if keep:
        shutil.copyfile(screen, keep)
    print(f"screenshots: {screen} {shot}")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


#: Twelve zoo models, each its own configuration of a sweep (the null format: no conversion).
TWELVE = ("tiny_cnn,tiny_vgg,tiny_bnn,squeezenet_mnist,mobilenet_v2_mnist,mnasnet_mnist,"
          "resnet18_mnist,vgg_small_mnist,resnet34_mnist,regnetx_600mf_mnist,densenet121_mnist,"
          "resnet50_mnist")

# Each summary row's box, and whether anything of the first screen reaches past the window.
EVERY_ROW = """JSON.stringify({
  rows: [...document.querySelectorAll('#summary tbody tr')].map(r => {
           const box = r.getBoundingClientRect(); return {bottom: box.bottom, height: box.height}; }),
  tableRight: document.querySelector('#summary table').getBoundingClientRect().right,
  scrolls: document.querySelector('#summary .scroll').scrollWidth
           > document.querySelector('#summary .scroll').clientWidth,
  pageWidth: document.documentElement.scrollWidth,
})"""


@pytest.mark.slow
def test_every_configuration_of_an_invalid_12_run_sweep_is_on_the_first_screen(cli, browser, tmp_path):
    """Issue 39: with INVALID runs each reasons cell was 8-10 lines and only 2 rows fitted
    the first screen, in a table wider than 1280 px. Every row is now one line (the reasons
    named, counted once above the table), and the table fits the window."""
    need("matplotlib", _importable("matplotlib"), "pip install 'aiot[report]'")
    # Too few samples by construction (--max-s ends the loop first): INVALID on any machine.
    runs = cli.json("sweep", "--device", "local", "--model", TWELVE, "--format", "null",
                    "--threads", "1", "--min-runs", "1000000", "--max-s", "0.05", "--min-s", "0",
                    "--warmup-runs", "1", "--warmup-min-s", "0", "--cooldown-max-s", "0")
    assert len(runs) == 12 and {r["validity"] for r in runs} == {"INVALID"}
    out = tmp_path / "report"
    cli.json("report", "--out", str(out))
    browser.open((out / "index.html").as_uri())
    assert browser.errors() == []
    seen = json.loads(browser.evaluate(EVERY_ROW))
    assert len(seen["rows"]) == 12
    assert all(row["bottom"] <= HEIGHT for row in seen["rows"]), seen["rows"]  # all on screen 1
    assert max(row["height"] for row in seen["rows"]) < 2 * min(row["height"] for row in seen["rows"])
    assert seen["tableRight"] <= WIDTH and not seen["scrolls"] and seen["pageWidth"] <= WIDTH, seen
    page = (out / "index.html").read_text()
    assert "12 of 12 rows are INVALID: " in page and "too few samples (12)" in page
    screen = tmp_path / "report-first-screen-invalid.png"
    browser.screenshot(screen, whole=False)
    assert png_size(screen) == (WIDTH, HEIGHT)
    keep = os.environ.get("AIOT_REPORT_INVALID_SCREENSHOT")  # (docs/images: scripts/screenshots.py)
    if keep:
        shutil.copyfile(screen, keep)
