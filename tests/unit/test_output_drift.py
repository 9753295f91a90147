"""Cross-device output comparison from stored fingerprints."""

import math

from aiot.host.store.output_drift import compare_fingerprints, output_drift
from aiot.host.store.store import RunRecord

OUT = {"size": 4, "l2": 1.0, "head": [0.5, -0.5, 0.5, -0.5]}


def _record(rid, device, output, sha="a" * 64, emulated=False, status="ok"):
    labels = {"emulated": "ssh"} if emulated else {}
    return RunRecord(id=rid, kind="latency", status=status, created_at="t", spec={},
                     provenance={"device": {"labels": labels}}, device=device, model="m", format="onnx",
                     threads=1, artifact_sha256=sha, result={"output": output} if output else {})


def test_identical_and_float_noise_match_but_a_wrong_value_does_not():
    assert compare_fingerprints(OUT, OUT) == (0.0, 0.0, "match")
    noisy = {**OUT, "head": [0.5 + 1e-6, -0.5, 0.5, -0.5]}
    assert compare_fingerprints(noisy, OUT)[2] == "match"
    wrong = {**OUT, "head": [0.6, -0.5, 0.5, -0.5]}
    max_abs, _, verdict = compare_fingerprints(wrong, OUT)
    assert verdict == "mismatch" and math.isclose(max_abs, 0.1, rel_tol=1e-9)
    scaled = {**OUT, "l2": 1.1}
    assert compare_fingerprints(scaled, OUT)[2] == "mismatch"


def test_different_output_sizes_are_not_comparable():
    verdict = compare_fingerprints({**OUT, "size": 5}, OUT)[2]
    assert verdict.startswith("not comparable")


def test_reference_is_a_real_device_and_single_device_artifacts_are_skipped():
    records = [
        _record("r1", "emu", OUT, emulated=True),
        _record("r2", "phone", {**OUT, "head": [0.5, -0.5, 0.5, -0.4]}),
        _record("r3", "phone", OUT, sha="b" * 64),  # only on one device: nothing to compare
        _record("r4", "emu", None),  # no fingerprint (an older agent)
        _record("r5", "emu", OUT, status="failed"),
    ]
    drifts = output_drift(records)
    assert [(d.record_id, d.reference_id, d.verdict) for d in drifts] == [("r1", "r2", "mismatch")]
    named = output_drift(records, reference_device="emu")
    assert [(d.record_id, d.reference_device) for d in named] == [("r2", "emu")]
