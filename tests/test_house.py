"""The house's floor plan (issue 30), read from the source by scripts/house.py: no import cycles
(imports inside functions included), no lower layer importing host, few loose modules in
host/, no module over 600 lines, no non-command function over 12 parameters, and few imports of
aiot's own modules inside functions. The layers themselves are import-linter's contract
(scripts/lint_imports.py, run by make test and below)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _house():
    spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["house"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


HOUSE = _house()
MEASURED = HOUSE.measure()
DETAILS = {
    "import_cycles": "cycles",
    "lower_to_host_imports": "lower_to_host",
    "loose_host_modules": "loose_host",
    "modules_over_600_lines": "big_modules",
    "functions_over_12_params": "long_signatures",
}


@pytest.mark.parametrize("measure", sorted(HOUSE.LIMITS))
def test_the_floor_plan_is_within_its_limits(measure):
    limit = HOUSE.LIMITS[measure]
    found = MEASURED[measure]
    detail = MEASURED.get(DETAILS.get(measure, ""), "")
    assert found <= limit, f"{measure}: {found} > {limit}: {detail}"


def test_the_check_reads_what_it_claims():
    """The measure sees the whole source: every package folder, and imports inside functions."""
    assert MEASURED["modules"] > 250
    assert MEASURED["aiot_imports"] > 1000
    assert MEASURED["in_function_aiot_imports"] > 0  # heavy toolchains stay lazy, and are counted


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path, monkeypatch):
    for name, body in {"a.py": "def f():\n    from aiot.core import b\n",
                       "b.py": "from aiot.core import a\n", "__init__.py": ""}.items():
        (tmp_path / "core" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "core" / name).write_text(body)
    monkeypatch.setattr(HOUSE, "ROOT", tmp_path)
    measured = HOUSE.measure()
    assert measured["cycles"] == [["aiot.core.a", "aiot.core.b"]]
    assert measured["in_function_aiot_imports"] == 1


def test_the_layers_contract_is_kept():
    if shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("import-linter is not installed (it comes with the test extra: make setup)")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "lint_imports.py")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "BROKEN" not in done.stdout
