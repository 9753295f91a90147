"""Train a zoo model on a dataset and cache the weights: Adam, per-step cosine schedule, cross-entropy.

Weights are keyed by a hash of everything that changes them (model, input spec, dataset
selection, hyper-parameters, binarization, recipe version), so ``train`` is cheap to call
again: with ``reuse=True`` a finished run is returned from its JSON summary without touching
torch's optimiser. Files are written to a temporary name and renamed into place, the weights
before their summary, so an interrupted run (Ctrl-C, crash, full disk) never leaves a file
that a later run would trust.

Binarized and quantized training follow BiBench's and RobustMQ's pipeline: the full-precision model is trained first
with the same recipe (or reused from the cache), binarized with the chosen algorithm
(:func:`aiot.models.bibench.binarize`) or quantized with a method at a bit-width
(:func:`aiot.models.quant.quantize`, ``--quantize lsq:4``), and fine-tuned
(quantization-aware training); each binarized layer's schedule (ReCU's tau, FDA's Fourier
terms) is advanced before every epoch.

Every finished epoch is checkpointed (model, optimizer, schedule, data-order RNG, history)
beside the weights; a run that was interrupted resumes from its last checkpoint when the same
configuration is trained again, and the checkpoint is deleted once the weights are saved.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from aiot.core.errors import UsageError
from aiot.core.fileio import sha256_file, write_atomic, write_text_atomic
from aiot.core.host_cpus import host_threads
from aiot.core.paths import weights_dir as default_weights_dir
from aiot.core.safe_load import UnpicklingRefused, load_tensors

log = logging.getLogger(__name__)

#: Bump when the training recipe changes in a way that changes the weights.
RECIPE_VERSION = 1
#: Format of the per-epoch checkpoint.
CHECKPOINT_VERSION = 1
#: How a binarized model starts: from the trained full-precision model (BiBench) or random init.
INITS = ("fp", "scratch")
#: Format of the JSON summary beside the weights.
SUMMARY_VERSION = 1

OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("cosine", "constant")

Progress = Callable[[str, int, int], None]

_EVAL_BATCH = 512


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how.

    Args:
        model: zoo model name (aliases allowed).
        dataset: ``fashion-mnist``, ``digits`` or ``folder:PATH``.
        epochs: passes over the training split.
        batch_size: images per step.
        lr: peak learning rate.
        optimizer: ``adam`` (default), ``adamw`` or ``sgd`` (momentum 0.9, Nesterov).
        schedule: ``cosine`` (per step, from ``lr`` to 0) or ``constant``.
        seed: seeds weight init, data order and the ``limit`` subset.
        limit: train on at most this many images (a class-balanced subset); the test
            split is always evaluated in full.
        threads: torch intra-op threads while training (None: the CPUs idle when the command
            started, :func:`aiot.core.host_cpus.host_threads`). Not part of :meth:`key`, since
            it does not change what is learned.
        binarize: a BiBench algorithm (``bnn``, ``reactnet``, …) or None for full precision.
        init: for binarized and quantized models, ``fp`` (fine-tune the full-precision model
            trained with the same recipe, BiBench's and RobustMQ's pipeline) or ``scratch``.
        quantize: a RobustMQ quantization ``METHOD:BITS`` (``lsq:4``, ``dorefa:8``) or None.
    """

    model: str
    dataset: str = "fashion-mnist"
    epochs: int = 2
    batch_size: int = 128
    lr: float = 1e-3
    optimizer: str = "adam"
    schedule: str = "cosine"
    seed: int = 0
    limit: int | None = None
    threads: int | None = None
    binarize: str | None = None
    init: str = "fp"
    quantize: str | None = None

    def validate(self) -> None:
        """Raise :class:`UsageError` for values that cannot work."""
        checks = [
            (self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}"),
            (self.batch_size >= 1, f"batch_size must be at least 1, got {self.batch_size}"),
            (math.isfinite(self.lr) and self.lr > 0, f"lr must be a positive number, got {self.lr}"),
            (self.optimizer.lower() in OPTIMIZERS,
             f"unknown optimizer '{self.optimizer}' (known: {', '.join(OPTIMIZERS)})"),
            (self.schedule.lower() in SCHEDULES,
             f"unknown schedule '{self.schedule}' (known: {', '.join(SCHEDULES)})"),
            (self.limit is None or self.limit >= 1, f"limit must be at least 1, got {self.limit}"),
            (self.threads is None or self.threads >= 1,
             f"threads must be at least 1, got {self.threads}"),
            (self.init in INITS, f"unknown init '{self.init}' (known: {', '.join(INITS)})"),
        ]
        for ok, problem in checks:
            if not ok:
                raise UsageError(problem)
        if self.binarize and self.quantize:
            raise UsageError(f"--binarize {self.binarize} and --quantize {self.quantize} exclude "
                             "each other", "binarize (1 bit) or quantize (2-8 bits), not both")
        if self.binarize:
            from aiot.models.bibench import get_algorithm

            get_algorithm(self.binarize)  # UnknownName with close names
        self.quantization()  # UsageError / UnknownName for a method or width RobustMQ lacks

    def quantization(self):
        """The parsed ``quantize`` (:class:`aiot.models.quant.Quantization`), or None."""
        if not self.quantize:
            return None
        from aiot.models.quant.methods import parse_quantize

        return parse_quantize(self.quantize)

    def full_precision(self) -> TrainConfig:
        """The same recipe without binarization or quantization: the model BiBench and RobustMQ
        fine-tune from."""
        return TrainConfig(**{**asdict(self), "binarize": None, "quantize": None, "init": "fp"})

    def key(self) -> str:
        """A stable 16-hex-digit hash of everything that determines the trained weights.

        Covers the canonical model name and its input spec, the dataset fingerprint of the
        training selection, the hyper-parameters and :data:`RECIPE_VERSION`; not
        ``threads``. Aliases of the model or dataset give the same key.
        """
        from aiot.models import get_model_spec
        from aiot.models.datasets import dataset_fingerprint

        spec = get_model_spec(self.model)
        payload = {
            "recipe": RECIPE_VERSION,
            "model": spec.name,
            "num_classes": spec.num_classes,
            "input": spec.input.to_dict(),
            "data": dataset_fingerprint(self.dataset, "train", self.limit, self.seed),
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "lr": repr(float(self.lr)),
            "optimizer": self.optimizer.lower(),
            "schedule": self.schedule.lower(),
            "seed": self.seed,
        }
        if self.binarize:  # absent for full precision, so earlier keys stay valid
            from aiot.models.bibench import get_algorithm

            payload["binarize"] = get_algorithm(self.binarize).name
            payload["init"] = self.full_precision().key() if self.init == "fp" else "scratch"
        if self.quantize:  # likewise absent for full precision
            payload["quantize"] = self.quantization().option
            payload["init"] = self.full_precision().key() if self.init == "fp" else "scratch"
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class TrainResult:
    """The outcome of :func:`train`.

    Args:
        weights_path: the saved ``state_dict`` (load with ``spec.build(weights=path)``).
        config: the configuration asked for.
        test_accuracy: top-1 accuracy on the full test split, 0..1.
        train_loss: mean cross-entropy over the last epoch.
        epochs_run: epochs trained.
        seconds: wall time of the training run (data loading, training, evaluation); for a
            cached result, the time of the original run.
        cached: True when the result came from the cache without training.
        history: one dict per epoch (``epoch``, ``train_loss``, ``lr``, ``seconds``).
    """

    weights_path: Path
    config: TrainConfig
    test_accuracy: float
    train_loss: float
    epochs_run: int
    seconds: float
    cached: bool
    history: tuple[dict, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (paths as strings)."""
        return {
            "weights_path": str(self.weights_path), "config": self.config.to_dict(),
            "test_accuracy": self.test_accuracy, "train_loss": self.train_loss,
            "epochs_run": self.epochs_run, "seconds": self.seconds, "cached": self.cached,
            "history": [dict(h) for h in self.history],
        }


def weights_file(config: TrainConfig, weights_dir: Path, key: str | None = None) -> Path:
    """``<weights_dir>/<model>-<dataset>-<key>.pt`` for ``config`` (names made file-safe)."""
    from aiot.models import get_model_spec
    from aiot.models.datasets.load import canonical_name, is_folder

    dataset = canonical_name(config.dataset)
    if is_folder(dataset):  # a path: keep its last component, the key tells folders apart
        dataset = "folder-" + Path(dataset.split(":", 1)[1]).name
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset)
    model = get_model_spec(config.model).name
    if config.binarize:
        from aiot.models.bibench import get_algorithm

        model = f"{model}.{get_algorithm(config.binarize).name}"
    if config.quantize:
        model = f"{model}.{config.quantization().suffix}"
    return weights_dir / f"{model}-{safe}-{key or config.key()}.pt"


def train(config: TrainConfig, progress: Progress | None = None, weights_dir: Path | None = None,
          reuse: bool = True) -> TrainResult:
    """Train ``config.model`` on ``config.dataset``, save the weights, report test accuracy.

    Args:
        config: what to train.
        progress: called as ``progress(phase, done, total)`` after every training step
            (``"train"``, steps over all epochs) and evaluation batch (``"eval"``).
        weights_dir: where to save; default ``cache_dir()/weights``.
        reuse: return an earlier run with the same :meth:`TrainConfig.key` (``cached=True``)
            instead of training again.

    Returns:
        The :class:`TrainResult`.

    Raises:
        UsageError: invalid configuration, or a dataset with more classes than the model.
        UnknownName: unknown model or dataset.
        DatasetError, MissingDependency: the dataset cannot be loaded.
    """
    config.validate()
    if weights_dir is None:
        weights_dir = default_weights_dir()
    weights_dir = Path(weights_dir)
    weights_dir.mkdir(parents=True, exist_ok=True)
    key = config.key()
    path = weights_file(config, weights_dir, key)
    if reuse and (cached := _read_cached(path, config, key)) is not None:
        log.info("reusing %s (test accuracy %.4f)", path, cached.test_accuracy)
        return cached
    start = None
    if (config.binarize or config.quantize) and config.init == "fp":
        start = train(config.full_precision(), progress, weights_dir, reuse=True).weights_path
    with torch_threads(training_threads(config)):
        return _train_and_save(config, key, path, progress, start)


def _build(spec, config: TrainConfig, start: Path | None):
    """The model to train: fresh, or binarized or quantized (from the trained FP weights
    ``start``)."""
    model = spec.build(weights=start)
    if config.binarize:
        from aiot.models.bibench import binarize

        binarize(model, config.binarize, (1, *spec.input.shape))
    if config.quantize:
        from aiot.models.quant import quantize

        chosen = config.quantization()
        quantize(model, chosen.method, chosen.bits)
    return model


def _train_and_save(config: TrainConfig, key: str, path: Path, progress: Progress | None,
                    start: Path | None = None) -> TrainResult:
    import torch

    from aiot.models import get_model_spec
    from aiot.models.datasets import dataset_fingerprint, load_dataset

    started = time.perf_counter()
    spec = get_model_spec(config.model)
    x_train, y_train = load_dataset(config.dataset, spec.input, "train", config.limit, config.seed)
    x_test, y_test = load_dataset(config.dataset, spec.input, "test")
    _check_classes(config, spec, y_train, y_test)
    log.info("training %s on %s: %d train / %d test images, %d epoch(s)", spec.name, config.dataset,
             len(y_train), len(y_test), config.epochs)
    torch.manual_seed(config.seed)
    model = _build(spec, config, start)
    checkpoint = path.with_suffix(".ckpt")
    history = _fit(model, torch.from_numpy(x_train), torch.from_numpy(y_train), config, progress,
                   checkpoint, key)
    accuracy = evaluate(model, torch.from_numpy(x_test), torch.from_numpy(y_test), progress)
    seconds = time.perf_counter() - started
    result = TrainResult(weights_path=path, config=config, test_accuracy=accuracy,
                         train_loss=history[-1]["train_loss"], epochs_run=config.epochs,
                         seconds=seconds, cached=False, history=tuple(history))
    _torch_save(model.state_dict(), path)
    digest = sha256_file(path)
    summary = {
        "v": SUMMARY_VERSION, "key": key, **result.to_dict(), "weights_file": path.name,
        "weights_sha256": digest, "model": spec.name,
        "dataset_fingerprint": dataset_fingerprint(config.dataset, "train", config.limit, config.seed),
        "train_images": len(y_train), "test_images": len(y_test), "torch": torch.__version__,
    }
    del summary["weights_path"], summary["cached"]  # where it lives and how it was got vary
    # The summary is written last: it is the marker that the weights beside it are complete.
    write_text_atomic(path.with_suffix(".json"), json.dumps(summary, indent=2, sort_keys=True))
    checkpoint.unlink(missing_ok=True)
    log.info("trained %s in %.1f s: test accuracy %.4f -> %s", spec.name, seconds, accuracy, path)
    return result


def _check_classes(config: TrainConfig, spec, y_train, y_test) -> None:
    top = int(max(y_train.max(initial=0), y_test.max(initial=0)))
    if top >= spec.num_classes:
        raise UsageError(f"dataset '{config.dataset}' has {top + 1} classes but {spec.name} has "
                         f"{spec.num_classes} outputs", "pick a model with enough classes")


def _batches(n: int, batch_size: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each step; a last batch of one is dropped (BatchNorm needs two)."""
    bounds = [(s, min(s + batch_size, n)) for s in range(0, n, batch_size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds.pop()
    return bounds


def _optimizer(model, config: TrainConfig):
    import torch

    name = config.optimizer.lower()
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9, nesterov=True)
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=config.lr)


def _fit(model, x, y, config: TrainConfig, progress: Progress | None,
         checkpoint: Path | None = None, key: str = "") -> list[dict]:
    """The training loop; returns one history entry per epoch.

    With ``checkpoint``, every finished epoch is saved there and a checkpoint of the same
    ``key`` found at the start is resumed from.
    """
    import torch
    import torch.nn.functional as F

    from aiot.models.bibench import update_schedules

    optimizer = _optimizer(model, config)
    steps = _batches(len(y), config.batch_size)
    total = len(steps) * config.epochs
    if config.schedule.lower() == "cosine":
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total)))
    else:
        scheduler = None
    # A private generator: the data order depends on the seed only, not on what else ran.
    order = torch.Generator().manual_seed(config.seed)
    state = _Resumable(model, optimizer, scheduler, order)
    history = state.resume(checkpoint, key) if checkpoint else []
    done = len(history) * len(steps)
    model.train()
    for epoch in range(len(history) + 1, config.epochs + 1):
        epoch_start = time.perf_counter()
        update_schedules(model, epoch, config.epochs)
        perm = torch.randperm(len(y), generator=order)
        loss_sum, seen = 0.0, 0
        for start, stop in steps:
            idx = perm[start:stop]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            loss_sum += float(loss.detach()) * len(idx)
            seen += len(idx)
            done += 1
            if progress:
                progress("train", done, total)
        entry = {"epoch": epoch, "train_loss": loss_sum / seen, "lr": optimizer.param_groups[0]["lr"],
                 "seconds": time.perf_counter() - epoch_start}
        log.debug("epoch %d: %s", epoch, entry)
        history.append(entry)
        if checkpoint:
            state.save(checkpoint, key, history)
    model.eval()
    return history


