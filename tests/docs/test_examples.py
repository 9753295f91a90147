"""The Python examples of the docs run (issue 52). The Python API's page runs as a notebook
would: its blocks in order in one namespace, its shell blocks' ``aiot`` lines through the CLI
between them, against this test's own store, measuring on ``local``; then the README's three
lines, on the sweep the page measured (its ``SWEEP_ID``). Every other page's Python blocks run
each on its own."""

from __future__ import annotations

import pytest

from tests.docs.blocks import ROOT, block_commands, blocks, doc_files

#: Pages whose blocks build on each other, run top to bottom.
IN_ORDER = (ROOT / "docs" / "guide" / "python-api.md",)
#: The README's example: the three lines, on a sweep the reader names.
README = ROOT / "README.md"
ALONE = [b for path in doc_files() if path not in (*IN_ORDER, README) for b in blocks(path)
         if b.lang == "python"]


def test_the_examples_are_found():
    assert ALONE, "docs/guide/ci.md's factory at least"
    assert sum(b.lang == "python" for b in blocks(IN_ORDER[0])) >= 5


@pytest.mark.parametrize("block", ALONE, ids=lambda b: b.where)
def test_a_python_example_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(block.text, block.where, "exec"), {"__name__": "__docs__"})


@pytest.mark.slow
@pytest.mark.parametrize("page", IN_ORDER, ids=lambda p: p.name)
def test_a_page_of_examples_runs_in_order(page, cli, tmp_path, monkeypatch):
    """Converts tiny_cnn to ONNX and measures it on local (a few seconds), as the page says."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    ran = []
    for block in blocks(page):
        if block.lang == "python":
            exec(compile(block.text, block.where, "exec"), namespace)
            ran.append(block.where)
        for command in block_commands(block):  # a shell block's aiot lines, as a user types them
            cli(*command.argv)
            ran.append(str(command))
    assert len(ran) >= 6
    # What the page promises: a sweep's runs as a DataFrame with the CSV export's columns.
    from aiot.host.cli.record_view import CSV_COLUMNS

    assert list(namespace["df"].columns) == list(CSV_COLUMNS) and len(namespace["df"]) == 1
    assert (tmp_path / "runs.parquet").is_file()

    (readme,) = [b for b in blocks(README) if b.lang == "python"]
    assert readme.text.count("\n") == 2, "three lines"
    mine = {"__name__": "__docs__"}
    exec(compile(readme.text.replace("SWEEP_ID", namespace["done"].id), readme.where, "exec"), mine)
    assert mine["df"]["sweep_id"].tolist() == [namespace["done"].id]
