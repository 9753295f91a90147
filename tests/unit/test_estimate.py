"""The up-front estimate of a long procedure (issue 39, item 9): conversions still needed vs
cached, read from the artifacts' sidecars, each at the duration recorded for its format (or a
rough figure it names), and runs at the duration finished runs took here."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import aiot
from aiot.host.engine.estimate import ROUGH_CONVERT_S, estimate
from aiot.host.engine.runs import MeasureParams, RunRequest


def _sidecar(folder, name: str, fmt: str, model: str, binarize=None, seconds=None, version=None):
    data = {"aiot_version": version or aiot.__version__, "format": fmt,
            "source": {"model": model, "binarize": binarize}, "converter": {"options": {}}}
    if seconds is not None:
        data["convert_seconds"] = seconds
    (folder / f"{name}.aiot.json").write_text(json.dumps(data))


@pytest.fixture(autouse=True)
def machine_cache(tmp_path, monkeypatch):
    """An empty conversion cache of this machine's (the suite's is shared by its tests)."""
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "conversions"


def _requests():
    params = MeasureParams(min_s=1.0, warmup_min_s=0.5)
    return [RunRequest("local", model, fmt, threads, params=params, binarize=binarize)
            for model in ("resnet18_cifar", "vgg_small")
            for fmt, binarize in (("tflite", None), ("lce", "bnn"))
            for threads in (1, 2)]


def test_cached_conversions_are_counted_and_the_rest_timed_as_recorded(tmp_path):
    _sidecar(tmp_path, "a", "tflite", "resnet18_cifar")  # cached: not converted again
    _sidecar(tmp_path, "b", "lce", "tiny_bnn", seconds=150.0)  # an LCE conversion took 150 s
    _sidecar(tmp_path, "c", "lce", "resnet18_cifar", "bnn", version="0.0.1")  # another aiot's
    _sidecar(tmp_path, "d", "lce", "vgg_small", "reactnet", seconds=90.0)  # vgg_small's own time
    est = estimate(_requests(), tmp_path)
    assert est.cached == 1 and est.runs == 8
    # vgg_small at its own recorded time, resnet18_cifar at the format's median (150, 90)
    assert sorted(est.convert) == [("resnet18_cifar_bnn lce", 120.0, True),
                                   ("vgg_small tflite", ROUGH_CONVERT_S["tflite"], False),
                                   ("vgg_small_bnn lce", 90.0, True)]
    line = est.line()
    assert line.startswith("estimate: 3 conversion(s) to do (2 lce × ~2 min, 1 tflite × ~60 s "
                           "(rough: none recorded here)), 1 cached; 8 run(s) × ~6 s (rough)"), line
    assert "about 5 min in all" in line and "Ctrl-C stops within seconds" in line


def test_a_conversion_kept_by_this_machine_counts_as_cached_with_its_time(tmp_path, machine_cache):
    """The machine's conversion cache (another results folder's conversions) is on disk too:
    a conversion copies from it, and its sidecars say how long converting took."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    (machine_cache / "e1").mkdir(parents=True)
    _sidecar(machine_cache / "e1", "a", "tflite", "resnet18_cifar", seconds=4.0)
    (machine_cache / "e2").mkdir()
    _sidecar(machine_cache / "e2", "b", "tflite", "tiny_cnn", seconds=2.0)
    est = estimate(_requests(), folder)
    assert est.cached == 1
    assert ("vgg_small tflite", 3.0, True) in est.convert  # the format's median here: (4 + 2) / 2


def test_runs_are_timed_from_finished_runs_on_the_same_device_and_format(tmp_path):
    done = [SimpleNamespace(status="ok", device="local", format="tflite",
                            created_at="2026-11-27T06:00:00+00:00",
                            finished_at=f"2026-11-27T06:00:{s:02d}+00:00") for s in (10, 12, 14)]
    other = SimpleNamespace(status="ok", device="phone", format="tflite",
                            created_at="2026-11-27T06:00:00+00:00", finished_at="2026-11-27T06:09:00+00:00")
    est = estimate(_requests(), tmp_path, [*done, other])
    assert (est.run_s, est.run_from) == (12.0, 3)
    assert "8 run(s) × ~12 s (from 3 recorded run(s))" in est.line()
