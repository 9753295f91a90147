#!/usr/bin/env python3
"""Make the pages of ``docs/reference/`` from the code, so that they cannot drift from it.

=================  ============================================================================
``cli.md``         every command, subcommand, argument and option of the Typer app
``environment.md`` every ``AIOT_*`` variable, from the one table (``aiot.core.environment``)
``exit-codes.md``  the exit codes: the ``AiotError`` family (read from the source), signals,
                   the ``results compare`` gate
``records.md``     a record's columns, its spec/provenance/result fields
                   (``aiot.host.store.readable``), the identity terms
                   (``aiot.host.store.identity``) and the export's columns
``protocol.md``    the agent's wire format (``aiot.device_agent.protocol`` and ``.spec``)
=================  ============================================================================

The pages are committed, so they read on GitHub as they are; ``tests/docs/test_reference.py``
fails when one differs from what this script makes now. Usage::

    python scripts/docs_reference.py           # write the pages
    python scripts/docs_reference.py --check   # exit 1 naming the stale pages
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import re
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"
#: The first line of every page: it is made, not written.
MADE = "<!-- Made by scripts/docs_reference.py from the code: edit the code, then run it. -->\n\n"
#: Source folders and the package each installs as (pyproject.toml's package-dir).
PACKAGES = {"core": "aiot.core", "host": "aiot.host", "converters": "aiot.converters",
            "models": "aiot.models", "device_agent": "aiot.device_agent"}


# -- text ------------------------------------------------------------------------------------


def markdown(text: str) -> str:
    """A docstring (reST-ish) as Markdown: ``x`` and :role:`x` as code, ``::`` blocks kept."""
    text = inspect.cleandoc(text or "")
    text = re.sub(r":(?:func|mod|class|data|meth|attr|exc):`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    text = re.sub(r"::\n", ":\n", text)
    # A block indented 4 spaces (a table of events, a JSON example) is kept as it is, fenced:
    # Markdown would join it to the paragraph above it.
    out, block = [], []
    for line in text.split("\n"):
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line[4:])
            continue
        if block:
            tail = []
            while block and not block[-1].strip():
                tail.append(block.pop())
            out += ["", "```text", *block, "```", *tail]
            block = []
        out.append(line)
    if block:
        out += ["", "```text", *block, "```"]
    return "\n".join(out)


def help_text(text: str | None) -> str:
    """An option's or a command's help as Markdown: Rich's escapes dropped, pipes kept."""
    # `<zoo>` would be an HTML tag to Markdown; `\\[` is Rich's escape of a bracket.
    return (text or "").replace("\\[", "[").replace("<", "&lt;").strip()


def first_line(text: str | None) -> str:
    """A docstring's first paragraph on one line, as Markdown."""
    return markdown(text).split("\n\n")[0].replace("\n", " ").strip()


def cell(text: str) -> str:
    """Text for a Markdown table's cell: its backslashes and pipes kept as they are."""
    return text.replace("\\", "\\\\").replace("|", "\\|")


def type_text(annotation) -> str:
    """``str | None`` as `str` or `None`: a pipe would split a Markdown table's cell."""
    return " or ".join(code(part.strip()) for part in str(annotation).split("|"))


def code(value) -> str:
    return f"`{value}`"


# -- the CLI ---------------------------------------------------------------------------------


def cli_root():
    """The Click command of ``aiot`` (its groups load their modules as they are walked)."""
    import typer.main

    from aiot.host.cli.app import app

    return typer.main.get_command(app)


def cli_tree():
    """``[(path, command)]``, depth first in ``--help``'s order, hidden commands left out."""
    root = cli_root()
    context = root.make_context("aiot", [], resilient_parsing=True)
    found = []

    def walk(command, path):
        found.append((path, command))
        for name in subcommands(command, context):
            walk(command.get_command(context, name), (*path, name))

    walk(root, ("aiot",))
    return found, context


def subcommands(command, context) -> list[str]:
    """The names of a group's visible commands (none for a command)."""
    if not hasattr(command, "commands"):
        return []
    return [name for name in command.list_commands(context)
            if (sub := command.get_command(context, name)) is not None and not sub.hidden]


