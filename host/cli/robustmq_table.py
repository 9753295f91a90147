"""``aiot paper robustmq``: run the grid (:mod:`aiot.host.robust.robustmq`) and print the
paper's tables in its shape (:mod:`aiot.host.robust.robustmq_tables`), the paper's ImageNet
numbers beside aiot's, then the paper's trends checked on aiot's numbers."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from aiot.converters.api import zoo_ref
from aiot.core.errors import UsageError
from aiot.host.cli._output import message, out, print_json, safe, spinner
from aiot.host.cli.options import split_list
from aiot.host.cli.wide_table import wide_tables
from aiot.host.engine.preflight import check_data_options
from aiot.host.robust.corrupt.imagenet_c import parse_corruptions, parse_severities
from aiot.host.robust.robustmq import Grid, check_grid, default_models, run_grid
from aiot.host.robust.robustmq_tables import paper, paper_cells, report
from aiot.models.quant.methods import METHODS, quantization

#: The paper's architecture shown for reading when the grid has none of its four.
_READING_ARCH = "ResNet18"


def build_grid(options: dict) -> Grid:
    """The checked :class:`~aiot.host.robust.robustmq.Grid` of the command's options (every
    name checked before any work)."""
    dataset, limit = options["dataset"], options["limit"]
    if dataset == "photos":
        raise UsageError("the photos have no labels: the grid's accuracies need them",
                         "pass --dataset fashion-mnist, digits or folder:PATH")
    dataset = check_data_options(None, dataset, limit)
    models = tuple(dict.fromkeys(zoo_ref(m, None).name for m in split_list(options["models"], "models"))) \
        if options["models"] else default_models(dataset)
    methods = tuple(dict.fromkeys(METHODS.canonical(m) for m in split_list(options["methods"], "methods")))
    bits = tuple(sorted({quantization(methods[0], b).bits for b in split_list(options["bits"], "bits")}))
    grid = Grid(models, methods, bits, dataset, limit, options["seed"],
                tuple(split_list(options["suites"], "suites")), tuple(split_list(options["attacks"], "attacks")),
                options["eps"], tuple(parse_corruptions(options["corruptions"])),
                tuple(parse_severities(options["severities"])), options["frames"] or None,
                options["epochs"], options["train_limit"])
    check_grid(grid)
    return grid


def run_and_print(grid: Grid, results_dir, fresh: bool, as_json: bool) -> dict:
    """Run (or resume) ``grid``, print its tables (or JSON), and return the report."""
    with spinner("RobustMQ grid…") as status:
        outcome = run_grid(grid, results_dir, fresh, progress=status.update)
    if outcome.resumed:
        message(f"resumed RobustMQ sweep {outcome.sweep_id}: {outcome.resumed} runs already done")
    result = report(grid, outcome.records, outcome.sweep_id)
    result["failures"] = outcome.failures
    if as_json:
        print_json(result)
    else:
        print_report(result)
    return result


def print_report(result: dict) -> None:
    """Every table in the paper's order, the trends, the failures, the paper's source."""
    for table in result["tables"]:
        if table["kind"] == "grid":
            out.print(_grid(table))
        else:  # 18 columns of corruptions or sequences: in parts on a narrow terminal
            out.print(*_detail(table), *_paper_detail(table, result["grid"]))
        for line in _reasons(table):
            out.print(f"  [yellow]{safe(line)}[/]")
    if result["trends"]:
        out.print(_trends(result["trends"]))
    for line in result.get("failures", []):
        out.print(f"[red]failed:[/] {safe(line)}")
    out.print(f"sweep {result['sweep']} · paper: {escape(result['paper']['source'])} "
              "(ImageNet, beside aiot's for reading only)")


def _fmt(fields: list[str], values) -> str:
    """``37.66 (39.56%)`` as the paper prints a cell; ``NC`` for the paper's unconverged."""
    if values == "NC":
        return "NC"
    values = values if isinstance(values, list) else [values]
    if any(v is None for v in values):
        return "—"
    if fields == ["mFP"]:
        return f"{values[0]:.3f}"
    text = f"{values[0]:.2f}"
    if len(values) > 1:
        text += f" ({values[1]:.2f}%)"
    if len(values) > 2:
        text += f" {values[2]:.2f}"
    return text


