"""The agent's ``serve`` command (a persistent session answering predict requests), in-process
with the null backend, and on this machine through LocalTransport's stream with a real model."""

import base64
import json
import os
import re
import signal
import time

import numpy as np
import pytest

from aiot.core.errors import AgentError, CommandTimeout, TransportError
from aiot.device_agent import AGENT_VERSION, cli, protocol
from aiot.device_agent import serve as serve_mod
from aiot.device_agent.spec import RunSpec
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.deploy import push_file
from aiot.host.transports import Stream
from aiot.host.transports.local import LocalTransport
from tests.helpers import process_gone

NULL_SHAPE = [1, 2, 3, 3]  # a row is (2, 3, 3): 18 values


def _null_artifact(folder, sleep_ms=0.0, outputs=5):
    path = folder / "null.json"
    path.write_text(json.dumps({"format": "aiot-null", "sleep_ms": sleep_ms, "input_shape": NULL_SHAPE,
                                "outputs": outputs}))
    return path


def _spec(artifact, backend="null"):
    return {"v": 1, "backend": backend, "artifact": str(artifact), "threads": 1}


def _request(request_id, x, **over):
    x = np.ascontiguousarray(x, dtype="<f4")
    req = {"op": "predict", "id": request_id, "shape": list(x.shape), "dtype": "float32",
           "data": base64.b64encode(x.tobytes()).decode()}
    req.update(over)
    return json.dumps(req) + "\n"


def _serve(tmp_path, capsys, lines, **artifact):
    """Run ``serve`` in this process over ``lines``; (exit code, decoded messages)."""
    spec = RunSpec.from_wire(_spec(_null_artifact(tmp_path, **artifact)))
    code = serve_mod.serve(spec, requests=[line.encode() for line in lines])
    out = capsys.readouterr().out.splitlines()
    return code, [protocol.decode(line) for line in out]


def test_ready_then_one_answer_per_request_until_close(tmp_path, capsys):
    rows = np.ones((3, 2, 3, 3), np.float32)
    code, msgs = _serve(tmp_path, capsys, [_request(1, rows), '{"op": "close"}\n', _request(2, rows)])
    assert code == 0 and [m["event"] for m in msgs] == ["ready", "predictions"]  # nothing after close
    ready, answer = msgs
    assert (ready["backend"], ready["input_dtype"]) == ("null", "float32")
    assert ready["input_shape"] == NULL_SHAPE
    assert ready["agent_version"] == AGENT_VERSION
    assert (answer["id"], answer["shape"], answer["dtype"]) == (1, [3, 5], "float32")
    assert base64.b64decode(answer["data"]) == bytes(3 * 5 * 4)  # the null model's zeros
    assert answer["compute_ms"] >= 0


def test_end_of_input_ends_the_session_with_exit_0(tmp_path, capsys):
    code, msgs = _serve(tmp_path, capsys, [])
    assert code == 0 and [m["event"] for m in msgs] == ["ready"]


@pytest.mark.parametrize("line, request_id, match", [
    (_request(7, np.zeros((2, 3, 2, 3))), 7,
     r"input rows of shape \[3, 2, 3\]; the model takes \[2, 3, 3\]"),
    (_request(8, np.zeros((1, 2, 3, 3)), data="AAAA"), 8, "'data' holds 3 bytes; .* needs 72"),
    (_request(9, np.zeros((1, 2, 3, 3)), data="not base64!"), 9, "'data' is not base64"),
    (_request(10, np.zeros((1, 2, 3, 3)), dtype="complex64"), 10, "'dtype' must be one of"),
    (_request("s", np.zeros((1, 2, 3, 3)), op="train"), "s", "unknown op 'train'"),
    (_request(None, np.zeros((1, 2, 3, 3))), None, "needs an integer or string 'id'"),
    ("{not json\n", None, "one JSON object per line"),
    ("[1, 2]\n", None, "must be a JSON object"),
])
def test_a_bad_request_gets_an_error_with_its_id_and_the_session_goes_on(tmp_path, capsys, line,
                                                                        request_id, match):
    code, msgs = _serve(tmp_path, capsys, [line, _request(11, np.zeros((1, 2, 3, 3)))])
    assert code == 0 and [m["event"] for m in msgs] == ["ready", "error", "predictions"]
    error = msgs[1]
    assert error["id"] == request_id and error["type"] == "RequestError"
    assert re.search(match, error["message"]), error["message"]
    assert msgs[2]["id"] == 11 and msgs[2]["shape"] == [1, 5]


def test_inputs_of_another_wire_type_are_converted(tmp_path, capsys):
    x = np.arange(18, dtype="<f8").reshape(1, 2, 3, 3)
    code, msgs = _serve(tmp_path, capsys, [_request(1, x.astype("<f4"), dtype="float64",
                                                    data=base64.b64encode(x.tobytes()).decode())])
    assert msgs[-1]["event"] == "predictions" and msgs[-1]["shape"] == [1, 5]


def test_serve_of_a_missing_artifact_is_an_error_event_and_exit_3(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec(tmp_path / "missing.json")))
    assert cli.main(["serve", str(spec)]) == 3
    (msg,) = [protocol.decode(line) for line in capsys.readouterr().out.splitlines()]
    assert (msg["event"], msg["type"]) == ("error", "ArtifactLoadError")
    assert "missing.json" in msg["message"]