def _default(param) -> str | None:
    default = param.default
    if callable(default) or default in (None, (), []) or param.name in ("help",):
        return None
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return None
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    if isinstance(default, (list, tuple)):
        default = ",".join(map(str, default))
    return str(default)


def _param_line(param, context) -> str:
    if param.param_type_name == "argument":
        name = (param.metavar or param.name).upper()
        optional = "" if param.required else " (optional)"
        return f"- {code(name)}{optional}: {help_text(getattr(param, 'help', None))}".rstrip(": ")
    names = ", ".join(code(o) for o in (*param.opts, *param.secondary_opts))
    kind = "" if getattr(param, "is_flag", False) else (
        f" {code(param.metavar or param.display_type(context).strip('<>').upper())}")
    facts = []
    default = _default(param)
    if default is not None:
        facts.append(f"default {code(default)}")
    if param.envvar:
        facts.append(f"env [{code(param.envvar)}](environment.md#{param.envvar.lower()})")
    if getattr(param, "multiple", False):
        facts.append("repeatable")
    if param.required:
        facts.append("required")
    tail = f" ({'; '.join(facts)})" if facts else ""
    return f"- {names}{kind}{tail}: {help_text(param.help)}".rstrip(": ")


def cli_page() -> str:
    tree, context = cli_tree()
    lines = [MADE, "# CLI reference\n\n",
             "Every command, subcommand, argument and option of `aiot`, as `aiot … --help` has "
             "them. A command's options go after its name (`aiot results list --json`); the "
             "root's options before it (`aiot --results-dir R report`).\n\n"]
    lines.append("| command | what it does |\n|---|---|\n")
    for path, command in tree[1:]:
        summary = first_line(command.short_help or command.help).replace("|", "\\|")
        lines.append(f"| [`{' '.join(path)}`](#{'-'.join(path)}) | {summary} |\n")
    for path, command in tree:
        depth = min(len(path) + 1, 4)
        lines.append(f"\n{'#' * depth} {' '.join(path)}\n\n")
        if command.help:
            lines.append(help_text(command.help) + "\n\n")
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        arguments = [p for p in params if p.param_type_name == "argument"]
        options = [p for p in params if p.param_type_name == "option"]
        subs = subcommands(command, context)
        usage = " ".join([*path, *(["[OPTIONS]"] if options else []),
                          *(["COMMAND"] if subs else []),
                          *((p.metavar or p.name).upper() for p in arguments)])
        lines.append(f"```text\n{usage}\n```\n\n")
        if arguments:
            lines.append("Arguments:\n\n" + "".join(_param_line(p, context) + "\n" for p in arguments) + "\n")
        if options:
            lines.append("Options:\n\n" + "".join(_param_line(p, context) + "\n" for p in options) + "\n")
        if subs:
            lines.append("Commands: " + ", ".join(f"[`{s}`](#{'-'.join((*path, s))})" for s in subs)
                         + ".\n")
    return "".join(lines).rstrip() + "\n"


def option_default(reader: str):
    """The default of the option ``aiot cmd … --name`` names (for ``{option}``)."""
    *path, option = reader.split()
    tree, _ = cli_tree()
    command = dict(tree)[tuple(path)]
    (param,) = [p for p in command.params if option in getattr(p, "opts", ())]
    return _default(param)


# -- the environment -------------------------------------------------------------------------


def _resolve(default: str, variable) -> str:
    def constant(match: re.Match) -> str:
        if match.group(1) == "option":
            reader = next(r for r in variable.readers if r.startswith("aiot "))
            return str(option_default(reader))
        module, _, name = match.group(1).rpartition(".")
        value = getattr(importlib.import_module(module), name)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value)

    return re.sub(r"\{([\w.]+)\}", constant, default)


SIDE_TITLES = {"host": "Read by aiot", "option": "Defaults of options (read by the CLI)",
               "child": "Set by aiot for the processes it starts",
               "tests": "The tests and scripts"}


