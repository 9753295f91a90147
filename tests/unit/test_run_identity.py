"""One run identity (:mod:`aiot.host.store.identity`): every view of stored runs (the sweep
table, the report's plots and first screen, ``results compare``, the leaderboard, BiBench's
grid and OM_infer, the profile tables, the campaign's resume key) groups the same records
the same way. Float, ``--opt quant=int8``, ``--via app`` and another ``--input-shape`` runs
of one model, each at two thread counts, are four configurations and eight keys everywhere.
"""

from __future__ import annotations

import pytest

from aiot.host.cli import sweep_view
from aiot.host.engine.bibench_hw import grid, plan
from aiot.host.engine.campaign import record_key, run_key
from aiot.host.engine.runs import MeasureParams, RunRequest
from aiot.host.report.build import build
from aiot.host.report.summary import best_rows
from aiot.host.scores.om_infer import match_runs
from aiot.host.store import identity, open_store
from aiot.host.store.compare import compare, latency_board, parse_check

#: The configurations: what differs from the plain float run.
VARIANTS = {"float": {}, "int8": {"options": (("quant", "int8"),)}, "app": {"via": "app"},
            "shape": {"input_shapes": (("x", (1, 3, 64, 64)),)}}
#: Their medians at 1 thread (at 2 threads: 0.6 of it); int8 is the fastest, app the slowest.
MEDIANS = {"float": 40.0, "int8": 12.0, "app": 45.0, "shape": 20.0}


def request(variant: str, threads: int, **extra) -> RunRequest:
    return RunRequest("phone", "resnet18", extra.pop("format", "tflite"), threads,
                      **{**VARIANTS[variant], **extra})


def store_run(store, req: RunRequest, median: float, size: int = 4000, profile=None):
    """A finished record of ``req``, written and read back as the executor's are."""
    record = store.begin("latency", req.to_spec(), {"device": {"name": req.device}},
                         device=req.device, model=req.model, format=req.format,
                         threads=req.threads)
    stats = {"median": median, "mean": median * 1.1, "p90": median * 1.2}
    result = {"stats_ms": stats, "validity": {"verdict": "VALID", "reasons": []}}
    if profile:
        result["profile"] = profile
    store.finish(record.id, "ok", result=result, median_ms=median, p90_ms=median * 1.2,
                 load_ms=5.0, size_bytes=size, validity="VALID")
    return record.id


@pytest.fixture
def runs(tmp_path):
    """Eight ok records (4 configurations × 1 and 2 threads), an older re-measurement of
    the float 1-thread run, and the ids of each variant's runs. The int8 and app runs are
    the newest: a view that merged them with the float run would show them instead."""
    ids: dict[tuple[str, int], str] = {}
    with open_store(tmp_path / "results") as store:
        store_run(store, request("float", 1), 99.0)  # the same key, re-measured below
        for variant in VARIANTS:
            for threads in (1, 2):
                ms = MEDIANS[variant] * (1 if threads == 1 else 0.6)
                ids[variant, threads] = store_run(store, request(variant, threads), ms)
        records = store.query()
    return records, ids


def partition(groups) -> set[frozenset[str]]:
    """Groups of record ids, as a set of sets (how a view grouped the records)."""
    return {frozenset(g) for g in groups}


def by_key(ids) -> set[frozenset[str]]:
    """The newest record per key: each of the eight stands alone."""
    return partition({i} for i in ids.values())


def test_the_identity_tells_the_eight_keys_apart(runs):
    records, ids = runs
    newest = {identity.key(r): r.id for r in records}  # oldest first
    assert sorted(newest.values()) == sorted(ids.values())
    assert len({identity.configuration(r) for r in records}) == 4
    labels = {identity.label(r) for r in records}
    assert len(labels) == 8
    assert "resnet18 · tflite[quant=int8] · 1t @ phone" in labels
    assert "resnet18 · tflite · 2t via app @ phone" in labels
    assert "resnet18 · tflite · x=1x3x64x64 · 1t @ phone" in labels
    # a request and the record it wrote have one key, one label and one campaign key
    req = request("int8", 2)
    stored = next(r for r in records if r.id == ids["int8", 2])
    assert identity.key(req) == identity.key(stored) and req.label() == identity.label(stored)
    assert run_key(req) == record_key(stored)


