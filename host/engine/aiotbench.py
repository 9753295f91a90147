"""AIoTBench's procedure as one campaign: its six models × four framework tests, per device.

AIoTBench (Luo et al.) times ResNet-50, Inception-v3, DenseNet-121, SqueezeNet, MobileNetV2
and MnasNet under TFLite (CPU), TFLite with the NNAPI delegate, PyTorch Mobile and Caffe2,
and reports model load time, average time per image, accuracy and file size. Here:

============  ==================================================================
test          how aiot runs it
============  ==================================================================
tflite-cpu    ``.tflite`` in LiteRT's CPU (XNNPACK) path, through the device agent
tflite-nnapi  ``.tflite`` in ``benchmark_model --use_nnapi`` (Android, native binary)
pytorch       ``.ptl`` in PyTorch Mobile's lite interpreter, through the agent
caffe2        Caffe2-style NetDef in ``speed_benchmark`` (native binary)
============  ==================================================================

A test the device cannot run becomes a ``skipped`` record with the reason (no Android for
NNAPI, no binary configured, no runtime on the device, converter unavailable on this host),
so the table always has every row. Inputs follow each model's spec (size, layout,
normalisation; :func:`aiot.models.aiotbench_input` gives AIoTBench's per-framework table).
Accuracy needs labelled images (``dataset``, e.g. ``folder:PATH`` of ImageNet validation
images); native tools report latency only.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiot.converters import get_converter
from aiot.host.engine.runs import MeasureParams, RunRequest
from aiot.host.native.config import inventory_binaries

#: AIoTBench's six models (ImageNet size), in its order.
MODELS = ("resnet50", "inception_v3", "densenet121", "squeezenet", "mobilenet_v2", "mnasnet")


@dataclass(frozen=True)
class FrameworkTest:
    """One of AIoTBench's framework configurations."""

    name: str
    title: str
    format: str
    native: str | None = None
    delegate: str | None = None


TESTS = (
    FrameworkTest("tflite-cpu", "TFLite CPU", "tflite"),
    FrameworkTest("tflite-nnapi", "TFLite + NNAPI", "tflite", "benchmark_model", "nnapi"),
    FrameworkTest("pytorch", "PyTorch Mobile", "ptl"),
    FrameworkTest("caffe2", "Caffe2-style", "caffe2", "speed_benchmark"),
)


def test_of(request: RunRequest) -> FrameworkTest:
    """The framework test a request belongs to."""
    for test in TESTS:
        if (test.format, test.native, test.delegate) == (request.format, request.native, request.delegate):
            return test
    raise KeyError(request.label())


def requests_for(devices: list[str], models: list[str], params: MeasureParams,
                 dataset: str | None = None, limit: int | None = None,
                 threads: int = 1) -> list[RunRequest]:
    """Every (device, model, test) as a run request."""
    return [RunRequest(device, model, test.format, threads, params=params, native=test.native,
                       delegate=test.delegate, dataset=None if test.native else dataset,
                       dataset_limit=None if test.native else limit)
            for device in devices for model in models for test in TESTS]


def skip_reason(test: FrameworkTest, device: str, info: dict) -> str | None:
    """Why ``device`` (its probe + agent facts ``info``) cannot run ``test``, or None."""
    converter = get_converter(test.format)
    available = converter.availability()
    if not available.ok:
        return f"{converter.name} converter unavailable on this host: {available.reason}"
    if test.delegate == "nnapi" and not info.get("android_version"):
        return f"NNAPI is Android's; {device} runs {info.get('os') or 'another OS'}"
    if test.native:
        if test.native not in inventory_binaries(device):
            return (f"no {test.native} binary configured for {device}: add "
                    f"[devices.{device}.binaries] {test.native} = \"/path\" to the inventory")
        return None
    runtimes = (info.get("agent") or {}).get("runtimes") or {}
    if not runtimes.get(converter.backend):
        return f"no {test.title} runtime ({converter.backend}) on {device}: see aiot devices setup {device}"
    return None


def row(record) -> dict:
    """One table row of AIoTBench's report from a finished record."""
    stats = (record.result or {}).get("stats_ms") or {}
    return {"device": record.device, "model": record.model,
            "test": test_of(_request_view(record)).name, "status": record.status,
            "reason": record.reason, "load_ms": record.load_ms,
            "mean_ms": stats.get("mean"), "median_ms": record.median_ms,
            "accuracy": record.accuracy, "size_bytes": record.size_bytes,
            "validity": record.validity}


def _request_view(record) -> RunRequest:
    spec = record.spec
    return RunRequest(record.device, record.model, record.format, record.threads,
                      native=spec.get("native"), delegate=spec.get("delegate"))
