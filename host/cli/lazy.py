"""A command group that imports a command's module only when the command is used.

Its table names each command, the module under ``aiot.host.cli`` that defines it and the first
paragraph of its help: the group's help and the completion of a command's name come from the
table, so listing the commands imports none of them. tests/cli/test_cli_lazy.py checks every
table against the real commands.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from contextlib import contextmanager

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

Command = TyperCommand | TyperGroup  # what Typer builds for a command or a group
Table = dict[str, tuple[str, str]]  # name -> (module under aiot.host.cli, first paragraph of help)


def load_commands(table: Table, module_name: str, rich_markup_mode=None) -> dict[str, Command]:
    """The Click commands one CLI module defines, built as Typer builds them: a module with
    ``register(app)`` adds its commands itself; a group module's ``app`` is added by the name(s)
    ``table`` gives it."""
    module = importlib.import_module(f"aiot.host.cli.{module_name}")
    holder = typer.Typer() if rich_markup_mode is None else typer.Typer(rich_markup_mode=rich_markup_mode)
    if hasattr(module, "register"):
        module.register(holder)
    else:
        for name, (owner, _) in table.items():
            if owner == module_name:
                holder.add_typer(module.app, name=name)
    commands = dict(typer.main.get_group(holder).commands)
    for command in commands.values():
        _reflow_help(command)
    return commands


def reflow(text: str) -> str:
    """A docstring's paragraphs with their source line breaks joined: Typer's Rich help keeps
    the single line breaks of every paragraph after the first, so a help text wrapped at 100
    columns in the source came out ragged at any other width. A paragraph whose lines start
    with a list mark or an indent keeps its lines."""
    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        lines = paragraph.split("\n")
        kept = any(line[:1] in (" ", "-", "*", "\b") for line in lines[1:])
        paragraphs.append(paragraph if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def _reflow_help(command: Command) -> None:
    if command.help:
        command.help = reflow(command.help)
    subcommands = getattr(command, "commands", {})
    if not isinstance(subcommands, _LazyCommands):  # a lazy group's are reflowed as they load
        for sub in subcommands.values():
            _reflow_help(sub)


class _LazyCommands(MutableMapping):
    """A group's commands: the names from its table, each module imported on first use."""

    def __init__(self, table: Table, commands: dict[str, Command], rich_markup_mode):
        self._table = table
        self._loaded = dict(commands)
        self._markup = rich_markup_mode

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in self._table:
            self._loaded.update(load_commands(self._table, self._table[name][0], self._markup))
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self):
        yield from self._table
        yield from (name for name in self._loaded if name not in self._table)

    def __len__(self) -> int:
        return len(self._table) + sum(name not in self._table for name in self._loaded)


class LazyGroup(TyperGroup):
    """A group whose commands come from :attr:`TABLE` (set by a subclass), each module
    imported when its command is used."""

    TABLE: Table = {}

    def __init__(self, **attrs):
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.TABLE, self.commands, self.rich_markup_mode)
        self._summaries = False

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx, cmd_name: str) -> Command | None:
        if self._summaries and cmd_name in self.TABLE:
            # Listing (the group's help, completing a command's name): the table says enough.
            return TyperCommand(cmd_name, help=self.TABLE[cmd_name][1])
        return super().get_command(ctx, cmd_name)

    @contextmanager
    def _listing(self):
        self._summaries = True
        try:
            yield
        finally:
            self._summaries = False

    def format_help(self, ctx, formatter) -> None:
        with self._listing():
            return super().format_help(ctx, formatter)

    def shell_complete(self, ctx, incomplete: str):
        with self._listing():
            return super().shell_complete(ctx, incomplete)
