"""``aiot robust``: robustness of the PyTorch model and of its deployed artifact.

Three suites, each stored as one record and shown by ``aiot report``:
``sysnoise`` (decoders, resizers, colour, precision, inference variants, platforms),
``corrupt`` (ImageNet-C corruptions and perturbation sequences) and ``attack`` (white-box,
transfer and black-box attacks). Each suite's command lives in its own module, imported when
the suite is used, and its work in another (``robust_attack_run``, ...), imported when it runs
(they pull NumPy and the engine). The options they share live in
:mod:`aiot.host.cli.robust_options`, the target and record/workspace plumbing in
:mod:`aiot.host.cli.robust_common`.
"""

from __future__ import annotations

import typer

from aiot.host.cli.lazy import LazyGroup, Table

# The suites, in the order `aiot robust --help` lists them (see aiot.host.cli.lazy).
SUITES: Table = {
    "sysnoise": ("robust_sysnoise", "Accuracy drop (dACC) and top-1 flip rate when one step of "
                                    "the deployment pipeline changes."),
    "corrupt": ("robust_corrupt", "Accuracy under the 15 ImageNet-C corruptions x 5 severities, "
                                  "and flip probability."),
    "attack": ("robust_attack", "White-box, transfer and black-box attacks; accuracy on the "
                                "reference and the deployment."),
}


class RobustGroup(LazyGroup):
    TABLE = SUITES


app = typer.Typer(cls=RobustGroup, no_args_is_help=True,
                  help="Robustness suites: system noise, natural corruptions, adversarial attacks.")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="robust")
