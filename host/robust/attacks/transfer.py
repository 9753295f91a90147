"""Transfer attacks: crafted with gradients of a *source* model, evaluated on the target.

SI-NI-FGSM (Lin et al., ICLR 2020: Nesterov momentum plus scale-invariant gradients over
``x / 2^i`` copies) from torchattacks. The source is another set of weights of the same
architecture (``--source-weights F [--source-binarize ALG]``: FP32 → BNN and back); without
one it is the reference itself, and the only transfer left is reference → deployment.
"""

from __future__ import annotations

from aiot.host.robust.attacks.base import Crafted, Problem
from aiot.host.robust.attacks.whitebox import run_torchattacks


def sinifgsm(problem: Problem, eps: float) -> Crafted:
    """SI-NI-FGSM: 10 steps of ε/10, momentum decay 1.0, 5 scale copies."""
    import torchattacks

    module, name = (problem.source, "source") if problem.source is not None else (problem.reference, "reference")
    steps = problem.iterations(10)
    attack = torchattacks.SINIFGSM(module, eps=eps, alpha=eps / steps, steps=steps, decay=1.0, m=5)
    return run_torchattacks(attack, module, problem, name)
