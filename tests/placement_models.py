"""Two ``.tflite`` files that differ in where their operators run, built at test time in the
``lce`` toolchain's TensorFlow as a user's TensorFlow would make them (no shipped blobs).

Both are CONV_2D → MEAN → FULLY_CONNECTED on an ``image`` float32 [1, 8, 8, 3]; the partial
one has a CUMSUM after the convolution, which XNNPACK has no kernel for: LiteRT cuts the graph
around it into two XNNPACK partitions and runs CUMSUM on its own kernel. Kept apart from
``tests/third_party.py``, whose text keys every other kept artifact (:func:`kept_build`).
"""

from __future__ import annotations

import hashlib
import tempfile
import textwrap
from pathlib import Path

#: TensorFlow script: ``kind`` "cumsum" (partly delegated) or "plain" (fully delegated).
SCRIPT = textwrap.dedent('''
    import sys

    import numpy as np
    import tensorflow as tf

    kind, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    w = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3)
    dense = tf.constant(rng.standard_normal((4, 5)).astype(np.float32))


    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="image")])
    def net(image):
        x = tf.nn.relu(tf.nn.conv2d(image, w, 1, "VALID"))
        if kind == "cumsum":
            x = tf.math.cumsum(x, axis=3)
        return {"logits": tf.matmul(tf.reduce_mean(x, axis=[1, 2]), dense)}


    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [net.get_concrete_function()], tf.Module())
    with open(out, "wb") as fh:
        fh.write(converter.convert())
''')
#: What, besides the toolchain, the kept files depend on.
SCRIPT_SHA = hashlib.sha256(SCRIPT.encode()).hexdigest()[:16]


def _build(kind: str, folder: Path) -> Path:
    from aiot.core import toolchains

    out = Path(folder) / kind / "net.tflite"  # one name: the two are one model's two versions
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aiot-build-") as tmp:
        script = Path(tmp) / "build.py"
        script.write_text(SCRIPT, encoding="utf-8")
        toolchains.run_script("lce", script, [kind, str(out)], timeout=600)
    return out


def cumsum_tflite(folder: Path) -> Path:
    """``cumsum/net.tflite``: 4 operators, CUMSUM outside XNNPACK's two partitions."""
    return _build("cumsum", folder)


def plain_tflite(folder: Path) -> Path:
    """``plain/net.tflite``: 3 operators, all in one XNNPACK partition."""
    return _build("plain", folder)
