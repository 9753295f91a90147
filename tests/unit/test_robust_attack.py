"""The attack suite's pieces: pixel space, oracle, catalogue, gradient attacks, metrics and tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aiot.core.errors import MissingDependency, UnknownName, UsageError
from aiot.host.robust.attacks import base, result
from aiot.host.robust.attacks.base import Attack, Crafted, Problem
from aiot.host.robust.attacks.catalog import ATTACKS, select_attacks
from aiot.host.robust.attacks.oracle import AdversarialFound, BudgetExhausted, Oracle, log_probs
from aiot.host.robust.attacks.space import distances, project, to_model_input, to_pixels, within
from aiot.host.robust.attacks.suite import AttackSettings, Outcome, budgeted_images
from aiot.models import InputSpec

GRAY = InputSpec(shape=(1, 2, 2), channel_order="GRAY", mean=(0.5,), std=(0.25,))


# --- pixel space ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    InputSpec(shape=(1, 28, 28), channel_order="GRAY", mean=(0.2860,), std=(0.3530,)),
    InputSpec(shape=(3, 16, 16), layout="NHWC", channel_order="BGR", mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3)),
])
def test_pixels_then_normalising_is_the_toolkits_preprocessing_bit_for_bit(spec):
    from aiot.models.datasets import preprocess

    rgb = spec.channels == 3
    images = np.random.default_rng(0).integers(0, 256, (3, 20, 24, 3) if rgb else (3, 28, 28), dtype=np.uint8)
    pixels = to_pixels(images, spec)
    assert pixels.shape == (3, *spec.shape) and 0 <= pixels.min() and pixels.max() <= 1
    assert np.array_equal(to_model_input(pixels, spec), preprocess(images, spec))


def test_distances_projection_and_the_ball():
    clean = np.full((2, 1, 2, 2), 0.5, np.float32)
    adversarial = clean + np.array([0.1, -0.3, 0.0, 0.0], np.float32).reshape(1, 1, 2, 2)
    assert distances(adversarial, clean, "linf") == pytest.approx([0.3, 0.3])
    assert distances(adversarial, clean, "l2") == pytest.approx([math.sqrt(0.1), math.sqrt(0.1)])
    inside = project(adversarial, clean, "linf", 0.2)
    assert inside[0].ravel() == pytest.approx([0.6, 0.3, 0.5, 0.5])
    shrunk = project(adversarial, clean, "l2", 0.1)
    assert distances(shrunk, clean, "l2") == pytest.approx([0.1, 0.1], rel=1e-5)
    assert within(inside, clean, "linf", 0.2).all() and not within(adversarial, clean, "linf", 0.2).any()
    assert not within(clean + 0.6, clean, "linf", 1.0).any()  # 1.1 is outside [0, 1]
    assert np.array_equal(project(np.full_like(clean, np.nan), clean, "l2", 1.0), clean)  # NaN = no step


def test_log_probs_agree_for_logits_and_probabilities():
    logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert log_probs(logits) == pytest.approx(log_probs(probs))
    assert np.exp(log_probs(logits)).sum(axis=1) == pytest.approx([1.0, 1.0])


# --- oracle ---------------------------------------------------------------------------------

class Threshold:
    """Class 1 when the mean pixel exceeds 0.6, else class 0 (normalised input: GRAY spec)."""

    name = "threshold"

    def __init__(self) -> None:
        self.queries, self.rows = 0, []

    def predict(self, x):
        self.queries += len(x)
        self.rows.append(len(x))
        mean = (np.asarray(x) * 0.25 + 0.5).reshape(len(x), -1).mean(axis=1)  # undo GRAY's normalisation
        return np.stack([0.6 - mean, mean - 0.6], axis=1)

    def close(self):
        pass


def test_oracle_counts_through_the_predictor_and_refuses_past_its_budget():
    predictor = Threshold()
    x = np.full((1, 2, 2), 0.5, np.float32)
    oracle = Oracle(predictor, GRAY, x, 0, budget=5)
    oracle.scores(np.stack([x, x, x]))
    with pytest.raises(BudgetExhausted):
        oracle.scores(np.stack([x, x, x]))  # 3 > 2 left: not asked at all
    assert oracle.queries == predictor.queries == 3 and oracle.remaining == 2
    assert oracle.decisions(np.stack([x, x + 0.4])).tolist() == [[1, 0], [0, 1]]
    assert oracle.queries == 5 and oracle.best_distance == pytest.approx(0.8)  # L2 of +0.4 on 4 pixels


def test_oracle_keeps_the_closest_adversarial_and_stops_when_told():
    x = np.full((1, 2, 2), 0.5, np.float32)
    oracle = Oracle(Threshold(), GRAY, x, 0, budget=100, norm="linf", eps=0.3)
    oracle.scores(np.stack([x + 0.4, x + 0.25, x + 0.05]))  # 0.4: outside ε; 0.05: still class 0
    assert oracle.best_distance == pytest.approx(0.25) and np.allclose(oracle.best, x + 0.25)
    stopping = Oracle(Threshold(), GRAY, x, 0, budget=100, norm="linf", eps=0.3, stop_on_success=True)
    with pytest.raises(AdversarialFound):
        stopping.scores(np.stack([x + 0.2]))
    assert stopping.queries == 1 and stopping.best is not None


# --- catalogue and dependencies -------------------------------------------------------------

def test_select_attacks_expands_groups_in_catalogue_order():
    assert [a.name for a in select_attacks("pgd,fgsm,PGD")] == ["fgsm", "pgd"]
    assert [a.name for a in select_attacks("black-box")] == [
        "spsa", "square", "nattack", "boundary", "hsj", "evolutionary"]
    assert [a.name for a in select_attacks("transfer,aa")] == ["autoattack", "sinifgsm"]
    assert len(select_attacks("all")) == len(ATTACKS) == 13
    assert {a.name for a in select_attacks("white-box")} == {"fgsm", "pgd", "pgd-l2", "cw", "deepfool", "autoattack"}


def test_unknown_attack_names_close_matches():
    with pytest.raises(UnknownName) as caught:
        select_attacks("fgsm,pgdd")
    assert caught.value.name == "pgdd" and "pgd" in caught.value.close
    with pytest.raises(UsageError, match="no attack selected"):
        select_attacks(" , ")


def test_a_missing_library_is_a_missing_dependency_with_the_no_deps_hint(monkeypatch):
    real = base.importlib.util.find_spec
    monkeypatch.setattr(base.importlib.util, "find_spec", lambda name: None if name == "torchattacks" else real(name))
    with pytest.raises(MissingDependency) as caught:
        base.require(ATTACKS.get("fgsm").modules)
    assert caught.value.extra == "robust" and "--no-deps" in caught.value.hint
    assert "aiot[robust]" in caught.value.hint
    base.require(ATTACKS.get("nattack").modules)  # ours: numpy only


def test_settings_reject_budgets_out_of_range():
    with pytest.raises(UsageError, match="--eps"):
        AttackSettings(("fgsm",), eps=-0.1).validate()
    with pytest.raises(UsageError, match="pixel range"):
        AttackSettings(("fgsm",), eps=8.0).validate()
    with pytest.raises(UsageError, match="--queries"):
        AttackSettings(("spsa",), queries=0).validate()
    with pytest.raises(UsageError, match="--eps-curve"):
        AttackSettings(("fgsm",), eps_curve=(0.01, math.nan)).validate()


# --- scoring at a budget ----------------------------------------------------------------------

def _attack(name="x", norm="l2", minimum_norm=True, family="white-box", queries=None) -> Attack:
    return Attack(name, name.upper(), family, norm, minimum_norm, "aiot", lambda p, e: None, queries)


def test_minimum_norm_results_count_only_inside_the_budget():
    clean = np.zeros((3, 1, 2, 2), np.float32)
    adversarial = clean + np.array([0.1, 0.3, 0.2]).reshape(3, 1, 1, 1).astype(np.float32)  # L2 0.2, 0.6, 0.4
    crafted = Crafted(adversarial, np.array([True, True, False]), np.zeros(3, int), np.ones(3, bool), "reference")
    images = budgeted_images(_attack(), crafted, clean, 0.5)
    # the first is within 0.5; the second is too far; the third did not fool its model
    assert np.array_equal(images, np.stack([adversarial[0], clean[1], clean[2]]))
    bounded = budgeted_images(_attack(norm="linf", minimum_norm=False), crafted, clean, 0.15)
    assert np.abs(bounded - clean).max() == pytest.approx(0.15)


def _outcome(name, correct_ref, correct_dep=None, family="white-box", seconds=1.0):
    n = len(correct_ref)
    crafted = Crafted(np.zeros((n, 1, 1, 1), np.float32), ~np.array(correct_ref), np.full(n, 10), np.ones(n, bool),
                      "reference")
    correct = {"reference": np.array(correct_ref, bool)}
    if correct_dep is not None:
        correct["ort@local"] = np.array(correct_dep, bool)
    attack = _attack(name, "linf", False, family, 100 if family != "white-box" else None)
    return Outcome(attack, 0.03, crafted, correct, seconds, 100 if attack.black_box else None, np.full(n, 0.03))


def test_summary_and_table_on_a_hand_built_example():
    # clean: reference right on 4 of 5 images (0.8), the deployment on 3 of 5 (0.6)
    clean = {"reference": 0.8, "ort@local": 0.6}
    a = _outcome("a", [1, 1, 0, 1, 0], [1, 0, 0, 1, 0])
    b = _outcome("b", [1, 0, 1, 1, 0], [0, 0, 0, 1, 0], family="score")
    summary = result.summary([a, b], clean)
    assert summary["a_reference"] == 0.6 and summary["b_deployed"] == 0.2
    assert summary["wcar_reference"] == pytest.approx(0.4)  # images 0 and 3 survive both attacks
    assert summary["wcar_deployed"] == pytest.approx(0.2)
    table = result.attack_table([a, b], clean)
    rows = {row[0]: dict(zip(table["columns"], row)) for row in table["rows"]}
    assert rows["a"]["normalized (reference)"] == pytest.approx(0.75)  # 0.6 / 0.8
    assert rows["a"]["AAI (reference)"] == pytest.approx(0.25)  # (0.8 - 0.6) / 0.8
    assert rows["b"]["AAI (ort@local)"] == pytest.approx(2 / 3)  # (0.6 - 0.2) / 0.6
    assert rows["a"]["queries"] is None and rows["b"]["queries"] == 50 and rows["b"]["queries per image"] == 10


def test_curves_have_one_series_per_attack_and_model():
    points = [_outcome("a", [1, 1, 1, 1]), _outcome("a", [1, 0, 1, 0])]
    points[1].eps = 0.05
    curves = result.eps_curves({"a": points}, ["reference"])
    assert curves == [{"name": "accuracy-vs-eps-linf", "title": "Accuracy vs L∞ budget",
                       "x_label": "ε∞ (pixels in [0, 1])", "y_label": "accuracy under attack",
                       "series": {"A · reference": [[0.03, 1.0], [0.05, 0.5]]}}]


# --- gradient attacks on real modules ------------------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("torchattacks")


def _linear_problem():
    from aiot.host.robust.attacks.modules import reference_module

    class Linear(torch.nn.Module):
        """Logits ``[w·x, -w·x]`` on the normalised input."""

        def __init__(self, w):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(w, dtype=torch.float32).reshape(1, 1, 2, 2))

        def forward(self, x):
            s = (x * self.w).flatten(1).sum(dim=1)
            return torch.stack([s, -s], dim=1)

    module = reference_module(Linear([1.0, -2.0, 3.0, -4.0]), GRAY)
    pixels = np.full((1, 1, 2, 2), 0.6, np.float32)  # normalised: 0.4 everywhere, s = -0.8: class 1
    return Problem(pixels, np.array([1]), GRAY, classes=2, reference=module)


def test_fgsm_moves_each_pixel_by_eps_against_the_gradient_sign():
    problem = _linear_problem()
    crafted = ATTACKS.get("fgsm").run(problem, 0.1)
    # loss of class 1 grows with s = Σ w·x, so each pixel moves by +0.1·sign(w) (std > 0 keeps signs)
    assert crafted.adversarial.ravel() == pytest.approx([0.7, 0.5, 0.7, 0.5])
    assert crafted.crafted_on == "reference" and crafted.queries.tolist() == [0]


# AutoAttack runs its four attacks on every image at ε = 0 (nothing is ever broken): ~5 s.
GRADIENT = ["fgsm", "pgd", "pgd-l2", "cw", "deepfool", pytest.param("autoattack", marks=pytest.mark.slow),
            "sinifgsm"]


@pytest.fixture(scope="module")
def tiny_problem():
    from aiot.host.robust.attacks.modules import reference_module
    from aiot.host.robust.attacks.whitebox import predicted
    from aiot.models import get_model_spec

    spec = get_model_spec("tiny_cnn")
    torch.manual_seed(0)
    module = reference_module(spec.build().eval(), spec.input)
    pixels = np.random.default_rng(0).uniform(0, 1, (3, 1, 28, 28)).astype(np.float32)
    labels = predicted(module, pixels)
    labels[0] = (labels[0] + 1) % 10  # one image the model gets wrong
    return Problem(pixels, labels, spec.input, classes=10, reference=module, seed=0, steps=2, queries=20)


def _accuracy(problem, images):
    from aiot.host.robust.attacks.whitebox import predicted

    return float(np.mean(predicted(problem.reference, images) == problem.labels))


@pytest.mark.parametrize("name", GRADIENT)
def test_eps_zero_leaves_accuracy_unchanged(tiny_problem, name):
    attack = ATTACKS.get(name)
    crafted = attack.run(tiny_problem, 0.0)
    images = budgeted_images(attack, crafted, tiny_problem.pixels, 0.0)
    assert np.abs(images - tiny_problem.pixels).max() <= 1e-6
    assert _accuracy(tiny_problem, images) == _accuracy(tiny_problem, tiny_problem.pixels) == pytest.approx(2 / 3)


@pytest.mark.parametrize("name,eps", [("fgsm", 0.05), ("pgd", 0.05), ("pgd-l2", 0.5), ("sinifgsm", 0.05),
                                      ("cw", 0.5)])
def test_results_stay_in_the_ball_and_in_range(tiny_problem, name, eps):
    attack = ATTACKS.get(name)
    images = budgeted_images(attack, attack.run(tiny_problem, eps), tiny_problem.pixels, eps)
    assert within(images, tiny_problem.pixels, attack.norm, eps).all()
    assert 0 <= images.min() and images.max() <= 1


def test_the_reference_stays_in_eval_mode(tiny_problem):
    # torchattacks restores the mode it found: a training-mode wrapper would switch BatchNorm
    # to batch statistics for every later prediction.
    ATTACKS.get("pgd").run(tiny_problem, 0.03)
    assert not tiny_problem.reference.training and not tiny_problem.reference.model.training
