"""The campaign engine without devices: planning, shuffling, resume, retries with backoff,
lost devices, parallel workers and Ctrl-C, with ``execute_run`` replaced by a script."""

from __future__ import annotations

import threading
import time

import pytest

from aiot.host.engine import campaign, executor
from aiot.host.engine.campaign import CampaignPolicy, SweepPlan, plan_sweep, run_campaign, run_key
from aiot.host.engine.runs import expand_sweep
from aiot.host.store import open_store


def _requests(devices=("a", "b"), threads=(1, 2)):
    return expand_sweep(list(devices), ["tiny_cnn"], ["onnx", "tflite"], list(threads))


class FakeDevices:
    """Stands in for execute_run: records each run as the script says, with real records."""

    def __init__(self, script=None, seconds: float = 0.0) -> None:
        self.script = script or (lambda request, attempt: "ok")
        self.seconds = seconds
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.max_parallel = 0
        self.max_per_device = 0

    def __call__(self, request, store, workspace, listener, sweep_id, context=None, cooldown=None, measure=None,
                 validity=None):
        attempt = context["sweep"]["attempt"]
        with self.lock:
            self.calls.append((request.label(), attempt))
            self.active[request.device] = self.active.get(request.device, 0) + 1
            self.max_parallel = max(self.max_parallel, sum(self.active.values()))
            self.max_per_device = max(self.max_per_device, self.active[request.device])
        record = store.begin("latency", request.to_spec(), dict(context), sweep_id=sweep_id,
                             device=request.device, model=request.model, format=request.format,
                             threads=request.threads)
        time.sleep(self.seconds)
        outcome = self.script(request, attempt)
        with self.lock:
            self.active[request.device] -= 1
        if outcome == "ok":
            store.finish(record.id, "ok", median_ms=1.0)
        else:
            store.finish(record.id, "failed", reason=outcome,
                         result={"error": {"type": "TransportError", "transient": outcome == "lost"}})
        return store.get(record.id)


@pytest.fixture
def fake(monkeypatch):
    devices = FakeDevices()
    monkeypatch.setattr(campaign, "execute_run", devices)
    return devices


def _plan(tmp_path, requests, **kwargs) -> SweepPlan:
    with open_store(tmp_path) as store:
        return plan_sweep(requests, store, **kwargs)


def test_plan_is_a_seeded_shuffle_with_a_stable_id(tmp_path):
    requests = _requests()
    one, two = _plan(tmp_path, requests, seed=3), _plan(tmp_path, list(reversed(requests)), seed=3)
    assert one.sweep_id == two.sweep_id and [run_key(r) for r in one.requests] == [run_key(r) for r in two.requests]
    other = _plan(tmp_path, requests, seed=4)
    assert other.sweep_id != one.sweep_id
    assert sorted(map(run_key, other.requests)) == sorted(map(run_key, one.requests))
    grouped = _plan(tmp_path, requests, shuffle=False)
    assert grouped.requests == requests


def test_devices_run_in_parallel_and_each_device_serially(tmp_path, fake):
    fake.seconds = 0.2
    plan = _plan(tmp_path, _requests(devices=("a", "b", "c")))
    started = time.perf_counter()
    records = run_campaign(plan, tmp_path, policy=CampaignPolicy())
    wall = time.perf_counter() - started
    assert len(records) == 12 and all(r.status == "ok" for r in records)
    assert fake.max_per_device == 1 and fake.max_parallel == 3
    assert wall < 12 * 0.2 * 0.6  # serial would take 2.4 s; three devices at once ~0.8 s


def test_running_the_same_sweep_again_redoes_only_missing_or_failed_runs(tmp_path, fake):
    requests = _requests()
    fake.script = lambda request, attempt: "bad model" if request.format == "tflite" else "ok"
    first = run_campaign(_plan(tmp_path, requests), tmp_path)
    assert sorted(r.status for r in first) == ["failed"] * 4 + ["ok"] * 4
    fake.calls.clear()
    fake.script = lambda request, attempt: "ok"
    plan = _plan(tmp_path, requests)
    assert plan.sweep_id == first[0].sweep_id and len(plan.done) == 4
    second = run_campaign(plan, tmp_path)
    assert len(second) == 4 and {r.format for r in second} == {"tflite"}
    assert len(fake.calls) == 4
    assert _plan(tmp_path, requests).todo == []  # complete: nothing left
    with open_store(tmp_path) as store:
        ok = store.query(sweep_id=plan.sweep_id, status="ok")
    assert len(ok) == 8 and len({run_key_of(r) for r in ok}) == 8  # none duplicated
    fresh = _plan(tmp_path, requests, fresh=True)
    assert not fresh.done
    # The fresh attempt's id does not extend the old one: a prefix of it names it alone.
    assert not fresh.sweep_id.startswith(plan.sweep_id) and fresh.sweep_id.endswith("." + plan.key)
    run_campaign(fresh, tmp_path)
    assert _plan(tmp_path, requests).sweep_id == fresh.sweep_id  # the same command resumes it


