"""A sweep over several emulated devices at once (real sshd and adbd), one of them killed
mid-sweep: its runs are skipped as 'device lost' while the others finish; once it is back,
running the same sweep again redoes exactly its runs; no record is lost or duplicated."""

from __future__ import annotations

import pytest

from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign, run_key
from aiot.host.engine.runs import MeasureParams, NullListener, expand_sweep
from aiot.host.store import open_store
from tests.helpers import KillAfterFirstRun, stop_emulators, stored_run_key

FAST = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=5, min_s=0.0, max_s=5.0)


@pytest.mark.slow
def test_sweep_over_emulated_devices_survives_one_killed_mid_sweep(cli, tmp_path):
    names = ["rack-ssh1", "rack-ssh2", "rack-adb"]
    kinds = ["ssh", "ssh", "adb"]
    for name, kind in zip(names, kinds, strict=True):
        cli.json("emulator", "start", kind, "--name", name)
    try:
        requests = expand_sweep(names, ["tiny_cnn"], ["null"], [1, 2], params=FAST) + \
            expand_sweep(names, ["tiny_cnn"], ["onnx"], [1], params=FAST)
        results = tmp_path / "results"
        with open_store(results) as store:
            plan = plan_sweep(requests, store, seed=7)
        listener = KillAfterFirstRun("rack-ssh1")
        records = run_campaign(plan, results, listener, CampaignPolicy(retries=2, backoff_s=0.2))
        assert listener.killed.is_set() and len(records) == 9
        victim = [r for r in records if r.device == "rack-ssh1"]
        others = [r for r in records if r.device != "rack-ssh1"]
        assert all(r.status == "ok" for r in others), [(r.device, r.reason) for r in others]
        assert [r.status for r in victim].count("ok") == 1
        assert {r.status for r in victim[1:]} <= {"failed", "skipped"}
        assert any("device lost" in (r.reason or "") for r in victim), [(r.status, r.reason, r.result) for r in victim]
        # Every emulated device's run is marked INVALID: it times this host.
        assert {r.validity for r in others} == {"INVALID"}
        assert all(any("emulated" in why for why in r.result["validity"]["reasons"]) for r in others)

        cli("emulator", "stop", "rack-ssh1")  # back online: a new server under the same name
        cli.json("emulator", "start", "ssh", "--name", "rack-ssh1")
        with open_store(results) as store:
            again = plan_sweep(requests, store, seed=7)
        assert again.sweep_id == plan.sweep_id and len(again.todo) == 2
        resumed = run_campaign(again, results, NullListener(), CampaignPolicy(retries=2, backoff_s=0.2))
        assert {r.device for r in resumed} == {"rack-ssh1"} and all(r.status == "ok" for r in resumed)

        with open_store(results) as store:
            everything = store.query(sweep_id=plan.sweep_id)
        assert not [r for r in everything if r.status == "pending"]
        ok_keys = [stored_run_key(r) for r in everything if r.status == "ok"]
        assert sorted(ok_keys) == sorted(run_key(r) for r in requests)  # each run once, none lost
    finally:
        stop_emulators(*names)

