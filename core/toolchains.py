"""Isolated toolchain environments: runtimes and converters that cannot share aiot's.

The runtimes disagree: the LCE converter needs TensorFlow, the LCE interpreter breaks
under NumPy 2 (it silently receives 0-byte inputs), while aiot's own environment has
NumPy 2 (ExecuTorch requires it). Each such stack gets a named virtual environment,
created on demand with ``aiot toolchains install NAME`` and cached under
``<cache>/toolchains/<name>-<key>``, where the key hashes its requirements and the Python
version — changing a pin makes a new environment instead of mutating a working one.

Code runs inside an environment as a subprocess (:func:`run_script`): a self-contained
script plus JSON/NPZ files in, files out. Nothing in aiot's own process imports a
toolchain, so ``aiot --help`` stays instant and the main environment stays small.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aiot.core import environment, stage_limit, warm_toolchain
from aiot.core.warm_toolchain import Warmth
from aiot.core.errors import AiotError, UsageError
from aiot.core.isolation import signal_name
from aiot.core.paths import cache_dir
from aiot.core.registry import Registry
from aiot.device_agent import backends

log = logging.getLogger(__name__)

MARKER = "aiot-toolchain.json"


class ToolchainError(AiotError):
    """A toolchain environment could not be created, or a script inside it failed."""


@dataclass(frozen=True)
class Toolchain:
    """A named environment: what it is for and exactly what it contains.

    Attributes:
        name: the name on the command line (``aiot toolchains install lce``).
        purpose: one line for ``aiot toolchains list``.
        requirements: pip requirement strings, pinned so results are reproducible.
        probe: modules that must import for the environment to count as working.
        warm: what its warm interpreter does once for every command
            (:mod:`aiot.core.warm_toolchain`); no modules: every command starts cold.
    """

    name: str
    purpose: str
    requirements: tuple[str, ...]
    probe: tuple[str, ...]
    warm: Warmth = Warmth()

    def key(self) -> str:
        """Hash of requirements and Python version: the environment's identity."""
        text = json.dumps({"python": sys.version_info[:2], "requirements": self.requirements})
        return hashlib.sha256(text.encode()).hexdigest()[:12]


TOOLCHAINS: Registry[Toolchain] = Registry("toolchain")
_EXECUTORCH_WARM_UP = """
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

try:  # no tqdm monitor thread in a process that forks
    import tqdm
    tqdm.tqdm.monitor_interval = 0
except ImportError:
    pass
model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8, 2)).eval()
program = torch.export.export(model, (torch.zeros(1, 1, 4, 4),))
to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch()
"""
TOOLCHAINS.add("lce", Toolchain(
    "lce",
    "Larq Compute Engine: converter (TensorFlow 2.16) and interpreter (NumPy < 2)",
    # LCE 0.16 is built against TF 2.16 and pins it; its interpreter needs NumPy 1.x.
    ("larq-compute-engine==0.16.0", "tensorflow-cpu==2.16.1", "numpy<2"),
    ("larq_compute_engine", "tensorflow"),
    # The converter's TensorFlow (the interpreter itself imports NumPy only).
    Warmth(("numpy", "tensorflow", "larq_compute_engine")),
))
TOOLCHAINS.add("executorch", Toolchain(
    "executorch",
    "ExecuTorch: XNNPACK lowering of exported programs and the executorch runtime",
    # Same torch as aiot's (the exported program crosses over as a .pt2 file); ExecuTorch
    # declares no torch pin of its own and would otherwise fetch a CUDA build.
    ("torch==2.13.0", "executorch==1.5.1"),
    ("executorch.exir", "executorch.runtime"),
    # Lowering's exir and XNNPACK partitioner (~13 s), the runtime's bindings for parity,
    # and one lowering of a tiny model: a process's first takes ~13 s, the next ones ~5.
    Warmth(("numpy", "torch", "executorch.exir",
            "executorch.backends.xnnpack.partition.xnnpack_partitioner",
            "executorch.extension.pybindings._C"), _EXECUTORCH_WARM_UP),
))
TOOLCHAINS.add("onnx2tf", Toolchain(
    "onnx2tf",
    "onnx2tf 1.x (TensorFlow 2.19): the other public PyTorch→TFLite path, for bench/tflite_paths.py",
    # onnx2tf 1.29.24 is the newest for Python 3.11 and pins TF 2.19 / NumPy 1.26 itself.
    ("onnx2tf==1.29.24",),
    ("onnx2tf", "tensorflow"),
))


def root_dir() -> Path:
    """Where environments live: ``AIOT_TOOLCHAINS_DIR``, else ``<cache>/toolchains``."""
    env = environment.get("AIOT_TOOLCHAINS_DIR")
    path = Path(env).expanduser().absolute() if env else cache_dir() / "toolchains"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only cache: nothing is installed there; an install says so
        log.debug("toolchains folder %s cannot be made: %s", path, exc)
    return path


