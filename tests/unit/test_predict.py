"""``aiot predict``'s parts without a device: the kernel grammar and grid, a model cut into
kernels, and fitting on a store filled with made-up but internally consistent records (each
kernel's latency alone and each model's from one known cost formula), so that what a
predictor gets right or wrong is the fitting's own doing."""

from __future__ import annotations

import math

import pytest

from aiot.core.errors import UsageError
from aiot.host.predict import blocks, graphs, grid
from aiot.host.predict.decompose import decompose
from aiot.host.predict.evaluate import evaluate, metrics
from aiot.host.predict.predictor import fit_predictor, load_predictor
from aiot.host.predict.training import training_set
from aiot.host.store import open_store
from aiot.host.store import predictions as stored
from aiot.models import count_complexity, get_model_spec
from aiot.models.model_ref import ARTIFACT, ModelRef, resolve_model

# -- the kernels and the grid -------------------------------------------------------------------


def test_a_kernel_name_is_its_configuration_and_back():
    name = blocks.name_of("conv", "relu6", c=24, o=64, k=3, s=2, r=56)
    assert name == "conv_c24_o64_k3_s2_r56_relu6"
    assert blocks.parse(name) == ("conv", {"c": 24, "o": 64, "k": 3, "s": 2, "r": 56}, "relu6")
    assert callable(blocks.conv_c24_o64_k3_s2_r56_relu6)  # every well-formed name is a factory
    for bad in ("conv_c24_o64_k3_r56_s2_relu", "conv_c24_o64_k3_s2_r56", "gap_c0_r7", "pool_c8_r7"):
        with pytest.raises(ValueError):
            blocks.parse(bad)
    with pytest.raises(AttributeError):
        blocks.not_a_kernel  # noqa: B018 - the attribute access is the test


def test_a_kernel_is_exported_once_and_named_by_its_version():
    path = graphs.kernel_program("gap_c8_r7")
    assert path.name == _kernel("gap_c8_r7") and graphs.kernel_name(path.name) == "gap_c8_r7"
    sha = path.read_bytes()
    assert graphs.kernel_program("gap_c8_r7").read_bytes() == sha  # kept: its sha is its identity
    assert graphs.kernel_of("aiot_00000000_gap_c8_r7.pt2") == ("00000000", "gap_c8_r7")
    assert graphs.kernel_name("aiot_00000000_gap_c8_r7.pt2") is None  # another aiot's kernels
    assert graphs.family(path.name) == "kernels" and graphs.family("resnet18_cifar") == "resnet"
    found = graphs.of_reference(resolve_model(str(path)))
    assert [k.kind for k in found.kernels] == ["gap"]


def test_the_grid_is_seeded_distinct_and_gives_every_kind_its_share():
    names = grid.sample_kernels(120, seed=3)
    assert names == grid.sample_kernels(120, seed=3) and len(set(names)) == 120
    assert names != grid.sample_kernels(120, seed=4)
    kinds = [blocks.parse(n)[0] for n in names]
    assert set(kinds) == set(blocks.KINDS)  # pointwise is a conv of kernel size 1
    assert kinds.count("conv") > kinds.count("dw") > kinds.count("res")
    assert any(blocks.parse(n)[1].get("k") == 1 for n in names if n.startswith("conv_"))
    assert grid.sample_kernels(4) and len(grid.sample_kernels(4)) == 4


@pytest.mark.parametrize("model", ["tiny_cnn", "resnet18_cifar", "mobilenet_v2_mnist", "squeezenet_mnist"])
def test_a_models_kernels_hold_its_macs_as_models_complexity_counts_them(model):
    spec = get_model_spec(model)
    found = graphs.of_reference(resolve_model(model))
    assert found.macs == count_complexity(spec.build(), (1, *spec.input.shape)).macs
    assert found.io_elems == math.prod(spec.input.shape) + spec.num_classes


