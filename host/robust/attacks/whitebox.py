"""White-box attacks on the host's PyTorch reference, in [0, 1] pixel space.

Libraries (``../shared/notes/robustness.md`` §A): torchattacks for FGSM, PGD L∞/L2 and C&W;
ART for DeepFool (torchattacks' DeepFool under-performs: it clamps and overshoots every step);
pyautoattack for the *standard* AutoAttack (APGD-CE, APGD-T, FAB-T, Square) — ART's
``AutoAttack`` defaults to a different set.
"""

from __future__ import annotations

import numpy as np

from aiot.host.robust.attacks.base import Crafted, Problem

#: ART DeepFool's overshoot (the paper's 0.02).
DEEPFOOL_OVERSHOOT = 0.02


def _tensors(problem: Problem):
    import torch

    return torch.from_numpy(np.ascontiguousarray(problem.pixels)), torch.from_numpy(
        np.asarray(problem.labels, dtype=np.int64))


def predicted(module, pixels: np.ndarray, batch: int = 256) -> np.ndarray:
    """Top-1 classes of a pixel-space module (no gradients)."""
    import torch

    top = [np.zeros(0, np.int64)]
    with torch.inference_mode():
        for i in range(0, len(pixels), batch):
            chunk = torch.from_numpy(np.ascontiguousarray(pixels[i:i + batch], dtype=np.float32))
            top.append(module(chunk).argmax(dim=1).numpy())
    return np.concatenate(top)


def crafted_on(module, problem: Problem, adversarial: np.ndarray, name: str) -> Crafted:
    """A gradient attack's result: no queries; fooled and attacked as the module sees it.

    ``attacked`` marks the images the module classifies correctly clean: the others are
    misclassified already, so what the library returns for them says nothing about the attack.
    """
    adversarial = np.asarray(adversarial, np.float32)
    return Crafted(adversarial, predicted(module, adversarial) != problem.labels,
                   np.zeros(len(adversarial), np.int64), predicted(module, problem.pixels) == problem.labels, name)


def run_torchattacks(attack, module, problem: Problem, name: str = "reference") -> Crafted:
    """Run a torchattacks attack on every image (seeded), batch by batch."""
    import torch

    torch.manual_seed(problem.seed)
    x, y = _tensors(problem)
    chunks = [attack(x[i:i + 128], y[i:i + 128]).detach().numpy() for i in range(0, len(x), 128)]
    adversarial = np.concatenate(chunks) if chunks else problem.pixels.copy()
    return crafted_on(module, problem, adversarial, name)


def fgsm(problem: Problem, eps: float) -> Crafted:
    """FGSM (Goodfellow et al. 2015): one step of ``eps · sign(∇x loss)``."""
    import torchattacks

    return run_torchattacks(torchattacks.FGSM(problem.reference, eps=eps), problem.reference, problem)


def pgd(problem: Problem, eps: float) -> Crafted:
    """PGD L∞ (Madry et al. 2018): random start, 20 steps of ``2.5 ε / steps``."""
    import torchattacks

    steps = problem.iterations(20)
    attack = torchattacks.PGD(problem.reference, eps=eps, alpha=2.5 * eps / steps, steps=steps,
                              random_start=True)
    return run_torchattacks(attack, problem.reference, problem)


def pgd_l2(problem: Problem, eps: float) -> Crafted:
    """PGD L2: random start, 20 steps of ``2.5 ε / steps`` along the normalised gradient."""
    import torchattacks

    if eps == 0:
        # torchattacks 3.5.1 projects with eps / ‖δ‖ = 0 / 0 (NaN); the ball is the image itself.
        return crafted_on(problem.reference, problem, problem.pixels.copy(), "reference")
    steps = problem.iterations(20)
    attack = torchattacks.PGDL2(problem.reference, eps=eps, alpha=2.5 * eps / steps, steps=steps,
                                random_start=True)
    return run_torchattacks(attack, problem.reference, problem)


def cw(problem: Problem, eps: float) -> Crafted:
    """C&W L2 (Carlini & Wagner 2017): c = 1, κ = 0, 100 Adam steps of 0.01 (minimum norm)."""
    import torchattacks

    attack = torchattacks.CW(problem.reference, c=1.0, kappa=0.0, steps=problem.iterations(100), lr=0.01)
    return run_torchattacks(attack, problem.reference, problem)


def deepfool(problem: Problem, eps: float) -> Crafted:
    """DeepFool L2 (Moosavi-Dezfooli et al. 2016), ART's: 50 steps, overshoot 0.02 (minimum norm)."""
    import torch
    from art.attacks.evasion import DeepFool
    from art.estimators.classification import PyTorchClassifier

    classifier = PyTorchClassifier(problem.reference, loss=torch.nn.CrossEntropyLoss(),
                                   input_shape=problem.pixels.shape[1:], nb_classes=problem.classes,
                                   clip_values=(0.0, 1.0), device_type="cpu")
    attack = DeepFool(classifier, max_iter=problem.iterations(50), epsilon=DEEPFOOL_OVERSHOOT,
                      nb_grads=problem.classes, batch_size=64, verbose=False)
    adversarial = attack.generate(problem.pixels) if len(problem.pixels) else problem.pixels
    return crafted_on(problem.reference, problem, adversarial, "reference")


def autoattack(problem: Problem, eps: float) -> Crafted:
    """Standard AutoAttack (Croce & Hein 2020) L∞ from pyautoattack: APGD-CE, APGD-T, FAB-T, Square.

    ``--steps`` shortens APGD and FAB (100 iterations in the standard version) and ``--queries``
    Square's 5,000 queries; the record says so.
    """
    from pyautoattack import AutoAttack

    attack = AutoAttack(problem.reference, eps=eps, norm="Linf", version="standard", seed=problem.seed,
                        device="cpu")
    attack.verbose = False
    targets = max(1, min(9, problem.classes - 1))
    attack.apgd_targeted.n_target_classes = attack.fab.n_target_classes = targets
    notes = []
    if problem.steps is not None:
        attack.apgd.n_iter = attack.apgd_targeted.n_iter = attack.fab.n_iter = problem.steps
        notes.append(f"AutoAttack ran APGD and FAB for {problem.steps} iterations (standard: 100)")
    if problem.queries is not None:
        attack.square.n_queries = problem.queries
        notes.append(f"AutoAttack's Square ran {problem.queries} queries (standard: 5,000)")
    x, y = _tensors(problem)
    adversarial = attack.run_standard_evaluation(x, y, batch_size=128)[0].numpy() if len(x) else problem.pixels
    result = crafted_on(problem.reference, problem, adversarial, "reference")
    result.notes.extend(notes)
    return result