def run_key_of(record) -> str:
    return campaign._digest(record.spec)[:16]


def test_transient_failures_are_retried_with_backoff(tmp_path, fake, monkeypatch):
    waits = []
    monkeypatch.setattr(campaign, "_sleep", waits.append)
    flaky = {"a": 2}  # the first two attempts on device a lose the link

    def script(request, attempt):
        if request.device == "a" and attempt <= flaky["a"]:
            return "lost"
        return "ok"

    fake.script = script
    plan = _plan(tmp_path, _requests(devices=("a",), threads=(1,)), shuffle=False)
    records = run_campaign(plan, tmp_path, policy=CampaignPolicy(retries=3, backoff_s=1.0))
    assert [r.status for r in records] == ["ok", "ok"]
    assert waits == [1.0, 2.0, 1.0, 2.0]  # each run: two lost links, exponential backoff, then ok


def test_a_device_that_stays_lost_is_skipped_while_the_others_finish(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(campaign, "_sleep", lambda seconds: None)
    fake.script = lambda request, attempt: "lost" if request.device == "a" else "ok"
    plan = _plan(tmp_path, _requests())
    records = run_campaign(plan, tmp_path, policy=CampaignPolicy(retries=2))
    by_device = {d: [r for r in records if r.device == d] for d in ("a", "b")}
    assert all(r.status == "ok" for r in by_device["b"]) and len(by_device["b"]) == 4
    statuses = sorted(r.status for r in by_device["a"])
    assert statuses == ["failed", "skipped", "skipped", "skipped"]
    assert all("device lost" in r.reason for r in by_device["a"] if r.status == "skipped")
    # Back online: resuming redoes exactly device a's four runs.
    fake.script = lambda request, attempt: "ok"
    again = run_campaign(_plan(tmp_path, _requests()), tmp_path)
    assert sorted(r.device for r in again) == ["a"] * 4


def test_non_transient_failures_are_not_retried(tmp_path, fake):
    fake.script = lambda request, attempt: "unsupported op"
    records = run_campaign(_plan(tmp_path, _requests(devices=("a",), threads=(1,))), tmp_path)
    assert [r.status for r in records] == ["failed", "failed"]
    assert all(attempt == 1 for _, attempt in fake.calls)


def test_thread_counts_above_eight_need_the_cores(tmp_path, fake, monkeypatch):
    from aiot.host.engine.workspace import Workspace

    monkeypatch.setattr(Workspace, "device_info", lambda self, device, agent=True: {"cores": 8})
    plan = _plan(tmp_path, _requests(devices=("a",), threads=(8, 16)), shuffle=False)
    records = run_campaign(plan, tmp_path)
    assert {(r.threads, r.status) for r in records} == {(8, "ok"), (16, "skipped")}
    assert "16 threads but the device has 8 cores" in [r.reason for r in records if r.threads == 16][0]


def test_ctrl_c_leaves_no_pending_record(tmp_path, fake, monkeypatch):
    fake.seconds = 0.3
    plan = _plan(tmp_path, _requests())
    original = campaign._wait_all

    def interrupt(futures):
        time.sleep(0.1)  # runs are in flight
        raise KeyboardInterrupt

    monkeypatch.setattr(campaign, "_wait_all", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_campaign(plan, tmp_path)
    time.sleep(0.5)  # in-flight runs end
    with open_store(tmp_path) as store:
        records = store.query(sweep_id=plan.sweep_id)
    assert records and not [r for r in records if r.status == "pending"]
    assert len(records) < 8  # no new run started after Ctrl-C
    del original


def test_device_workers_convert_one_at_a_time(tmp_path, monkeypatch):
    """Device threads reach the same model and format together: conversion is serialized,
    so the later ones reuse the artifact and torch's thread-unsafe export state is safe."""
    from aiot.host.engine.runs import NullListener, RunRequest

    state = {"active": 0, "most": 0}
    lock = threading.Lock()

    def convert_model(*args, **kwargs):
        with lock:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
        time.sleep(0.05)
        with lock:
            state["active"] -= 1
        return type("Conv", (), {"artifact": tmp_path / "m.onnx", "sidecar": tmp_path / "m.json",
                                 "facts": {}})()

    for name in ("m.onnx", "m.json"):
        (tmp_path / name).write_text("")
    monkeypatch.setattr(executor, "convert_model", convert_model)
    monkeypatch.setattr(executor, "read_sidecar", lambda artifact: {})
    # Different options: four artifacts, none the campaign's kept one of another request.
    requests = [RunRequest(device, "tiny_cnn", "onnx", 1, options=(("k", device),)) for device in "abcd"]
    workspace = type("Workspace", (), {"artifacts_dir": tmp_path, "shipped": None, "conversions": {}})()
    workers = [threading.Thread(target=executor._convert, args=(r, workspace, NullListener()))
               for r in requests]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert state["most"] == 1
