"""The root lists its commands from a static table (``aiot.host.cli.app.COMMANDS``) and imports a
command's module only when it is used: the table must say what the real commands say."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections import defaultdict

from aiot.host.cli.app import COMMANDS, load_commands


def test_the_table_names_every_command_with_its_own_help():
    by_module = defaultdict(list)
    for name, (module, _) in COMMANDS.items():
        by_module[module].append(name)
    for module, names in by_module.items():
        real = load_commands(module)
        assert sorted(real) == sorted(names), module
        for name in names:
            command = real[name]
            help_text = inspect.cleandoc(command.short_help or command.help or "")
            assert help_text.split("\n\n")[0].strip() == COMMANDS[name][1], name
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