def environment_page() -> str:
    from aiot.core import environment

    lines = [MADE, "# Environment variables\n\n",
             "Every `AIOT_*` variable, from the one table in `core/environment.py`. aiot's code "
             "reads them through `aiot.core.environment.get`; `tests/docs/test_environment.py` "
             "fails on a variable read anywhere else, or missing from the table.\n\n",
             # the docstring's kinds of reader (not its first lines, nor its note on defaults)
             markdown("\n\n".join(inspect.cleandoc(environment.__doc__).split("\n\n")[2:-1]))
             + "\n\n",
             "| variable | what it does |\n|---|---|\n"]
    lines += [f"| [`{v.name}`](#{v.name.lower()}) | {v.meaning.replace('|', '/')} |\n"
              for v in environment.VARIABLES]
    lines.append("\n")
    for side in environment.SIDES:
        rows = [v for v in environment.VARIABLES if v.side == side]
        lines.append(f"## {SIDE_TITLES[side]}\n\n")
        for v in rows:
            readers = ", ".join(code(r) for r in v.readers)
            lines.append(f"### {v.name}\n\n{v.meaning}\n\n- default: {_resolve(v.default, v)}\n"
                         f"- read by: {readers}\n\n")
    return "".join(lines).rstrip() + "\n"


# -- exit codes ------------------------------------------------------------------------------


def error_classes() -> list[tuple[str, str, int, str]]:
    """``(class, module, exit code, first docstring line)`` of every ``AiotError`` subclass in
    the source (read, not imported: heavy modules stay unimported), sorted by code and name."""
    classes: dict[str, tuple[str, list[str], int | None, str]] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = ".".join([package, *path.relative_to(ROOT / folder).with_suffix("").parts])
            module = module.removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                code_ = next((s.value.value for s in node.body if isinstance(s, ast.Assign)
                              and any(getattr(t, "id", "") == "exit_code" for t in s.targets)
                              and isinstance(s.value, ast.Constant)), None)
                classes.setdefault(node.name, (module, bases, code_, ast.get_docstring(node) or ""))

    def exit_code(name: str, seen=()) -> int | None:
        module, bases, own, _ = classes[name]
        if own is not None or name == "AiotError":
            return own
        for base in bases:
            if base in classes and base not in seen:
                found = exit_code(base, (*seen, name))
                if found is not None:
                    return found
        return None

    def is_error(name: str, seen=()) -> bool:
        return name == "AiotError" or any(
            b in classes and b not in seen and is_error(b, (*seen, name)) for b in classes[name][1])

    rows = [(name, classes[name][0], exit_code(name), first_line(classes[name][3]))
            for name in classes if is_error(name)]
    return sorted(rows, key=lambda r: (r[2], r[1], r[0]))


def exit_codes_page() -> str:
    import typer

    from aiot.core import errors
    from aiot.host.cli import app, results_compare

    # Click's usage errors (an unknown option, a missing argument): Typer vendors Click.
    usage_code = typer.BadParameter.exit_code
    lines = [MADE, "# Exit codes\n\n", markdown(errors.__doc__) + "\n\n",
             "| code | when |\n|---|---|\n",
             "| 0 | the command did what it was asked |\n",
             f"| {errors.AiotError.exit_code} | a failure: an `AiotError` of exit "
             f"{errors.AiotError.exit_code} (the family below), or a command whose work failed "
             "(a failed run of a sweep, a damaged store found by `results check`) |\n",
             f"| {errors.UsageError.exit_code} | input the user must fix: the errors of exit "
             f"{errors.UsageError.exit_code} below, and Click's own usage errors (an unknown "
             f"option, a missing argument: exit {usage_code}) |\n",
             f"| {results_compare.INCOMPLETE_EXIT} | `aiot results compare` only: B is "
             "incomplete (below) |\n"]
    compare = results_compare.__doc__.split("Its exit codes:", 1)[1].split("\n\n")[0]
    lines.append("\n## Signals\n\nA stopped command keeps its finished records and marks its "
                 "unfinished ones failed with the cause.\n\n| code | signal | how aiot "
                 "takes it |\n|---|---|---|\n")
    endings = {128 + signal.SIGINT: ("SIGINT", "Ctrl-C: Python's KeyboardInterrupt")}
    for signum, ending in app._ENDING.items():
        endings[ending.exit_code] = (signal.Signals(signum).name, first_line(ending.__doc__))
    for exit_code, (name, how) in sorted(endings.items()):
        lines.append(f"| {exit_code} | {name} | {cell(how)} |\n")
    lines.append(f"\n## The `results compare` gate\n\nIts exit codes: {' '.join(compare.split())}\n")
    lines.append("\n## The error family\n\nEvery expected failure is one of these (a bug keeps "
                 "its traceback). Each prints one `error:` line and, where it has one, a "
                 "`hint:` line.\n\n| error | module | exit | what it is |\n|---|---|---|---|\n")
    for name, module, exit_code, doc in error_classes():
        lines.append(f"| `{name}` | `{module}` | {exit_code} | {cell(doc)} |\n")
    return "".join(lines).rstrip() + "\n"


