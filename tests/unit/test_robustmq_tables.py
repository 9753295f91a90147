"""RobustMQ's Tables 1–10 as packaged: every number (and every "NC") in the paper's reading
order is what the seed's text of the paper prints, and the std the paper prints is the one
aiot's Table 9/10 computes."""

import re
import statistics
from pathlib import Path

import pytest

from aiot.host.robust.robustmq import PAPER_ARCHITECTURES, Cell, Grid, default_models
from aiot.host.robust.robustmq_tables import GRID_TABLES, CellResults, paper, paper_cells

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "seeds" / "robustmq.txt"


def _seed_tokens() -> list:
    """Every decimal number and NC of the seed's table lines (``| ...``) from Table 1's
    header to the end of Table 10, in order."""
    if not SEED.exists():
        pytest.skip(f"the seeds are not beside this clone ({SEED})")
    lines = SEED.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Model | Method | 2-bit"))
    end = next(i for i, line in enumerate(lines) if line.startswith("| Resize mode in Pillow"))
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    tokens = []
    for line in lines[start:end]:
        if line.startswith("|"):
            tokens += [t if t == "NC" else float(t) for t in re.findall(r"\d+\.\d+|\bNC\b", line)]
    return tokens


def _flat(value) -> list:
    return list(value) if isinstance(value, list) else [value]


def _reading_order(data: dict) -> list:
    """The packaged values in the seed's order: tables by number; a grid table per
    architecture and method row (its four widths, then the FP value on the first row); a
    detail table row by row."""
    values = []
    for number in range(1, 11):
        if str(number) in data["grids"]:
            grid = data["grids"][str(number)]
            for arch in data["architectures"]:
                for index, method in enumerate(data["methods"]):
                    for cell in grid["quant"][arch][method]:
                        values += _flat(cell)
                    if index == 0:
                        values += _flat(grid["fp"][arch])
        else:
            for row in data["details"][str(number)]["rows"]:
                for cell in row["values"]:
                    values += _flat(cell)
    return values


def test_packaged_tables_are_the_papers_numbers_in_reading_order():
    assert _reading_order(paper()) == _seed_tokens()


def test_the_tables_cover_the_papers_grid():
    data = paper()
    assert "RobustMQ" in data["source"] and "Tables 1-10" in data["source"]
    assert data["architectures"] == list(PAPER_ARCHITECTURES.values())
    assert sorted(map(int, data["grids"])) == sorted(GRID_TABLES)
    assert sorted(map(int, data["details"])) == [6, 8, 10]
    t1 = data["grids"]["1"]
    assert t1["fp"]["ResNet18"] == 71.06 and t1["quant"]["ResNet18"]["PACT"][0] == "NC"
    assert t1["quant"]["MobileNetV2"]["DoReFa"] == ["NC"] * 4
    assert data["grids"]["3"]["quant"]["ResNet18"]["LSQ"][0] == [46.85, 28.98]
    assert data["grids"]["9"]["fp"]["ResNet50"] == [76.08, 0.72, 0.49]
    assert paper_cells(data["grids"]["1"], "ResNet50", "lsq", (2, 8), True) == {"2": 69.83, "8": 77.54,
                                                                              "32": 76.63}
    assert paper_cells(data["grids"]["1"], None, "lsq", (2,), True) == {}


def test_the_printed_std_is_the_sample_std_of_the_rows_accuracies():
    """Tables 9 and 10 print the sample std of a row's 14 accuracies (not Eq. 12's std of
    SNI): aiot's Table 9 computes that, so its numbers read beside the paper's."""
    detail = paper()["details"]["10"]
    for row in detail["rows"]:
        if row["values"][0] == "NC":
            continue
        accuracies, printed = row["values"][1:15], row["values"][16]
        assert statistics.stdev(accuracies) == pytest.approx(printed, abs=0.011), row


def test_a_cells_systematic_row_reads_the_papers_14_noises():
    reference = {"option": "pil-bilinear", "setting": "down 64 px->28x28", "status": "reference"}
    rows = [[o, "down 64 px->28x28", "ok", acc] for o, acc in (("pil-nearest", 0.5), ("cv2-area", 0.7))]
    decoders = [["pillow", "64 px JPEG", "reference", 0.8], ["opencv", "64 px JPEG",
                                                             "bit-identical to Pillow (not a finding)", None],
                ["pyav", "64 px JPEG", "ok", 0.6]]
    result = {"clean_accuracy": 0.8, "tables": [
        {"title": "JPEG decoder (reference: Pillow)", "columns": ["option", "setting", "status", "accuracy"],
         "rows": decoders},
        {"title": "Resize method", "columns": ["option", "setting", "status", "accuracy"],
         "rows": [[*reference.values(), 0.8], *rows, ["pil-nearest", "up 21 px->28x28", "ok", 0.1]]}]}
    cell = CellResults({"sysnoise": result})
    accs = cell.systematic_accuracies()
    assert accs["pil-nearest"] == 0.5 and accs["decoder-opencv"] == 0.8 and accs["decoder-ffmpeg"] == 0.6
    assert accs["pil-box"] is None  # not measured: left out of the mean
    found = [0.8, 0.5, 0.7, 0.8, 0.8, 0.6]
    sr, sni, std = cell.systematic()
    assert sr == pytest.approx(statistics.fmean(found) * 100)
    assert sni == pytest.approx((0.8 - statistics.fmean(found)) / 0.8 * 100)
    assert std == pytest.approx(statistics.stdev(found) * 100)