@dataclass
class _Resumable:
    """Everything a training run needs to continue exactly where an epoch ended."""

    model: Any
    optimizer: Any
    scheduler: Any
    order: Any  # the data-order torch.Generator

    def save(self, path: Path, key: str, history: list[dict]) -> None:
        """Write the checkpoint atomically (an interrupted save keeps the previous one)."""
        import torch

        payload = {"v": CHECKPOINT_VERSION, "key": key, "history": history,
                   "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                   "scheduler": self.scheduler.state_dict() if self.scheduler else None,
                   "order": self.order.get_state(), "rng": torch.get_rng_state()}
        _torch_save(payload, path)

    def resume(self, path: Path, key: str) -> list[dict]:
        """Load ``path`` if it is a checkpoint of ``key``; returns the epochs it holds."""
        import torch

        if not path.is_file():
            return []
        try:
            payload = load_tensors(path, f"checkpoint {path.name}")
            if payload.get("v") != CHECKPOINT_VERSION or payload.get("key") != key:
                return []
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            if self.scheduler is not None and payload["scheduler"] is not None:
                self.scheduler.load_state_dict(payload["scheduler"])
            self.order.set_state(payload["order"])
            torch.set_rng_state(payload["rng"])
        except Exception as exc:  # noqa: BLE001 - a bad checkpoint only costs a restart
            # A refused one says what it holds, in aiot's words (not torch's unsafe-load advice).
            why = exc.message if isinstance(exc, UnpicklingRefused) else exc
            log.warning("ignoring unreadable checkpoint %s (%s); training from the start", path, why)
            return []
        history = [dict(h) for h in payload["history"]]
        log.info("resuming from %s after epoch %d", path, len(history))
        return history


