"""The root and ``aiot robust`` list their commands from a static table (``aiot.host.cli.lazy``)
and import a command's module only when it is used: each table must say what the real commands
say."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections import defaultdict

import pytest
import typer
import typer.main

from aiot.host.cli.app import COMMANDS
from aiot.host.cli.lazy import load_commands, reflow
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


def _help_in_a_fresh_process(args: list[str], prefixes: tuple[str, ...]) -> tuple[str, str]:
    """``aiot ARGS`` (a help screen) in a fresh interpreter: its stdout, and the line listing
    the loaded modules that start with one of ``prefixes``."""
    code = (
        "import sys\n"
        "from aiot.host.cli.app import app\n"
        "try:\n"
        f"    app({args!r}, prog_name='aiot')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in sys.modules if m.startswith({prefixes!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout, done.stdout.strip().splitlines()[-1]


def test_the_root_help_imports_no_command_module():
    stdout, loaded = _help_in_a_fresh_process(["--help"], ("aiot.host.", "torch", "numpy"))
    assert "Commands" in stdout and "sweep" in stdout
    for module, _ in COMMANDS.values():
        assert f"'aiot.host.cli.{module}'" not in loaded
    for heavy in ("'aiot.host.engine", "'torch'", "'numpy'"):
        assert heavy not in loaded


def test_a_command_is_found_and_runs_through_the_table(cli):
    assert cli("devices", "--help").stdout.count("Usage: aiot devices") == 1
    typo = cli("swep", code=2)
    assert "Did you mean 'sweep'?" in typo.stderr


def test_the_robust_help_imports_no_suite(cli):
    stdout, loaded = _help_in_a_fresh_process(["robust", "--help"], ("aiot.host.", "numpy"))
    assert "sysnoise" in stdout and "attack" in stdout
    assert "robust_" not in loaded and "'numpy'" not in loaded, loaded
    assert "robust attack [OPTIONS]" in cli("robust", "attack", "--help").stdout


def test_a_help_paragraph_after_the_first_is_reflowed_but_a_list_keeps_its_lines():
    text = "First line\nof the summary.\n\nSecond paragraph,\nwrapped in the source.\n\n- one\n- two"
    assert reflow(text) == ("First line of the summary.\n\nSecond paragraph, wrapped in the source."
                            "\n\n- one\n- two")
    real = load_commands(COMMANDS, COMMANDS["sweep"][0])["sweep"]
    assert "running the same command again resumes" in real.help  # joined: no source break left


@pytest.mark.parametrize("args", [["devices", "--help"], ["predict", "fit", "--help"],
                                  ["--results-dir", "x", "--store-wait", "5", "devices", "list", "--help"]])
def test_a_subcommands_help_imports_no_pydantic(args):
    """Issue 53: the options of the groups above a page (the root's --results-dir, aiot
    predict's --model) are processed before its --help exits; a string (or a default) is kept as
    given instead of checked by pydantic, whose import alone costs ~60 ms."""
    stdout, loaded = _help_in_a_fresh_process(args, ("pydantic",))
    assert "Usage: aiot" in stdout
    assert loaded == "LOADED []", loaded


def test_a_value_that_needs_converting_is_still_converted_and_checked(cli, monkeypatch):
    """Kept as given only when already of its type: ``--threads 4`` still goes through Typer's
    coercion (to an int), and a bad value still fails as before."""
    from typer._click.exceptions import BadParameter

    from aiot.host.cli.lazy import as_given

    app = typer.Typer()

    @app.command()
    def show(threads: int = 1, name: str | None = None) -> None: ...

    command = typer.main.get_command(app)
    as_given(command.params)
    assert all(type(p._runtime_param).__name__ == "_AsGiven" for p in command.params)
    assert command.make_context("show", ["--threads", "4", "--name", "x"]).params == {
        "threads": 4, "name": "x"}
    assert command.make_context("show", []).params == {"threads": 1, "name": None}
    with pytest.raises(BadParameter, match="valid integer"):
        command.make_context("show", ["--threads", "four"])
    monkeypatch.setenv("AIOT_STORE_WAIT_S", "300")  # --store-wait sets it: restored after
    assert "number" in cli("--store-wait", "soon", "devices", "list", code=2).stderr


def test_the_measure_options_defaults_are_the_engines():
    """aiot run and sweep show SweepSpec's defaults and --input-shape's grammar without
    importing the engine (issue 53): the copies in aiot.host.cli.measure are the engine's."""
    from aiot.host.cli import measure
    from aiot.host.engine.input_shapes import SYNTAX
    from aiot.host.engine.runs import MeasureParams
    from aiot.host.engine.spec import SweepSpec

    spec = SweepSpec(devices=())
    assert measure.SWEEP == {name: getattr(spec, name) for name in measure.SWEEP}
    assert measure.SHAPE_SYNTAX == SYNTAX
    timing = MeasureParams()
    for name in ("warmup_runs", "warmup_min_s", "min_runs", "min_s", "max_s"):
        assert measure.TIMING[name] == getattr(timing, name)
