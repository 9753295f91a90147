"""The device agent on this machine, driven exactly as the host drives any device."""

import json

import pytest

from aiot.core.errors import AgentError
from aiot.device_agent import agent as agent_mod
from aiot.device_agent import cli
from aiot.device_agent.spec import RunSpec
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.deploy import push_file
from aiot.host.transports.local import LocalTransport

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    pytest.importorskip("onnx")
    path = tmp_path_factory.mktemp("m") / "small.onnx"
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 3)).eval()
    torch.onnx.export(model, (torch.randn(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17)
    return model, path


@pytest.fixture
def session(tmp_path):
    with AgentSession(LocalTransport(root=tmp_path / "dev")) as s:
        yield s


def _spec(remote, **over):
    spec = {"v": 1, "backend": "onnxruntime", "artifact": remote, "threads": 1, "warmup_runs": 2,
            "warmup_min_s": 0.0, "min_runs": 20, "min_s": 0.0, "max_s": 30.0}
    spec.update(over)
    return spec


def test_hello_lists_runtimes(session):
    hello = session.hello()
    assert hello["agent_version"] and hello["runtimes"]["onnxruntime"]


def test_run_reports_raw_samples_and_stats(session, onnx_model):
    remote = push_file(session.transport, onnx_model[1]).remote
    progress = []
    res = session.run(_spec(remote), on_progress=lambda *a: progress.append(a))
    assert len(res["samples_ns"]) == res["stats_ms"]["count"] >= 20
    assert res["stats_ms"]["min"] <= res["stats_ms"]["median"] <= res["stats_ms"]["max"]
    assert res["load_ms"] > 0 and res["first_inference_ms"] > 0 and res["peak_rss_kb"] > 0
    assert res["warmup"]["count"] >= 2 and res["input_shape"] == [1, 1, 8, 8]
    assert {p[0] for p in progress} >= {"load", "measure"}


def test_run_places_the_timed_loop_in_wall_clock_time(session, onnx_model):
    import time

    remote = push_file(session.transport, onnx_model[1]).remote
    before = time.time()
    res = session.run(_spec(remote))
    after = time.time()
    start, end = res["measure_start_unix_s"], res["measure_end_unix_s"]
    assert before < start < end < after
    # The span covers every timed iteration, plus only the loop's own bookkeeping between them.
    assert end - start >= sum(res["samples_ns"]) / 1e9 - 1e-6


def test_wall_clock_maps_perf_counter_readings_through_the_anchor():
    anchor = (1_700_000_000_000_000_000, 5_000)
    assert agent_mod.wall_clock_s(5_000, anchor) == 1_700_000_000.0
    assert agent_mod.wall_clock_s(5_000 + 250_000_000, anchor) == 1_700_000_000.25


def test_min_seconds_extends_the_run(session, onnx_model):
    remote = push_file(session.transport, onnx_model[1]).remote
    res = session.run(_spec(remote, min_runs=1, min_s=0.3))
    assert sum(res["samples_ns"]) / 1e9 >= 0.25 and len(res["samples_ns"]) > 1


def test_accuracy_matches_pytorch_on_the_same_shard(session, onnx_model, tmp_path):
    import numpy as np

    model, path = onnx_model
    x = np.random.default_rng(1).standard_normal((40, 1, 8, 8)).astype("float32")
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).argmax(1).numpy()
    y = ref.copy()
    y[:10] = (y[:10] + 1) % 3  # ten deliberately wrong labels
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    t = session.transport
    data = {"x": push_file(t, tmp_path / "x.npy").remote, "y": push_file(t, tmp_path / "y.npy").remote}
    res = session.run(_spec(push_file(t, path).remote, dataset=data))
    assert res["accuracy"] == {"correct": 30, "total": 40, "top1": 0.75}


def test_truncated_artifact_is_a_clear_agent_error(session, onnx_model, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(onnx_model[1].read_bytes()[:100])
    remote = push_file(session.transport, broken).remote
    with pytest.raises(AgentError, match="cannot load .*broken.onnx"):
        session.run(_spec(remote))


@pytest.mark.parametrize("bad, match", [
    ({"v": 2}, "run spec version"),
    ({"backend": "caffe9"}, "unknown backend"),
    ({"threads": 0}, "'threads' must be a positive integer"),
    ({"min_s": -1}, "'min_s' must be a non-negative"),
])
def test_bad_specs_are_refused_by_name(bad, match):
    with pytest.raises(agent_mod.SpecError, match=match):
        RunSpec.from_wire({**_spec("/x"), **bad})


def test_agent_main_speaks_only_protocol_on_errors(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec(str(tmp_path / "missing.onnx"))))
    assert cli.main(["run", str(spec)]) == 3
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("@@AIOT ") and '"event":"error"' in line


def test_output_fingerprint_matches_pytorch_on_the_seeded_input(session, onnx_model):
    import numpy as np

    model, path = onnx_model
    res = session.run(_spec(push_file(session.transport, path).remote, seed=7))
    x = np.random.default_rng(7).standard_normal((1, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy().ravel()
    got = res["output"]
    assert got["size"] == 3 and np.allclose(got["head"], want, atol=1e-5)
    assert abs(got["l2"] - float(np.linalg.norm(want))) < 1e-5


def test_a_preloading_session_imports_each_runtime_once_for_its_children(tmp_path, monkeypatch,
                                                                       onnx_model):
    """An emulated board's session (``AIOT_AGENT_PRELOAD=1``, set by its python3 wrapper)
    imports a run's runtime before forking the run's child, once, and says so."""
    monkeypatch.setenv("AIOT_AGENT_PRELOAD", "1")
    local = LocalTransport(root=tmp_path / "dev")
    with AgentSession(local, persistent=True) as agent:
        assert agent.hello()["preloaded"] == []
        remote = push_file(local, onnx_model[1]).remote
        first = agent.run(_spec(remote, min_runs=3), timeout=60)
        control = agent.control("onnxruntime")
        assert control.info["preload"] is True
        assert agent.process_kind("onnxruntime") == "session-fork-preloaded"
        with open(f"/proc/{control.pid}/maps") as fh:
            assert "onnxruntime" in fh.read()  # in the session itself, for every child
        second = agent.run(_spec(remote, min_runs=3), timeout=60)
        assert agent.hello()["preloaded"] == ["onnxruntime"]  # imported once
        assert first["output"] == second["output"] and second["load_ms"] > 0
    monkeypatch.delenv("AIOT_AGENT_PRELOAD")
    with AgentSession(LocalTransport(root=tmp_path / "dev2"), persistent=True) as plain:
        assert "preloaded" not in plain.hello()
        plain.run(_spec(push_file(plain.transport, onnx_model[1]).remote, min_runs=3), timeout=60)
        assert plain.process_kind("onnxruntime") == "session-fork"
