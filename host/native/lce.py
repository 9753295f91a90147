"""Larq Compute Engine's ``lce_benchmark_model``: TFLite's tool with the LCE ops registered.

Its output is that of the TensorFlow release it pins (LCE 0.3 → TF 2.2, 0.4 → 2.3, 0.7 → 2.8,
0.16 → 2.16.1), plus ``Use reference Bconv: [..]`` / ``Use indirect BGEMM: [..]`` echo lines
from 0.7 on, so the TFLite parser reads it. Only XNNPACK is accepted as a delegate: NNAPI and
GPU delegates cannot run ``LceBconv2d``, so they would time a partly delegated graph.

Placement: LCE's own operators (``LceBconv2d``, ``LceQuantize``, ...) run on LCE's kernels, so
they count as taken beside what XNNPACK took: the engine is ``lce``, and only operators neither
took are outside.
"""

from __future__ import annotations

from aiot.device_agent.backends.tflite_io import operator_codes
from aiot.host.native.delegation import native_placement
from aiot.host.native.tflite import BenchmarkModelAdapter


class LceBenchmarkModelAdapter(BenchmarkModelAdapter):
    """``lce_benchmark_model``: TFLite flags plus ``--use_reference_bconv`` and
    ``--use_indirect_bgemm`` (pass those in ``extra``)."""

    tool = "lce_benchmark_model"
    source = ("Larq Compute Engine's own build: a release asset of larq/compute-engine "
              "(lce_benchmark_model_android_arm64, _aarch64), or built from that repository with "
              "Bazel (//larq_compute_engine/tflite/benchmark:lce_benchmark_model, "
              "--config=android_arm64) or CMake")
    formats = frozenset({"lce", "tflite"})
    delegates = frozenset({"xnnpack"})

    def placement(self, record: dict, artifact, delegate: str | None) -> dict | None:
        """XNNPACK's line plus LCE's own operators, read from the artifact."""
        try:
            with open(artifact, "rb") as fh:
                codes = operator_codes(fh.read())
        except (OSError, ValueError, TypeError):
            return record.get("placement")
        own = sum(1 for c in codes if isinstance(c, str) and c.startswith("Lce"))
        lines = (record.get("native") or {}).get("delegations") or []
        return native_placement(lines, delegate or "xnnpack", total=len(codes), own=own,
                                engine="lce")
