"""RobustMQ's tables from a grid's records, in the paper's shape, beside the paper's numbers.

Tables 1–5, 7 and 9 are grids (architecture × method rows, bit-width columns, the FP model in
the 32-bit column of each architecture's first row): clean accuracy; WCAR; FGSM and PGD AR
with AAI; mNR with NCI; mFP; SR with SNI and the std. Tables 6, 8 and 10 detail the first
model per corruption, per perturbation sequence and per decoder/resize mode. Percentages are
in percent as the paper prints them.

The paper's ImageNet numbers ship as package data (``robustmq_paper.json``; a test checks
each against the seed's text of the paper in reading order) and are shown beside aiot's for
reading only: aiot's grid runs on other data at other sizes.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import cache
from importlib import resources

from aiot.host.robust import metrics
from aiot.host.robust.robustmq import PAPER_ARCHITECTURES, Cell, Grid
from aiot.models.quant.methods import METHODS

#: Grid tables: number → (title, suite, fields).
GRID_TABLES = {
    1: ("Clean accuracy (%)", None, ("ACC",)),
    2: ("Worst-case adversarial robustness WCAR (%)", "attack", ("WCAR",)),
    3: ("FGSM: AR (%) and AAI (%)", "attack", ("AR", "AAI")),
    4: ("PGD: AR (%) and AAI (%)", "attack", ("AR", "AAI")),
    5: ("Natural corruptions: mNR (%) and NCI (%)", "corrupt", ("mNR", "NCI")),
    7: ("Perturbation sequences: mFP", "corrupt", ("mFP",)),
    9: ("Systematic noise: SR (%), SNI (%) and std of SR (points)", "sysnoise", ("SR", "SNI", "std")),
}
#: The paper's 14 systematic noises as aiot's sysnoise options: (kind, option, setting prefix).
SYSTEMATIC = (
    ("pil-bilinear", "resize", "pil-bilinear"), ("pil-nearest", "resize", "pil-nearest"),
    ("pil-box", "resize", "pil-box"), ("pil-hamming", "resize", "pil-hamming"),
    ("pil-cubic", "resize", "pil-bicubic"), ("pil-lanczos", "resize", "pil-lanczos"),
    ("cv2-bilinear", "resize", "cv2-linear"), ("cv2-nearest", "resize", "cv2-nearest"),
    ("cv2-area", "resize", "cv2-area"), ("cv2-cubic", "resize", "cv2-cubic"),
    ("cv2-lanczos", "resize", "cv2-lanczos4"), ("decoder-pillow", "decoder", "pillow"),
    ("decoder-opencv", "decoder", "opencv"), ("decoder-ffmpeg", "decoder", "pyav"),
)


@cache
def paper() -> dict:
    """The packaged Tables 1–10: ``source``, ``architectures``, ``methods``, ``bits``, ``grids``
    (number → ``fp`` per architecture, ``quant`` per architecture and method: one value per
    width, ``"NC"`` where the paper's model did not converge) and ``details``."""
    text = resources.files("aiot.host.robust").joinpath("robustmq_paper.json").read_text(encoding="utf-8")
    return json.loads(text)


def _zoo_entry(model: str):
    """The zoo's entry of ``model``, imported here: the zoo imports torch, which the paper
    commands' help and the CLI's start need not (``aiot paper --help``: 2.6 s of CPU with it)."""
    from aiot.models import get_model_spec

    return get_model_spec(model)


def paper_architecture(model: str) -> str | None:
    """The paper's architecture a zoo model is a variant of (``resnet18_mnist`` → ResNet18)."""
    return PAPER_ARCHITECTURES.get(_zoo_entry(model).family)


def _pct(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value * 100


#: A cell whose clean accuracy is below this many times chance did not converge: the paper
#: prints such a model's every number as "NC" (its PACT 2-bit ResNet18), and so does aiot,
#: since the robustness of a model that has learned nothing measures nothing.
NC_FACTOR = 2.0
#: ...judged on at least this many images: on fewer it is noise (a tiny grid's float model
#: scored 1 of 8 while its fine-tuned children scored 3 and 6), while on 100 a model at
#: chance reaches twice chance in 0.2 % of evaluations (one at 50 % falls below it in 1e-10).
NC_MIN_IMAGES = 100
NC = "NC"


class CellResults:
    """One cell's ok results by suite, and the metrics the tables print (``"NC"`` for every
    number of a cell that did not converge, as the paper prints them)."""

    def __init__(self, results: dict[str, dict], chance: float | None = None, images: int = 0):
        self.results = results
        self.chance = chance
        self.images = images

    def unconverged(self) -> str | None:
        """Why the cell counts as not converged (its clean accuracy against chance), or None."""
        clean = self.clean()
        if (clean is None or self.chance is None or self.images < NC_MIN_IMAGES
                or clean >= NC_FACTOR * self.chance):
            return None
        return (f"not converged: clean accuracy {clean * 100:.2f}% is below {NC_FACTOR:g}× "
                f"chance ({self.chance * 100:.2f}%)")

    def clean(self) -> float | None:
        """Clean accuracy (fraction): the attack suite's, else the corruption or sysnoise suite's."""
        attack, corrupt, sysnoise = (self.results.get(s) for s in ("attack", "corrupt", "sysnoise"))
        if attack:
            return attack["summary"].get("clean_reference")
        if corrupt:
            return corrupt["summary"].get("clean_accuracy")
        return sysnoise.get("clean_accuracy") if sysnoise else None

    def values(self, table: int) -> list | None:
        """The cell's numbers in table ``table``'s fields, or None where its suite has no result."""
        suite = GRID_TABLES[table][1]
        result = self.results.get(suite) if suite else None
        if suite and result is None:
            return None
        if self.unconverged():
            return NC
        if table == 1:
            clean = _pct(self.clean())
            return None if clean is None else [clean]
        summary = result["summary"]
        if table == 2:
            return [_pct(summary.get("wcar_reference"))]
        if table in (3, 4):
            ar, clean = summary.get(("fgsm" if table == 3 else "pgd") + "_reference"), summary.get("clean_reference")
            return None if ar is None else [_pct(ar), _pct(metrics.aai(clean, ar))]
        if table == 5:
            mnr, clean = summary.get("mNR"), summary.get("clean_accuracy")
            return [_pct(mnr), _pct(metrics.relative_drop(clean, mnr))]
        if table == 7:
            return None if summary.get("mFP") is None else [summary["mFP"]]
        return self.systematic()

    def systematic(self) -> list | None:
        """``[SR, SNI, std]``: mean accuracy over the paper's 14 noises (%), its relative drop
        from the clean accuracy (%), and the sample std of the 14 accuracies (points).

        The std is what the paper's Tables 9–10 print (their ResNet18 FP 0.53 and LSQ 2-bit
        2.05 are the sample std of the row's accuracies), not Eq. 12's std of SNI
        (:func:`aiot.host.robust.metrics.systematic_robustness`, in the sysnoise suite)."""
        accs = self.systematic_accuracies()
        clean = (self.results.get("sysnoise") or {}).get("clean_accuracy")
        found = [a for a in accs.values() if a is not None]
        if not found or clean is None:
            return None
        mean = statistics.fmean(found)
        spread = statistics.stdev(found) * 100 if len(found) > 1 else 0.0
        return [mean * 100, _pct(metrics.relative_drop(clean, mean)), spread]

    def systematic_accuracies(self) -> dict[str, float | None]:
        """Accuracy (fraction) per paper noise; an option bit-identical to Pillow's decoder
        scores the reference's accuracy (it decodes the same pixels)."""
        result = self.results.get("sysnoise")
        if not result:
            return {}
        rows = {}
        for table in result["tables"]:
            columns = table["columns"]
            if "option" not in columns or "accuracy" not in columns:
                continue
            kind = "decoder" if table["title"].startswith("JPEG decoder") else "resize"
            for row in table["rows"]:
                cells = dict(zip(columns, row, strict=True))
                if kind == "resize" and not str(cells.get("setting", "")).startswith("down"):
                    continue
                accuracy = cells["accuracy"]
                if accuracy is None and str(cells.get("status", "")).startswith("bit-identical"):
                    accuracy = result.get("clean_accuracy")
                rows[(kind, cells["option"])] = accuracy
        return {name: rows.get((kind, option)) for name, kind, option in SYSTEMATIC}


def cell_results(grid: Grid, records: dict) -> dict[Cell, CellResults]:
    """Each cell's ok results by suite (``records``: job key → newest record)."""
    found = {}
    for job in grid.jobs():
        record = records.get(job.key)
        if record is not None and record.status == "ok" and record.result:
            found.setdefault(job.cell, {})[job.suite] = record.result
    return {cell: CellResults(found.get(cell, {}), 1 / _zoo_entry(cell.model).num_classes, grid.limit)
            for cell in grid.cells()}


def _status(grid: Grid, records: dict, cell: Cell, suite: str | None) -> str:
    """Why a cell has no value: its record's status and reason, or not run."""
    for job in grid.jobs():
        if job.cell == cell and (suite is None or job.suite == suite):
            record = records.get(job.key)
            if record is not None and record.status != "ok":
                return f"{record.status}: {record.reason or ''}".strip(": ")
    return "not run"


def report(grid: Grid, records: dict, sweep_id: str) -> dict:
    """Every table of the paper for ``grid`` (JSON-able), the trends, and the paper's source."""
    cells = cell_results(grid, records)
    tables = [_grid_table(number, grid, cells, records) for number in GRID_TABLES
              if GRID_TABLES[number][1] in (None, *grid.suites)]
    first = grid.models[0]
    for number, suite in ((6, "corrupt"), (8, "corrupt"), (10, "sysnoise")):
        if suite in grid.suites:
            tables.append(_detail_table(number, grid, first, cells))
    tables.sort(key=lambda t: t["table"])
    return {"sweep": sweep_id, "grid": grid.to_dict(), "tables": tables,
            "trends": trends(grid, cells), "paper": {"source": paper()["source"]}}


def _grid_table(number: int, grid: Grid, cells: dict, records: dict) -> dict:
    title, suite, fields = GRID_TABLES[number]
    data = paper()["grids"][str(number)]
    columns = [*map(str, grid.bits), "32"]
    rows = []
    for model in grid.models:
        arch = paper_architecture(model)
        fp = cells[Cell(model)].values(number)
        for index, method in enumerate(grid.methods or ("",)):
            title_m = METHODS.get(method).title if method else "FP"
            row = {"model": model, "arch": arch, "method": title_m, "cells": {}, "why": {}, "paper": {}}
            for bits in grid.bits if method else ():
                cell = Cell(model, f"{method}:{bits}")
                row["cells"][str(bits)] = cells[cell].values(number)
                if row["cells"][str(bits)] in (None, NC):
                    row["why"][str(bits)] = cells[cell].unconverged() or _status(grid, records, cell, suite)
            if index == 0:
                row["cells"]["32"] = fp
                if fp in (None, NC):
                    row["why"]["32"] = cells[Cell(model)].unconverged() or _status(grid, records, Cell(model), suite)
            row["paper"] = paper_cells(data, arch, method, grid.bits, index == 0)
            rows.append(row)
    return {"table": number, "kind": "grid", "title": title, "fields": list(fields),
            "columns": columns, "rows": rows}


def paper_cells(data: dict, arch: str | None, method: str, bits, with_fp: bool) -> dict:
    """The paper's values of one row at the grid's widths (empty for a model the paper lacks)."""
    if arch is None or not method:
        return {"32": data["fp"][arch]} if arch and with_fp else {}
    values = data["quant"][arch][METHODS.get(method).title.replace("-Net", "")]
    shown = {str(b): values[paper()["bits"].index(b)] for b in bits}
    if with_fp:
        shown["32"] = data["fp"][arch]
    return shown


def _detail_table(number: int, grid: Grid, model: str, cells: dict) -> dict:
    """Tables 6, 8, 10 for ``model``: one row per FP / method × width, the paper's columns."""
    rows, columns = [], []
    for cell in (c for c in grid.cells() if c.model == model):
        values = _detail_values(number, cells[cell])
        columns = columns or list(values or ())
        if values is not None and cells[cell].unconverged():
            values = dict.fromkeys(values, NC)
        rows.append({"method": METHODS.get(cell.method).title if cell.method else "FP",
                     "bits": cell.bits, "values": None if values is None else list(values.values())})
    detail = paper()["details"][str(number)]
    return {"table": number, "kind": "detail", "model": model,
            "title": detail["title"].replace("ResNet18", model), "columns": columns, "rows": rows,
            "paper": {"architecture": detail["architecture"], "columns": detail["columns"],
                      "rows": detail["rows"]}}


def _detail_values(number: int, cell: CellResults) -> dict | None:
    """The detail table's columns → values for one cell (None when its suite did not run)."""
    if number == 10:
        accs, summary = cell.systematic_accuracies(), cell.systematic()
        clean = (cell.results.get("sysnoise") or {}).get("clean_accuracy")
        if summary is None:
            return None
        return {"ACC": _pct(clean), **{k: _pct(v) for k, v in accs.items()},
                "Mean": summary[0], "std": summary[2]}
    result = cell.results.get("corrupt")
    if not result:
        return None
    if number == 6:
        table = result["tables"][0]
        nr = table["columns"].index("NR")
        clean, mnr = result["summary"].get("clean_accuracy"), result["summary"].get("mNR")
        return {"ACC": _pct(clean), **{row[0]: _pct(row[nr]) for row in table["rows"] if row[0] != "mean"},
                "mNR": _pct(mnr), "NCI": _pct(metrics.relative_drop(clean, mnr))}
    sequences = next((t for t in result["tables"] if "FP" in t["columns"]), None)
    if sequences is None:
        return None
    fp = sequences["columns"].index("FP")
    return {**{row[0]: row[fp] for row in sequences["rows"]}, "mFP": result["summary"].get("mFP")}


def trends(grid: Grid, cells: dict) -> list[dict]:
    """The paper's headline trends checked on aiot's numbers, per model and method between
    its lowest and highest width: adversarial robustness (WCAR) rises as bits fall; natural
    (mNR) and systematic robustness (std of SR, lower is steadier) fall."""
    if len(grid.bits) < 2:
        return []
    low, high = min(grid.bits), max(grid.bits)
    checks = (("adversarial robustness (WCAR) rises as bits fall", 2, 0, 1),
              ("natural robustness (mNR) falls as bits fall", 5, 0, -1),
              ("systematic robustness falls as bits fall (std of SR rises)", 9, 2, 1))
    found = []
    for model in grid.models:
        for method in grid.methods:
            for claim, table, index, sign in checks:
                if GRID_TABLES[table][1] not in grid.suites:
                    continue
                a = cells[Cell(model, f"{method}:{low}")].values(table)
                b = cells[Cell(model, f"{method}:{high}")].values(table)
                if NC in (a, b) or a is None or b is None or a[index] is None or b[index] is None:
                    continue  # not run, or not converged: nothing to compare
                holds = (a[index] - b[index]) * sign > 0
                found.append({"model": model, "method": METHODS.get(method).title, "claim": claim,
                              "low": a[index], "high": b[index], "bits": [low, high], "holds": holds})
    return found
