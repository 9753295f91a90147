"""What the emulated phone runs, asked before converting (issue 39, the design card's flow).

``aiot push --model resnet18_bnn`` to a phone converts to LCE, which no runtime aiot installs
on a phone runs: push refuses before converting, names what the phone runs and the fix; with
``lce_benchmark_model`` in the phone's inventory entry it pushes and suggests ``--native``;
pushed as ``--format tflite`` instead, the BNN runs in float and its table says so.
A ``.ptl`` sweep on a phone set up without torch is refused the same way, with
``devices setup --with torch``; the agent's own failure carries that fix too.
"""

from __future__ import annotations

import os
import time

import pytest

from aiot.core.errors import AgentError
from aiot.device_agent.spec import RunSpec
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.resolve import open_transport
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
        # where that binary comes from: aiot ships none (issue 51)
        assert "lce_benchmark_model is Larq Compute Engine's own build" in refused.stderr
        assert not any((tmp_path / "results").rglob("*.lce"))

        # The BNN pushed as tflite runs in float; every table of its runs says so (issue 51).
        cli.json("push", "--device", "ph39", "--model", "tiny_vgg_bnn", "--format", "tflite")
        floated = cli("sweep", "-d", "ph39", "--threads", "1", *fast(warmup_runs=1, cooldown=False))
        assert "tflite (BNN as float)" in floated.stdout
        (record,) = cli.json("results", "list")
        assert record["status"] == "ok" and record["spec"]["binarize"] == "bnn", record["reason"]
        assert "tflite (BNN as float)" in cli("results", "list").stdout

        ptl = cli("push", "--device", "ph39", "--model", "tiny_cnn", "--format", "ptl", code=2)
        assert "no pytorch_mobile runtime" in ptl.stderr
        assert "aiot devices setup ph39 --with torch" in ptl.stderr

        # A sweep asks the same before converting; an agent asked anyway (a run built by API,
        # a lab node's) fails with the same fix.
        swept = cli("sweep", "-m", "tiny_cnn", "-f", "onnx,ptl", "-d", "ph39", "--threads", "1",
                    *fast(warmup_runs=1, cooldown=False), code=2)
        assert "ph39 cannot time ptl artifacts" in swept.stderr
        assert "aiot devices setup ph39 --with torch" in swept.stderr
        assert len(cli.json("results", "list")) == 1  # the tflite BNN's run above, no other
        with AgentSession(open_transport("ph39")) as agent, pytest.raises(AgentError) as failed:
            agent.run(RunSpec(backend="pytorch_mobile", artifact="model.ptl").to_wire())
        assert "BackendUnavailable" in failed.value.message
        assert failed.value.hint == "run: aiot devices setup ph39 --with torch"

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