def env_dir(toolchain: Toolchain) -> Path:
    """The environment folder of ``toolchain`` (whether installed or not)."""
    return root_dir() / f"{toolchain.name}-{toolchain.key()}"


def _env_python(env: Path) -> Path:
    return env / "bin" / "python"


def installed(name: str) -> dict | None:
    """The marker of an installed, complete environment, or None."""
    toolchain = TOOLCHAINS.get(name)
    env = env_dir(toolchain)
    try:
        marker = json.loads((env / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if _env_python(env).exists() else None


def python(name: str) -> Path | None:
    """The interpreter of an installed environment, or None."""
    toolchain = TOOLCHAINS.get(name)
    return _env_python(env_dir(toolchain)) if installed(name) else None


def backend_toolchain(backend: str) -> str | None:
    """The toolchain that holds agent backend ``backend``'s runtime when aiot's own Python
    lacks it (LCE: NumPy < 2), else None. Decided from package metadata, as an agent's hello
    is (:func:`aiot.device_agent.backends.installed`): importing the runtime (or NumPy) to ask
    cost a sweep a tenth of a second of CPU before its first run."""
    if backend not in backends.MODULES:
        return None
    module = importlib.import_module(backends.MODULES[backend], backends.__name__)
    if module.TOOLCHAIN is None or module.installed_version() is not None:
        return None
    return module.TOOLCHAIN


def runtime_python(backend: str) -> Path | None:
    """The toolchain interpreter that has ``backend``'s runtime when aiot's own lacks it."""
    toolchain = backend_toolchain(backend)
    return python(toolchain) if toolchain else None


def require_python(name: str) -> Path:
    """The interpreter of ``name``'s environment.

    Raises:
        ToolchainError: not installed; the hint says how to install it.
    """
    found = python(name)
    if found is None:
        raise ToolchainError(f"the '{name}' toolchain environment is not installed",
                             f"run: aiot toolchains install {name}")
    return found


def install(name: str, progress=None) -> dict:
    """Create ``name``'s environment (no-op when installed); returns its marker.

    The environment is built in a ``.partial`` folder and renamed into place only after
    every requirement installed and every probe module imported, so an interrupted or
    failed install never leaves something that looks usable. pip's output goes to
    ``<env>.log``.

    Raises:
        ToolchainError: venv creation, pip, or the import probe failed.
    """
    toolchain = TOOLCHAINS.get(name)
    done = installed(name)
    if done:
        return done
    final = env_dir(toolchain)
    partial = final.with_name(final.name + ".partial")
    logfile = final.with_name(final.name + ".log")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    final.parent.mkdir(parents=True, exist_ok=True)  # a read-only cache: its one-line error here
    with open(logfile, "w", encoding="utf-8") as log_fh:
        _step(progress, f"creating environment {final.name}")
        _run_logged([sys.executable, "-m", "venv", str(partial)], log_fh, logfile, "venv creation")
        py = str(_env_python(partial))
        _step(progress, "installing " + " ".join(toolchain.requirements))
        _run_logged([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                     *toolchain.requirements], log_fh, logfile, "pip install")
        _step(progress, "checking imports")
        probe = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
        _run_logged([py, "-c", probe, *toolchain.probe], log_fh, logfile, "import check")
    marker = {"name": name, "key": toolchain.key(), "requirements": list(toolchain.requirements),
              "python": ".".join(map(str, sys.version_info[:3])),
              "versions": _versions(py, toolchain), "install_seconds": round(time.perf_counter() - started, 1)}
    (partial / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    # venv scripts hard-code the folder they were made in; the interpreter is what we run,
    # and ``bin/python`` is a symlink, so the rename keeps it working.
    return marker


def remove(name: str) -> bool:
    """Delete ``name``'s environment; True if there was one."""
    env = env_dir(TOOLCHAINS.get(name))
    if not env.exists():
        return False
    shutil.rmtree(env)
    return True


def listing() -> list[dict]:
    """One row per known toolchain for ``aiot toolchains list``."""
    rows = []
    for toolchain in TOOLCHAINS:
        marker = installed(toolchain.name)
        rows.append({"name": toolchain.name, "purpose": toolchain.purpose,
                     "requirements": list(toolchain.requirements), "installed": bool(marker),
                     "path": str(env_dir(toolchain)) if marker else None,
                     "versions": (marker or {}).get("versions", {})})
    return rows


def run_script(name: str, script: Path, args: list[str], timeout: float = 900) -> str:
    """Run a self-contained ``script`` with ``name``'s interpreter; returns its stdout.

    Raises:
        ToolchainError: not installed, timed out, or the script failed (its last error
            line is the message; the full output goes to the debug log).
    """
    # -P: the script's own folder must not shadow packages: its siblings (a format's
    # ``converter.py``, ``__init__.py``) would otherwise be importable as top-level modules.
    return run_python(name, ["-P", str(script), *args], timeout=timeout, what=script.name)


def run_module(name: str, module: str, args: list[str], cwd: Path, timeout: float = 900) -> str:
    """``python -m module args`` in ``name``'s interpreter from ``cwd``; returns its stdout.

    A module that reports its own errors on stdout (the device agent's protocol) is not
    judged by its exit status here: the caller reads the error event. A crash without
    output still raises.
    """
    return run_module_output(name, module, args, cwd, timeout)[0]


def run_module_output(name: str, module: str, args: list[str], cwd: Path,
                      timeout: float = 900) -> tuple[str, str]:
    """:func:`run_module`, returning ``(stdout, stderr)``: where a native runtime logs the
    reason of an error its Python API reports only as a code (ExecuTorch's XNNPACK)."""
    proc = _run_python(name, ["-m", module, *args], cwd=cwd, timeout=timeout, what=module,
                       check=False)
    return proc.stdout, proc.stderr


def run_python(name: str, args: list[str], *, cwd: Path | None = None, timeout: float = 900,
               what: str = "python", check: bool = True) -> str:
    """Run ``name``'s interpreter with ``args``; returns stdout.

    The environment is scrubbed of ``PYTHONPATH`` and user site-packages, so nothing of
    aiot's own environment (NumPy 2) leaks into the toolchain's.

    Raises:
        ToolchainError: not installed, timed out, or (with ``check``, or when it printed
            nothing) a non-zero exit; the message is its last error line.
    """
    return _run_python(name, args, cwd=cwd, timeout=timeout, what=what, check=check).stdout


def _run_python(name: str, args: list[str], *, cwd: Path | None, timeout: float, what: str,
                check: bool) -> subprocess.CompletedProcess:
    py = require_python(name)
    env = {**os.environ, "PYTHONNOUSERSITE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)
    # Within a conversion stage, what is left of its limit (aiot.core.stage_limit).
    allowed, stage = stage_limit.budget(timeout)
    try:  # stoppable from any thread: a campaign's Ctrl-C ends a conversion in flight
        proc = warm_toolchain.run(str(py), TOOLCHAINS.get(name).warm, args, cwd=cwd,
                                  env=env, timeout=allowed)
    except subprocess.TimeoutExpired as exc:
        if stage is not None:
            raise stage_limit.ran_out(stage, f"the '{name}' toolchain process ({what})",
                                      getattr(exc, "pid", None), getattr(exc, "state", None)) from None
        raise ToolchainError(f"{what} in the '{name}' toolchain ran over {timeout:.0f} s") from None
    log.debug("%s stderr:\n%s", what, proc.stderr)
    if proc.returncode != 0 and (check or not proc.stdout.strip()):
        raise ToolchainError(f"{what} in the '{name}' toolchain failed: {_why_failed(proc)}",
                             "run with --verbose for its full output")
    return proc


def _why_failed(proc: subprocess.CompletedProcess) -> str:
    """Its last error line; for an interpreter a signal ended (a negative return code: a
    runtime's SIGSEGV, the OOM killer's SIGKILL) that signal first, which its stderr never
    says."""
    if proc.returncode >= 0:
        return _last_error(proc.stderr)
    said = _last_error(proc.stderr) if proc.stderr.strip() else ""
    killed = f"killed by {signal_name(-proc.returncode)}"
    return f"{killed}; it last said: {said}" if said else killed


#: The line a Python traceback ends its exception with (``RuntimeError: …``); lines after
#: it are the exception's own later lines (ExecuTorch's advice "If you believe this operator
#: should be included into core ATen opset…"), not its cause.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b:?")


def _last_error(stderr: str) -> str:
    """The failure a process's stderr names: its last exception line where it printed a
    traceback, else its last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    headers = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return (headers[-1] if headers else lines[-1] if lines else "no error output")[:300]


def _versions(py: str, toolchain: Toolchain) -> dict[str, str]:
    names = [req.split("=")[0].split("<")[0].split(">")[0] for req in toolchain.requirements]
    script = ("import sys\nfrom importlib.metadata import version\n"
              "for n in sys.argv[1:]: print(n, version(n))")
    out = subprocess.run([py, "-c", script, *names], capture_output=True, text=True, check=False)
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def _run_logged(argv: list[str], log_fh, logfile: Path, what: str) -> None:
    log_fh.write(f"$ {' '.join(argv)}\n")
    log_fh.flush()
    proc = subprocess.run(argv, stdout=log_fh, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = _last_error(logfile.read_text(encoding="utf-8", errors="replace"))
        raise ToolchainError(f"{what} failed: {tail}", f"full log: {logfile}")


def _step(progress, message: str) -> None:
    log.info(message)
    if progress:
        progress(message)


def check_name(name: str) -> str:
    """The canonical toolchain name (UnknownName with suggestions otherwise)."""
    if not name:
        raise UsageError("no toolchain named", f"known: {', '.join(t.name for t in TOOLCHAINS)}")
    return TOOLCHAINS.get(name).name
