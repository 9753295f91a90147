"""Toolchain noise stays out of a plain command's output and ``-v`` keeps it (issue 51).

What toolchains print when they are imported or run (torchao's "Failed to load … .so" and
"Detected no triton" log records, torch's ``_pytree`` deprecation lines, ``FutureWarning``\\ s,
LiteRT's and TensorFlow's C++ lines on fd 2) reaches a terminal through the file descriptors,
through log handlers a library installs when imported, and through Python's warnings. An
in-process runner sees none of these as a terminal does, so each case runs the real ``aiot``
in a process of its own. A library of the user's model (``noisylib``, on the path as an
installed package is: its classes travel to aiot's process by reference and are imported
there) says each kind of noise when imported; a real TFLite conversion brings litert-torch's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import fast

pytestmark = pytest.mark.slow

#: Imported by aiot's process when it rebuilds the user's model: the noise of torchao and torch.
NOISY_LIB = textwrap.dedent("""
    import logging
    import warnings

    import torch

    logging.getLogger("noisylib").warning("Failed to load noisylib/_C_mxfp8.so: Could not load this library")
    logging.getLogger("noisylib.kernel.intmm").warning(
        "Warning: Detected no triton, on systems without Triton certain kernels will not work")
    logging.getLogger("torch.utils._pytree").warning(
        "<enum 'NoisyMode'> is an Enum subclass: calling register_constant() on Enum subclasses is deprecated")
    warnings.warn("noisylib.old_api is deprecated and will be removed", FutureWarning)


    class Layer(torch.nn.Linear):
        pass
""")

NET = textwrap.dedent("""
    import torch

    from noisylib import Layer


    def make():
        return torch.nn.Sequential(Layer(4, 3)), torch.randn(1, 4)
""")

#: A fragment of each noise line (as a log handler, torch's or Python's warnings write it).
NOISE = ("Failed to load noisylib", "Detected no triton", "register_constant()",
         "noisylib.old_api is deprecated")


@pytest.fixture
def noisy_model(tmp_path) -> tuple[str, dict]:
    """``net.py:make`` and the environment in which ``noisylib`` is an installed library."""
    library = tmp_path / "site-packages"
    (library / "noisylib").mkdir(parents=True)
    (library / "noisylib" / "__init__.py").write_text(NOISY_LIB)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "net.py").write_text(NET)
    path = os.pathsep.join(p for p in (str(library), os.environ.get("PYTHONPATH")) if p)
    return f"{tmp_path / 'code' / 'net.py'}:make", {"PYTHONPATH": path}


def aiot(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The real ``aiot`` CLI in a process of its own (the test's isolated folders)."""
    done = subprocess.run([sys.executable, "-m", "aiot", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done


def test_a_noisy_library_of_the_model_is_quiet_and_verbose_keeps_its_noise(noisy_model):
    model, env = noisy_model
    plain = aiot("convert", model, "-f", "onnx", **env)
    assert "✓" in plain.stdout and "parity vs PyTorch" in plain.stdout
    assert not [n for n in NOISE if n in plain.stdout + plain.stderr], plain.stderr
    assert plain.stderr.splitlines() == [f"converting {model} to onnx…"], plain.stderr
    loud = aiot("-v", "convert", model, "-f", "onnx", **env)
    assert "✓" in loud.stdout
    assert [n for n in NOISE if n not in loud.stderr] == [], loud.stderr
    swept = aiot("sweep", "-m", model, "-f", "onnx", "--threads", "1", *fast(warmup_runs=1), **env)
    assert " ok" in swept.stdout and "Traceback" not in swept.stderr
    assert not [n for n in NOISE if n in swept.stdout + swept.stderr], swept.stderr


def test_a_real_tflite_conversion_prints_only_its_result_and_verbose_keeps_the_toolchain(tmp_path):
    fresh = {"AIOT_CONVERSION_CACHE": "off"}  # the conversion itself, not a cached copy
    plain = aiot("convert", "tiny_cnn", "-f", "tflite", **fresh)
    assert "✓" in plain.stdout and "tiny_cnn.tflite" in plain.stdout
    assert plain.stderr.splitlines() == ["converting tiny_cnn to tflite…"], plain.stderr
    # Another results folder: the first conversion's artifact would be reused, not made again.
    loud = aiot("-v", "--results-dir", str(tmp_path / "loud"), "convert", "tiny_cnn", "-f", "tflite",
                **fresh)
    assert "✓" in loud.stdout
    kept = [line for line in loud.stderr.splitlines() if "toolchain: " in line]
    assert kept, loud.stderr[-2000:]  # litert-torch's, torchao's and TensorFlow's lines, in the log
    assert Path(plain.stdout.split()[1]).suffix == ".tflite"
