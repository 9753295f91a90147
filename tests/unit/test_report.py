"""``aiot report``: the report model, Markdown and CSV from a hand-built store."""

import csv
import sys

import pytest

from aiot.host.report.build import build, collect
from aiot.host.report.html import cell, write
from aiot.host.store import open_store
from aiot.host.store.identity import this_host

PI = {"name": "pi4", "cpu_model": "Cortex-A72", "cores": 4, "soc": "BCM2711", "abi": "arm64-v8a",
      "distribution": "Debian GNU/Linux 12", "transport": "ssh"}
PIXEL = {"name": "pixel", "cpu_model": "Tensor G2", "cores": 8, "abi": "arm64-v8a",
         "android_version": "14", "manufacturer": "Google", "model": "Pixel 7", "transport": "adb"}
_clock = iter(range(1_700_000_000, 1_800_000_000, 10))


def _state(temp: float | None, khz: int | None) -> dict:
    def reading():
        return {"timestamp": float(next(_clock)), "cpu_temp_max_c": temp,
                "cpu_freq_khz": {"0": khz, "1": khz} if khz else {}}
    return {"before": reading(), "after": reading()}


def add(store, *, device="pi4", fmt="tflite", threads=1, median=10.0, status="ok", reason=None,
        accuracy=None, binarize=None, invalid=(), load=5.0, size=4000, kind="latency",
        model="resnet18", temp=None, khz=None, result=None, sweep="s1", shapes=None):
    """One finished record as the executor stores it (``shapes``: its --input-shape)."""
    info = {"pi4": PI, "pixel": PIXEL}.get(device, {"name": device})
    prov = {"aiot_version": "0.1.0", "git": {"id": "ab" * 20, "dirty": False},
            "host": {"hostname": "ws", "platform": "Linux"}, "device": info,
            "runtime": {"backend": "litert", "version": "2.3.0"}, "toolchain": {"torch": "2.13.0"},
            "device_state": _state(temp, khz)}
    spec = {"device": device, "model": model, "format": fmt, "threads": threads,
            "binarize": binarize, **({"input_shapes": shapes} if shapes else {})}
    rec = store.begin(kind, spec, prov, sweep_id=sweep, device=device, model=model, format=fmt,
                      threads=threads)
    if status != "ok":
        store.finish(rec.id, status, reason=reason)
        return rec.id
    verdict = {"verdict": "INVALID" if invalid else "VALID", "reasons": list(invalid)}
    stats = {"median": median, "mean": median * 1.1, "p90": median * 1.2}
    store.finish(rec.id, "ok", result=result or {"stats_ms": stats, "validity": verdict},
                 median_ms=median, p90_ms=median * 1.2, load_ms=load, accuracy=accuracy,
                 size_bytes=size, validity=verdict["verdict"])
    return rec.id


@pytest.fixture
def campaign(tmp_path):
    """Two devices, two formats over threads, a binarized pair, an INVALID and a failed run,
    a training record and a robustness record."""
    results = tmp_path / "results"
    ids = {}
    with open_store(results) as store:
        for device, temp, khz in (("pi4", 55.0, 1_500_000), ("pixel", 38.5, 2_000_000)):
            for threads, median in ((1, 10.0), (2, 6.0), (4, 4.0)):
                add(store, device=device, threads=threads, median=median, accuracy=0.7,
                    temp=temp + threads, khz=khz)
                add(store, device=device, fmt="onnx", threads=threads, median=median * 1.5,
                    accuracy=0.7, load=12.0, temp=temp, khz=khz)
        ids["bin"] = add(store, fmt="lce", binarize="bnn", median=2.0, size=250)
        ids["invalid"] = add(store, device="pixel", fmt="onnx", threads=8, median=3.0,
                             invalid=("too few samples: 3 < min_runs 50",))
        ids["failed"] = add(store, fmt="onnx", threads=8, status="failed", reason="agent crashed")
        store.finish(store.begin("train", {"model": "resnet18", "dataset": "cifar10", "epochs": 2},
                                 {"aiot_version": "0.1.0"}, model="resnet18", device="host").id,
                     "ok", result={"test_accuracy": 0.71, "epochs_run": 2, "seconds": 12.5},
                     accuracy=0.71)
        add(store, kind="robustness", model="resnet18", fmt="tflite", accuracy=0.4,
            result={"attack": "fgsm", "eps": 0.03, "robust_accuracy": 0.4})
        records = collect(store)
    return build(records, source="results", generated_at="2026-01-02T03:04:05+00:00"), ids