def evaluate(model, x, y, progress: Progress | None = None, batch_size: int = _EVAL_BATCH) -> float:
    """Top-1 accuracy (0..1) of ``model`` on preprocessed tensors ``x``, labels ``y``.

    Args:
        model: the network; put in eval mode.
        x: float32 inputs.
        y: int64 labels.
        progress: called as ``progress("eval", done, total)`` per batch.
        batch_size: images per forward pass.
    """
    import torch

    model.eval()
    n = len(y)
    if n == 0:
        return 0.0
    total = math.ceil(n / batch_size)
    correct = 0
    with torch.inference_mode():
        for i, start in enumerate(range(0, n, batch_size)):
            logits = model(x[start:start + batch_size])
            correct += int((logits.argmax(1) == y[start:start + batch_size]).sum())
            if progress:
                progress("eval", i + 1, total)
    return correct / n


def training_threads(config: TrainConfig) -> int:
    """The intra-op threads a training of ``config`` uses: its own count, else the idle CPUs."""
    return config.threads or host_threads()


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Use ``threads`` intra-op threads inside the block and restore the previous count."""
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _read_cached(path: Path, config: TrainConfig, key: str) -> TrainResult | None:
    """The cached result for ``key`` if its summary and intact weights exist, else None."""
    summary_path = path.with_suffix(".json")
    if not (path.is_file() and summary_path.is_file()):
        return None
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        if summary.get("v") != SUMMARY_VERSION or summary.get("key") != key:
            return None
        if sha256_file(path) != summary["weights_sha256"]:
            log.warning("cached weights %s do not match their summary; training again", path)
            return None
        return TrainResult(
            weights_path=path, config=config, test_accuracy=float(summary["test_accuracy"]),
            train_loss=float(summary["train_loss"]), epochs_run=int(summary["epochs_run"]),
            seconds=float(summary["seconds"]), cached=True, history=tuple(summary["history"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable training summary %s: %s", summary_path, exc)
        return None


def _torch_save(obj, path: Path) -> None:
    """``torch.save`` to a buffer, then written atomically by Python: torch's own file writer
    fails on a full disk with a C++ message that names no errno ("unexpected pos"), while
    a Python write raises ENOSPC, which aiot names in one line."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_atomic(path, lambda tmp: tmp.write_bytes(buffer.getbuffer()))