def test_latency_is_the_median_even_when_it_is_zero(runs):
    records, _ = runs
    record = records[-1]
    zero = type(record)(**{**record.to_dict(), "median_ms": 0.0})
    assert identity.latency(zero) == identity.Latency("median", 0.0)  # not the mean
    mean_only = type(record)(**{**record.to_dict(), "median_ms": None})
    assert identity.latency(mean_only).stat == "mean"
    assert identity.latency(type(record)(**{**record.to_dict(), "status": "failed"})) is None


def test_the_sweep_table_keeps_four_configurations(runs):
    records, ids = runs
    gains = sweep_view.speedups(records)
    for variant in VARIANTS:  # each 2-thread run over its own configuration's 1-thread run
        assert gains[ids[variant, 2]] == pytest.approx(1 / 0.6)
    cells = {sweep_view.format_cell(r) for r in records}
    assert cells == {"tflite", "tflite[quant=int8]"}


def test_the_report_plots_and_first_screen_keep_every_configuration(runs):
    records, ids = runs
    report = build(records, source="results")
    assert partition({r.id} for r in report.plotted_runs()) == by_key(ids)
    rows = best_rows(report)
    assert len(rows) == 4  # one row per configuration: int8 does not vanish into float
    best = {r["id"] for r in rows}
    assert best == {ids[v, 2] for v in VARIANTS}
    by_id = {r["id"]: r for r in rows}
    assert by_id[ids["int8", 2]]["variant"] == "tflite[quant=int8]"
    assert by_id[ids["app", 2]]["variant"] == "tflite via app"
    assert by_id[ids["float", 2]]["median_ms"] == pytest.approx(24.0)


def test_compare_pairs_each_key_with_itself_only(runs, tmp_path):
    records, ids = runs
    with open_store(tmp_path / "again") as store:  # the same runs measured again
        for variant in VARIANTS:
            for threads in (1, 2):
                store_run(store, request(variant, threads), MEDIANS[variant])
        again = store.query()
    result = compare(records, again, [parse_check("median:5%")])
    assert len(result.rows) == 8 and not result.missing
    firsts = {identity.label(r): r for r in records}
    seconds = {identity.label(r): r for r in again}
    for row in result.rows:
        a, b = firsts[row.label()], seconds[row.label()]
        assert (row.a_id, row.b_id) == (a.id, b.id)
        assert identity.key(a) == identity.key(b)


def test_the_leaderboard_ranks_every_key(runs):
    records, ids = runs
    board = latency_board(records)
    assert partition({s.record_id} for s in board) == by_key(ids)
    assert board[0].record_id == ids["int8", 2] and board[0].variant == "tflite[quant=int8]"


def test_bibench_and_om_infer_pair_a_bnn_with_the_float_run_not_int8(tmp_path):
    cells, _ = plan(["phone"], "cifar", [1], MeasureParams(),
                    {"phone": {"agent": {"runtimes": {"litert": "1", "lce": "1"}}, "cores": 4}},
                    {"phone": {}})
    by = {(c.model, c.column): c.request for c in cells if c.request}
    with open_store(tmp_path / "results") as store:
        fp32 = store_run(store, by["resnet18_cifar", "fp32"], 40.0, size=4000)
        bnn = store_run(store, by["resnet18_cifar", "bnn"], 10.0, size=250)
        # newer: an int8 and a --via app run of the same model, format and threads
        int8 = store_run(store, RunRequest("phone", "resnet18_cifar", "tflite", 1,
                                           options=(("quant", "int8"),)), 20.0, size=1000)
        store_run(store, RunRequest("phone", "resnet18_cifar", "tflite", 1, via="app"), 80.0)
        records = store.query()
    [row] = [r for r in grid(cells, records, {}) if r["model"] == "resnet18_cifar"]
    assert row["cells"]["fp32"]["record_id"] == fp32 and row["cells"]["fp32"]["ms"] == 40.0
    assert row["cells"]["bnn"]["speedup"] == pytest.approx(4.0)
    [pair] = match_runs(records).pairs
    assert (pair.fp_id, pair.bin_id, pair.speedup) == (fp32, bnn, pytest.approx(4.0))
    assert int8 not in {pair.fp_id, pair.bin_id}