def test_model_rows_flags_and_provenance(campaign):
    report, ids = campaign
    assert len(report.runs) == 15  # latency records only, every status
    assert [r.id for r in report.invalid_runs] == [ids["invalid"]]
    assert report.invalid_runs[0].invalid_reasons == ("too few samples: 3 < min_runs 50",)
    failed = next(r for r in report.runs if r.id == ids["failed"])
    assert failed.status == "failed" and failed.reason == "agent crashed"
    # Plots see ok runs only, one per configuration; the binarized model is its own series.
    plotted = report.plotted_runs()
    assert ids["failed"] not in {r.id for r in plotted} and len(plotted) == 14
    assert {r.model_label for r in plotted} == {"resnet18", "resnet18_bnn"}
    p = report.provenance
    assert [d["device"] for d in p.devices] == ["pi4", "pixel"]
    assert p.devices[1]["os"] == "Android 14" and p.devices[1]["hardware"] == "Google Pixel 7"
    assert p.devices[0]["os"] == "Debian GNU/Linux 12"
    versions = {v["what"]: v["values"] for v in p.versions}
    assert versions["aiot"] == "0.1.0" and versions["runtime litert"] == "2.3.0"
    assert p.statuses == {"ok": 16, "failed": 1} and p.sweeps == ["s1"]
    assert p.first <= p.last


def test_scores_telemetry_and_sections(campaign):
    report, ids = campaign
    [pair] = report.matching.pairs
    assert (pair.bin_id, pair.speedup, pair.compression) == (ids["bin"], 5.0, 16.0)
    assert report.om_scores[0].algorithm == "bnn"
    # Two readings (before, after) per run that has telemetry, oldest first.
    assert len(report.readings) == 24
    assert [x.time for x in report.readings] == sorted(x.time for x in report.readings)
    assert {x.freq_mhz for x in report.readings} == {1500.0, 2000.0}
    keys = [s.key for s in report.sections()]
    # The answer first (best per model, device and format; the formats compared), then the
    # figures and analyses, then provenance, failures and every run.
    assert keys == ["summary", "formats", "latency", "accuracy", "load", "bnn", "leaderboard",
                    "telemetry", "kind-robustness", "training", "provenance", "flags", "runs"]
    flags = next(s for s in report.sections() if s.key == "flags")
    assert {row["id"] for row in flags.tables[0].rows} == {ids["invalid"], ids["failed"]}


def test_leaderboard_without_a_vips_scorer_says_so(campaign, monkeypatch):
    from aiot.host.report.build import leaderboard

    monkeypatch.setitem(sys.modules, "aiot.host.scores.vips", None)  # import fails
    board = leaderboard([])
    assert board.rows == [] and board.note.startswith("VIPS/VOPS: no scores")
    report, _ = campaign
    report.leaderboard = board
    # An empty part is left out of the page; the CLI says why.
    assert "leaderboard" not in {s.key for s in report.sections()}
    assert report.left_out()["leaderboard"] == board.note


def test_leaderboard_from_the_vips_scorer(campaign):
    pytest.importorskip("aiot.host.scores.vips")
    report, ids = campaign
    board = report.leaderboard
    assert {row["device"] for row in board.rows} == {"pi4", "pixel"}
    # INVALID runs are not tests: the pixel's onnx test is its newest VALID run.
    assert ids["invalid"] not in {t["source"] for t in board.tests}
    assert all(row["vips"] > 0 for row in board.rows)


