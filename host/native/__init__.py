"""aiot.host.native: adapters for user-supplied native benchmark binaries.

One module per tool, each a ``NativeAdapter`` that builds the binary's argv (``command``) and
reads its output into a record shaped like the device agent's result (``parse``):

==========================  ======================  ==========================================
tool                        formats                 delegates
==========================  ======================  ==========================================
``benchmark_model``         tflite                  xnnpack, nnapi, gpu
``lce_benchmark_model``     lce, tflite             xnnpack
``speed_benchmark_torch``   ptl                     vulkan
``benchmark_single_model``  dabnn                   (single-threaded, none)
``executor_runner``         executorch              (delegation is decided at export)
``onnxruntime_perf_test``   onnx, ort               nnapi, xnnpack, qnn
``speed_benchmark``         caffe2                  none
==========================  ======================  ==========================================

``run_native`` runs one through a Transport; ``ensure_binary`` pushes a binary once per content;
``resolve_binary`` finds the user's binary for a device.
"""

from aiot.host.native.base import InputSpec, NativeAdapter
from aiot.host.native.config import inventory_binaries, resolve_binary
from aiot.host.native.deploy import DeployedBinary, ensure_binary
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.registry import TOOLS, adapters_for_format, get_adapter
from aiot.host.native.run import NativeSpec, profile_native, run_native

__all__ = [
    "TOOLS", "DeployedBinary", "InputSpec", "NativeAdapter", "NativeOutputError", "NativeSpec",
    "adapters_for_format", "ensure_binary", "get_adapter", "inventory_binaries",
    "profile_native", "resolve_binary", "run_native",
]
