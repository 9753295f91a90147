"""What the emulated phone runs, asked before converting (issue 39, the design card's flow).

``aiot push --model resnet18_bnn`` to a phone converts to LCE, which no runtime aiot installs
on a phone runs: push refuses before converting, names what the phone runs and the fix; with
``lce_benchmark_model`` in the phone's inventory entry it pushes and suggests ``--native``.
A ``.ptl`` run on a phone set up without torch fails with ``devices setup --with torch``.
"""

from __future__ import annotations

import os
import time

import pytest

from aiot.host.emulator import arm64
from tests.helpers import fast

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]


def test_push_refuses_what_the_phone_cannot_run_before_converting(cli, tmp_path):
    cli.json("emulator", "start", "adb", "--arch", "arm64", "--profile", "android", "--name", "ph39")
    try:
        cli.json("devices", "setup", "ph39")  # numpy, onnxruntime, litert: no torch, no LCE
        begun = time.monotonic()
        refused = cli("push", "--device", "ph39", "--model", "resnet18_bnn", code=2)
        assert time.monotonic() - begun < 60  # asked the phone, converted nothing
        assert "ph39 cannot time lce artifacts: its agent has no lce runtime (it runs " in refused.stderr
        assert "tflite" in refused.stderr and "--native lce_benchmark_model" in refused.stderr
        assert "[devices.ph39.binaries] lce_benchmark_model" in refused.stderr
        assert not any((tmp_path / "results").rglob("*.lce"))

        ptl = cli("push", "--device", "ph39", "--model", "tiny_cnn", "--format", "ptl", code=2)
        assert "no pytorch_mobile runtime" in ptl.stderr
        assert "aiot devices setup ph39 --with torch" in ptl.stderr

        # The same failure met by a sweep (which does not ask first) carries the same fix.
        cli("sweep", "-m", "tiny_cnn", "-f", "ptl", "-d", "ph39", "--threads", "1",
            *fast(warmup_runs=1, cooldown=False), code=1)
        (record,) = cli.json("results", "list")
        assert record["status"] == "failed"
        assert "BackendUnavailable" in record["reason"]
        assert "aiot devices setup ph39 --with torch" in record["reason"]

        # A configured native tool redirects the push instead of refusing it.
        binary = tmp_path / "speed_benchmark_torch"
        binary.write_text("#!/bin/sh\n")
        with open(os.environ["AIOT_INVENTORY"], "a", encoding="utf-8") as fh:
            fh.write(f'\n[devices.ph39.binaries]\nspeed_benchmark_torch = "{binary}"\n')
        pushed = cli.json("push", "--device", "ph39", "--model", "tiny_cnn", "--format", "ptl")
        assert pushed["native"] == "speed_benchmark_torch"
        assert pushed["measure"] == "aiot sweep --device ph39 --native speed_benchmark_torch --threads 1,2,4,8"
    finally:
        cli("emulator", "stop", "ph39")
