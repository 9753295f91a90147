"""The native-tool adapters by binary name; the imports below are the registration order."""

from __future__ import annotations

from aiot.core.registry import Registry
from aiot.host.native.base import NativeAdapter
from aiot.host.native.caffe2 import SpeedBenchmarkAdapter
from aiot.host.native.dabnn import BenchmarkSingleModelAdapter
from aiot.host.native.executorch import ExecutorRunnerAdapter
from aiot.host.native.lce import LceBenchmarkModelAdapter
from aiot.host.native.onnxruntime import PerfTestAdapter
from aiot.host.native.tflite import BenchmarkModelAdapter
from aiot.host.native.torch_mobile import SpeedBenchmarkTorchAdapter

TOOLS: Registry[NativeAdapter] = Registry("native tool")
TOOLS.add("benchmark_model", BenchmarkModelAdapter(), aliases=("tflite_benchmark_model",))
TOOLS.add("lce_benchmark_model", LceBenchmarkModelAdapter())
TOOLS.add("speed_benchmark_torch", SpeedBenchmarkTorchAdapter())
TOOLS.add("benchmark_single_model", BenchmarkSingleModelAdapter(), aliases=("dabnn",))
TOOLS.add("executor_runner", ExecutorRunnerAdapter(), aliases=("xnn_executor_runner",))
TOOLS.add("onnxruntime_perf_test", PerfTestAdapter(), aliases=("perf_test",))
TOOLS.add("speed_benchmark", SpeedBenchmarkAdapter(), aliases=("caffe2_speed_benchmark",))


def get_adapter(name: str) -> NativeAdapter:
    """The adapter for a tool name or alias; UnknownName (with suggestions) otherwise."""
    return TOOLS.get(name)


def adapters_for_format(fmt: str) -> list[NativeAdapter]:
    """Adapters whose binary runs artifacts of format ``fmt``, in registration order."""
    return [adapter for adapter in TOOLS if fmt in adapter.formats]
