"""``aiot complexity``: BiBench's theoretical complexity (r_c, r_s, OM_comp) of zoo models."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.converters.api import zoo_ref
from aiot.core.units import MIB
from aiot.host.cli._output import out, print_json, spinner
from aiot.host.cli.options import Algorithms, JsonOpt, parse_algorithms


def _specs(models: list[str]) -> list:
    from aiot.models import get_model_spec  # the zoo: torch

    specs = {}
    for name in models:
        spec = get_model_spec(zoo_ref(name, None).name)  # resnet18_bnn counts as resnet18
        specs.setdefault(spec.name, spec)
    return list(specs.values())


def _fp_dict(spec) -> dict:
    fp = spec.complexity()
    return {"name": spec.name, "input": list(spec.input.shape), "params": fp.params,
            "macs": fp.macs, "storage_bytes": fp.params * 4}


def _table(specs: list, rows: list):
    from rich.table import Table

    table = Table("model", "algorithm", "params (M)", "storage (MiB)", "float MACs (M)",
                  "1-bit MACs (M)", "r_c", "r_s")
    for spec in specs:
        fp = _fp_dict(spec)
        table.add_row(spec.name, "fp32", f"{fp['params'] / 1e6:.2f}",
                      f"{fp['storage_bytes'] / MIB:.2f}", f"{fp['macs'] / 1e6:.1f}", "0", "1.00",
                      "1.00", style="dim")
        for r in (r for r in rows if r.model == spec.name):
            params = r.binary_params + r.binarized_fp_params
            table.add_row(r.model, r.algorithm, f"{params / 1e6:.2f}",
                          f"{r.storage_bytes / MIB:.2f}", f"{r.binarized_fp_macs / 1e6:.1f}",
                          f"{r.binary_macs / 1e6:.1f}", f"{r.r_c:.2f}", f"{r.r_s:.2f}")
    return table


def _om_lines(specs: list, rows: list) -> list[str]:
    from aiot.models.bibench import om_comp_by_algorithm

    over = ", ".join(s.name for s in specs)
    lines = []
    for algorithm, value in om_comp_by_algorithm(rows).items():
        group = [r for r in rows if r.algorithm == algorithm]
        mean_c = sum(r.r_c for r in group) / len(group)
        mean_s = sum(r.r_s for r in group) / len(group)
        lines.append(f"OM_comp {algorithm}: {value:.2f}  (E(r_c) {mean_c:.2f}, E(r_s) {mean_s:.2f} "
                     f"over {over})")
    return lines


def complexity(
    models: Annotated[list[str], typer.Argument(
        help="Zoo model names, e.g. resnet18 resnet18_cifar vgg_small.", show_default=False)],
    binarize: Algorithms = None,
    as_json: JsonOpt = False,
) -> None:
    """BiBench's compression r_c, speedup r_s and OM_comp of binarized zoo models (eq. 7-8).

    1-bit weights count 1/32 of a float, 1-bit MACs 1/64; scale factors, thresholds and
    activation re-scaling stay full precision. OM_comp averages over the given models.
    """
    from aiot.models.bibench import binarized_complexity, om_comp_by_algorithm

    algorithms = parse_algorithms(binarize)
    specs = _specs(models)
    rows = []
    what = f"{len(algorithms)} algorithms" if len(algorithms) > 1 else algorithms[0]
    with spinner(f"counting {specs[0].name} binarized with {what}…") as status:
        for index, spec in enumerate(specs):
            if index:
                status.update(f"counting {spec.name} binarized with {what}…")
            rows.extend(binarized_complexity(spec, algorithm) for algorithm in algorithms)
    if as_json:
        print_json({"models": [_fp_dict(s) for s in specs], "rows": [r.to_dict() for r in rows],
                    "om_comp": om_comp_by_algorithm(rows)})
        return
    out.print(_table(specs, rows))
    for line in _om_lines(specs, rows):
        out.print(line)


def register(app: typer.Typer) -> None:
    app.command("complexity")(complexity)
