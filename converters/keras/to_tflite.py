"""Keras model file -> ``.tflite``, with parity: run in the ``lce`` toolchain (TensorFlow 2.16,
Keras 3), never imported by aiot.

``python to_tflite.py MODEL OUT.tflite`` loads the model as Keras saved it (``.keras`` or
legacy ``.h5``), exports a SavedModel and converts that with TFLiteConverter (TF 2.16's
converter fails on a Keras 3 model given directly: "missing attribute 'value'"), then runs
the Keras model and the ``.tflite`` (TensorFlow's own TFLite interpreter) on the same seeded
inputs, a free dim at 1, and prints one JSON line: the inputs used and each output's largest
difference and scale.
"""

import json
import os
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf


def _inputs(model) -> list:
    rng = np.random.default_rng(0)
    values = []
    for tensor in model.inputs:
        shape = [d if d else 1 for d in tensor.shape]
        dtype = np.dtype(str(tensor.dtype))
        if np.issubdtype(dtype, np.integer):
            values.append(rng.integers(0, 10, shape).astype(dtype))
        else:
            values.append(rng.standard_normal(shape).astype(dtype))
    return values


def _tflite_outputs(data: bytes, model, values: list) -> list:
    interpreter = tf.lite.Interpreter(model_content=data)
    runner = interpreter.get_signature_runner()
    names = list(interpreter.get_signature_list()["serving_default"]["inputs"])
    by_name = {t.name: v for t, v in zip(model.inputs, values)}
    feed = ({n: by_name[n] for n in names} if set(names) == set(by_name)
            else dict(zip(names, values)))
    found = runner(**feed)
    return [found[k] for k in sorted(found, key=lambda k: (len(k), k))]  # output_0, output_1...


def main(src: str, out: str) -> None:
    # safe_mode: a Lambda layer's pickled bytecode is refused, not run (a file is read, never run)
    model = keras.saving.load_model(src, compile=False, safe_mode=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.export(os.path.join(tmp, "saved"))
        data = tf.lite.TFLiteConverter.from_saved_model(os.path.join(tmp, "saved")).convert()
    with open(out, "wb") as fh:
        fh.write(data)
    values = _inputs(model)
    expected = [np.asarray(y) for y in tf.nest.flatten(model(values if len(values) > 1
                                                               else values[0], training=False))]
    got = _tflite_outputs(data, model, values)
    outputs = [{"max_abs_diff": float(np.max(np.abs(e.astype(np.float64) - g)))
                if e.shape == g.shape else None,
                "scale": float(np.max(np.abs(e))) if e.size else 0.0,
                "shape": list(e.shape)} for e, g in zip(expected, got)]
    print(json.dumps({"inputs": [{"name": t.name, "shape": list(v.shape), "dtype": str(v.dtype)}
                                 for t, v in zip(model.inputs, values)],
                      "outputs": outputs, "compared": len(got) == len(expected)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
