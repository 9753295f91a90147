"""Every ``AIOT_*`` variable has one owner (issue 52): the table in ``core/environment.py``.

aiot's code reads a variable only through ``aiot.core.environment.get`` (the device agent,
which imports nothing of aiot, only the variables the host sets for it); every variable named
in the code, the Makefile and the scripts is in the table; each row's readers read it; and every
option that Click fills from a variable is in the table too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer.main

from aiot.core import environment
from aiot.host.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = {"core": "aiot.core", "host": "aiot.host", "models": "aiot.models",
           "converters": "aiot.converters", "device_agent": "aiot.device_agent",
           "src/aiot": "aiot"}
#: A variable's name in text: not ``@@AIOT_PID`` (a marker in device output), not Click's
#: ``_AIOT_COMPLETE`` (shell completion's own).
NAME = re.compile(r"(?<![@\w])AIOT_[A-Z0-9_]*[A-Z0-9]")
READS = {"get", "getenv", "pop", "setdefault"}


def sources() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for folder, package in PACKAGE.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            module = ".".join([package, *parts]).removesuffix(".__init__")
            found[module] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


SOURCES = sources()
def constants(trees) -> dict[str, str]:
    """Module-level constants that hold a variable's name (``ENV = "AIOT_VALIDITY"``)."""
    return {target.id: node.value.value
            for tree in trees for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and NAME.fullmatch(node.value.value)
            for target in node.targets if isinstance(target, ast.Name)}


#: Every module's such constants: a read through one of them is a read of the variable.
CONSTANTS = constants(tree for _, tree in SOURCES.values())


def _variable(node: ast.AST, known: dict[str, str]) -> str | None:
    """The ``AIOT_*`` name an expression stands for (a literal or a known constant), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return known.get(node.id if isinstance(node, ast.Name) else node.attr)
    return None


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def environ_reads(tree: ast.Module, known: dict[str, str] = CONSTANTS) -> list[tuple[int, str]]:
    """``(line, variable)`` of each read of an ``AIOT_*`` variable from ``os.environ`` or
    ``os.getenv`` (a write, ``os.environ[X] = v``, is no read)."""
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            func = node.func
            if (func.attr in READS and _is_environ(func.value)) or (
                    func.attr == "getenv" and getattr(func.value, "id", "") == "os"):
                name = _variable(node.args[0], known)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            name = _variable(node.slice, known)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            name = _variable(node.left, known)
        if name:
            found.append((node.lineno, name))
    return found


def test_the_scan_finds_every_kind_of_read():
    tree = ast.parse("import os\nENV = 'AIOT_Q'\nos.environ.get('AIOT_A')\nos.getenv(ENV)\n"
                     "os.environ['AIOT_B']\n'AIOT_C' in os.environ\nos.environ['AIOT_D'] = '1'\n")
    found = environ_reads(tree, constants([tree]))
    assert [name for _, name in found] == ["AIOT_A", "AIOT_Q", "AIOT_B", "AIOT_C"]


def test_aiot_reads_its_variables_only_through_the_table():
    outside = []
    for module, (path, tree) in SOURCES.items():
        if module == "aiot.core.environment":
            continue
        for line, name in environ_reads(tree):
            row = environment.TABLE.get(name)
            agent = module.startswith("aiot.device_agent.")
            if agent and row is not None and row.side == environment.CHILD and module in row.readers:
                continue  # the agent imports nothing of aiot: it reads what the host set
            outside.append(f"{path.relative_to(ROOT)}:{line} reads {name}")
    assert not outside, "read through aiot.core.environment.get instead:\n" + "\n".join(outside)


def _named_in(paths) -> dict[str, str]:
    found = {}
    for path in paths:
        for name in NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_variable_the_code_names_is_in_the_table():
    files = [path for path, _ in SOURCES.values()] + [
        ROOT / "Makefile", ROOT / ".ci" / "run", *sorted((ROOT / "scripts").glob("*.sh"))]
    missing = {name: where for name, where in _named_in(files).items() if name not in environment.TABLE}
    assert not missing, f"add these to core/environment.py's table: {missing}"


def _module_file(module: str) -> Path:
    parts = module.split(".")[1:]
    folder = {"core": "core", "host": "host", "models": "models", "converters": "converters",
              "device_agent": "device_agent"}[parts[0]]
    path = ROOT / folder / Path(*parts[1:])
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


@pytest.mark.parametrize("row", environment.VARIABLES, ids=lambda v: v.name)
def test_each_rows_readers_name_it(row):
    """A row names the modules (or options, or files) that read it, and each of them does."""
    assert row.side in environment.SIDES and row.readers and row.meaning and row.default
    for reader in row.readers:
        first = reader.split()[0]
        if first.startswith("aiot."):
            text = _module_file(first).read_text(encoding="utf-8")
            constants = [c for c, v in CONSTANTS.items() if v == row.name]
            assert row.name in text or any(c in text for c in constants), (row.name, reader)
        elif first == "aiot":
            assert row.side == environment.OPTION and row.name in _option_envvars(), (row.name, reader)
        else:
            path = ROOT / first
            text = "".join(p.read_text(encoding="utf-8", errors="replace")
                           for p in ([path] if path.is_file() else sorted(path.rglob("*.py"))))
            assert row.name in text, (row.name, reader)


def _option_envvars() -> dict[str, str]:
    """``{variable: "aiot cmd --option"}`` of every option Click fills from an AIOT_ variable."""
    root = typer.main.get_command(app)
    context = root.make_context("aiot", [], resilient_parsing=True)
    found = {}

    def walk(command, path):
        for param in command.params:
            if param.param_type_name == "option" and param.envvar and str(param.envvar).startswith("AIOT_"):
                found[param.envvar] = " ".join([*path, param.opts[0]])
        for name in command.list_commands(context) if hasattr(command, "commands") else ():
            walk(command.get_command(context, name), (*path, name))

    walk(root, ("aiot",))
    return found


def test_every_option_read_from_a_variable_is_in_the_table():
    options = _option_envvars()
    assert "AIOT_RESULTS_DIR" in options and "AIOT_LAB" in options  # the walk sees the tree
    for name, option in options.items():
        row = environment.variable(name)
        assert row.side == environment.OPTION and option in row.readers, (name, option, row.readers)


def test_a_variable_outside_the_table_is_refused(monkeypatch):
    monkeypatch.setenv("AIOT_STORE_WAIT_S", " 12 ")
    assert environment.get("AIOT_STORE_WAIT_S") == " 12 " and environment.value("AIOT_STORE_WAIT_S") == "12"
    with pytest.raises(KeyError, match="AIOT_NOT_A_VARIABLE is not in"):
        environment.get("AIOT_NOT_A_VARIABLE")