def test_csv_has_raw_values_and_every_table(campaign, tmp_path):
    report, ids = campaign
    files, plots = write(report, "csv", tmp_path / "out")
    assert files[0].name == "runs.csv" and plots == {}
    assert {f.name for f in files} >= {"runs.csv", "flagged.csv", "bnn_pairs.csv", "om_infer.csv",
                                       "devices.csv", "versions.csv", "telemetry.csv",
                                       "load_time.csv", "training.csv", "kind_robustness.csv"}
    rows = list(csv.DictReader(files[0].open()))
    assert len(rows) == 15
    invalid = next(r for r in rows if r["id"] == ids["invalid"])
    assert invalid["validity"] == "INVALID" and invalid["notes"].startswith("too few samples")
    assert float(invalid["median_ms"]) == 3.0  # raw milliseconds, not "3.000"
    # A kind's own metrics are rows of the file (one per metric), never columns of it.
    robust = {r["metric"]: r for r in csv.DictReader((tmp_path / "out" / "kind_robustness.csv").open())}
    assert robust["attack"]["value"] == "fgsm" and float(robust["robust_accuracy"]["value"]) == 0.4
    assert robust["eps"]["model"] == "resnet18" and robust["eps"]["host"] == this_host()


def test_markdown_links_drawn_plots_and_notes_missing_ones(campaign, tmp_path):
    pytest.importorskip("matplotlib")
    report, _ = campaign
    out = tmp_path / "out"
    (out / "leaderboard.png").parent.mkdir(parents=True)
    (out / "stale").write_text("not ours")
    files, plots = write(report, "md", out)
    text = files[0].read_text()
    assert files[0].name == "report.md" and text.startswith("# aiot report")
    assert "1 INVALID run(s)" in text and "| **INVALID** |" in text
    drawn = {k for k, p in plots.items() if not isinstance(p, str)}
    assert drawn >= {"latency_threads", "bnn_speedup", "accuracy_latency", "load_time", "telemetry"}
    for key in drawn:
        png = out / plots[key].file
        assert f"]({png.name})" in text and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "stale").exists()  # only our own plot files are ever removed


def test_a_figure_or_part_without_data_is_left_out(tmp_path):
    pytest.importorskip("matplotlib")
    with open_store(tmp_path / "results") as store:
        add(store, threads=1)  # no accuracy, no telemetry
        records = collect(store)
    out = tmp_path / "out"
    out.mkdir()
    (out / "accuracy_latency.png").write_bytes(b"stale")
    files, plots = write(build(records, source="results"), "html", out)
    page = files[0].read_text()
    assert "accuracy_latency" not in plots  # no part asked for it
    assert not (out / "accuracy_latency.png").exists()  # and no stale copy stays
    # Neither a "no figure" note nor an empty section on the page: the CLI says what was left out.
    assert "No figure" not in page and 'id="accuracy"' not in page and 'id="telemetry"' not in page
    assert "no temperature or frequency readings" not in page and 'id="bnn"' not in page
    assert '<img src="latency_threads.png"' in page and (out / "latency_threads.png").exists()
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_cell_formats():
    assert cell("ms", 0.01234) == "0.0123" and cell("ms", 12.34) == "12.3"
    assert cell("bytes", 220522) == "215.4 KiB" and cell("pct", 0.9) == "90.00%"
    assert cell("si", 151.19e9) == "151.19G" and cell("score", 18190.3) == "18,190"
    assert cell("time", "2026-01-02T03:04:05+00:00") == "2026-01-02 03:04:05"
    assert cell("ms", None) == "—" and cell("id", "abcdef0123") == "abcdef01"


def test_cli_report_md_and_errors(cli, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    results = tmp_path / "results"  # the isolated AIOT_RESULTS_DIR
    cli("report", code=2)  # an empty store: nothing to report
    with open_store(results) as store:
        add(store, threads=1, accuracy=0.5)
        add(store, threads=2, accuracy=0.5, invalid=("throttling detected: cpu0 cap fell",))
    out = cli.json("report", "--format", "md", "--out", str(tmp_path / "md"))
    assert out["files"][0] == str(tmp_path / "md" / "report.md")
    assert out["runs"] == 2 and out["invalid"] == 1 and "latency_threads" in out["plots"]
    assert out["notes"]["telemetry"].startswith("no temperature") and "bnn" in out["notes"]
    plain = cli("report")  # default: an HTML page in <results>/report
    assert plain.stdout.strip() == str(results / "report" / "index.html")
    assert "1 INVALID" in plain.stderr
    assert "unknown report format" in cli("report", "--format", "pdf", code=2).stderr
    assert "no records in sweep" in cli("report", "--sweep", "nope", code=2).stderr