def test_fusions_cut_kernels_where_the_runtimes_do():
    resnet = graphs.of_reference(resolve_model("resnet18_cifar")).kernels
    assert resnet[0].ops == ["conv2d", "batch_norm", "relu"] and resnet[0].kind == "conv"
    assert resnet[0].describe() == "conv 3x3/1 3→64 @32x32+bn+relu"
    adds = [k for k in resnet if k.kind == "add"]
    assert len(adds) == 8 and all(k.act == "relu" for k in adds)  # add-relu, one kernel each
    (se,) = decompose(*blocks.build("se_c32_r14")).kernels  # pool, 2 convs, sigmoid, scale
    assert se.kind == "se" and se.groups == 8 and se.macs == 2 * 32 * 8
    res = decompose(*blocks.build("res_c16_o32_s2_r16")).kernels
    assert [k.kind for k in res] == ["conv", "conv", "conv", "add"]
    (bn,) = decompose(*blocks.build("bn_c16_r8_relu")).kernels
    assert (bn.kind, bn.act) == ("bn", "relu")
    (grouped,) = decompose(*blocks.build("gconv_c48_g2_k3_s1_r8_relu")).kernels  # RegNet's
    assert (grouped.kind, grouped.groups, grouped.bn, grouped.act) == ("gconv", 2, True, "relu")
    assert grouped.macs == 48 * 24 * 9 * 8 * 8 and grouped.describe() == "gconv 3x3/1 g2 48→48 @8x8+bn+relu"


def test_a_regnets_grouped_convolutions_are_a_kind_the_grid_draws():
    kinds = {k.kind for k in graphs.of_reference(resolve_model("regnetx_600mf_cifar")).kernels}
    assert "gconv" in kinds and "dw" not in kinds
    drawn = [blocks.parse(n)[1] for n in grid.sample_kernels(300) if n.startswith("gconv_")]
    assert len(drawn) >= 12 and all(1 < f["g"] < f["c"] and f["c"] % f["g"] == 0 for f in drawn)


def test_the_grid_stacks_large_convolutions_below_and_beyond_a_caches_size():
    """What teaches the composition the cost of weights read from memory, on any device."""
    stacks = [blocks.parse(n)[1] for n in grid.sample_kernels(300) if n.startswith("stack_")]
    megabytes = [f["n"] * 9 * f["c"] ** 2 * 4 / 2**20 for f in stacks]
    assert len(stacks) >= 5 and min(megabytes) < 16 and max(megabytes) > 64, megabytes
    module, example = blocks.build("stack_c256_n3_r4")
    found = decompose(module, example)
    assert [k.describe() for k in found.kernels] == ["conv 3x3/1 256→256 @4x4+bn+relu"] * 3
    convs = [m for m in module.modules() if type(m).__name__ == "Conv2d"]
    assert len({m.weight.data_ptr() for m in convs}) == 3  # each with weights of its own


def test_an_artifact_or_a_binarized_model_has_no_kernels_to_read():
    with pytest.raises(UsageError, match="binarized or quantized"):
        graphs.of_reference(resolve_model("tiny_vgg_bnn"))
    with pytest.raises(UsageError, match="prediction reads a PyTorch graph"):
        graphs.of_reference(ModelRef(ARTIFACT, "m.tflite", format="tflite"))


# -- a store of made-up, consistent runs -------------------------------------------------------

PER_CALL_MS, PER_ELEMENT_MS = 0.02, 2e-6


def _alone_ms(kernel) -> float:
    """A kernel measured alone: the per-call cost, its own copies, and its work."""
    work = kernel.macs / 4e6 + kernel.in_elems * 1.5e-6 + kernel.out_elems * 1e-6
    return PER_CALL_MS + PER_ELEMENT_MS * kernel.io_elems + work


def _model_ms(decomposition) -> float:
    """What the same costs make of a whole model: one call, one copy in and out."""
    kernels = decomposition.kernels
    return (sum(_alone_ms(k) for k in kernels) - PER_CALL_MS * (len(kernels) - 1)
            - PER_ELEMENT_MS * (sum(k.io_elems for k in kernels) - decomposition.io_elems))


def _record(store, model: str, ms: float | None, kind: str = "code", sha: str | None = None,
            status: str = "ok", validity: str = "VALID", device: dict | None = None, threads: int = 1,
            profiled: list[str] | None = None):
    record = store.begin("latency", {"model": model, "model_sha256": sha, "threads": threads,
                                     "device": "local", "format": "onnx"},
                         {"source": {"kind": kind, "name": model, "sha256": sha},
                          "device": device or {"name": "local"}},
                         device="local", model=model, format="onnx", threads=threads)
    reasons = [] if validity == "VALID" else ["device busy: other processes kept 1.2 CPUs busy"]
    profile = {"available": True, "ops": [{"name": t, "type": t, "ms": 0.01} for t in profiled]} if profiled else {}
    store.finish(record.id, status, median_ms=ms if status == "ok" else None,
                 validity=validity if status == "ok" else None,
                 result={"validity": {"verdict": validity, "reasons": reasons, "limits": {}},
                         **({"profile": profile} if profile else {})})
    return record


