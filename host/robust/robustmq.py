"""RobustMQ's whole grid as one resumable procedure (``aiot paper robustmq``).

The grid is the paper's: architectures × (full precision, and each quantization method at
each bit-width) × three suites (adversarial attacks, natural corruptions with their
perturbation sequences, systematic noise of decoders and resize modes). Each cell is trained
first as the paper does (``aiot train``'s recipe: the float model, then quantization-aware
fine-tuning from it; cached trainings are reused), then each suite runs as one ordinary
``robust-*`` record, so ``aiot results`` and ``aiot report`` read them like any other.

Resuming is the campaign engine's (:func:`aiot.host.engine.campaign.sweep_key` and
:func:`~aiot.host.engine.campaign.resume_sweep`): the grid's jobs hash to a sweep id, every
record is filed under it, and the same command again runs only the jobs without an ok
record; the sweep is locked against a second process (:func:`aiot.host.store.locks.campaign_locks`).
Tables are built from the records by :mod:`aiot.host.robust.robustmq_tables`.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiot.core.errors import AiotError, UsageError
from aiot.host.devices.reservations import current_user
from aiot.host.engine.campaign import resume_sweep, sweep_key
from aiot.host.engine.weights import TRAINED
from aiot.host.engine.workspace import Workspace
from aiot.host.robust.attacks.base import require
from aiot.host.robust.attacks.catalog import select_attacks
from aiot.host.robust.attacks.suite import AttackSettings, run_suite
from aiot.host.robust.corrupt import imagenet_c
from aiot.host.robust.corrupt.suite import CorruptConfig, run_corrupt
from aiot.host.robust.data import eval_set
from aiot.host.robust.record import run_recorded
from aiot.host.robust.sysnoise import evaluate as sysnoise_evaluate
from aiot.host.robust.target import Target
from aiot.host.store.locks import campaign_locks
from aiot.host.store.store import RunRecord, open_store, utc_now
from aiot.host.training.record import train_and_record
from aiot.host.training.trainer import TrainConfig
from aiot.models.quant.methods import BITS, METHODS

#: The paper's four architectures, by aiot family (the 28 px variants run on Fashion-MNIST).
PAPER_ARCHITECTURES = {"resnet18": "ResNet18", "resnet50": "ResNet50",
                       "regnetx_600mf": "RegNetX600M", "mobilenet_v2": "MobileNetV2"}
#: Suites of the grid, their record kinds and the job field records carry.
SUITES = {"attack": "robust-attack", "corrupt": "robust-corrupt", "sysnoise": "robust-sysnoise"}
JOB_FIELD = "robustmq_job"
#: System noise as the paper has it: decoders and resize modes (not colour, precision, ...).
SYSNOISE_TYPES = ("decoder", "resize")
#: The host the grid runs on: every suite scores the fake-quantized PyTorch model here.
HOST = "local"


def default_models(dataset: str) -> tuple[str, ...]:
    """The paper's architectures: the ImageNet models on an ImageNet folder, else the 28 px
    variants (Fashion-MNIST, digits)."""
    suffix = "" if dataset.startswith("folder:") else "_mnist"
    return tuple(f"{family}{suffix}" for family in PAPER_ARCHITECTURES)


@dataclass(frozen=True)
class Cell:
    """One model of the grid: ``model`` at full precision (``quantize`` None) or quantized."""

    model: str
    quantize: str | None = None

    @property
    def method(self) -> str | None:
        return self.quantize.partition(":")[0] if self.quantize else None

    @property
    def bits(self) -> int:
        return int(self.quantize.partition(":")[2]) if self.quantize else 32

    @property
    def zoo_name(self) -> str:
        """What ``--model`` takes for it (``tiny_cnn_lsq4``)."""
        return f"{self.model}_{self.quantize.replace(':', '')}" if self.quantize else self.model


@dataclass(frozen=True)
class Grid:
    """What ``aiot paper robustmq`` measures (every field is part of the sweep's identity).

    Args:
        models: zoo models (FP); each is measured as is and quantized.
        methods, bits: quantization methods (canonical names) and bit-widths.
        dataset, limit, seed: evaluation images (a seeded, class-balanced subset).
        suites: which of :data:`SUITES` run.
        attacks, eps: the white-box attacks and their small L∞ budget (WCAR is over them).
        corruptions, severities, frames: ImageNet-C corruptions, severities, and frames per
            perturbation sequence (None: no flip probability).
        epochs, train_limit: the training recipe of each cell (``aiot train``'s).
    """

    models: tuple[str, ...]
    methods: tuple[str, ...] = ("dorefa", "pact", "lsq")
    bits: tuple[int, ...] = BITS
    dataset: str = "fashion-mnist"
    limit: int = 200
    seed: int = 0
    suites: tuple[str, ...] = tuple(SUITES)
    attacks: tuple[str, ...] = ("fgsm", "pgd")
    eps: float = 0.01
    corruptions: tuple[str, ...] = imagenet_c.CORRUPTIONS
    severities: tuple[int, ...] = imagenet_c.SEVERITIES
    frames: int | None = 16
    epochs: int = 2
    train_limit: int | None = None

    def cells(self) -> list[Cell]:
        """Per model: its FP cell, then each method at each width (the paper's row order)."""
        return [cell for model in self.models for cell in (
            Cell(model), *(Cell(model, f"{m}:{b}") for m in self.methods for b in self.bits))]

    def attack_settings(self) -> AttackSettings:
        return AttackSettings(tuple(self.attacks), eps=self.eps, dataset=self.dataset,
                              limit=self.limit, seed=self.seed)

    def corrupt_config(self) -> CorruptConfig:
        return CorruptConfig(tuple(self.corruptions), tuple(self.severities), self.dataset,
                             self.limit, self.seed, self.frames)

    def sysnoise_spec(self) -> dict:
        return {"types": list(SYSNOISE_TYPES), "devices": [HOST], "dataset": self.dataset,
                "limit": self.limit, "seed": self.seed}

    def suite_spec(self, suite: str) -> dict:
        """The spec a suite's record carries (the same as the suite's own command's)."""
        return {"attack": lambda: self.attack_settings().to_dict(),
                "corrupt": lambda: self.corrupt_config().to_dict(),
                "sysnoise": self.sysnoise_spec}[suite]()

    def train_config(self, cell: Cell) -> TrainConfig:
        return TrainConfig(model=cell.model, dataset=self.dataset, epochs=self.epochs,
                           limit=self.train_limit, seed=self.seed, quantize=cell.quantize)

    def jobs(self) -> list[Job]:
        """Every (cell, suite) of the grid, in the order they run."""
        return [Job(cell, suite, job_key(cell, suite, self.suite_spec(suite), self.train_config(cell)))
                for cell in self.cells() for suite in self.suites]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Job:
    """One suite on one cell; ``key`` names it across runs of the command."""

    cell: Cell
    suite: str
    key: str


def job_key(cell: Cell, suite: str, spec: dict, train: TrainConfig) -> str:
    """A stable id of one job: its model, suite settings and training recipe."""
    payload = {"cell": asdict(cell), "suite": suite, "spec": spec, "train": asdict(train)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Outcome:
    """What :func:`run_grid` leaves: the sweep, its newest record per job, and what failed."""

    sweep_id: str
    resumed: int
    records: dict[str, RunRecord] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


Progress = Callable[[str], None]


def run_grid(grid: Grid, results_dir: Path, fresh: bool = False, progress: Progress | None = None) -> Outcome:
    """Run (or resume) ``grid``: per cell, train then run the suites it still lacks.

    A job that fails (its record says why) does not stop the others; Ctrl-C finishes the
    running record as failed and stops, and the same call later resumes.

    Raises:
        Busy: another process runs this very grid.
    """
    progress = progress or (lambda text: None)
    jobs = grid.jobs()
    with open_store(results_dir) as store:
        store.reap_stale()
        sweep_id, history = resume_sweep(store, sweep_key([j.key for j in jobs], grid.seed, False), fresh)
    done = {r.spec.get(JOB_FIELD) for r in history if r.status == "ok"}
    outcome = Outcome(sweep_id, len(done & {j.key for j in jobs}))
    info = {"user": current_user(), "host": socket.gethostname(), "runs": len(jobs), "started": utc_now()}
    with campaign_locks(sweep_id, [], info), open_store(results_dir) as store:
        workspace = Workspace(results_dir)
        try:
            for cell in grid.cells():
                todo = [j for j in jobs if j.cell == cell and j.key not in done]
                if todo:
                    _run_cell(grid, cell, todo, store, workspace, sweep_id, progress, outcome)
        finally:
            workspace.close()
        outcome.records = newest_per_job(store.query(sweep_id=sweep_id))
    return outcome


def newest_per_job(records: list[RunRecord]) -> dict[str, RunRecord]:
    """The last record of each job (records oldest first): a rerun replaces a failure."""
    newest = {}
    for record in records:
        key = record.spec.get(JOB_FIELD)
        if key:
            newest[key] = record
    return newest


def _run_cell(grid: Grid, cell: Cell, todo: list[Job], store, workspace, sweep_id: str,
              progress: Progress, outcome: Outcome) -> None:
    """Train ``cell`` (or reuse its training), then run its ``todo`` jobs."""
    progress(f"training {cell.zoo_name} on {grid.dataset}…")
    try:
        trained, _ = train_and_record(grid.train_config(cell), store)
    except AiotError as exc:
        outcome.failures.append(f"{cell.zoo_name}: training failed: {exc.one_line()}")
        return
    target = Target(cell.model, trained.weights_path, fmt=None, device=HOST,
                    weights_origin=TRAINED, quantize=cell.quantize)
    for job in todo:
        progress(f"{job.suite} on {cell.zoo_name}…")
        spec = {**grid.suite_spec(job.suite), JOB_FIELD: job.key}
        try:
            run_recorded(store, SUITES[job.suite], target, spec,
                         _work(grid, job.suite, target, workspace, progress), sweep_id=sweep_id)
        except AiotError as exc:  # recorded as failed; the other jobs go on
            outcome.failures.append(f"{cell.zoo_name} {job.suite}: {exc.one_line()}")


def _work(grid: Grid, suite: str, target: Target, workspace, progress: Progress):
    """The suite's work function for :func:`run_recorded`."""
    if suite == "attack":
        return lambda provenance: run_suite(target, grid.attack_settings(), None, progress=progress)
    if suite == "corrupt":
        return lambda provenance: run_corrupt(target, grid.corrupt_config(), workspace, provenance, progress)

    def sysnoise(provenance: dict) -> dict:
        images = eval_set(grid.dataset, grid.limit, grid.seed)
        result, learned = sysnoise_evaluate(target, images, types=SYSNOISE_TYPES, devices=[HOST],
                                            workspace=workspace, progress=progress)
        provenance.update(learned)
        return result

    return sysnoise


def check_grid(grid: Grid) -> None:
    """Every name of ``grid`` checked before any work (models, methods, suites, attacks).

    Raises:
        UsageError / UnknownName: the first bad name, with the known ones.
    """
    unknown = [s for s in grid.suites if s not in SUITES]
    if unknown or not grid.suites:
        raise UsageError(f"unknown suite(s) {', '.join(unknown) or '(none)'}",
                         f"use some of: {', '.join(SUITES)}")
    for method in grid.methods:
        METHODS.get(method)
    if not grid.models:
        raise UsageError("--models named no model", "e.g. --models tiny_cnn")
    grid.attack_settings().validate()
    if "attack" in grid.suites:
        for attack in select_attacks(",".join(grid.attacks)):
            require(attack.modules)
