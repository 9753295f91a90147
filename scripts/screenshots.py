#!/usr/bin/env python3
"""Make the docs' screenshots (``docs/images/*.png``) from real pages: real sweeps on ``local``
in a private results folder, the report they write and ``aiot lab view`` over them, opened in
headless Chromium.

Needs what ``make test`` needs for the browser tests: Debian's ``chromium`` and
``chromium-driver``, and the ``view`` and ``report`` extras (scripts/bootstrap.sh installs
them). Takes a few minutes (three conversions of tiny_cnn, the sweeps, two pages).
Usage: ``.venv/bin/python scripts/screenshots.py [--out docs/images]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Timing flags: enough samples for a verdict, no cool-down wait. The load check is off (the
#: page says so: VALID (relaxed)), since the machine that makes the pictures is rarely idle.
TIMING = ("--min-runs", "50", "--min-s", "0.5", "--warmup-runs", "3", "--warmup-min-s", "0",
          "--cooldown-max-s", "0", "--validity", "load=off")
#: Twelve configurations of aiot's own test format, every run INVALID (too few samples).
TWELVE = ("tiny_cnn,tiny_vgg,tiny_bnn,squeezenet_mnist,mobilenet_v2_mnist,mnasnet_mnist,"
          "resnet18_mnist,vgg_small_mnist,resnet34_mnist,regnetx_600mf_mnist,densenet121_mnist,"
          "resnet50_mnist")
REPORT_SIZE = (1280, 900)  # the first screen of a laptop's browser window
VIEW_WIDTH = 1300


def aiot(env: dict, *args: str) -> str:
    """Run ``aiot args`` as a user does; its stdout."""
    done = subprocess.run([sys.executable, "-m", "aiot", *args], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"aiot {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def private_env(folder: Path) -> dict:
    """A results folder, state, inventory and device workdir of the script's own (the machine's
    cache and toolchains are kept: conversions are reused)."""
    return {**os.environ, "AIOT_RESULTS_DIR": str(folder / "results"),
            "AIOT_STATE_DIR": str(folder / "state"), "AIOT_INVENTORY": str(folder / "devices.toml"),
            "AIOT_LOCAL_WORKDIR": str(folder / "device"), "XDG_CONFIG_HOME": str(folder / "config"),
            "AIOT_NO_PROGRESS": "1", "NO_COLOR": "1"}


def browser(profile: Path):
    """Headless Chromium driven by Selenium (chromium-driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for flag in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(60)
    return driver


def first_screen(driver, url: str, path: Path) -> None:
    driver.set_window_size(*REPORT_SIZE)
    driver.get(url)
    driver.save_screenshot(str(path))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


#: The bottom of a page's content (its document is as tall as the window).
CONTENT_BOTTOM = ("return Math.ceil(Math.max(...Array.from(document.querySelectorAll('body *'))"
                  ".map(e => e.getBoundingClientRect().bottom)))")


def whole_page(driver, path: Path) -> None:
    """The page cut below its content, :data:`VIEW_WIDTH` wide (Pillow crops a tall window's
    screenshot: the window's height is not the page's)."""
    from PIL import Image

    driver.set_window_size(VIEW_WIDTH, 2000)
    time.sleep(1.0)  # the live fragments settle after a resize
    driver.save_screenshot(str(path))
    bottom = driver.execute_script(CONTENT_BOTTOM) + 16
    with Image.open(path) as shot:
        cropped = shot.crop((0, 0, shot.width, min(bottom, shot.height)))
    cropped.save(path)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_view(env: dict, folder: Path, driver, out: Path, a: str, b: str) -> None:
    """``aiot lab view`` over the results: its devices and campaigns pages, and sweep B
    compared with sweep A."""
    from selenium.webdriver.common.by import By

    token = folder / "view-token"
    token.write_text(os.urandom(12).hex() + "\n")
    port = free_port()
    log = open(folder / "view.log", "wb")
    view = subprocess.Popen([sys.executable, "-m", "aiot", "lab", "view", "--port", str(port),
                             "--token", str(token), "--every", "0.5"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if view.poll() is not None:
                    sys.exit((folder / "view.log").read_text())
                time.sleep(0.3)
        driver.set_window_size(VIEW_WIDTH, 900)
        driver.get(f"{url}/login#{token.read_text().strip()}")
        time.sleep(1)
        field = driver.find_element(By.NAME, "name")
        field.send_keys(os.environ.get("AIOT_SCREENSHOT_USER", "lab"))
        field.submit()
        time.sleep(2)  # the devices page reads each free device's telemetry
        whole_page(driver, out / "lab-view-devices.png")
        driver.get(f"{url}/campaigns")
        time.sleep(1.5)
        whole_page(driver, out / "lab-view-campaigns.png")
        driver.get(f"{url}/compare?a={a}&b={b}")
        time.sleep(1.5)
        whole_page(driver, out / "lab-view-compare.png")
    finally:
        view.terminate()
        view.wait(timeout=30)
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aiot-screenshots-") as tmp:
        folder = Path(tmp)
        env = private_env(folder / "campaign")
        # A campaign on local, measured twice (the second a --fresh attempt: B against A), and
        # one run that cannot reach its minimum sample count (INVALID, flagged on the page).
        sweep = ("sweep", "--device", "local", "--model", "tiny_cnn", "--format", "onnx,tflite,ptl",
                 "--threads", "1,2", "--dataset", "fashion-mnist", "--limit", "50", *TIMING, "--json")
        a = json.loads(aiot(env, *sweep))[0]["sweep_id"]
        b = json.loads(aiot(env, *sweep, "--fresh"))[0]["sweep_id"]
        aiot(env, "run", "--model", "tiny_cnn", "--format", "onnx", "--min-runs", "1000000",
             "--max-s", "0.05", "--min-s", "0", "--warmup-runs", "1", "--warmup-min-s", "0")
        aiot(env, "report", "--out", str(folder / "report"))
        invalid_env = private_env(folder / "invalid")
        aiot(invalid_env, "sweep", "--device", "local", "--model", TWELVE, "--format", "null",
             "--threads", "1", "--min-runs", "1000000", "--max-s", "0.05", "--min-s", "0",
             "--warmup-runs", "1", "--warmup-min-s", "0", "--cooldown-max-s", "0")
        aiot(invalid_env, "report", "--out", str(folder / "invalid-report"))
        driver = browser(folder / "chromium-profile")
        try:
            first_screen(driver, (folder / "report" / "index.html").as_uri(),
                         args.out / "report-first-screen.png")
            first_screen(driver, (folder / "invalid-report" / "index.html").as_uri(),
                         args.out / "report-first-screen-invalid.png")
            lab_view(env, folder, driver, args.out, a, b)
        finally:
            driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