def _kernel(factory: str) -> str:
    """The model name a collected kernel's records carry (its program's file name)."""
    return f"aiot_{graphs.kernel_version()}_{factory}.pt2"


MODELS = ("tiny_cnn", "vgg_small_mnist", "resnet18_mnist", "mobilenet_v2_mnist")


@pytest.fixture
def filled(tmp_path):
    """A store of 90 collected kernels, four zoo models of four families, and runs that teach
    nothing (INVALID, failed, at another thread count, a kernel of another kernel file)."""
    results = tmp_path / "results"
    with open_store(results) as store:
        for name in grid.sample_kernels(90, seed=1):
            found = decompose(*blocks.build(name))  # a block is several kernels: a small model
            ms = _alone_ms(found.kernels[0]) if len(found.kernels) == 1 else _model_ms(found)
            _record(store, _kernel(name), ms, kind="program", sha="1" * 64)
        for model in MODELS:
            ms = _model_ms(graphs.of_reference(resolve_model(model)))
            _record(store, model, ms, kind="zoo")
            _record(store, model, ms * 1.02, kind="zoo")  # measured twice: one sample
        _record(store, "tiny_cnn", 99.0, kind="zoo", validity="INVALID")
        _record(store, "tiny_cnn", None, kind="zoo", status="failed")
        _record(store, "tiny_cnn", 7.0, kind="zoo", threads=2)
        _record(store, "aiot_00000000_gap_c8_r7.pt2", 0.1, kind="program", sha="0" * 64)
    return results


def test_the_training_set_keeps_valid_runs_and_says_what_it_left_out(filled):
    with open_store(filled) as store:
        found = training_set(store, "local", "onnx", 1)
    assert len(found.kernels) + len(found.models) == 90 + len(MODELS)
    assert {s.family for s in found.models} >= {"tiny", "vgg", "resnet", "mobilenet"}
    assert all(len(s.records) == 2 for s in found.models if s.family != "kernels")
    assert found.left_out == {"INVALID (device busy)": 1, "failed": 1,
                              "a kernel of another aiot's kernels": 1}
    assert "left out 3 run(s)" in found.left_out_line()


def test_a_fitted_predictor_predicts_a_family_it_never_saw(filled):
    """Every family held out in turn: the kernels and the other families are all it learns from."""
    with open_store(filled) as store:
        found = evaluate(training_set(store, "local", "onnx", 1))
    assert sorted(found.families()) == ["mobilenet", "resnet", "tiny", "vgg"]
    for outcome in found.outcomes:
        # the made-up costs are exactly the composition's form: what is left is the kernels'
        assert abs(outcome.error_pct) < 25, outcome
        assert outcome.low_ms < outcome.predicted_ms < outcome.high_ms
    overall = found.of()
    assert overall["n"] == len(MODELS) and overall["mape"] < 15
    assert found.baseline()["n"] == len(MODELS)


def test_the_stored_predictor_reads_back_and_predicts_the_same(filled):
    with open_store(filled) as store:
        training = training_set(store, "local", "onnx", 1)
    fitted = fit_predictor(training)
    assert fitted.composition.models == len(MODELS) + sum(s.family == "kernels" for s in training.models)
    assert fitted.composition.per_call_ms > 0  # the per-call cost of a kernel alone, found again
    path = fitted.save(filled)
    assert path.parent == filled / "predict"
    loaded = load_predictor(filled, "local", "onnx", 1)
    model = graphs.of_reference(resolve_model("squeezenet_mnist"))
    first, again = fitted.predict("squeezenet_mnist", model), loaded.predict("squeezenet_mnist", model)
    assert first.ms == pytest.approx(again.ms, rel=1e-9)
    assert loaded.provenance["kernel_records"] and loaded.provenance["left_out"]
    assert first.kernels and sum(k.ms for k in first.kernels) > 0


