"""A checked sweep resolves once and converts each artifact once (issue 36's call budget).

Preflight resolves each model once and hands the resolved reference on; the campaign converts
(or verifies in the cache) each artifact once and keeps it for its other runs. Counted on a real
10-key sweep of a cached zoo model on the embedded local device, with spies around the real
functions wherever aiot's modules hold them.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

pytest.importorskip("onnxruntime")

FAST = ("--min-runs", "2", "--min-s", "0", "--warmup-min-s", "0", "--warmup-runs", "0",
        "--cooldown-max-s", "0")
THREADS = ",".join(str(t) for t in range(1, 11))  # 10 keys of one model and format


def _spy(monkeypatch, calls: Counter, module_name: str, name: str) -> None:
    """Count calls of ``module_name.name`` through every aiot module that imported it."""
    real = getattr(sys.modules[module_name], name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("aiot") and getattr(module, name, None) is real:
            monkeypatch.setattr(module, name, counted)


@pytest.mark.slow
def test_a_ten_key_sweep_resolves_and_builds_each_model_once(cli, monkeypatch):
    from aiot.host.engine import campaign

    # Every thread count runs (a 2-core box would skip those above 8 as more than its cores;
    # over-subscribed runs are measured, and judged INVALID, as on any device).
    monkeypatch.setattr(campaign, "ALWAYS_RUN_THREADS", 10)
    cli("sweep", "-d", "local", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", *FAST)  # cached
    import aiot.converters.api  # noqa: F401 - loaded by the sweep above; its names are spied
    import aiot.host.devices.resolve  # noqa: F401
    import aiot.models.model_ref  # noqa: F401

    calls: Counter = Counter()
    _spy(monkeypatch, calls, "aiot.models.model_ref", "resolve_model")
    _spy(monkeypatch, calls, "aiot.converters.api", "build_source_model")
    _spy(monkeypatch, calls, "aiot.converters.api", "state_sha256")
    _spy(monkeypatch, calls, "aiot.host.devices.resolve", "open_transport")
    _spy(monkeypatch, calls, "aiot.host.store.identity", "request_key")
    from aiot.host.transports.local import LocalTransport

    probe = LocalTransport.info
    monkeypatch.setattr(LocalTransport, "info", lambda self: calls.update(["probe"]) or probe(self))
    records = cli.json("sweep", "-d", "local", "-m", "tiny_cnn", "-f", "onnx", "--threads", THREADS,
                       "--fresh", *FAST)

    assert sorted(r["threads"] for r in records) == list(range(1, 11))
    assert {r["status"] for r in records} == {"ok"}
    assert len({r["artifact_sha256"] for r in records}) == 1
    assert calls["resolve_model"] <= 1, calls  # the CLI's, handed on to every run
    assert calls["build_source_model"] <= 1, calls  # one conversion (a cache check) for ten runs
    assert calls["state_sha256"] <= 1, calls
    assert calls["open_transport"] <= 2, calls  # one for preflight's checks, one for the runs
    assert calls["probe"] <= 1, calls  # preflight's probe, handed on to the device's workspace
    assert calls["request_key"] <= 2 * len(records), calls  # the plan's, and the table's