def test_the_grid_is_the_papers_rows_and_its_jobs_are_stable():
    grid = Grid(("tiny_cnn",), ("dorefa", "lsq"), (2, 8), "digits", 8)
    assert grid.cells() == [Cell("tiny_cnn"), Cell("tiny_cnn", "dorefa:2"), Cell("tiny_cnn", "dorefa:8"),
                            Cell("tiny_cnn", "lsq:2"), Cell("tiny_cnn", "lsq:8")]
    jobs = grid.jobs()
    assert len(jobs) == 5 * 3 and len({j.key for j in jobs}) == 15
    assert [j.key for j in Grid(("tiny_cnn",), ("dorefa", "lsq"), (2, 8), "digits", 8).jobs()] == [
        j.key for j in jobs]
    assert jobs[0].key not in {j.key for j in Grid(("tiny_cnn",), ("lsq",), (2,), "digits", 9).jobs()}
    assert Cell("tiny_cnn", "lsq:4").zoo_name == "tiny_cnn_lsq4" and Cell("tiny_cnn").bits == 32
    assert default_models("fashion-mnist") == ("resnet18_mnist", "resnet50_mnist", "regnetx_600mf_mnist",
                                               "mobilenet_v2_mnist")
    assert default_models("folder:/x")[0] == "resnet18"


def test_rows_of_the_papers_architectures_carry_its_numbers_and_say_what_did_not_run():
    from aiot.host.cli._output import out
    from aiot.host.cli.robustmq_table import print_report
    from aiot.host.robust.robustmq_tables import report

    grid = Grid(("resnet18_mnist",), ("pact",), (2, 4), "digits", 8, suites=("attack",))
    result = report(grid, {}, "abc123")
    assert [t["table"] for t in result["tables"]] == [1, 2, 3, 4]  # only what the suites measure
    (row,) = result["tables"][0]["rows"]
    assert row["arch"] == "ResNet18" and row["paper"] == {"2": "NC", "4": 70.41, "32": 71.06}
    assert row["cells"] == {"2": None, "4": None, "32": None}
    assert row["why"] == {"2": "not run", "4": "not run", "32": "not run"}
    assert result["tables"][2]["rows"][0]["paper"]["4"] == [36.49, 48.17]
    assert result["trends"] == []
    with out.capture() as captured:
        print_report({**result, "failures": []})
    text = captured.get()
    assert "Table 3: FGSM: AR (%) and AAI (%)" in text and "paper 36.49 (48.17%)" in text
    assert "paper NC" in text and "not run: resnet18_mnist PACT 2-bit" in text
    assert "paper ResNet18" not in text  # its own rows carry the paper's numbers


def test_a_cell_that_did_not_converge_is_nc_in_every_table_as_the_paper_prints_it():
    from types import SimpleNamespace

    from aiot.host.cli._output import out
    from aiot.host.cli.robustmq_table import print_report
    from aiot.host.robust.robustmq_tables import report

    grid = Grid(("tiny_cnn",), ("pact",), (2, 8), "digits", 200, suites=("attack",))
    clean = {Cell("tiny_cnn"): 0.9, Cell("tiny_cnn", "pact:2"): 0.12, Cell("tiny_cnn", "pact:8"): 0.85}
    records = {job.key: SimpleNamespace(status="ok", reason=None, result={"summary": {
        "clean_reference": clean[job.cell], "wcar_reference": clean[job.cell] / 2,
        "fgsm_reference": clean[job.cell] / 2, "pgd_reference": clean[job.cell] / 3}})
        for job in grid.jobs()}
    assert CellResults({"attack": records[grid.jobs()[0].key].result}, 0.1, 200).unconverged() is None
    low = {"attack": {"summary": {"clean_reference": 0.12}}}
    assert CellResults(low, 0.1, 8).unconverged() is None  # 1 of 8 images says nothing
    assert CellResults(low, 0.1, 200).unconverged().startswith("not converged")
    result = report(grid, records, "abc")
    (row,) = [r for r in result["tables"][0]["rows"]]
    assert row["cells"] == {"2": "NC", "8": [85.0], "32": [90.0]}
    assert row["why"]["2"].startswith("not converged: clean accuracy 12.00% is below 2× chance (10.00%)")
    assert all(t["rows"][0]["cells"]["2"] == "NC" for t in result["tables"])
    assert result["trends"] == []  # a 2-bit model that learned nothing is no evidence either way
    with out.capture() as captured:
        print_report({**result, "failures": []})
    assert "NC" in captured.get() and "not converged" in captured.get()
