"""Round 3, untrusted files: forcing torch's weights-only loads must stay inside aiot.

While aiot loads a ``.pt2`` (``aiot.core.safe_load.weights_only_loads``) every ``torch.load``
of torch.export is weights-only, even one that asks for ``weights_only=False``. A process
another thread starts meanwhile (a parallel sweep's other device: a local agent, a toolchain's
converter) must get the user's environment, not that switch: it is a real child here, started
inside the block.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_SHOW = ("import os; print(os.environ.get('TORCH_FORCE_WEIGHTS_ONLY_LOAD'), "
         "os.environ.get('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'))")


class Evil:
    """Unpickling this opens ``marker`` for writing: code run by loading a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.fault("a child started during a weights-only load")
def test_a_child_started_during_a_safe_load_gets_the_users_environment(fault, tmp_path,
                                                                        monkeypatch):
    from aiot.core.safe_load import weights_only_loads

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the user's own setting
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    marker = tmp_path / "ran"
    buffer = io.BytesIO()
    torch.save(Evil(marker), buffer)
    with weights_only_loads():
        seen = subprocess.run([sys.executable, "-c", _SHOW], capture_output=True, text=True,
                              check=True).stdout.split()
        with pytest.raises(pickle.UnpicklingError):  # still forced here, as torch.export asks
            torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert seen == ["None", "1"]
    assert not marker.exists()
    with weights_only_loads():  # nested in a thread's own call: no deadlock, still forced
        with weights_only_loads(), pytest.raises(pickle.UnpicklingError):
            torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert not marker.exists()
