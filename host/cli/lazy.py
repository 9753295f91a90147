"""A command group that imports a command's module only when the command is used.

Its table names each command, the module under ``aiot.host.cli`` that defines it and the first
paragraph of its help: the group's help and the completion of a command's name come from the
table, so listing the commands imports none of them. tests/cli/test_cli_lazy.py checks every
table against the real commands.

A group's own options (the root's --results-dir, ``aiot predict``'s --model) are processed
before a subcommand's ``--help`` exits, and Typer checks each value with pydantic, whose import
alone costs ~60 ms: :func:`as_given` lets a value that needs no checking skip it.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass

import typer
import typer.main
from typer import _click as click
from typer.core import TyperCommand, TyperGroup

try:  # Typer's private coercion API (0.29): without it, as_given does nothing
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - another Typer
    RuntimeParam = None

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
        _groups_as_given(command)
    return commands


if RuntimeParam is not None:
    @dataclass(frozen=True)
    class _AsGiven(RuntimeParam):
        """A value already of the parameter's type (a default, any string from the command
        line) as it is, as Typer's own coercion would return it; any other value to that
        coercion, built (pydantic imported) only then."""

        def _coerce_value(self, value, param, ctx):
            if type(value) is self.annotation:
                return value
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def as_given(params: list) -> None:
    """Let a ``str``, ``int`` or ``bool`` option or argument without a parser or a range skip
    Typer's coercion when its value is already of that type (or None): pydantic is then
    imported only when a value needs converting (``--threads 4``), not for ``aiot devices
    --help``. A no-op when Typer's private API is not the one this was written for."""
    if RuntimeParam is None:
        return
    for param in params:
        described = getattr(param, "type_descriptor", None)
        info = getattr(described, "parameter_info", None)
        if (getattr(param, "_runtime_param", False) is None and info is not None
                and described.annotation in (str, int, bool) and getattr(info, "parser", None) is None
                and getattr(info, "click_type", None) is None
                and getattr(info, "min", None) is None and getattr(info, "max", None) is None):
            param._runtime_param = _AsGiven(annotation=described.annotation, parameter_info=info)


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


def _groups_as_given(command: Command) -> None:
    """:func:`as_given` for the options of a group and of the groups inside it (processed
    before their subcommands' ``--help``)."""
    subcommands = getattr(command, "commands", None)
    if subcommands is None or isinstance(subcommands, _LazyCommands):  # a lazy group does its own
        return
    # Its --help too (None when not asked), built here as the group would build it.
    as_given(command.get_params(click.Context(command, **command.context_settings)))
    for sub in subcommands.values():
        _groups_as_given(sub)


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

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        as_given(self.get_params(ctx))  # here: Typer adds --install-completion after __init__
        return super().parse_args(ctx, args)

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
