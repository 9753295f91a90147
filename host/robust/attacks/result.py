"""The attack suite's result dict: summary, one table row per attack, accuracy-vs-ε curves, notes."""

from __future__ import annotations

import importlib.metadata

import numpy as np

from aiot.host.robust import metrics
from aiot.host.robust.attacks.base import finite_or_none

#: pip distributions behind each attack library (recorded with their versions).
_DISTRIBUTIONS = {"torchattacks": "torchattacks", "art": "adversarial-robustness-toolbox",
                  "pyautoattack": "pyautoattack"}


def _accuracy(mask: np.ndarray) -> float:
    return float(np.mean(mask)) if len(mask) else 0.0


def _role_label(role: str) -> str:
    return "reference" if role == "reference" else "deployed"


def summary(outcomes, clean: dict[str, float]) -> dict:
    """Headline numbers: clean accuracy, ACC* per attack and WCAR, per evaluated model."""
    out = {}
    for role, acc in clean.items():
        label = _role_label(role)
        out[f"clean_{label}"] = acc
        for outcome in outcomes:
            out[f"{outcome.attack.name}_{label}"] = _accuracy(outcome.correct[role])
        if outcomes:
            worst = metrics.worst_case_accuracy({o.attack.name: o.correct[role] for o in outcomes})
            out[f"wcar_{label}"] = finite_or_none(worst)
    return out


def _median_distance(outcome) -> float | None:
    found = outcome.crafted.found & outcome.crafted.attacked
    return finite_or_none(float(np.median(outcome.distance[found]))) if found.any() else None


def attack_table(outcomes, clean: dict[str, float]) -> dict:
    """One row per attack: budget, where it was crafted, ACC*, normalized, AAI, queries, time."""
    roles = list(clean)
    columns = ["attack", "family", "norm", "eps", "crafted on"]
    for role in roles:
        columns += [f"accuracy ({role})", f"normalized ({role})", f"AAI ({role})"]
    columns += ["attacked", "queries", "queries per image", "budget per image", "seconds", "median distance"]
    rows = []
    for o in outcomes:
        row = [o.attack.name, o.attack.family, o.attack.norm, o.eps, o.crafted.crafted_on]
        for role in roles:
            acc = _accuracy(o.correct[role])
            row += [acc, finite_or_none(metrics.normalized_adversarial_accuracy(clean[role], acc)),
                    finite_or_none(metrics.aai(clean[role], acc))]
        attacked = int(o.crafted.attacked.sum())
        total = int(o.crafted.queries.sum())
        per_image = total / attacked if o.attack.black_box and attacked else None
        row += [attacked, total if o.attack.black_box else None, per_image, o.budget, round(o.seconds, 3),
                _median_distance(o)]
        rows.append(row)
    return {"name": "attacks", "title": "Accuracy under attack (ACC*, over all images)",
            "columns": columns, "rows": rows}


def eps_curves(curves: dict, roles: list[str]) -> list[dict]:
    """Accuracy vs budget, one series per (attack, evaluated model), one curve per norm."""
    result = []
    for norm, symbol in (("linf", "∞"), ("l2", "2")):
        series = {}
        for points in curves.values():
            if not points or points[0].attack.norm != norm:
                continue
            for role in roles:
                series[f"{points[0].attack.title} · {role}"] = [[p.eps, _accuracy(p.correct[role])] for p in points]
        if series:
            result.append({"name": f"accuracy-vs-eps-{norm}", "title": f"Accuracy vs L{symbol} budget",
                           "x_label": f"ε{symbol} (pixels in [0, 1])", "y_label": "accuracy under attack",
                           "series": series})
    return result


def notes(outcomes, problem, deployed) -> list[str]:
    """Honest remarks on how the numbers were obtained."""
    lines = ["Accuracy is over all images (ARBiBench): an image misclassified clean stays misclassified."]
    names = [o.attack.name for o in outcomes]
    minimum = [o.attack.title for o in outcomes if o.attack.minimum_norm]
    if minimum:
        verb = "searches" if len(minimum) == 1 else "search"
        lines.append(f"{', '.join(minimum)} {verb} for the smallest adversarial: an image counts as broken "
                     "only when it lies within the L2 budget (the median distance is the one reached).")
    if deployed is not None and any(not o.attack.black_box for o in outcomes):
        lines.append(f"White-box and transfer images were crafted on the host and evaluated unchanged on "
                     f"{deployed.name}: its column is transfer-to-deployment accuracy.")
    black = [o for o in outcomes if o.attack.black_box]
    if black:
        attacked = int(black[0].crafted.attacked.sum())
        lines.append(f"Black-box attacks queried {problem.victim.name} through its predictor, on the "
                     f"{attacked} images it classifies correctly, each with its own query budget; "
                     "score-based ones stop at the first adversarial inside the ε-ball.")
    if "sinifgsm" in names:
        lines.append("SI-NI-FGSM was crafted on the source weights." if problem.source is not None else
                     "SI-NI-FGSM was crafted on the reference itself (no --source-weights): "
                     "white-box on the reference, transfer only to the deployment.")
    for o in outcomes:
        lines += [n for n in o.crafted.notes if n not in lines]
    return lines


def libraries(outcomes) -> dict:
    """Versions of numpy, torch and the attack libraries that ran."""
    wanted = ["numpy", "torch", *sorted({_DISTRIBUTIONS[o.attack.library] for o in outcomes
                                         if o.attack.library in _DISTRIBUTIONS})]
    versions = {}
    for name in wanted:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def build_result(settings, outcomes, curves, evaluator, problem, data, deployed) -> dict:
    """The suite's record result (the shared shape of every robustness suite)."""
    clean = {role: _accuracy(mask) for role, mask in evaluator.clean.items()}
    main_role = deployed.name if deployed is not None else "reference"
    return {"suite": "attack", "clean_accuracy": clean[main_role],
            "summary": summary(outcomes, clean),
            "tables": [attack_table(outcomes, clean)],
            "curves": eps_curves(curves, list(clean)),
            "notes": notes(outcomes, problem, deployed),
            "data": data.describe(), "libraries": libraries(outcomes)}
