"""aiot.converters: one module per artifact format, each a subclass of ``Converter``.

Single-file formats are modules here (``onnx``, ``ort``, ``ptl``, ``tflite``, ``null``);
multi-file ones are subpackages (``dabnn``, ``caffe2``, ``lce``, ``executorch``). Beside them
the shared pipeline: ``base`` (the base class and registry), ``api`` (convert a model, check
parity, write the sidecar), ``parity``/``sign_parity``, ``sidecar``, ``source`` and
``factory_process`` (user code), ``graph`` (lowering to a layer list), ``matrix``
(``--format all``), ``windows``. They import ``aiot.models``, ``aiot.core`` and the agent's
protocol, never ``aiot.host``.

Importing this package registers the built-in formats; it imports no toolchain (torch,
onnx, litert-torch are imported inside ``export``), so ``aiot convert --list`` is instant.
"""

from aiot.converters import caffe2 as _caffe2  # noqa: F401 - registers "caffe2"
from aiot.converters import dabnn as _dabnn  # noqa: F401 - registers "dabnn"
from aiot.converters import executorch as _executorch  # noqa: F401 - registers "executorch"
from aiot.converters import lce as _lce  # noqa: F401 - registers "lce"
from aiot.converters import null as _null  # noqa: F401 - registers "null"
from aiot.converters import onnx as _onnx  # noqa: F401 - registers "onnx"
from aiot.converters import ort as _ort  # noqa: F401 - registers "ort"
from aiot.converters import ptl as _ptl  # noqa: F401 - registers "ptl"
from aiot.converters import tflite as _tflite  # noqa: F401 - registers "tflite"
from aiot.converters.base import (
    CONVERTERS,
    Availability,
    Converter,
    check_format,
    format_table,
    get_converter,
    user_converters,
)

__all__ = ["CONVERTERS", "Availability", "Converter", "check_format", "format_table", "get_converter",
           "user_converters"]
