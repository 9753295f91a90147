"""Larq Compute Engine's ``lce_benchmark_model``: TFLite's tool with the LCE ops registered.

Its output is that of the TensorFlow release it pins (LCE 0.3 → TF 2.2, 0.4 → 2.3, 0.7 → 2.8,
0.16 → 2.16.1), plus ``Use reference Bconv: [..]`` / ``Use indirect BGEMM: [..]`` echo lines
from 0.7 on, so the TFLite parser reads it. Only XNNPACK is accepted as a delegate: NNAPI and
GPU delegates cannot run ``LceBconv2d``, so they would time a partly delegated graph.
"""

from __future__ import annotations

from aiot.host.native.tflite import BenchmarkModelAdapter


class LceBenchmarkModelAdapter(BenchmarkModelAdapter):
    """``lce_benchmark_model``: TFLite flags plus ``--use_reference_bconv`` and
    ``--use_indirect_bgemm`` (pass those in ``extra``)."""

    tool = "lce_benchmark_model"
    formats = frozenset({"lce", "tflite"})
    delegates = frozenset({"xnnpack"})