def test_new_events_are_part_of_protocol_v1():
    line = protocol.encode("predictions", id=3, shape=[0, 0], dtype="float32", data="", compute_ms=0.0)
    assert protocol.decode(line)["id"] == 3 and protocol.decode(protocol.encode("ready"))["v"] == 1


# -- LocalTransport's stream -------------------------------------------------------------------


@pytest.fixture
def local(tmp_path):
    return LocalTransport(root=tmp_path / "dev")


def test_stream_lines_both_ways_then_end_of_file(local):
    stream = local.open_stream(["cat"])
    assert isinstance(stream, Stream)
    stream.send_line("it's; $(touch pwned)")
    assert stream.read_line(5) == "it's; $(touch pwned)"
    stream.close()
    assert (stream.read_line(1), stream.exit_code) == (None, 0) and process_gone(stream.pid)
    with pytest.raises(TransportError, match="has ended"):
        stream.send_line("again")
    with pytest.raises(ValueError, match="newline"):
        local.open_stream(["cat"]).send_line("a\nb")


def test_stream_reports_exit_code_stderr_and_read_timeout(local):
    stream = local.open_stream(["sh", "-c", "echo oops >&2; read line; exit 3"])
    with pytest.raises(CommandTimeout, match="printed nothing for 0.2 s"):
        stream.read_line(0.2)
    stream.send_line("go")
    assert stream.read_line(5) is None and stream.exit_code == 3 and stream.stderr() == "oops\n"
    stream.close()


def test_closing_a_stream_kills_a_command_that_ignores_stdin(local):
    stream = local.open_stream(["sleep", "30"])
    started = time.monotonic()
    stream.close(grace=0.2)
    assert time.monotonic() - started < 3 and stream.exit_code == -signal.SIGKILL and process_gone(stream.pid)


# -- AgentSession.serve on this machine --------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    path = tmp_path_factory.mktemp("m") / "small.onnx"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 3)).eval()
    torch.onnx.export(model, (torch.randn(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17)
    return model, path


@pytest.fixture
def agent(local):
    with AgentSession(local) as session:
        yield session


def _served(agent, path, backend="onnxruntime"):
    return agent.serve(_spec(push_file(agent.transport, path).remote, backend))


def test_served_outputs_equal_pytorch_row_by_row(agent, onnx_model):
    model, path = onnx_model
    x = np.random.default_rng(0).standard_normal((5, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    with _served(agent, path) as session:
        assert session.info["input_shape"] == [1, 1, 8, 8] and session.info["backend"] == "onnxruntime"
        got = session.predict(x)
        again = session.predict(x[2:3])  # the same process answers a second request
        assert session.compute_ms > 0
    assert got.shape == (5, 3) and np.allclose(got, want, atol=1e-5)
    assert np.array_equal(again, got[2:3])


def test_an_error_reply_keeps_the_session_usable(agent, onnx_model):
    model, path = onnx_model
    x = np.zeros((2, 1, 8, 8), np.float32)
    with _served(agent, path) as session:
        with pytest.raises(AgentError, match=r"RequestError: input rows of shape \[8, 8\]"):
            session.predict(x[:, 0])
        with torch.no_grad():
            assert np.allclose(session.predict(x), model(torch.from_numpy(x)).numpy(), atol=1e-5)


def test_close_ends_the_agent_process(agent, onnx_model):
    session = _served(agent, onnx_model[1])
    pid = session.pid
    session.close()
    session.close()  # idempotent
    assert process_gone(pid) and session._stream.exit_code == 0  # it exited on "close", not killed
    with pytest.raises(AgentError, match="has ended: the session was closed"):
        session.predict(np.zeros((1, 1, 8, 8), np.float32))


def test_a_killed_agent_is_a_one_line_agent_error(agent, onnx_model):
    session = _served(agent, onnx_model[1])
    os.kill(session.pid, signal.SIGKILL)
    with pytest.raises(AgentError, match="agent on local was killed while answering request 1") as err:
        session.predict(np.zeros((1, 1, 8, 8), np.float32))
    assert "\n" not in err.value.one_line()
    with pytest.raises(AgentError, match="has ended"):
        session.predict(np.zeros((1, 1, 8, 8), np.float32))
    session.close()


def test_a_request_past_its_timeout_stops_the_agent(agent, tmp_path):
    session = _served(agent, _null_artifact(tmp_path, sleep_ms=30_000), backend="null")
    pid = session.pid
    with pytest.raises(CommandTimeout, match="no answer within 0.3 s while answering request 1"):
        session.predict(np.zeros((1, 2, 3, 3), np.float32), timeout=0.3)
    assert process_gone(pid)
    session.close()


def test_a_model_that_does_not_load_fails_serve_and_leaves_no_process(agent, onnx_model, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(onnx_model[1].read_bytes()[:100])
    with pytest.raises(AgentError, match="ArtifactLoadError: onnxruntime cannot load .*broken.onnx"):
        _served(agent, broken)
    workdir = agent.transport.workdir()
    assert [p for p in os.listdir("/proc") if "device_agent serve " + workdir in _cmdline(p)] == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class MissingPython(LocalTransport):
    def python(self, backend=None) -> str:
        return "/nonexistent/python3"


def test_an_agent_that_cannot_start_is_a_one_line_error_with_its_last_words(tmp_path, onnx_model):
    with AgentSession(MissingPython(root=tmp_path / "dev")) as session:
        with pytest.raises(AgentError, match=r"agent on local exited 127 while starting: "
                                             r".*/nonexistent/python3") as err:
            _served(session, onnx_model[1])
    assert "\n" not in err.value.one_line()