def test_the_profile_table_names_a_run_as_every_table_does(tmp_path, capsys):
    from aiot.host.cli.profile_view import print_profiles

    profile = {"available": True, "tool": "profiler", "runs": 1,
               "ops": [{"name": "conv", "type": "Conv", "ms": 1.0, "pct": 100.0}]}
    req = request("int8", 1, binarize="bnn", format="lce")
    with open_store(tmp_path / "results") as store:
        store_run(store, req, 5.0, profile=profile)
        [record] = store.query()
    print_profiles([record])
    shown = " ".join(capsys.readouterr().out.split())
    assert "resnet18_bnn · lce[quant=int8] · 1t @ phone" in shown  # not resnet18.bnn
    assert identity.label(record) == req.label() == "resnet18_bnn · lce[quant=int8] · 1t @ phone"


def test_a_binarized_model_run_in_float_says_so_in_every_view(tmp_path, capsys):
    """``resnet18_bnn`` as tflite runs its binary layers in float: no longer the binarized
    deployment LCE measures. The run table, ``results show``'s format, the report, the
    leaderboard and every label say ``tflite (BNN as float)``; the LCE run and the plain
    model's tflite run say nothing."""
    from aiot.host.cli.run_table import print_run_table

    as_float = RunRequest("phone", "resnet18", "tflite", 1, binarize="bnn")
    binary = RunRequest("phone", "resnet18", "lce", 1, binarize="bnn")
    plain = RunRequest("phone", "resnet18", "tflite", 1)
    with open_store(tmp_path / "results") as store:
        ids = [store_run(store, r, ms) for r, ms in ((as_float, 30.0), (binary, 10.0), (plain, 29.0))]
        records = {r.id: r for r in store.query()}
    floated, lce, fp32 = (records[i] for i in ids)
    assert identity.deployment_note(floated) == identity.BNN_AS_FLOAT == "BNN as float"
    assert identity.deployment_note(lce) is None and identity.deployment_note(fp32) is None
    assert identity.deployment_note(as_float) == "BNN as float"  # a request, before it runs
    assert identity.label(floated) == as_float.label() == "resnet18_bnn · tflite (BNN as float) · 1t @ phone"
    assert identity.label(lce) == "resnet18_bnn · lce · 1t @ phone"
    assert sweep_view.format_cell(floated) == "tflite (BNN as float)"
    assert sweep_view.format_cell(fp32) == "tflite"
    with_options = RunRequest("phone", "resnet18", "tflite", 1, binarize="bnn", delegate="xnnpack",
                              native="benchmark_model", options=(("quant", "int8"),))
    assert identity.variant(with_options) == "tflite[quant=int8]+xnnpack (benchmark_model) (BNN as float)"

    print_run_table(list(records.values()), sweep=True)  # run, sweep and results list's table
    table = capsys.readouterr().out
    assert table.count("tflite (BNN as float)") == 1 and "lce (BNN" not in table
    report = build(list(records.values()), source="results")
    variants = {run.id: run.variant for run in report.runs}
    assert variants[floated.id] == "tflite (BNN as float)" and variants[fp32.id] == "tflite"
    board = {s.record_id: s.variant for s in latency_board(list(records.values()))}
    assert board[floated.id] == "tflite (BNN as float)" and board[lce.id] == "lce"