def test_a_kernel_outside_what_was_collected_is_warned_about(filled):
    with open_store(filled) as store:
        fitted = fit_predictor(training_set(store, "local", "onnx", 1))
    big = decompose(*blocks.build("conv_c2048_o2048_k3_s1_r64_relu"))
    guess = fitted.predict("big", big)
    assert any("outside what was collected" in w and "macs" in w for w in guess.warnings), guess.warnings
    assert guess.kernels[0].outside


def test_runs_on_an_emulated_device_are_said_to_be_no_timings(tmp_path):
    results = tmp_path / "results"
    with open_store(results) as store:
        for name in grid.sample_kernels(8, seed=2):
            if blocks.parse(name)[0] in ("res", "mb"):
                continue
            (kernel,) = decompose(*blocks.build(name)).kernels
            _record(store, _kernel(name), _alone_ms(kernel), kind="program", sha="1" * 64,
                    device={"name": "local", "labels": {"emulated": True}})
        training = training_set(store, "local", "onnx", 1)
    guess = fit_predictor(training).predict("tiny_cnn", graphs.of_reference(resolve_model("tiny_cnn")))
    assert training.emulated == len(training.samples)
    assert any("emulated device" in w and "not timings" in w for w in guess.warnings)
    assert any("no whole models were measured" in w for w in guess.warnings)


def _blocked(kernel) -> bool:
    """ONNX Runtime's rule on an AVX-512 host: NCHWc where the channels fill 16-wide blocks."""
    return kernel.kind == "conv" and kernel.cin % 16 == 0 and kernel.cout % 16 == 0


def test_kernels_a_runtime_ran_on_two_code_paths_get_a_regressor_each(tmp_path):
    """Convolutions whose profiles show the blocked layout's reorders cost a third of the plain
    ones per MAC: a regressor each, and a rule learned from them picks the path of a
    convolution never measured; one regressor for both misses both."""
    results = tmp_path / "results"
    with open_store(results) as store:
        for name in grid.sample_kernels(90, seed=1):
            found = decompose(*blocks.build(name))
            if len(found.kernels) != 1:
                continue
            kernel = found.kernels[0]
            blocked = _blocked(kernel)
            ms = _alone_ms(kernel) * (1 if blocked or kernel.kind != "conv" else 3)
            _record(store, _kernel(name), ms, kind="program", sha="1" * 64,
                    profiled=["Conv", "ReorderInput", "ReorderOutput"] if blocked else ["FusedConv"])
        training = training_set(store, "local", "onnx", 1)
    assert {s.path for s in training.kernels} == {"blocked", "plain"}
    fitted = fit_predictor(training)
    regs = fitted.regressors
    assert set(regs.paths) == {"conv"} and regs.paths["conv"].paths == ["blocked", "plain"]
    assert {"conv@blocked", "conv@plain"} <= set(regs.own) and "conv" not in regs.own
    assert regs.paths["conv"].agreement >= 0.9
    for unseen in ("conv_c48_o96_k3_s1_r16_relu", "conv_c40_o88_k3_s1_r16_relu"):
        (kernel,) = decompose(*blocks.build(unseen)).kernels
        line = fitted.predict(unseen, decompose(*blocks.build(unseen))).kernels[0]
        assert line.path == ("blocked" if _blocked(kernel) else "plain")
        truth = _alone_ms(kernel) * (1 if _blocked(kernel) else 3)
        assert line.ms == pytest.approx(truth, rel=0.3), unseen
    # the stored file keeps each sample's path: read back, the same split and the same times
    fitted.save(results)
    loaded = load_predictor(results, "local", "onnx", 1)
    assert set(loaded.regressors.own) == set(regs.own)
    assert loaded.regressors.paths["conv"].agreement == regs.paths["conv"].agreement


def test_a_profile_without_the_layout_operators_says_plain_and_none_says_nothing():
    from aiot.host.predict.training import code_path

    assert code_path("onnx", ["Conv", "ReorderInput"]) == "blocked"
    assert code_path("onnx", ["FusedConv"]) == "plain"
    assert code_path("onnx", []) == ""  # not profiled: the rule decides
    assert code_path("tflite", ["CONV_2D"]) == ""  # one path as far as its profile tells


def test_alignment_reads_how_far_channels_fill_simd_blocks():
    from aiot.host.predict.decompose import Kernel
    from aiot.host.predict.features import alignment

    assert alignment(Kernel("gconv", cin=528, cout=528, groups=22)) == [4.0, 4.0, 3.0, 3.0]  # 24 a group
    assert alignment(Kernel("conv", cin=3, cout=64)) == [0.0, 6.0, 0.0, 6.0]
    assert alignment(Kernel("conv", cin=1024, cout=2048)) == [6.0, 6.0, 6.0, 6.0]  # capped at 64


