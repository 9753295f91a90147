"""``aiot robust``: robustness of the PyTorch model and of its deployed artifact.

Three suites, each stored as one record and shown by ``aiot report``:
``sysnoise`` (decoders, resizers, colour, precision, inference variants, platforms),
``corrupt`` (ImageNet-C corruptions and perturbation sequences) and ``attack`` (white-box,
transfer and black-box attacks). Each suite's command lives in its own module; what they
share (options, target, record/workspace plumbing) in :mod:`aiot.host.cli.robust_common`.
"""

from __future__ import annotations

import typer

from aiot.host.cli import robust_attack, robust_corrupt, robust_sysnoise

app = typer.Typer(no_args_is_help=True,
                  help="Robustness suites: system noise, natural corruptions, adversarial attacks.")

for _suite in (robust_sysnoise, robust_corrupt, robust_attack):
    _suite.register(app)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="robust")
