"""PyTorch Mobile backend (``.ptl``): PyTorch's lite interpreter, on a device with torch."""

from __future__ import annotations

from . import SessionBase

#: Package names the runtime ships as (see backends.installed).
DISTRIBUTIONS = ("torch",)

import json
import zipfile

NAME = "pytorch_mobile"
EXTENSIONS = (".ptl",)
INPUT_FILE = "aiot_input.json"  # written into the artifact by aiot's ptl converter


def version() -> str | None:
    """The installed torch version, or None."""
    try:
        import torch
    except Exception:
        return None
    return torch.__version__


def input_meta(path: str) -> dict:
    """The input shape and dtype stored in the artifact (a zip archive) by the converter."""
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith("/extra/" + INPUT_FILE)]
        if not names:
            raise ValueError(f"{path} has no extra/{INPUT_FILE}: convert it with aiot's ptl converter")
        return json.loads(archive.read(names[0]))


class Session(SessionBase):
    """One loaded module; input is set once and ``invoke`` runs it."""

    def __init__(self, path: str, threads: int) -> None:
        import numpy as np
        import torch
        from torch.jit.mobile import _load_for_lite_interpreter

        # Intra-op threads, as for the other backends; the process runs one model.
        torch.set_num_threads(threads)
        meta = input_meta(path)
        self._torch = torch
        self._module = _load_for_lite_interpreter(path)
        self.input_shape = tuple(meta["shape"])
        self.input_dtype = np.float32
        self._x = None
        self._out = None

    def set_input(self, x) -> None:
        self._x = self._torch.from_numpy(x)

    def invoke(self) -> None:
        with self._torch.no_grad():
            self._out = self._module(self._x)

    def output(self):
        return self._out.numpy()



def open(path: str, threads: int) -> Session:  # noqa: A001 - the backend protocol's name
    """Load ``path`` for inference with ``threads`` intra-op threads."""
    return Session(path, threads)
