"""``aiot models``: the model zoo."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="The model zoo: architectures, inputs, complexity.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def _describe(spec, facts: dict) -> dict:
    return {
        "name": spec.name, "family": spec.family, "variant": spec.variant, "paper": spec.paper,
        "input": spec.input.to_dict(), "num_classes": spec.num_classes,
        "params": facts["params"], "macs": facts["macs"],
        "reference_flops_m": spec.reference_flops_m, "description": spec.description,
    }


def _facts_with_progress(names: list[str]) -> dict:
    from aiot.host.cli._output import err, progress_enabled
    from aiot.host.model_facts import complexities

    if not progress_enabled():
        return complexities(names)
    from rich.progress import Progress

    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("counting parameters and MACs", total=None)
        return complexities(names, on_step=lambda n: progress.update(task, description=f"counting {n}"))


@app.command("list")
def list_models(
    paper: Annotated[str | None, typer.Option(help="Only models of one paper (AIoTBench, BiBench, aiot).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List zoo models with input spec, parameters and MACs next to the papers' reference FLOPs."""
    from rich.table import Table

    from aiot.host.cli._output import out, print_json
    from aiot.models import ZOO

    specs = [s for s in ZOO if paper is None or s.paper.lower() == paper.lower()]
    facts = _facts_with_progress([s.name for s in specs])
    rows = [_describe(s, facts[s.name]) for s in specs]
    if as_json:
        print_json(rows)
        return
    table = Table("model", "paper", "input", "classes", "params (M)", "MACs (M)", "paper MACs (M)")
    for r in rows:
        shape = "×".join(str(d) for d in r["input"]["shape"])
        ref = f"{r['reference_flops_m']:.0f}" if r["reference_flops_m"] else "—"
        table.add_row(r["name"], r["paper"], shape, str(r["num_classes"]), _millions(r["params"], 2),
                      _millions(r["macs"], 1), ref)
    out.print(table)


@app.command("info")
def info(model: Annotated[str, typer.Argument(help="Zoo model name, e.g. resnet18.")],
         binarize: Annotated[str | None, typer.Option(
             help="Also show this BiBench algorithm's binarized model: which layers, "
                  "deployability on LCE and daBNN, r_c and r_s.")] = None,
         as_json: JsonOpt = False) -> None:
    """Show one model: input spec (layout, channel order, normalisation), size and MACs."""
    from rich.table import Table

    from aiot.host.cli._output import out, print_json
    from aiot.models import get_model_spec

    spec = get_model_spec(model)
    binarized = _binarized_facts(spec, binarize) if binarize else None
    row = _describe(spec, _facts_with_progress([spec.name])[spec.name])
    if binarized:
        row["binarized"] = binarized
    if as_json:
        print_json(row)
        return
    table = Table(show_header=False, title=f"model {spec.name}")
    table.add_column(style="bold")
    table.add_column()
    inp = row["input"]
    rows = [
        ("family / variant", f"{row['family']} / {row['variant']}"), ("paper", row["paper"]),
        ("input", f"{'×'.join(map(str, inp['shape']))} {inp['layout']} {inp['channel_order']}"),
        ("normalisation", f"mean {inp['mean']} std {inp['std']}"),
        ("classes", row["num_classes"]), ("parameters", _count(row["params"])),
        ("MACs", _count(row["macs"])),
        ("paper MACs", f"{row['reference_flops_m']:.0f} M" if row["reference_flops_m"] else "—"),
        ("about", row["description"]),
    ]
    if binarized:
        rows += _binarized_rows(binarized)
    for key, value in rows:
        table.add_row(key, str(value))
    out.print(table)


def _millions(count: int | None, digits: int) -> str:
    """``4.65`` for 4,652,008 at two digits; "—" for a model that could not be counted."""
    return "—" if count is None else f"{count / 1e6:.{digits}f}"


def _count(count: int | None) -> str:
    return "—" if count is None else f"{count:,}"


def _binarized_facts(spec, algorithm: str) -> dict:
    """What binarizing ``spec`` with ``algorithm`` gives: layers, verdicts, complexity."""
    from aiot.models.bibench import (
        binarized_complexity,
        binarized_layers,
        build_binarized,
        get_algorithm,
        verdicts,
    )

    algo = get_algorithm(algorithm)
    model = build_binarized(spec, algo.name)
    layers = [name for name, _ in binarized_layers(model)]
    complexity = binarized_complexity(spec, algo.name)
    return {**algo.to_dict(), "binarized_layers": layers,
            "deployability": [v.to_dict() for v in verdicts(algo)],
            "r_c": complexity.r_c, "r_s": complexity.r_s,
            "storage_bytes": complexity.storage_bytes}


def _binarized_rows(facts: dict) -> list[tuple[str, str]]:
    layers = facts["binarized_layers"]
    shown = ", ".join(layers[:4]) + (f", … ({len(layers)} in all)" if len(layers) > 4 else "")
    rows = [("binarized with", (f"{facts['title']} ({facts['paper']}): scale {facts['scale']}, "
                               f"gradient {facts['gradient']}")),
            ("binarized layers", shown),
            ("r_c / r_s", (f"{facts['r_c']:.2f} / {facts['r_s']:.2f} "
                          f"(storage {facts['storage_bytes'] / 1e6:.2f} MB)"))]
    for v in facts["deployability"]:
        rows.append((f"deploys to {v['library']}", f"{v['deployable']}: {v['reason']}"))
    return rows
