"""Training (digits, tiny_cnn), weight caching and atomic saves; results/cache folder precedence."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest

from aiot.core import paths
from aiot.core.errors import UnknownName, UsageError

torch = pytest.importorskip("torch")

from aiot.host.training import trainer as training
from aiot.host.training.trainer import TrainConfig, TrainResult, train  # noqa: E402

# The digits come with scikit-learn (extra "data"); path tests run without it.
needs_digits = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                                  reason="scikit-learn is not installed")

# 1,437 training images, 45 steps of 32: about a second on two cores.
DIGITS = TrainConfig(model="tiny_cnn", dataset="digits", epochs=1, batch_size=32, lr=3e-3, seed=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[TrainResult, list[tuple[str, int, int]], Path]:
    folder = tmp_path_factory.mktemp("weights")
    calls: list[tuple[str, int, int]] = []
    result = train(DIGITS, progress=lambda *a: calls.append(a), weights_dir=folder)
    return result, calls, folder


@needs_digits
def test_one_epoch_on_digits_learns(trained):
    result, calls, folder = trained
    assert not result.cached and result.epochs_run == 1 and result.config == DIGITS
    assert result.test_accuracy > 0.5, result  # chance is 0.1
    assert result.train_loss < 2.3 and len(result.history) == 1 and result.seconds > 0
    train_calls = [c for c in calls if c[0] == "train"]
    eval_calls = [c for c in calls if c[0] == "eval"]
    assert train_calls[-1] == ("train", 45, 45) and len(train_calls) == 45
    assert eval_calls and eval_calls[-1][1] == eval_calls[-1][2]


@needs_digits
def test_weights_and_summary_are_written_whole(trained):
    from aiot.models import get_model_spec

    result, _, folder = trained
    path = result.weights_path
    assert path.parent == folder and path.name == f"tiny_cnn-digits-{DIGITS.key()}.pt"
    assert sorted(p.name for p in folder.iterdir()) == sorted([path.name, path.with_suffix(".json").name])
    summary = json.loads(path.with_suffix(".json").read_text())
    assert summary["key"] == DIGITS.key() and summary["test_accuracy"] == result.test_accuracy
    assert summary["config"]["dataset"] == "digits" and len(summary["weights_sha256"]) == 64
    # The saved state dict loads strictly into a fresh model and reproduces the accuracy.
    from aiot.models.datasets import load_dataset

    spec = get_model_spec("tiny_cnn")
    x, y = load_dataset("digits", spec.input, "test")
    model = spec.build(weights=path)
    accuracy = training.evaluate(model, torch.from_numpy(x), torch.from_numpy(y))
    assert accuracy == pytest.approx(result.test_accuracy)


@needs_digits
def test_reuse_returns_cached_without_training(trained, monkeypatch):
    result, _, folder = trained

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(training, "_fit", no_training)
    again = train(replace(DIGITS, threads=1), weights_dir=folder)  # threads do not change the key
    assert again.cached and again.weights_path == result.weights_path
    assert again.test_accuracy == result.test_accuracy and again.history == result.history
    with pytest.raises(AssertionError, match="trained again"):
        train(DIGITS, weights_dir=folder, reuse=False)


@needs_digits
def test_corrupt_cached_weights_are_not_reused(trained, tmp_path):
    result, _, _ = trained
    copy = tmp_path / result.weights_path.name
    copy.write_bytes(result.weights_path.read_bytes()[:100])
    copy.with_suffix(".json").write_text(result.weights_path.with_suffix(".json").read_text())
    assert training._read_cached(copy, DIGITS, DIGITS.key()) is None


@needs_digits
def test_ctrl_c_leaves_no_files(tmp_path):
    def interrupt(phase, done, total):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(replace(DIGITS, seed=1), progress=interrupt, weights_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@needs_digits
def test_interrupt_while_saving_leaves_no_partial_file(tmp_path, monkeypatch):
    real_save = torch.save

    def half_save(obj, target, *args, **kwargs):
        real_save(obj, target, *args, **kwargs)
        if hasattr(target, "truncate"):  # saved to a buffer first (then written by Python)
            target.truncate(50)
        else:
            with open(target, "r+b") as fh:
                fh.truncate(50)  # half written when the interrupt arrives
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", half_save)
    config = replace(DIGITS, seed=2, limit=200)
    with pytest.raises(KeyboardInterrupt):
        train(config, weights_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@needs_digits
def test_key_is_stable_and_sensitive():
    key = DIGITS.key()
    assert len(key) == 16 and key == TrainConfig(**DIGITS.to_dict()).key()
    assert key == replace(DIGITS, threads=2).key() == replace(DIGITS, model="tiny-cnn").key()
    assert key == replace(DIGITS, dataset="sklearn-digits").key()
    changed = {replace(DIGITS, epochs=2).key(), replace(DIGITS, lr=1e-3).key(), replace(DIGITS, seed=1).key(),
               replace(DIGITS, limit=100).key(), replace(DIGITS, dataset="fashion-mnist").key()}
    assert key not in changed and len(changed) == 5
    assert TrainConfig.from_dict({**DIGITS.to_dict(), "extra": 1}) == DIGITS


@needs_digits
@pytest.mark.parametrize("bad", [dict(epochs=0), dict(batch_size=0), dict(lr=0.0), dict(optimizer="rmsprop"),
                                 dict(schedule="step"), dict(limit=0), dict(threads=0)])
def test_bad_config_is_a_usage_error(bad, tmp_path):
    with pytest.raises(UsageError):
        train(replace(DIGITS, **bad), weights_dir=tmp_path)


@needs_digits
def test_unknown_model_or_dataset(tmp_path):
    with pytest.raises(UnknownName):
        train(replace(DIGITS, model="tiny_cnnn"), weights_dir=tmp_path)
    with pytest.raises(UnknownName):
        train(replace(DIGITS, dataset="digitz"), weights_dir=tmp_path)


def test_batches_drop_a_trailing_single_image():
    assert training._batches(65, 32) == [(0, 32), (32, 64)]
    assert training._batches(66, 32) == [(0, 32), (32, 64), (64, 66)]
    assert training._batches(1, 32) == [(0, 1)]


# --- paths ----------------------------------------------------------------------------------

def test_results_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(tmp_path / "env"))
    assert paths.results_dir(str(tmp_path / "opt")) == tmp_path / "opt"
    assert (tmp_path / "opt").is_dir()
    assert paths.results_dir() == tmp_path / "env" and (tmp_path / "env").is_dir()
    monkeypatch.delenv("AIOT_RESULTS_DIR")
    root = paths.source_root()
    assert root is not None and (root / "pyproject.toml").is_file()
    assert paths.results_dir() == root / "results"
    # An installed aiot (no checkout above it) uses the user data folder.
    monkeypatch.setattr(paths, "source_root", lambda: None)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert paths.results_dir() == tmp_path / "home" / ".local" / "share" / "aiot" / "results"


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_WEIGHTS_DIR", str(tmp_path / "w"))
    assert paths.weights_dir() == tmp_path / "w"  # the weights cache alone, moved
    monkeypatch.delenv("AIOT_WEIGHTS_DIR")
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "c"))
    assert paths.cache_dir() == tmp_path / "c" and paths.weights_dir() == tmp_path / "c" / "weights"
    monkeypatch.delenv("AIOT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "aiot" and paths.cache_dir().is_dir()


def test_unwritable_results_dir_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create results folder"):
        paths.results_dir(str(blocker / "sub"))
