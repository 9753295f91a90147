"""The house's floor plan (issue 30), read from the source by scripts/house.py: no import cycles
(imports inside functions included), no lower layer importing host, few loose modules in
host/, no module over 600 lines, no non-command function over 12 parameters, and few imports of
aiot's own modules inside functions. The layers themselves are import-linter's contract
(scripts/lint_imports.py, run below, so by make test)."""

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
    "functions_defined_twice": "defined_twice",
    "wing_back_edges": "back_edges",
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


def test_no_function_is_defined_twice_and_host_wings_keep_their_order():
    """Issue 36: one definition per function, and host's wings import only those below them."""
    assert MEASURED["functions_defined_twice"] == 0, MEASURED["defined_twice"]
    assert MEASURED["wing_back_edges"] == 0, MEASURED["back_edges"]


def test_the_wings_order_is_import_linters_contract():
    """house.py's order of host's wings and import-linter's layers contract are one order."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c.get("containers") == ["aiot.host"]]
    assert contract["type"] == "layers"
    assert tuple(reversed(contract["layers"])) == HOUSE.WINGS
    wings = {p.name for p in (ROOT / "host").iterdir() if (p / "__init__.py").is_file()}
    assert wings == set(HOUSE.WINGS)  # a new wing takes its place in the order


def test_a_copied_function_and_a_back_edge_are_found(tmp_path, monkeypatch):
    body = "def {name}(dims):\n    return 'x'.join(str(d) for d in dims) if dims else 'scalar'\n"
    files = {"host/store/a.py": body.format(name="dims_text"),
             "host/engine/b.py": body.format(name="_dims") + "from aiot.host.lab import c\n",
             "host/lab/c.py": "def open(path):\n    return Session(path, 1, None, 2)\n"
                              "class Session: ...\n",
             "host/devices/d.py": "def open(path):\n    return Session(path, 1, None, 2)\n"
                                  "class Session: ...\n"}
    for name, text in files.items():
        path = tmp_path / name
        for folder in [*reversed(path.relative_to(tmp_path).parents)][1:]:
            (tmp_path / folder).mkdir(exist_ok=True)
            (tmp_path / folder / "__init__.py").touch()
        path.write_text(text)
    monkeypatch.setattr(HOUSE, "ROOT", tmp_path)
    measured = HOUSE.measure()
    # The same body under two names is one function twice; a protocol's entry point returning
    # each module's own class is not.
    assert measured["defined_twice"] == ["aiot.host.engine.b._dims = aiot.host.store.a.dims_text"]
    assert measured["back_edges"] == ["aiot.host.engine.b -> aiot.host.lab.c"]


def test_the_layers_contract_is_kept():
    if shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("import-linter is not installed (it comes with the test extra: make setup)")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "lint_imports.py")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "BROKEN" not in done.stdout