def test_a_convolution_costs_what_its_channels_padded_to_the_runtimes_tile_cost():
    from aiot.host.predict.decompose import Kernel
    from aiot.host.predict.features import padded_macs, tiled_channels
    from aiot.host.predict.fitting import KindModel

    def conv(c: int, r: int = 32) -> Kernel:
        return Kernel("conv", cin=c, cout=c, k=3, h=r, w=r, ho=r, wo=r, macs=c * c * 9 * r * r,
                      in_elems=c * r * r, out_elems=c * r * r, params=c * c * 9)

    assert padded_macs(conv(72), 32) == conv(72).macs * 96 / 72
    assert tiled_channels(Kernel("gconv", cin=528, cout=528, groups=22)) == 24
    assert tiled_channels(Kernel("add", cin=64, cout=64)) is None
    # a runtime computing 32 output channels at a time (TFLite's XNNPACK here: 64->64 and
    # 72->72 at 32x32 took 0.74 and 1.24 ms, where their MACs differ by 27 %)
    widths = [8 * i for i in range(2, 40) if i != 9]
    kernels = [conv(c, r) for c in widths for r in (8, 16)]
    ms = [padded_macs(k, 32) / 5e7 for k in kernels]
    model = KindModel().fit(kernels, ms)
    slow, fast = (math.exp(v) for v in model.predict([conv(72), conv(64)]))
    assert slow / fast == pytest.approx(96 * 72 / (64 * 64), rel=0.05)


