"""aiot.converters: one module per artifact format, each a subclass of ``Converter``.

Single-file formats are modules here (``onnx``, ``ort``, ``ptl``, ``tflite``, ``null``);
multi-file ones are subpackages (``dabnn``, ``caffe2``, ``lce``, ``executorch``). Beside them
the shared pipeline: ``base`` (the base class and registry), ``api`` (convert a model, check
parity, write the sidecar), ``parity``/``sign_parity``, ``sidecar``, ``source`` and
``factory_process`` (user code), ``graph`` (lowering to a layer list), ``matrix``
(``--format all``), ``windows``. They import ``aiot.models``, ``aiot.core`` and the agent's
protocol, never ``aiot.host``.

Importing this package registers the built-in formats (below); it imports no toolchain (torch,
onnx, litert-torch are imported inside ``export``), so ``aiot convert --list`` is instant.
"""

from aiot.converters.base import (
    CONVERTERS,
    Availability,
    Converter,
    check_format,
    format_table,
    get_converter,
    user_converters,
)
from aiot.converters.caffe2 import Caffe2Converter
from aiot.converters.dabnn import DabnnConverter
from aiot.converters.executorch import ExecutorchConverter
from aiot.converters.lce import LceConverter
from aiot.converters.null import NullConverter
from aiot.converters.onnx import OnnxConverter
from aiot.converters.ort import OrtConverter
from aiot.converters.ptl import PtlConverter
from aiot.converters.tflite import TfliteConverter

# The built-in formats, in the order tables and ``--format all`` list them (here, not at
# each module's import, so that one format's module importing another changes nothing).
for _converter in (Caffe2Converter(), DabnnConverter(), ExecutorchConverter(), LceConverter(),
                   NullConverter(), OnnxConverter(), OrtConverter(), PtlConverter(),
                   TfliteConverter()):
    CONVERTERS.add(_converter.name, _converter)
del _converter

__all__ = ["CONVERTERS", "Availability", "Converter", "check_format", "format_table", "get_converter",
           "user_converters"]
