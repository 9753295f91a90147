"""docs/reference/ is made from the code (scripts/docs_reference.py) and committed: it fails
here when a page differs from what the script makes now, and the pages name every command,
subcommand, option and AIOT_* variable."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from aiot.core import environment
from tests.docs.blocks import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_reference"] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
MADE = SCRIPT.pages()


@pytest.mark.parametrize("name", sorted(MADE))
def test_the_committed_page_is_what_the_code_makes(name):
    committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
    assert committed == MADE[name], (f"docs/reference/{name} is stale: run "
                                     "python scripts/docs_reference.py and commit the pages")


def test_the_cli_page_names_every_command_subcommand_and_option():
    page = MADE["cli.md"]
    tree, _ = SCRIPT.cli_tree()
    assert len(tree) > 60  # every group's commands were loaded
    for path, command in tree:
        assert f"#{'#' if len(path) > 1 else ''} {' '.join(path)}\n" in page, path
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in page, (path, param.opts)


def test_the_environment_page_names_every_variable():
    page = MADE["environment.md"]
    for row in environment.VARIABLES:
        assert f"### {row.name}\n" in page
    assert "{" not in page.split("## Read by aiot", 1)[1], "a default's {constant} was not filled in"


def test_the_other_pages_hold_their_facts():
    from aiot.device_agent import protocol
    from aiot.host.cli.record_view import CSV_COLUMNS
    from aiot.host.store.identity import KEY_SPEC

    assert all(f"### {event}\n" in MADE["protocol.md"] for event in protocol.EVENTS)
    assert "| `UsageError` | `aiot.core.errors` | 2 |" in MADE["exit-codes.md"]
    assert "| 143 | SIGTERM |" in MADE["exit-codes.md"]
    assert ", ".join(f"`{c}`" for c in CSV_COLUMNS) in MADE["records.md"]
    assert all(f"`{s}`" in MADE["records.md"] for s in KEY_SPEC)
    assert "**Configuration**" in MADE["records.md"]  # the identity terms


def test_the_check_mode_names_a_stale_page(tmp_path, monkeypatch, capsys):
    for name, text in MADE.items():
        (tmp_path / name).write_text(text if name != "cli.md" else text + "changed\n")
    monkeypatch.setattr(SCRIPT, "OUT", tmp_path)
    monkeypatch.setattr(SCRIPT, "pages", lambda: MADE)
    assert SCRIPT.main(["--check"]) == 1
    assert capsys.readouterr().out.strip() == (
        "stale: docs/reference/cli.md (run: python scripts/docs_reference.py)")
