"""``aiot report``'s robustness sections from hand-built suite records."""

from __future__ import annotations

import pytest

from aiot.host.report.build import build, collect
from aiot.host.report.html import write
from aiot.host.store import open_store


def _suite_record(store, kind, *, fmt="ort", device="local", accuracy=0.8, status="ok", curves=True,
                  summary=None, reason=None):
    rec = store.begin(kind, {"target": {"model": "tiny_cnn"}}, {"aiot_version": "0.1.0"},
                      device=device, model="tiny_cnn", format=fmt, threads=1)
    if status != "ok":
        store.finish(rec.id, status, reason=reason)
        return rec.id
    result = {"suite": kind.split("-")[1], "clean_accuracy": accuracy,
              "summary": summary or {"mNR": 0.6, "mean_G": 0.2},
              "tables": [{"name": "accuracy", "title": "Accuracy per corruption",
                          "columns": ["corruption", "severity", "accuracy"],
                          "rows": [["gaussian_noise", 1, 0.7], ["gaussian_noise", 2, 0.5]]}],
              "curves": [{"name": "severity", "title": "Accuracy vs severity", "x_label": "severity",
                          "y_label": "accuracy",
                          "series": {"gaussian_noise": [[0, 0.8], [1, 0.7], [2, 0.5]]}}] if curves else [],
              "notes": ["ImageNet-C params at 28 px"]}
    store.finish(rec.id, "ok", result=result, accuracy=accuracy)
    return rec.id


@pytest.fixture
def report(tmp_path):
    with open_store(tmp_path / "results") as store:
        ids = {"old": _suite_record(store, "robust-corrupt", accuracy=0.5),
               "new": _suite_record(store, "robust-corrupt", accuracy=0.8),
               "arm": _suite_record(store, "robust-corrupt", device="arm64", accuracy=0.79),
               "failed": _suite_record(store, "robust-attack", status="failed", reason="agent died"),
               "sys": _suite_record(store, "robust-sysnoise", curves=False, summary={"decoder_dacc_mean": 0.01})}
        records = collect(store)
    return build(records, source="results", generated_at="2026-01-02T03:04:05+00:00"), ids


def test_one_section_per_suite_newest_record_per_target(report):
    report, ids = report
    sections = {s.key: s for s in report.sections()}
    assert [k for k in sections if k.startswith("robust")] == [
        "robust-sysnoise", "robust-corrupt", "robust-attack"]
    corrupt = sections["robust-corrupt"]
    summary, *details = corrupt.tables
    assert [row["id"] for row in summary.rows] == [ids["old"], ids["new"], ids["arm"]]
    assert [row["mNR"] for row in summary.rows] == [0.6, 0.6, 0.6]
    # detail tables only for the newest ok record per (model, format, device): local's new one and arm64's
    assert sorted(t.key[-8:] for t in details) == sorted([ids["new"][:8], ids["arm"][:8]])
    assert details[0].rows[1] == {"corruption": "gaussian_noise", "severity": 2, "accuracy": 0.5}
    assert corrupt.figures == ("robust_corrupt",)
    assert "ImageNet-C params at 28 px." in corrupt.intro
    attack = sections["robust-attack"]
    assert attack.note == "no finished record of this suite yet"
    assert attack.tables[0].rows[0]["reason"] == "agent died"
    assert sections["robust-sysnoise"].figures == ()  # no curves, no empty figure


def test_markdown_draws_the_curves(report, tmp_path):
    report, _ids = report
    files, _plots = write(report, "md", tmp_path / "out")
    assert (tmp_path / "out" / "robust_corrupt.png").stat().st_size > 1000
    text = files[0].read_text()
    assert "Robustness: natural corruptions" in text and "robust_corrupt.png" in text
    assert "Robustness: adversarial attacks" in text
