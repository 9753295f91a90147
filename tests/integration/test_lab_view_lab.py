"""``aiot lab view`` over a lab of two Ray nodes (tests/integration/test_lab.py's hosts alpha and
beta, each owning one emulated device), in a real headless Chromium: both devices listed
online, busy while a CLI sweep measures them, and beta's device offline once beta's node dies
mid-sweep — all without a reload."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("ray", reason="the lab needs aiot[lab] (Ray)")
from tests.integration.test_lab import CLI_FAST, lab  # noqa: E402,F401  the two-node lab fixture
from tests.integration.test_lab_view_browser import (  # noqa: E402,F401  the browser fixture
    TEXT,
    browser,
    log_in,
    running_view,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_the_devices_of_a_two_node_lab_go_busy_then_offline_on_the_page(lab, browser, tmp_path):
    from aiot.host.lab.node import kill_session

    address, _alpha, beta = lab
    with running_view(tmp_path, "--lab", address) as (url, token):
        log_in(browser, url, token)
        browser.execute_script("window.aiotNoReload = 1")

        def state(device):
            return browser.execute_script(TEXT, f'tr[data-device="{device}"] .state') or ""

        wait_until(lambda: state("dev-a").startswith("online") and state("dev-b").startswith("online"),
                   "both lab devices online")
        sweep = subprocess.Popen([sys.executable, "-m", "aiot", "sweep", "--lab", address, "-d", "dev-a,dev-b",
                                  "-m", "tiny_cnn", "-f", "onnx", "--threads", "1,2,3", *CLI_FAST],
                                 stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sweep.log", "wb"),
                                 env=dict(os.environ))
        try:
            wait_until(lambda: state("dev-b").startswith("busy"), "dev-b busy with the sweep")
            kill_session(beta.node_pid())  # beta's host goes down mid-sweep
            seen = []
            try:
                wait_until(lambda: seen.append(state("dev-b")) or seen[-1].startswith("offline"), "dev-b offline",
                           timeout=180)
            except AssertionError:
                raise AssertionError(f"dev-b never offline; the page said {sorted(set(seen))}") from None
            assert state("dev-a").split()[0] in ("online", "busy")
            sweep.wait(timeout=300)
        finally:
            if sweep.poll() is None:
                sweep.kill()
        assert browser.execute_script("return window.aiotNoReload") == 1
