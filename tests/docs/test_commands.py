"""Docs that cannot lie (issue 52): every ``aiot …`` line in a code block of README.md and
docs/ names a real command and subcommand with real options, parsed against the Click tree of
``aiot.host.cli.app``, and the quick ones run on ``local`` in an isolated store."""

from __future__ import annotations

import re

import pytest
import typer.main

from aiot.host.cli.app import app
from tests.docs.blocks import Command, commands

ROOT_COMMAND = typer.main.get_command(app)
CONTEXT = ROOT_COMMAND.make_context("aiot", [], resilient_parsing=True)
COMMANDS = commands()
#: Command paths cheap enough to run for every line that shows them (no conversion, no device
#: but ``local``, an empty store): a docs line that no longer runs fails here.
QUICK = {("devices", "list"), ("devices", "info"), ("models", "list"), ("convert",),
         ("toolchains", "list"), ("results", "list"), ("results", "check"), ("emulator", "list"),
         ("results", "export"), ("results", "top")}
#: Words that stand for something the reader fills in.
PLACEHOLDER = re.compile(r"^(\.\.\.|…|<.*>|[A-Z][A-Z0-9_]*|.*\$.*)$")


def _option(command, name: str):
    if name in ("--help", "-h"):
        return "flag"
    for param in command.params:
        if param.param_type_name == "option" and name in (*param.opts, *param.secondary_opts):
            return "flag" if param.is_flag or param.count else "value"
    return None


def parse(argv: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """The command path ``argv`` names and its problems (an unknown command or option)."""
    command, path, problems, words = ROOT_COMMAND, (), [], list(argv)
    while words:
        word = words.pop(0)
        if word in ("...", "…"):
            continue
        if word.startswith("-") and len(word) > 1:
            name, eq, _ = word.partition("=")
            kind = _option(command, name)
            if kind is None:
                problems.append(f"`aiot {' '.join(path)}` has no option {name}")
            elif kind == "value" and not eq and words:
                words.pop(0)
            continue
        if hasattr(command, "commands"):
            sub = command.get_command(CONTEXT, word)
            if sub is None:
                problems.append(f"`aiot {' '.join(path)}` has no command {word!r}")
                break
            command, path = sub, (*path, word)
        # a leaf's positional argument: what the reader fills in, not checked
    if hasattr(command, "commands") and not problems and not {"--help", "--version"} & set(argv) \
            and not command.invoke_without_command:  # `aiot predict -m MODEL` runs the group itself
        problems.append(f"`aiot {' '.join(path)}` needs a command")
    return path, problems


def test_the_docs_show_commands():
    """The parse below reads what it claims: the README's tour and the guide's pages."""
    where = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "docs/guide/getting-started.md", "docs/guide/campaigns.md"} <= where
    assert len(COMMANDS) > 100


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_every_command_line_names_real_commands_and_options(command: Command):
    path, problems = parse(command.argv)
    assert not problems, f"{command}: {'; '.join(problems)}"
    assert path, f"{command}: names no command"


def test_a_wrong_command_or_option_is_found():
    assert parse(("results", "lst"))[1] == ["`aiot results` has no command 'lst'"]
    assert parse(("sweep", "--threads", "1", "--no-such"))[1] == ["`aiot sweep` has no option --no-such"]
    assert parse(("results",))[1] == ["`aiot results` needs a command"]
    assert parse(("sweep", "...", "--cluster", "big,little")) == (("sweep",), [])


def _runnable(command: Command) -> bool:
    path, problems = parse(command.argv)
    if problems or path not in QUICK or (path == ("convert",) and "--list" not in command.argv):
        return False
    if any(PLACEHOLDER.match(word) for word in command.argv):
        return False
    devices = [command.argv[i + 1] for i, w in enumerate(command.argv[:-1]) if w in ("--device", "-d")]
    named = [w for w in command.argv[2:] if not w.startswith("-")] if path == ("devices", "info") else []
    return all(d == "local" for d in devices + named)


QUICK_LINES = sorted({c.argv: c for c in COMMANDS if _runnable(c)}.values(), key=str)


def test_the_quick_lines_are_found():
    paths = {parse(c.argv)[0] for c in QUICK_LINES}
    assert {("devices", "list"), ("models", "list"), ("convert",), ("results", "list")} <= paths


@pytest.mark.parametrize("command", QUICK_LINES, ids=str)
def test_the_quick_command_lines_run_on_local(command: Command, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what a line writes (an export's --out) lands here
    result = cli(*command.argv)
    assert result.exit_code == 0 and "Traceback" not in result.output, command
