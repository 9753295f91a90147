"""The root and ``aiot robust`` list their commands from a static table (``aiot.host.cli.lazy``)
and import a command's module only when it is used: each table must say what the real commands
say."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections import defaultdict

import pytest

from aiot.host.cli.app import COMMANDS
from aiot.host.cli.lazy import load_commands
from aiot.host.cli.robust import SUITES


@pytest.mark.parametrize("table", [COMMANDS, SUITES], ids=["aiot", "aiot robust"])
def test_the_table_names_every_command_with_its_own_help(table):
    by_module = defaultdict(list)
    for name, (module, _) in table.items():
        by_module[module].append(name)
    for module, names in by_module.items():
        real = load_commands(table, module)
        assert sorted(real) == sorted(names), module
        for name in names:
            command = real[name]
            help_text = inspect.cleandoc(command.short_help or command.help or "")
            assert help_text.split("\n\n")[0].strip() == table[name][1], name
            assert not command.deprecated, name
            assert not getattr(command, "rich_help_panel", None), name
            assert not command.hidden, name


def test_the_root_help_imports_no_command_module():
    code = (
        "import sys\n"
        "from aiot.host.cli.app import app\n"
        "try:\n"
        "    app(['--help'], prog_name='aiot')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('aiot.host.', 'torch', 'numpy'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands" in done.stdout and "sweep" in done.stdout
    loaded = done.stdout.strip().splitlines()[-1]
    for module, _ in COMMANDS.values():
        assert f"'aiot.host.cli.{module}'" not in loaded
    for heavy in ("'aiot.host.engine", "'torch'", "'numpy'"):
        assert heavy not in loaded


def test_a_command_is_found_and_runs_through_the_table(cli):
    assert cli("devices", "--help").stdout.count("Usage: aiot devices") == 1
    typo = cli("swep", code=2)
    assert "Did you mean 'sweep'?" in typo.stderr


def test_the_robust_help_imports_no_suite(cli):
    code = (
        "import sys\n"
        "from aiot.host.cli.app import app\n"
        "try:\n"
        "    app(['robust', '--help'], prog_name='aiot')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('aiot.host.', 'numpy'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "sysnoise" in done.stdout and "attack" in done.stdout
    loaded = done.stdout.strip().splitlines()[-1]
    assert "robust_" not in loaded and "'numpy'" not in loaded, loaded
    assert "robust attack [OPTIONS]" in cli("robust", "attack", "--help").stdout
