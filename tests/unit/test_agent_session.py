"""The agent's ``session`` command (one agent per device, each measurement in a forked child)
and the host's ControlSession over LocalTransport's stream, with the null backend."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from aiot.core.errors import AgentError, CommandTimeout, is_transient
from aiot.device_agent import protocol
from aiot.device_agent.session import _how_it_ended
from aiot.device_agent.telemetry import telemetry_text
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.agent_stream import AgentSessionLost
from aiot.host.devices.deploy import push_file
from aiot.host.devices.telemetry import TELEMETRY_SCRIPT, parse_telemetry, read_telemetry
from aiot.host.transports.base import StreamUnsupported
from aiot.host.transports.local import LocalTransport
from tests.helpers import process_gone


def _null_artifact(folder, sleep_ms=0.0):
    path = folder / "null.json"
    path.write_text(
        json.dumps(
            {"format": "aiot-null", "sleep_ms": sleep_ms, "input_shape": [1, 4], "outputs": 3}
        )
    )
    return path


def _run_spec(artifact, **over):
    return {
        "v": 1,
        "backend": "null",
        "artifact": str(artifact),
        "threads": 1,
        "warmup_runs": 0,
        "warmup_min_s": 0,
        "min_runs": 5,
        "min_s": 0,
        **over,
    }


class _Agent:
    """``python -m aiot.device_agent session`` as a child of this test, spoken to raw."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiot.device_agent", "session"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.ready = self.read()

    def send(self, request) -> None:
        self.proc.stdin.write((request if isinstance(request, str) else json.dumps(request)) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "the session ended"
        return protocol.decode(line)

    def answer(self, request) -> list[dict]:
        """Every message up to the request's final one (progress included)."""
        self.send(request)
        msgs = [self.read()]
        while msgs[-1]["event"] == "progress":
            msgs.append(self.read())
        return msgs

    def children(self) -> list[int]:
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
            return [int(pid) for pid in fh.read().split()]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def raw_agent():
    agent = _Agent()
    yield agent
    agent.close()


def _start_long_run(agent, tmp_path) -> int:
    """Ask for a 30 s run (request id 1); the PID of the child measuring it."""
    spec = _run_spec(_null_artifact(tmp_path, sleep_ms=50), min_s=30, max_s=30)
    agent.send({"op": "run", "id": 1, "spec": spec})
    return _child_of(agent)


def _child_of(agent, within=5.0) -> int:
    deadline = time.monotonic() + within
    while not agent.children():
        assert time.monotonic() < deadline, "no child was forked"
        time.sleep(0.01)
    return agent.children()[0]


# -- the agent side ----------------------------------------------------------------------------


def test_ready_then_hello_telemetry_and_runs_each_answered_with_its_id(raw_agent, tmp_path):
    assert raw_agent.ready["event"] == "ready" and raw_agent.ready["isolation"] == "fork"
    assert raw_agent.ready["pid"] == raw_agent.proc.pid
    (hello,) = raw_agent.answer({"op": "hello", "id": 1})
    assert (hello["event"], hello["id"]) == ("hello", 1) and "runtimes" in hello
    (tele,) = raw_agent.answer({"op": "telemetry", "id": "t"})
    assert tele["id"] == "t" and tele["text"].startswith("@@cpufreq\n")
    first = raw_agent.answer({"op": "run", "id": 2, "spec": _run_spec(_null_artifact(tmp_path))})
    assert [m["event"] for m in first][-1] == "result" and {m["id"] for m in first} == {2}
    assert first[-1]["backend"] == "null" and len(first[-1]["samples_ns"]) == 5
    # The child is reaped before the next request is read: no process lingers between runs.
    assert raw_agent.answer({"op": "hello", "id": "h"})[0]["event"] == "hello"
    assert raw_agent.children() == []
    second = raw_agent.answer({"op": "run", "id": 3, "spec": _run_spec(_null_artifact(tmp_path))})
    assert second[-1]["event"] == "result" and second[-1]["id"] == 3


def test_the_session_itself_never_loads_a_runtime(raw_agent, tmp_path):
    # Children are forked from the session: a runtime it loaded, every run would inherit warm.
    spec = _run_spec(_null_artifact(tmp_path))
    assert raw_agent.answer({"op": "run", "id": 1, "spec": spec})[-1]["event"] == "result"
    assert raw_agent.answer({"op": "memory", "id": 2, "spec": spec})[-1]["event"] == "memory"
    with open(f"/proc/{raw_agent.proc.pid}/maps") as fh:
        maps = fh.read()
    assert "onnxruntime" not in maps and "tflite" not in maps and "torch" not in maps


def test_bad_requests_get_errors_and_the_session_goes_on(raw_agent, tmp_path):
    raw_agent.send("not json")
    assert raw_agent.read()["type"] == "RequestError"
    (unknown,) = raw_agent.answer({"op": "reboot", "id": 5})
    assert (unknown["event"], unknown["id"], unknown["type"]) == ("error", 5, "RequestError")
    (bad,) = raw_agent.answer({"op": "run", "id": 6, "spec": {"v": 9}})
    assert (bad["event"], bad["id"], bad["type"]) == ("error", 6, "SpecError")
    (no_spec,) = raw_agent.answer({"op": "run", "id": 7})
    assert (no_spec["id"], no_spec["type"]) == (7, "SpecError")
    missing = raw_agent.answer({"op": "run", "id": 8, "spec": _run_spec(tmp_path / "gone.json")})
    assert (missing[-1]["id"], missing[-1]["type"]) == (8, "ArtifactLoadError")
    assert raw_agent.answer({"op": "hello", "id": 9})[0]["event"] == "hello"


def test_a_child_killed_mid_run_is_reported_and_the_session_goes_on(raw_agent, tmp_path):
    os.kill(_start_long_run(raw_agent, tmp_path), signal.SIGKILL)
    msgs = [raw_agent.read()]
    while msgs[-1]["event"] == "progress":
        msgs.append(raw_agent.read())
    assert (msgs[-1]["event"], msgs[-1]["id"], msgs[-1]["type"]) == ("error", 1, "AgentDied")
    assert "killed by SIGKILL" in msgs[-1]["message"]
    assert raw_agent.answer({"op": "hello", "id": 2})[0]["event"] == "hello"


def test_closing_stdin_mid_run_kills_the_child_and_ends_the_session(raw_agent, tmp_path):
    child = _start_long_run(raw_agent, tmp_path)
    raw_agent.proc.stdin.close()
    assert raw_agent.proc.wait(timeout=5) == 0 and process_gone(child)


def test_a_close_request_mid_run_ends_it_too(raw_agent, tmp_path):
    child = _start_long_run(raw_agent, tmp_path)
    raw_agent.send({"op": "close"})
    assert raw_agent.proc.wait(timeout=5) == 0 and process_gone(child)


def test_the_child_dies_with_a_killed_session(raw_agent, tmp_path):
    # An SSH host kills the session by its PID alone; the measurement must not live on.
    child = _start_long_run(raw_agent, tmp_path)
    raw_agent.proc.kill()
    raw_agent.proc.wait()
    assert process_gone(child)


def test_how_a_child_ended_in_words():
    assert _how_it_ended(signal.SIGKILL) == "was killed by SIGKILL"
    assert _how_it_ended(3 << 8) == "exited with code 3"


def _fake_sysfs(root):
    def write(rel, text):
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1800000\n")
    write("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "2400000\n")
    (root / "sys/devices/system/cpu/cpu1").mkdir(parents=True)  # offline core: no cpufreq
    (root / "sys/devices/system/cpu/cpufreq").mkdir(parents=True)  # not a core
    write("/sys/class/thermal/thermal_zone0/type", "cpu-1-0-usr\n")
    write("/sys/class/thermal/thermal_zone0/temp", "41500\n")
    write("/sys/class/thermal/thermal_zone1/type", "battery\n")  # no temp file: skipped
    write("/sys/class/power_supply/battery/type", "Battery\n")
    write("/sys/class/power_supply/battery/capacity", "87\n")
    write("/sys/class/power_supply/battery/status", "Discharging\n")
    write("/sys/class/power_supply/battery/temp", "312\n")


def test_telemetry_text_prints_the_scripts_sections_from_a_sysfs_tree(tmp_path):
    _fake_sysfs(tmp_path)
    text = telemetry_text(str(tmp_path))
    assert text == (
        "@@cpufreq\n0 1800000 2400000\n1 - -\n@@thermal\nthermal_zone0\tcpu-1-0-usr\t41500\n"
        "@@power\nbattery\tBattery\t87\tDischarging\t312\n"
    )
    t = parse_telemetry(text, 1.0)
    assert (t.cpu_freq_khz, t.cpu_cap_khz, t.cpu_temp_max_c) == ({0: 1800000}, {0: 2400000}, 41.5)
    assert (t.battery_pct, t.battery_status, t.battery_temp_c) == (87, "Discharging", 31.2)


def test_telemetry_text_reads_what_the_shell_script_reads_on_this_machine():
    script = subprocess.run(
        ["sh", "-c", TELEMETRY_SCRIPT], capture_output=True, text=True, check=True
    ).stdout
    ours, theirs = parse_telemetry(telemetry_text(), 0.0), parse_telemetry(script, 0.0)
    # Frequencies move between two readings; which cores and zones are read must not.
    assert set(ours.cpu_freq_khz) == set(theirs.cpu_freq_khz)
    assert set(ours.cpu_cap_khz) == set(theirs.cpu_cap_khz)
    assert set(ours.cpu_temps_c) == set(theirs.cpu_temps_c)
    assert (ours.battery_pct is None) == (theirs.battery_pct is None)


# -- the host side -----------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path):
    return LocalTransport(root=tmp_path / "dev")


def test_agent_session_runs_commands_in_one_session(local, tmp_path):
    with AgentSession(local, persistent=True) as agent:
        remote = push_file(local, _null_artifact(tmp_path)).remote
        seen = []
        result = agent.run(_run_spec(remote), timeout=60, on_progress=lambda *p: seen.append(p))
        control = agent.control("null")
        assert control is not None and result["backend"] == "null" and seen[0][0] == "load"
        assert agent.run(_run_spec(remote), timeout=60)["backend"] == "null"
        assert agent.control("null") is control and agent.hello()["agent_version"]
        telemetry = agent.telemetry()
        assert telemetry.cpu_freq_khz.keys() == read_telemetry(local).cpu_freq_khz.keys()
        assert agent.memory(_run_spec(remote), timeout=60)["peak_rss_kb"] > 0
        with pytest.raises(AgentError, match="ArtifactLoadError"):
            agent.run(_run_spec("/nonexistent.json"), timeout=60)
        assert agent.control("null") is control  # an error answer keeps the session
        pid = control.pid
    assert process_gone(pid)


def test_without_sessions_every_command_is_its_own_process(local, tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_AGENT_SESSION", "0")
    with AgentSession(local) as agent:
        remote = push_file(local, _null_artifact(tmp_path)).remote
        assert agent.run(_run_spec(remote), timeout=60)["backend"] == "null"
        assert agent.control() is None


class _NoStreams(LocalTransport):
    def open_stream(self, argv, cwd=None, env=None):
        raise StreamUnsupported("no shell v2 on this device")


def test_a_device_without_streams_falls_back_to_one_shot_commands(tmp_path):
    with AgentSession(_NoStreams(root=tmp_path / "dev")) as agent:
        remote = push_file(agent.transport, _null_artifact(tmp_path)).remote
        assert agent.run(_run_spec(remote), timeout=60)["backend"] == "null"
        assert agent.control() is None and agent.hello()["agent_version"]
        assert agent.telemetry().timestamp > 0


def test_a_killed_session_is_a_lost_link_and_the_next_command_starts_a_new_one(local, tmp_path):
    with AgentSession(local, persistent=True) as agent:
        remote = push_file(local, _null_artifact(tmp_path)).remote
        control = agent.control("null")
        os.kill(control.pid, signal.SIGKILL)
        with pytest.raises(AgentSessionLost, match="was killed") as err:
            agent.run(_run_spec(remote), timeout=60)
        assert is_transient(err.value) and control.ended
        assert agent.run(_run_spec(remote), timeout=60)["backend"] == "null"
        assert agent.control("null") is not control


def test_a_run_past_its_timeout_stops_the_session_and_is_not_transient(local, tmp_path):
    with AgentSession(local, persistent=True) as agent:
        remote = push_file(local, _null_artifact(tmp_path, sleep_ms=50)).remote
        control = agent.control("null")
        with pytest.raises(
            CommandTimeout, match="timed out: no answer within 1 s while measuring"
        ) as err:
            agent.run(_run_spec(remote, min_s=30, max_s=30), timeout=1)
        assert not is_transient(err.value) and control.ended and process_gone(control.pid)
        assert agent.run(_run_spec(remote), timeout=60)["backend"] == "null"


class _BrokenStdin:
    """A stream whose agent said ``ready`` and then died: writing to it fails at once."""

    pid = 42

    def __init__(self) -> None:
        self.exit_code = None
        self._lines = [protocol.encode("ready", agent_version="x", pid=42, isolation="fork")]

    def send_line(self, line):
        from aiot.core.errors import TransportError

        raise TransportError("cannot write to python on dev: [Errno 32] Broken pipe")

    def read_line(self, timeout=None):
        return self._lines.pop(0) if self._lines else None

    def stderr(self):
        return ""

    def close(self, grace=3.0):
        self.exit_code = -9


def test_a_write_to_a_dead_agent_says_how_it_ended_like_a_read_would():
    # Which of the two notices the death first (the write or the read) is a race: one message.
    from aiot.host.devices.agent_stream import ControlSession

    control = ControlSession(_BrokenStdin(), "dev")
    with pytest.raises(
        AgentSessionLost, match="agent on dev was killed while reading a request"
    ) as err:
        control.hello()
    assert is_transient(err.value) and control.ended