def _grid(table: dict) -> Table:
    view = Table("model", "method", *[f"{c}-bit" for c in table["columns"]],
                 title=f"Table {table['table']}: {escape(table['title'])} · aiot (paper's ImageNet below)")
    for row in table["rows"]:
        cells = []
        for column in table["columns"]:
            value = row["cells"].get(column)
            text = "" if column not in row["cells"] else (
                _fmt(table["fields"], value) if value is not None else "[yellow]—[/]")
            if column in row["paper"]:
                text += f"\n[dim]paper {_fmt(table['fields'], row['paper'][column])}[/]"
            cells.append(text)
        view.add_row(safe(row["model"]), row["method"], *cells)
    if not any(row["arch"] for row in table["rows"]):
        _reading_rows(view, table)
    return view


def _reading_rows(view: Table, table: dict) -> None:
    """The paper's ResNet18 rows under a grid of none of its architectures, for reading."""
    data = paper()["grids"][str(table["table"])]
    bits = [int(c) for c in table["columns"] if c != "32"]
    methods = list(dict.fromkeys(r["method"] for r in table["rows"]))
    for index, method in enumerate(methods):
        name = {"DoReFa-Net": "dorefa", "PACT": "pact", "LSQ": "lsq"}.get(method, "")
        shown = paper_cells(data, _READING_ARCH, name, bits, index == 0)
        view.add_row(f"[dim]paper {_READING_ARCH}[/]", f"[dim]{method}[/]",
                     *(f"[dim]{_fmt(table['fields'], shown[c])}[/]" if c in shown else ""
                       for c in table["columns"]))


def _detail(table: dict) -> list[Table]:
    digits = ".3f" if table["table"] == 8 else ".2f"
    rows = [[row["method"], str(row["bits"]),
             *("—" if v is None else v if v == "NC" else format(v, digits)
               for v in row["values"] or [None] * len(table["columns"]))]
            for row in table["rows"]]
    return wide_tables(f"Table {table['table']}: {escape(table['title'])} · aiot", ("method", "bits"),
                       [escape(c) for c in table["columns"]], rows, out.width)


def _paper_detail(table: dict, grid: dict) -> list[Table]:
    """The paper's rows of the same table (ResNet18 on ImageNet) at the grid's methods and widths."""
    data = table["paper"]
    wanted = {(m, b) for m in ("DoReFa", "PACT", "LSQ") for b in grid["bits"]
              if m.lower() in [x.lower() for x in grid["methods"]]}
    rows = [[row["method"], str(row["bits"]), *(v if v == "NC" else f"{v:g}" for v in row["values"])]
            for row in data["rows"] if row["method"] == "FP" or (row["method"], row["bits"]) in wanted]
    return wide_tables(f"Table {table['table']} in the paper ({data['architecture']}, ImageNet)",
                       ("method", "bits"), data["columns"], rows, out.width, style="dim")


def _reasons(table: dict) -> list[str]:
    """One line per distinct reason a grid cell has no value."""
    found: dict[str, list[str]] = {}
    for row in table.get("rows", []):
        for bits, why in row.get("why", {}).items():
            found.setdefault(why, []).append(f"{row['model']} {row['method']} {bits}-bit")
    return [f"{why}: {', '.join(cells[:4])}{', …' if len(cells) > 4 else ''}"
            for why, cells in found.items()]


def _trends(trends: list[dict]) -> Table:
    view = Table("model", "method", "the paper's trend", "low bits", "high bits", "on aiot's numbers",
                 title="The paper's headline trends, checked on aiot's numbers")
    for t in trends:
        digits = ".2f"
        view.add_row(safe(t["model"]), t["method"], t["claim"], f"{t['bits'][0]}-bit {t['low']:{digits}}",
                     f"{t['bits'][1]}-bit {t['high']:{digits}}",
                     "[green]holds[/]" if t["holds"] else "[yellow]does not hold[/]")
    return view