# -- records ---------------------------------------------------------------------------------


def _kind(kind) -> str:
    from aiot.host.store import readable

    if isinstance(kind, readable.Map):
        return f"object of {_kind(kind[1])}"
    if isinstance(kind, readable.Of):
        return f"list of {_kind(kind[1])}" if not isinstance(kind[1], dict) else "list of objects"
    if isinstance(kind, tuple):
        return " or ".join(_kind(k) for k in kind)
    if isinstance(kind, dict):
        return "object"
    return {"scalar": "plain value", "obj": "object", "num": "number", "int": "integer"}.get(kind, kind)


def _fields(schema: dict, prefix: str):
    from aiot.host.store import readable

    for name, kind in schema.items():
        required = name.endswith("!")
        path = f"{prefix}.{name.rstrip('!')}"
        yield path, _kind(kind) + (" (required)" if required else "")
        inner = kind[1] if isinstance(kind, readable.Of) else kind
        if isinstance(inner, dict):
            yield from _fields(inner, path + ("[]" if isinstance(kind, readable.Of) else ""))


def records_page() -> str:
    from aiot.host.cli import record_view
    from aiot.host.store import identity, readable, store

    lines = [MADE, "# Records\n\n", markdown(store.__doc__.split("\n\n")[0]) + "\n\n",
             "## Columns\n\n", first_line(store.RunRecord.__doc__) + " Statuses: "
             + ", ".join(code(s) for s in store.STATUSES) + ".\n\n",
             "| column | type |\n|---|---|\n"]
    for field in dataclasses.fields(store.RunRecord):
        lines.append(f"| `{field.name}` | {type_text(field.type)} |\n")
    lines.append("\n## Fields of spec, provenance and result\n\n"
                 + markdown(readable.__doc__.split("\n\n")[0]) + "\n\n")
    for part, schema in readable.SCHEMA.items():
        lines.append(f"### {part}\n\n| field | kind |\n|---|---|\n")
        lines += [f"| `{path}` | {kind} |\n" for path, kind in _fields(schema, part)]
        lines.append("\n")
    lines.append("## Identity\n\n" + markdown(identity.__doc__) + "\n\n"
                 "A key is made of the record's columns "
                 + ", ".join(code(c) for c in identity.KEY_COLUMNS) + " and its spec's "
                 + ", ".join(code(s) for s in identity.KEY_SPEC) + ".\n\n")
    lines.append("## Export columns\n\n`aiot results export --format csv` and `--format parquet`, and the Python "
                 "API's `Store.runs()`, have these columns, in this order:\n\n"
                 + ", ".join(code(c) for c in record_view.CSV_COLUMNS) + ".\n")
    return "".join(lines).rstrip() + "\n"


# -- the protocol ----------------------------------------------------------------------------


def _event_fields(fields: dict, indent: int = 0):
    for name, kind in fields.items():
        optional = name.endswith("?")
        shown = name.rstrip("?")
        pad = "  " * indent
        if isinstance(kind, dict):
            yield f"{pad}- `{shown}`{' (optional)' if optional else ''}: object\n"
            yield from _event_fields(kind, indent + 1)
        elif isinstance(kind, list):
            item = kind[0]
            if isinstance(item, dict):
                yield f"{pad}- `{shown}`{' (optional)' if optional else ''}: list of objects\n"
                yield from _event_fields(item, indent + 1)
            else:
                yield f"{pad}- `{shown}`{' (optional)' if optional else ''}: list of `{item}`\n"
        else:
            yield f"{pad}- `{shown}`{' (optional)' if optional else ''}: `{kind}`\n"