def test_a_grouped_convolution_is_checked_on_its_width_not_its_count_of_groups():
    from aiot.host.predict.decompose import Kernel
    from aiot.host.predict.features import coverage, outside

    def gconv(c: int, g: int) -> Kernel:
        return Kernel("gconv", cin=c, cout=c, groups=g, h=8, macs=c * (c // g) * 9 * 64,
                      in_elems=c * 64, out_elems=c * 64)

    seen = coverage([gconv(96, 4), gconv(512, 8), gconv(256, 64)])  # 24, 64 and 4 a group
    assert outside(gconv(264, 11), seen) is None  # 24 a group: 11 groups never seen, and fine
    assert "width 128 outside 4–64" in outside(gconv(256, 2), seen)


def test_a_global_pool_is_checked_on_the_range_of_its_input_size():
    from dataclasses import replace

    from aiot.host.predict.decompose import Kernel
    from aiot.host.predict.features import coverage, outside

    def gap(r: int) -> Kernel:
        return Kernel("gap", cin=512, cout=512, k=r, h=r, w=r, ho=1, wo=1, macs=512 * r * r,
                      in_elems=512 * r * r, out_elems=512)

    seen = coverage([gap(2), gap(7), gap(224)])
    assert outside(gap(4), seen) is None  # 4x4 was never drawn, but lies inside 2-224
    assert gap(4).describe() == "gap 512ch @4x4"
    assert "h 448 outside 2–224" in outside(replace(gap(224), h=448), seen)


def test_the_composition_learns_what_weights_outgrowing_the_caches_cost():
    """Made-up models: each kernel's sum less the overheads, plus 0.3 ns for every weight of a
    kernel of over 4 MiB of them in a model of over 32 MiB (a cache of that size). The fit
    finds the sizes out of sample and the cost; without such models it adds no term."""
    from aiot.host.predict.fitting import ModelRow, fit_composition

    def row(weights: tuple[int, ...], ms_alone: float) -> ModelRow:
        big = sum(w for w in weights if w * 4 > 4 * 2**20) if sum(weights) * 4 > 32 * 2**20 else 0
        truth = ms_alone - 0.01 * (len(weights) - 1) + 3e-7 * big
        return ModelRow(ms_alone, len(weights), 1000 * len(weights), 1000, truth, weights)

    rows = [row((2_400_000,) * n, 0.8 * n) for n in range(2, 9)]  # 9.6 MB each: 19 to 77 MB
    rows += [row((600_000,) * n, 0.7 * n) for n in (2, 4, 8, 16)]  # 2.4 MB each: never cold
    rows += [row((1_500_000,) * n, 0.6 * n) for n in (6, 8)]  # 6 MB each: over 4 MiB, not 8
    rows += [row((50_000,) * 40, 6.0), row((2_400_000, 2_400_000, 50_000), 2.0)]  # 19 MB: cached
    fitted = fit_composition(rows)
    assert (fitted.cold_kernel_mib, fitted.cold_model_mib) == (4.0, 32.0)
    assert fitted.per_cold_weight_ms == pytest.approx(3e-7, rel=0.05)
    assert fitted.sigma < 0.01
    plain = fit_composition([r for r in rows if sum(r.kernel_weights) * 4 <= 32 * 2**20])
    assert plain.cold_kernel_mib is None and plain.per_cold_weight_ms == 0.0


def test_cache_sizes_that_predict_about_as_well_give_way_to_the_fewest_cold_weights():
    """The one-standard-error rule: leave-one-out errors a hair apart (0.099 against 0.102, as
    RegNetX held out on 2026-12-06) choose the sizes that make the fewest weights cold; errors
    clearly apart choose the lowest."""
    from aiot.host.predict.fitting import ModelRow, _simplest_within_one_se

    mib = 2**20 // 4  # weights in a MiB
    rows = [ModelRow(1.0, 2, 10, 1, 1.0, (2 * mib, 5 * mib)),  # 7 MiB: warm at 8 MiB and over
            ModelRow(1.0, 2, 10, 1, 1.0, (12 * mib, 30 * mib))]  # 42 MiB: cold at 32 MiB
    spread = [0.02, -0.15, 0.12, -0.05, 0.08, -0.11]
    low = [e * 0.97 for e in spread]  # (1, 4): about as good, and more weights cold
    candidates = [(low, (1.0, 4.0)), (spread, (8.0, 32.0)), ([0.4] * 6, None)]
    assert _simplest_within_one_se(rows, candidates)[1] == (8.0, 32.0)
    far = [e * 0.3 for e in spread]  # (1, 4) clearly better
    assert _simplest_within_one_se(rows, [(far, (1.0, 4.0)), *candidates[1:]])[1] == (1.0, 4.0)
    assert _simplest_within_one_se(rows, [(spread, None), *candidates[:2]])[1] is None


def test_fitting_without_kernels_is_one_line_saying_what_to_collect(tmp_path):
    with open_store(tmp_path / "r") as store:
        with pytest.raises(UsageError, match="no VALID kernel runs") as raised:
            fit_predictor(training_set(store, "local", "onnx", 1))
    assert "aiot predict collect -d local -f onnx --threads 1" in raised.value.hint


def test_metrics_are_rmse_mape_and_shares():
    found = metrics([(105.0, 100.0), (80.0, 100.0), (100.0, 100.0), (9.0, 10.0)])
    assert found["n"] == 4 and found["mape"] == pytest.approx((5 + 20 + 0 + 10) / 4)
    assert found["within_5"] == 50.0 and found["within_10"] == 75.0
    assert found["rmse_ms"] == pytest.approx(math.sqrt((25 + 400 + 0 + 1) / 4))
    assert metrics([])["n"] == 0


def test_a_later_run_checks_the_prediction_made_before_it(tmp_path):
    with open_store(tmp_path / "r") as store:
        early = _record(store, "tiny_cnn", 1.0, kind="zoo")  # before any prediction
        prediction = store.begin(stored.PREDICTION, {"model": "tiny_cnn", "model_sha256": None},
                                 {}, device="local", model="tiny_cnn", format="onnx", threads=1)
        store.finish(prediction.id, "ok", result={"predicted_ms": 1.1, "low_ms": 0.9, "high_ms": 1.3})
        later = _record(store, "tiny_cnn", 1.0, kind="zoo")
        other = _record(store, "tiny_cnn", 1.0, kind="zoo", threads=2)
        assert stored.predicted_before(store, store.get(early.id)) is None
        assert stored.predicted_before(store, store.get(other.id)) is None
        found = stored.predicted_before(store, store.get(later.id))
        assert found.id == prediction.id
        line = stored.line(found, store.get(later.id))
        pairs = stored.pairs(store.query())
    assert "1.1 ms (0.9–1.3)" in line and "measured 1 ms: prediction +10.0 %, inside the interval" in line
    assert [(p.id, m.id) for p, m in pairs] == [(prediction.id, later.id)]