def _kinds_legend(path: Path) -> str:
    """The comment that defines the field kinds, above ``STR_CAP`` in protocol.py, as Markdown
    (its table of kinds fenced)."""
    text = path.read_text(encoding="utf-8")
    block = text[text.index("# -- what each event carries"):text.index("#: Characters of a")]
    comment = [line[2:] if line.startswith("# ") else line[1:] for line in block.splitlines()[2:]]
    prose, _, kinds = "\n".join(comment).strip().partition("\n\n")
    return markdown(prose) + "\n\n```text\n" + inspect.cleandoc(kinds) + "\n```"


def _spec_comments(path: Path) -> dict[str, str]:
    """Each RunSpec field's ``#:`` comment (on its line or the lines above it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, above = {}, []
    for line in lines:
        stripped = line.strip()
        match = re.match(r"(\w+): [^=]+(?:= [^#]+)?(?:#: (.*))?$", stripped)
        if stripped.startswith("#:"):
            above.append(stripped[2:].strip())
        elif match and line.startswith("    ") and not line.startswith("     "):
            found[match.group(1)] = " ".join([*above, match.group(2) or ""]).strip()
            above = []
        else:
            above = []
    return found


def protocol_page() -> str:
    from aiot.device_agent import protocol, spec

    lines = [MADE, "# The agent's protocol\n\n",
             f"Protocol version {protocol.PROTOCOL_VERSION}: every machine-readable line the "
             f"agent prints starts with `{protocol.PREFIX.strip()} ` (`PREFIX`), then one JSON "
             "object. Defined in `device_agent/protocol.py`; the run spec in "
             "`device_agent/spec.py`.\n\n",
             "## Events\n\n", markdown(protocol.__doc__.split("\n\n", 1)[1]) + "\n\n",
             "## What each event carries\n\n", _kinds_legend(Path(protocol.__file__)) + "\n\n",
             f"Limits: `STR_CAP` {protocol.STR_CAP} characters, `LIST_CAP` "
             f"{protocol.LIST_CAP:,} items, `DEPTH_CAP` {protocol.DEPTH_CAP} levels.\n\n"]
    for event in protocol.EVENTS:
        lines.append(f"### {event}\n\n")
        lines += list(_event_fields(protocol.FIELDS.get(event, {})))
        lines.append("\n")
    lines.append("## Answers\n\nThe event that answers each command, exactly one per request:\n\n"
                 "| command | answer |\n|---|---|\n")
    lines += [f"| `{c}` | `{e}` |\n" for c, e in protocol.ANSWERS.items()]
    comments = _spec_comments(Path(spec.__file__))
    lines.append(f"\n## The run spec (version {spec.RUN_SPEC_VERSION})\n\n"
                 + markdown(spec.__doc__) + "\n\n"
                 + markdown(spec.RunSpec.__doc__) + "\n\n| field | type | default | meaning |\n"
                 "|---|---|---|---|\n")
    for field in dataclasses.fields(spec.RunSpec):
        default = "required" if field.default is dataclasses.MISSING else code(repr(field.default))
        meaning = markdown(comments.get(field.name, "")).replace("|", "/").replace("\n", " ")
        lines.append(f"| `{field.name}` | {type_text(field.type)} | {default} | {meaning} |\n")
    lines.append("\nLeft off the wire while unset: "
                 + ", ".join(code(k) for k in spec.SENT_WHEN_SET) + ".\n")
    return "".join(lines).rstrip() + "\n"


PAGES = {"cli.md": cli_page, "environment.md": environment_page,
         "exit-codes.md": exit_codes_page, "records.md": records_page,
         "protocol.md": protocol_page}


def pages() -> dict[str, str]:
    """Every reference page's text, by file name."""
    return {name: make() for name, make in PAGES.items()}


def stale(made: dict[str, str]) -> list[str]:
    """The pages whose committed text differs from ``made`` (or that are missing)."""
    return [name for name, text in made.items()
            if not (OUT / name).is_file() or (OUT / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale")
    args = parser.parse_args(argv)
    made = pages()
    if args.check:
        old = stale(made)
        for name in old:
            print(f"stale: docs/reference/{name} (run: python scripts/docs_reference.py)")
        return 1 if old else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in made.items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote docs/reference/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
